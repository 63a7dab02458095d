"""Einsum against numpy.einsum (the reference ONNX's own spec cites): the equations vision
transformers export, implicit outputs, ellipsis broadcasting, sums, outer and inner products,
diagonals, three and four operands; on the best ISA (where the rewrite into Transpose / ReduceSum
/ Reshape / MatMul / Mul must leave no reference kernel) and on the reference kernels."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

from helpers import rel_error

# (equation, operand shapes, runs on fast kernels)
CASES = [
    ("bhid,bhjd->bhij", [(2, 3, 7, 16), (2, 3, 9, 16)], True),  # attention scores
    ("bhij,bhjd->bhid", [(2, 3, 7, 9), (2, 3, 9, 16)], True),  # attention x values
    ("bij,bjk->bik", [(3, 5, 6), (3, 6, 4)], True),
    ("ij,jk", [(5, 6), (6, 4)], True),  # implicit output: ik
    ("...ij,...jk->...ik", [(2, 1, 5, 6), (3, 6, 4)], True),  # ellipsis broadcast
    ("bchw,oc->bohw", [(2, 8, 5, 7), (12, 8)], True),  # a 1x1 conv
    ("nqhd,nkhd->nhqk", [(1, 10, 4, 8), (1, 12, 4, 8)], True),  # heads in the middle
    ("ij->ji", [(5, 7)], True),
    ("bij->bj", [(3, 5, 7)], True),  # a sum
    ("ijk", [(2, 3, 4)], True),  # implicit identity
    ("i,j->ij", [(5,), (7,)], True),  # outer product
    ("i,i", [(9,), (9,)], True),  # inner product -> scalar
    ("bi,bj->b", [(4, 5), (4, 6)], True),  # sums of both operands' own labels
    ("Bi,iJ->JB", [(3, 5), (5, 2)], True),  # capital labels, transposed output
    ("...ii->...i", [(2, 4, 4)], True),  # a diagonal: times the identity, summed
    ("ii", [(5, 5)], True),  # the trace
    ("iji->j", [(4, 3, 4)], True),
    ("biib,bj->ij", [(2, 3, 3, 2), (2, 5)], True),  # two repeated labels
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)], True),  # three operands: left to right
    ("bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 5)], True),
    ("ij,j,j->i", [(6, 7), (7,), (7,)], True),
    ("ab,bc,cd,de->ea", [(2, 3), (3, 4), (4, 5), (5, 6)], True),
    ("...ij,...jk,kl->...il", [(2, 1, 3, 4), (5, 4, 6), (6, 2)], True),  # ellipsis broadcast
]


def einsum_model(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s))
           for n, s in zip(names, shapes)]
    ref = np.einsum(eq, *[np.zeros(s, np.float32) for s in shapes])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(ref.shape))
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    g = helper.make_graph([node], "einsum", ins, [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


@pytest.mark.parametrize("eq,shapes,fast", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_numpy(eq, shapes, fast, tmp_path):
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(eq, *[x.astype(np.float64) for x in xs])
    data = einsum_model(eq, shapes)
    for max_isa in (None, "scalar"):
        with kiln.Session.from_bytes(data, threads=1, tune="none", max_isa=max_isa,
                                     cache_dir=tmp_path) as s:
            y = s.run({f"x{i}": x for i, x in enumerate(xs)})["y"]
            assert y.shape == want.shape
            assert rel_error(y, want) <= 1e-5, (max_isa, rel_error(y, want))
            kernels = [st["kernel"] for st in s.plan()["steps"]]
            if max_isa is None and fast:
                assert not [k for k in kernels if k.startswith("ref_")], kernels
            if max_isa is None and not fast:
                assert kernels == ["ref_Einsum"], kernels


@pytest.mark.parametrize("eq,shapes,what", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "sizes"),
    ("ij->i", [(2, 3, 4)], "does not fit"),
    ("i$->i", [(2, 3)], "holds '$'"),
    ("ij,jk->iz", [(2, 3), (3, 4)], "in no operand"),
    ("ij->ii", [(2, 2)], "repeats"),
])
def test_einsum_errors_name_the_problem(eq, shapes, what):
    names = [f"x{i}" for i in range(len(shapes))]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s))
           for n, s in zip(names, shapes)]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    m = helper.make_model(helper.make_graph([node], "einsum", ins, [out]),
                          opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(kiln.Error) as e:
        kiln.Session.from_bytes(m.SerializeToString(), threads=1, tune="none",
                                disable_cache=True)
    assert what in str(e.value)
