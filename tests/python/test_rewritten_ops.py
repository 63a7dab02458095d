"""Forms rewritten into ops with fast kernels (graph/rewrite_forms.cpp): Max / Min / Mean / Sum
of one or of three and more broadcasting operands, Clip with computed bounds, Gemm with computed
B / transA / a full or computed C, Softmax over a middle axis, Split on any axis and rank,
opset 7-8 BatchNormalization with spatial = 0 (per-activation statistics: a Mul and an Add):
against numpy, with no reference kernel in the plan on the best ISA and on AVX2, and on the
reference path (the rewritten graph on the reference kernels)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

from helpers import rel_error


def model(nodes, ins, outs, inits=(), opset=13):
    g = helper.make_graph(
        nodes, "rewritten",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in ins],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in outs],
        initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


def run_all(data, feeds, want, tol):
    for max_isa in (None, "avx2", "scalar"):
        with kiln.Session.from_bytes(data, threads=2, tune="none", max_isa=max_isa,
                                     disable_cache=True) as s:
            got = s.run(feeds)
            if max_isa != "scalar" and s.isa != "scalar":
                kernels = [st["kernel"] for st in s.plan()["steps"]]
                assert not [k for k in kernels if k.startswith("ref_")], kernels
        for name, w in want.items():
            assert got[name].shape == w.shape, (max_isa, name)
            assert rel_error(got[name], w) <= tol, (max_isa, name, rel_error(got[name], w))


VARIADIC = {"Max": lambda xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
            "Min": lambda xs: np.minimum.reduce(np.broadcast_arrays(*xs)),
            "Sum": lambda xs: sum(xs),
            "Mean": lambda xs: sum(xs) / np.float32(len(xs))}


@pytest.mark.parametrize("op", list(VARIADIC))
@pytest.mark.parametrize("shapes", [[(2, 3, 4, 5)], [(2, 3, 4, 5)] * 3,
                                    [(2, 3, 4, 5), (5,), (3, 1, 1), (1, 3, 4, 1)],
                                    [(7,), (), (6, 1)]])
def test_variadic(op, shapes):
    rng = np.random.default_rng(len(shapes))
    xs = [np.asarray(rng.standard_normal(s), dtype=np.float32) for s in shapes]
    want = np.asarray(VARIADIC[op](xs), dtype=np.float32)
    names = [f"x{k}" for k in range(len(xs))]
    data = model([helper.make_node(op, names, ["y"])], list(zip(names, shapes)),
                 [("y", want.shape)])
    run_all(data, dict(zip(names, xs)), {"y": want}, 1e-6)


@pytest.mark.parametrize("bounds", ["both", "min", "max"])
def test_clip_computed_bounds(bounds):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    lo, hi = np.asarray(-0.5, np.float32), np.asarray(0.7, np.float32)
    ins, feeds = [("x", x.shape)], {"x": x}
    if bounds != "max":
        ins.append(("lo", ()))
        feeds["lo"] = lo
    if bounds != "min":
        ins.append(("hi", ()))
        feeds["hi"] = hi
    node = helper.make_node("Clip", ["x", "lo" if bounds != "max" else "",
                                     "hi" if bounds != "min" else ""], ["y"])
    want = np.clip(x, lo if bounds != "max" else None, hi if bounds != "min" else None)
    run_all(model([node], ins, [("y", x.shape)]), feeds, {"y": want}, 0)


@pytest.mark.parametrize("shape,axis,sizes", [((6,), 0, [2, 4]), ((3, 10), 1, [3, 3, 4]),
                                              ((2, 5, 7, 9), 2, [1, 6]),
                                              ((2, 4, 3, 8), -1, [4, 4]),
                                              ((4, 2, 3), 0, [1, 1, 2])])
def test_split_any_axis(shape, axis, sizes):
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    outs = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    names = [f"y{k}" for k in range(len(sizes))]
    split = numpy_helper.from_array(np.array(sizes, np.int64), "split")
    node = helper.make_node("Split", ["x", "split"], names, axis=axis)
    data = model([node], [("x", shape)], [(n, o.shape) for n, o in zip(names, outs)], [split])
    run_all(data, {"x": x}, dict(zip(names, outs)), 0)


@pytest.mark.parametrize("b_const", [False, True])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_kind", ["none", "row", "matrix", "computed"])
def test_gemm_forms(b_const, trans_a, trans_b, c_kind):
    rng = np.random.default_rng(10)
    m, k, n = 5, 7, 9
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    alpha, beta = 0.75, -1.5
    ins, feeds, inits = [("a", a.shape)], {"a": a}, []
    if b_const:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        ins.append(("b", b.shape))
        feeds["b"] = b
    want = alpha * (a.T if trans_a else a) @ (b.T if trans_b else b)
    c_name = ""
    if c_kind != "none":
        c = rng.standard_normal((n,) if c_kind == "row" else (m, n)).astype(np.float32)
        c_name = "c"
        if c_kind == "computed":
            ins.append(("c", c.shape))
            feeds["c"] = c
        else:
            inits.append(numpy_helper.from_array(c, "c"))
        want = want + beta * c
    node = helper.make_node("Gemm", ["a", "b", c_name] if c_name else ["a", "b"], ["y"],
                            alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    data = model([node], ins, [("y", (m, n))], inits)
    run_all(data, feeds, {"y": want.astype(np.float32)}, 1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis", [((3, 4, 5), 0), ((3, 4, 5), 1), ((2, 6, 5, 7), 2),
                                        ((2, 6, 5, 7), 0), ((2, 3, 4, 5, 6), 2)])
def test_softmax_middle_axis(op, shape, axis):
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32) * 3
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    want = e / e.sum(axis=axis, keepdims=True)
    if op == "LogSoftmax":
        want = np.log(want)
    data = model([helper.make_node(op, ["x"], ["y"], axis=axis)], [("x", shape)], [("y", shape)])
    run_all(data, {"x": x}, {"y": want.astype(np.float32)}, 2e-6)


@pytest.mark.parametrize("shape,reps", [((1, 8, 5, 6), (1, 2, 1, 3)), ((3, 4), (2, 1)),
                                        ((2, 3, 4), (2, 2, 2)), ((7,), (4,)),
                                        ((2, 3, 4), (1, 1, 1))])
def test_tile(shape, reps):
    x = np.random.default_rng(12).standard_normal(shape).astype(np.float32)
    want = np.tile(x, reps)
    r = numpy_helper.from_array(np.array(reps, np.int64), "r")
    data = model([helper.make_node("Tile", ["x", "r"], ["y"])], [("x", shape)],
                 [("y", want.shape)], [r])
    run_all(data, {"x": x}, {"y": want}, 0)


@pytest.mark.parametrize("shape,per_activation", [((2, 3, 4, 5), True), ((2, 6), True),
                                                  ((2, 3, 4, 5), False)])
def test_batchnorm_spatial0(shape, per_activation):
    """Opset 7-8's spatial = 0: statistics per activation ([C, D...]), or per channel ([C])."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    ps = shape[1:] if per_activation else shape[1:2]
    scale, bias, mean = (rng.standard_normal(ps).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, ps).astype(np.float32)
    inits = [numpy_helper.from_array(a, n)
             for a, n in zip((scale, bias, mean, var), ("s", "b", "m", "v"))]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0,
                            epsilon=1e-3)
    data = model([node], [("x", shape)], [("y", shape)], inits, opset=7)
    bshape = ps if per_activation else ps + (1,) * (len(shape) - 2)
    r = lambda a: a.reshape(bshape).astype(np.float64)
    want = (x - r(mean)) / np.sqrt(r(var) + 1e-3) * r(scale) + r(bias)
    run_all(data, {"x": x}, {"y": want.astype(np.float32)}, 1e-6)


def test_image_scaler_opset8():
    """ImageScaler (experimental, opsets < 10): y = x * scale + bias[c]."""
    x = np.random.default_rng(3).uniform(0, 255, (2, 3, 5, 7)).astype(np.float32)
    node = helper.make_node("ImageScaler", ["x"], ["y"], scale=1 / 255.0, bias=[0.1, -0.2, 0.3])
    g = helper.make_graph([node], "scaler",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)]).SerializeToString()
    want = x * np.float32(1 / 255.0) + np.array([0.1, -0.2, 0.3], np.float32).reshape(3, 1, 1)
    run_all(data, {"x": x}, {"y": want}, 1e-6)


@pytest.mark.parametrize("alpha", [1.0, 1.7])
def test_swish_opset24(alpha):
    """Swish (opset 24) = x * sigmoid(alpha x): after a conv with alpha 1 it fuses into the conv
    (the same nodes older exporters wrote)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 8, 9)).astype(np.float32)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Swish", ["c"], ["y"], alpha=alpha)]
    g = helper.make_graph(nodes, "swish",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(w, "w")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)]).SerializeToString()
    c = np.zeros((1, 4, 8, 9))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(3):
        for j in range(3):
            c += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 8, j:j + 9], w[:, :, i, j])
    want = c / (1 + np.exp(-alpha * c))
    run_all(data, {"x": x}, {"y": want.astype(np.float32)}, 1e-5)
    if alpha == 1.0:
        with kiln.Session.from_bytes(data, tune="none", disable_cache=True) as s:
            assert [st["op"] for st in s.plan()["steps"]] == ["Conv"], s.plan()["steps"]
