"""A Linear layer on [.., tokens, C] exported as MatMul by a constant matrix: its bias Add (or
Sub), per-channel scale Mul, activation and residual Add fuse into the FC kernel's epilogue
(graph/fuse.cpp) — one step, no broadcast passes — against numpy on every ISA path; constants
that do not run along the last dim stay separate ops, with the same results."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi

rng = np.random.default_rng(21)


def const(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


@pytest.mark.parametrize("xshape", [(2, 7, 16), (5, 16), (1, 3, 4, 16)])
@pytest.mark.parametrize("bias_op", ["Add", "Sub"])
@pytest.mark.parametrize("act", ["Relu", "Gelu", None])
def test_linear_epilogue_fused(xshape, bias_op, act, tmp_path):
    x = rng.standard_normal(xshape).astype(np.float32)
    w, w2 = (rng.standard_normal((16, 24)).astype(np.float32) * 0.3 for _ in range(2))
    b = rng.standard_normal(24).astype(np.float32)
    s = rng.standard_normal((1,) * (len(xshape) - 1) + (24,)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node(bias_op, ["m", "b"] if bias_op == "Sub" else ["b", "m"], ["mb"])]
    last = "mb"
    if act:
        nodes.append(helper.make_node(act, [last], ["a"]))
        last = "a"
    nodes += [helper.make_node("Mul", [last, "s"], ["ms"]),
              helper.make_node("MatMul", ["x", "w2"], ["r"]),
              helper.make_node("Add", ["ms", "r"], ["y"])]
    inits = [const("w", w), const("w2", w2), const("b", b), const("s", s)]
    data = onnx_model(nodes, [vi("x", xshape)], [vi("y", None)], inits, 20)
    xd = x.astype(np.float64)
    m = xd @ w
    h = m - b if bias_op == "Sub" else m + b
    if act == "Relu":
        h = np.maximum(h, 0)
    elif act == "Gelu":
        from math import erf
        h = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    want = (h * s + xd @ w2).astype(np.float32)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert rel_error(out["y"], want) <= 2e-6, max_isa
        kernels = [st["kernel"] for st in plan["steps"]]
        if max_isa != "scalar":
            assert len(kernels) == 2 and all(k.startswith("fc_") for k in kernels), (max_isa,
                                                                                     kernels)


@pytest.mark.parametrize("cshape,steps", [((7, 1), 2), ((1, 7, 24), 2), ((2, 7, 24), 1)])
def test_linear_other_constants(cshape, steps, tmp_path):
    """A constant along the tokens is no per-channel epilogue: its own step, the same results (a
    whole same-shape tensor is a residual, fused as one)."""
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    w = rng.standard_normal((16, 24)).astype(np.float32)
    c = rng.standard_normal(cshape).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "c"], ["y"])]
    data = onnx_model(nodes, [vi("x", x.shape)], [vi("y", None)], [const("w", w), const("c", c)],
                      13)
    want = (x.astype(np.float64) @ w + c).astype(np.float32)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert rel_error(out["y"], want) <= 2e-6, max_isa
        if max_isa != "scalar":
            assert len(plan["steps"]) == steps, (max_isa, plan["steps"])
