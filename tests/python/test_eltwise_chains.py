"""Chains of standalone elementwise ops (graph/fuse.cpp): unary ops and Mul / Add / Sub by a
scalar constant after an elementwise op (a unary op, a same-shape Add, a broadcast Mul) run as
one step, bit-exact against numpy float32 arithmetic in the same order (-0 kept); a value with
two readers or that is a graph output ends a chain; glue ops inside a chain within their
accuracy."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from helpers import onnx_model, run_on_each_isa, value_info as vi

rng = np.random.default_rng(33)
f32 = np.float32


def scalar(name, v):
    return numpy_helper.from_array(np.array(v, np.float32), name)


def check(data, feeds, want, tmp_path, steps, exact=True):
    for max_isa, out, plan in run_on_each_isa(data, feeds, tmp_path):
        for k, w in want.items():
            got = out[k]
            if exact:
                assert np.array_equal(got, w), (max_isa, k, np.abs(got - w).max())
                assert np.array_equal(np.signbit(got), np.signbit(w)), (max_isa, k)
            else:
                assert np.abs(got - w).max() <= 4e-6 * max(1, np.abs(w).max()), (max_isa, k)
        # (Layout conversions the solver may add around a step are not ops.)
        kernels = [st["kernel"] for st in plan["steps"] if not st["kernel"].startswith("reorder_")]
        if max_isa != "scalar":
            assert len(kernels) == steps, (max_isa, kernels)
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)


@pytest.mark.parametrize("shape", [(2, 19, 7, 9), (3, 50), (1, 16, 4, 4)])
def test_scalar_chain_one_step(shape, tmp_path):
    x = (rng.standard_normal(shape) * 3).astype(f32)
    x.flat[:4] = [-0.0, 0.0, -1.5, 2.0]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "a"], ["m"]),
             helper.make_node("Add", ["b", "m"], ["p"]),
             helper.make_node("Neg", ["p"], ["n"]),
             helper.make_node("Sub", ["n", "c"], ["s"]),
             helper.make_node("Sub", ["d", "s"], ["y"])]
    inits = [scalar("a", 1.5), scalar("b", 0.5), scalar("c", 0.1), scalar("d", 2.25)]
    data = onnx_model(nodes, [vi("x", shape)], [vi("y", None)], inits, 13)
    r = np.where(x < 0, f32(0), x)
    want = f32(2.25) - (-(r * f32(1.5) + f32(0.5)) - f32(0.1))
    check(data, {"x": x}, {"y": want}, tmp_path, 1)


def test_negative_zero_kept(tmp_path):
    """Mul by a scalar keeps -0 (no + 0 in the fused form)."""
    x = np.array([[-0.0, 0.0, -2.0, 3.0] * 4], f32)
    nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["n"]),
             helper.make_node("Mul", ["n", "k"], ["y"])]
    data = onnx_model(nodes, [vi("x", x.shape)], [vi("y", None)], [scalar("k", 0.5)], 13)
    check(data, {"x": x}, {"y": -np.abs(x) * f32(0.5)}, tmp_path, 1)


def test_binary_producers(tmp_path):
    """A same-shape Add and a broadcast Mul take the unary ops after them."""
    shape = (2, 24, 5, 6)
    x, z = (rng.standard_normal(shape).astype(f32) for _ in range(2))
    g = rng.standard_normal((1, 24, 1, 1)).astype(f32)
    nodes = [helper.make_node("Add", ["x", "z"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Mul", ["r", "h"], ["y0"]),
             helper.make_node("Mul", ["x", "g"], ["bm"]),
             helper.make_node("Clip", ["bm", "lo", "hi"], ["y1"])]
    inits = [scalar("h", 0.25), scalar("lo", -0.5), scalar("hi", 0.5),
             numpy_helper.from_array(g, "g")]
    data = onnx_model(nodes, [vi("x", shape), vi("z", shape)], [vi("y0", None), vi("y1", None)],
                      inits, 13)
    s = x + z
    want = {"y0": np.where(s < 0, f32(0), s) * f32(0.25), "y1": np.clip(x * g, f32(-0.5), f32(0.5))}
    check(data, {"x": x, "z": z}, want, tmp_path, 2)


def test_chain_breaks(tmp_path):
    """An intermediate read twice or returned stays materialised; results unchanged."""
    shape = (2, 8, 6, 6)
    x = rng.standard_normal(shape).astype(f32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "a"], ["m"]),      # m: an output and read by Add
             helper.make_node("Add", ["m", "b"], ["p"]),
             helper.make_node("Sigmoid", ["p"], ["y"])]
    inits = [scalar("a", 3.0), scalar("b", -1.0)]
    data = onnx_model(nodes, [vi("x", shape)], [vi("m", None), vi("y", None)], inits, 13)
    m = np.where(x < 0, f32(0), x) * f32(3)
    p = (m.astype(np.float64) - 1)
    want = {"m": m, "y": (1 / (1 + np.exp(-p))).astype(f32)}
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert np.array_equal(out["m"], want["m"]), max_isa
        assert np.abs(out["y"] - want["y"]).max() <= 4e-6, max_isa
        ops = [st["kernel"] for st in plan["steps"] if not st["kernel"].startswith("reorder_")]
        if max_isa != "scalar":
            assert len(ops) == 2, (max_isa, ops)


def test_glue_ops_in_a_chain(tmp_path):
    x = rng.standard_normal((4, 33)).astype(f32)
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Mul", ["e", "a"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["p"]), helper.make_node("Log", ["p"], ["y"])]
    data = onnx_model(nodes, [vi("x", x.shape)], [vi("y", None)],
                      [scalar("a", 2.0), scalar("b", 1.0)], 13)
    want = np.log(np.exp(x.astype(np.float64)) * 2 + 1).astype(f32)
    check(data, {"x": x}, {"y": want}, tmp_path, 1, exact=False)
