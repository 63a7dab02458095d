"""Slice (one axis; strided, reversed and several axes), Gather (constant indices) and Concat (any axis)
of any rank run on the block-copy glue kernel, and rank-5 broadcast binary ops on the collapsed
bcast kernel (Swin's and ViT's patterns: q/k/v split and pick, torch.roll, patch merging, the
shifted-window mask add): against numpy, on the best ISA (no reference kernel in the plan) and
on the reference kernels."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

from helpers import rel_error


def i64(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def model(nodes, inits, x_shape, y_shape, extra_inputs=()):
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in extra_inputs]
    g = helper.make_graph(nodes, "copy", ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


def slice_case(shape, starts, ends, axes, steps):
    x = np.zeros(shape)
    sl = [slice(None)] * len(shape)
    for s, e, a, t in zip(starts, ends, axes, steps):
        sl[a] = slice(s, e, t)
    y_shape = x[tuple(sl)].shape
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])]
    inits = [i64("s", starts), i64("e", ends), i64("a", axes), i64("t", steps)]
    return model(nodes, inits, shape, y_shape), lambda v: v[tuple(sl)]


CASES = {
    "slice one axis (qkv split)": slice_case((1, 50, 2304), [768], [1536], [2], [1]),
    "slice axis 1 (roll)": slice_case((1, 56, 56, 96), [-3], [2**62], [1], [1]),
    "slice axis 2 (roll)": slice_case((1, 56, 56, 96), [0], [53], [2], [1]),
    "slice strided, two axes (patch merging)": slice_case((1, 56, 56, 96), [1, 0], [2**62, 2**62],
                                                          [1, 2], [2, 2]),
    "slice strided inner axis": slice_case((2, 5, 7, 9), [1], [9], [3], [3]),
    # Negative steps (torch.flip and x[..., ::-k]): reversed and strided runs.
    "flip last axis (horizontal flip)": slice_case((1, 3, 20, 37), [-1], [-2**63], [3], [-1]),
    "flip channels (RGB <-> BGR)": slice_case((2, 3, 8, 8), [-1], [-2**63], [1], [-1]),
    "flip two axes, rank 3": slice_case((4, 6, 9), [-1, -1], [-2**63, -2**63], [0, 2], [-1, -1]),
    "flip rank 5, middle axis": slice_case((1, 2, 5, 3, 4), [2**62], [-2**62], [2], [-1]),
    "reverse step 2 on the inner axis": slice_case((2, 5, 11), [9], [0], [2], [-2]),
    "reverse step 3 with a cut, rank 2": slice_case((17, 40), [15, 30], [1, 2**62], [0, 1],
                                                    [-3, 1]),
    "single element, huge negative step": slice_case((3, 7, 5), [4], [0], [1], [-2**62]),
}


def gather_case(shape, axis, idx):
    x = np.zeros(shape)
    y_shape = np.take(x, idx, axis=axis).shape
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)]
    return model(nodes, [i64("i", idx)], shape, y_shape), lambda v: np.take(v, idx, axis=axis)


CASES["gather scalar index, rank 5 (q, k, v)"] = gather_case((3, 4, 3, 49, 32), 0, 1)
CASES["gather index list, negative"] = gather_case((2, 6, 5), 1, [5, -1, 0, 2])


def concat_case(shapes, axis):
    y_shape = np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape
    names = ["x"] + [f"c{k}" for k in range(1, len(shapes))]
    nodes = [helper.make_node("Concat", names, ["y"], axis=axis)]
    extra = [(n, s) for n, s in zip(names[1:], shapes[1:])]
    return model(nodes, [], shapes[0], y_shape, extra), None


CASES["concat axis 2, rank 4 (roll)"] = concat_case([(1, 56, 3, 96), (1, 56, 53, 96)], 2)
CASES["concat last axis (patch merging)"] = concat_case([(1, 28, 28, 96)] * 4, -1)
CASES["concat axis 1, rank 3 (class token)"] = concat_case([(1, 1, 768), (1, 196, 768)], 1)


def add5_case():
    nodes = [helper.make_node("Add", ["x", "m"], ["y"])]
    return model(nodes, [], (1, 4, 3, 49, 49), (1, 4, 3, 49, 49), [("m", (1, 4, 1, 49, 49))]), None


CASES["rank-5 broadcast add (window mask)"] = add5_case()


@pytest.mark.parametrize("name", list(CASES))
def test_copy_ops_match_numpy(name, tmp_path):
    data, fn = CASES[name]
    m = onnx.load_from_string(data)
    rng = np.random.default_rng(3)
    feeds = {}
    for vi in m.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    op = m.graph.node[0].op_type
    if op == "Concat":
        axis = m.graph.node[0].attribute[0].i
        want = np.concatenate([feeds[n] for n in m.graph.node[0].input], axis=axis)
    elif op == "Add":
        want = feeds["x"] + feeds["m"]
    else:
        want = fn(feeds["x"])
    for max_isa in (None, "scalar"):
        with kiln.Session.from_bytes(data, threads=2, tune="none", max_isa=max_isa,
                                     cache_dir=tmp_path) as s:
            y = s.run(feeds)["y"]
            assert y.shape == want.shape
            assert rel_error(y, want) == 0.0, (max_isa, rel_error(y, want))
            if max_isa is None:
                kernels = [st["kernel"] for st in s.plan()["steps"]]
                assert not [k for k in kernels if k.startswith("ref_")], kernels
