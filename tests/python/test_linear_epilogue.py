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


@pytest.mark.parametrize("view", ["Reshape", "Flatten", None])
def test_linear_batchnorm1d_fused(view, tmp_path):
    """LeViT's Linear + BatchNorm1d on flattened tokens: MatMul [1, T, C] -> view [T, C] ->
    BatchNormalization (its channels the last dim) -> view back -> HardSwish. The BN becomes
    last-dim constants that move, with the HardSwish, ahead of the views into the MatMul's
    epilogue: one fc step (and the views), no per-element BN pass; a Gemm's BatchNorm1d on [N, C]
    the same."""
    t, cin, cout = 49, 16, 24
    x = rng.standard_normal((1, t, cin)).astype(np.float32)
    w = rng.standard_normal((cin, cout)).astype(np.float32) * 0.3
    scale, bias = rng.uniform(0.5, 1.5, cout), rng.standard_normal(cout)
    mean, var = rng.standard_normal(cout), rng.uniform(0.5, 2.0, cout)
    inits = [const("w", w), const("scale", scale), const("bias", bias), const("mean", mean),
             const("var", var), numpy_helper.from_array(np.array([t, cout], np.int64), "flat"),
             numpy_helper.from_array(np.array([1, t, cout], np.int64), "back")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"])]
    if view == "Reshape":
        nodes.append(helper.make_node("Reshape", ["m", "flat"], ["f"]))
    elif view == "Flatten":
        nodes.append(helper.make_node("Flatten", ["m"], ["f"], axis=2))
    else:  # a Gemm on [T, C] instead
        x = x[0]
        nodes = [helper.make_node("Gemm", ["x", "w"], ["f"])]
    nodes += [helper.make_node("BatchNormalization", ["f", "scale", "bias", "mean", "var"], ["n"],
                               epsilon=1e-3),
              helper.make_node("Reshape", ["n", "back"], ["r"]),
              helper.make_node("HardSwish", ["r"], ["y"])]
    data = onnx_model(nodes, [vi("x", x.shape)], [vi("y", None)], inits, 14)
    n = (x.reshape(t, cin).astype(np.float64) @ w - mean) / np.sqrt(var + 1e-3) * scale + bias
    n = n.reshape(1, t, cout)
    want = (n * np.clip(n + 3, 0, 6) / 6).astype(np.float32)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert rel_error(out["y"], want) <= 2e-6, max_isa
        kernels = [st["kernel"] for st in plan["steps"] if st["family"] != "view"]
        if max_isa != "scalar":
            assert len(kernels) == 1 and kernels[0].startswith("fc_"), (max_isa, kernels)


@pytest.mark.parametrize("op,cshape,first,steps,view", [
    ("Mul", (24,), True, 1, None), ("Sub", (1,), False, 1, None),
    ("Add", (1, 24), False, 1, (2, 3, 24)), ("Div", (24,), False, 2, None),
    ("Mul", (1, 1, 24), True, 2, None), ("Add", (3, 1), False, 2, (2, 3, 24)),
    ("Mul", (12,), False, 2, (6, 2, 12))])
def test_last_dim_op_behind_a_view(op, cshape, first, steps, view, tmp_path):
    """An op with a last-dim or scalar constant behind a view that keeps the last dim (an
    Unsqueeze, or a Reshape given by `view`) moves ahead of it into the Linear's epilogue; Div is
    no scale_shift post-op (its own step); a constant of the view's higher rank, along another dim
    ((3, 1)) or behind a view that splits the last dim does not move. The same results either
    way."""
    x = rng.standard_normal((6, 16)).astype(np.float32)
    w = rng.standard_normal((16, 24)).astype(np.float32)
    c = rng.uniform(0.5, 1.5, cshape).astype(np.float32)
    ins = ["c", "u"] if first else ["u", "c"]
    if view:
        shape = numpy_helper.from_array(np.array(view, np.int64), "shape")
        v = helper.make_node("Reshape", ["m", "shape"], ["u"])
    else:
        shape = numpy_helper.from_array(np.array([0], np.int64), "shape")
        v = helper.make_node("Unsqueeze", ["m", "shape"], ["u"])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), v, helper.make_node(op, ins, ["y"])]
    data = onnx_model(nodes, [vi("x", x.shape)], [vi("y", None)],
                      [const("w", w), const("c", c), shape], 13)
    m = (x.astype(np.float64) @ w).reshape(view or (1, 6, 24))
    f = {"Div": np.divide, "Mul": np.multiply, "Sub": np.subtract, "Add": np.add}[op]
    want = (f(c, m) if first else f(m, c)).astype(np.float32)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert out["y"].shape == want.shape
        assert rel_error(out["y"], want) <= 2e-6, max_isa
        kernels = [st["kernel"] for st in plan["steps"] if st["family"] != "view"]
        if max_isa != "scalar":
            assert len(kernels) == steps, (max_isa, kernels)
