"""Layers whose weights or parameters are computed rather than constants — ONNX's own operator
tests feed them as graph inputs; CondConv / dynamic convolutions, modulated convs, FiLM / AdaIN
conditioning compute them; an STFT with a computed window becomes such a conv.

Conv: on a JIT ISA the im2col (any groups), direct or depthwise family reads the weights packed
per run by a step of their own (kernel names ending "_rw"), not the reference kernel. Checked
against a float64 numpy convolution over strides, pads, dilations, groups, fused activations and
residuals, on every ISA path this CPU has, with new weights on each run (no stale packing). BatchNormalization and Layer / Instance / GroupNormalization with
computed parameters expand into the normalisation with constant parameters and broadcast ops
(graph/function_ops.h): no reference kernel either."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

import kiln
from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi


def conv_ref(x, w, b=None, stride=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), group=1):
    """ONNX Conv in float64: x [N, C, H, W], w [M, C / group, KH, KW], pads (t, l, b, r)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                         j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", win,
                                                       w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        y += b.astype(np.float64).reshape(1, -1, 1, 1)
    return y


# (N, C, H, W, M, KH, KW, stride, pads, dilations, group)
SHAPES = [
    (1, 3, 9, 9, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 16, 13, 11, 20, 5, 3, (2, 1), (2, 0, 1, 1), (1, 2), 1),
    (1, 32, 7, 7, 48, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (3, 5, 6, 17, 7, 1, 4, (1, 3), (0, 2, 0, 1), (1, 1), 1),
    (1, 12, 10, 10, 100, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2),
    (2, 64, 9, 9, 64, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 4),
]


def runtime_weight_convs(plan):
    """The plan's conv kernels reading computed weights (and it has no reference kernel)."""
    kernels = [st["kernel"] for st in plan["steps"]]
    assert not any(k.startswith("ref_") for k in kernels), kernels
    return [k for k in kernels
            if k.startswith(("conv_im2col_", "conv_dw_", "conv_direct_")) and k.endswith("_rw")]


def shape_id(s):
    return "n{}c{}h{}w{}_m{}k{}x{}_s{}{}_g{}".format(*s[:7], *s[7], s[10])


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("bias", ["none", "input", "constant"])
def test_conv_weights_as_inputs(shape, bias, tmp_path):
    n, c, h, w_, m, kh, kw, stride, pads, dil, group = shape
    rng = np.random.default_rng(m * kh + kw)
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((m, c // group, kh, kw)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    names, inputs, inits, feeds = ["x", "w"], [vi("x", x.shape), vi("w", w.shape)], [], {"x": x,
                                                                                        "w": w}
    if bias == "input":
        names.append("b")
        inputs.append(vi("b", b.shape))
        feeds["b"] = b
    elif bias == "constant":
        names.append("b")
        inits.append(numpy_helper.from_array(b, "b"))
    node = helper.make_node("Conv", names, ["y"], kernel_shape=[kh, kw], strides=list(stride),
                            pads=[pads[0], pads[1], pads[2], pads[3]], dilations=list(dil),
                            group=group)
    data = onnx_model([node], inputs, [vi("y", None)], inits)
    want = conv_ref(x, w, None if bias == "none" else b, stride, pads, dil, group)
    runs = run_on_each_isa(data, feeds, tmp_path)
    assert runs[-1][0] == "scalar"
    for max_isa, out, plan in runs:
        assert rel_error(out["y"].astype(np.float64), want) <= 2e-6, max_isa
        if max_isa != "scalar":
            assert runtime_weight_convs(plan), plan["steps"]


@pytest.mark.parametrize("threads", [1, 2])
def test_computed_weights_change_every_run(threads):
    """CondConv-style: the weights are a constant bank mixed by a per-run coefficient, then a
    fused Relu and a residual Add. Each run's output follows that run's weights."""
    rng = np.random.default_rng(7)
    c, m = 24, 24
    bank = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    nodes = [helper.make_node("Mul", ["bank", "a"], ["w"]),
             helper.make_node("Conv", ["x", "w", "bias"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["y"])]
    data = onnx_model(nodes, [vi("x", [2, c, 14, 14]), vi("a", [1])], [vi("y", None)],
                      [numpy_helper.from_array(bank, "bank"), numpy_helper.from_array(bias,
                                                                                      "bias")])
    with kiln.Session.from_bytes(data, threads=threads, disable_cache=True) as s:
        assert runtime_weight_convs(s.plan()), s.plan()["steps"]
        for a in (1.0, -0.5, 3.0):
            x = rng.standard_normal((2, c, 14, 14)).astype(np.float32)
            want = np.maximum(conv_ref(x, bank * np.float32(a), bias, pads=(1, 1, 1, 1)), 0) + x
            y = s.run({"x": x, "a": np.array([a], np.float32)})["y"]
            assert rel_error(y.astype(np.float64), want) <= 2e-6, a


def test_computed_weights_of_a_depthwise_conv(tmp_path):
    """A depthwise conv's computed weights: the depthwise family packs them per run."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                            group=8)
    data = onnx_model([node], [vi("x", x.shape), vi("w", w.shape)], [vi("y", None)])
    want = conv_ref(x, w, pads=(1, 1, 1, 1), group=8)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x, "w": w}, tmp_path):
        assert rel_error(out["y"].astype(np.float64), want) <= 2e-6, max_isa
        if max_isa != "scalar":
            assert runtime_weight_convs(plan), plan["steps"]


def norm_ref(op, x, params, eps, axis=-1, groups=1):
    """The ONNX normalisations in float64 (inference BatchNormalization)."""
    x = x.astype(np.float64)
    p = [None if v is None else v.astype(np.float64) for v in params]
    if op == "BatchNormalization":
        at = (1, -1) + (1,) * (x.ndim - 2)
        scale, b, mean, var = (v.reshape(at) for v in p)
        return (x - mean) / np.sqrt(var + eps) * scale + b
    if op == "LayerNormalization":
        axes = tuple(range(axis % x.ndim, x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps) * p[0]
        return y if p[1] is None else y + p[1]
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    mu = xg.mean(axis=2, keepdims=True)
    y = ((xg - mu) / np.sqrt(((xg - mu) ** 2).mean(axis=2, keepdims=True) + eps)).reshape(x.shape)
    at = (1, -1) + (1,) * (x.ndim - 2)
    return y * p[0].reshape(at) + p[1].reshape(at)


# (op, x shape, parameter shapes, attributes, which parameters are graph inputs)
NORMS = [
    ("BatchNormalization", (2, 6, 5, 7), [(6,)] * 4, {"epsilon": 1e-3}, "all"),
    ("BatchNormalization", (3, 10, 9), [(10,)] * 4, {}, "scale"),
    ("LayerNormalization", (2, 5, 24), [(24,), (24,)], {"axis": -1}, "all"),
    ("LayerNormalization", (2, 3, 4, 8), [(4, 8), (4, 8)], {"axis": 2, "epsilon": 1e-4}, "bias"),
    ("LayerNormalization", (4, 16), [(16,)], {"axis": -1}, "scale"),
    ("LayerNormalization", (3, 2, 20), [(20,), (20,)], {"axis": 2}, "scale"),
    ("InstanceNormalization", (1, 4, 9), [(4,), (4,)], {}, "bias"),
    ("InstanceNormalization", (2, 5, 6, 6), [(5,), (5,)], {}, "all"),
    ("GroupNormalization", (2, 8, 5, 5), [(8,), (8,)], {"num_groups": 4}, "scale"),
]


@pytest.mark.parametrize("case", NORMS, ids=lambda c: f"{c[0]}_{len(c[1])}d_{c[4]}")
def test_normalisation_with_computed_parameters(case, tmp_path):
    op, xs, pshapes, attrs, fed = case
    rng = np.random.default_rng(len(xs) * 7 + len(pshapes))
    x = rng.standard_normal(xs).astype(np.float32)
    params = [rng.standard_normal(s).astype(np.float32) for s in pshapes]
    if op == "BatchNormalization":
        params[3] = np.abs(params[3]) + 0.5  # the variance
    names = ["x"] + [f"p{i}" for i in range(len(params))]
    inputs, inits, feeds = [vi("x", xs)], [], {"x": x}
    for i, (nm, v) in enumerate(zip(names[1:], params)):
        as_input = fed == "all" or (fed == "scale" and i == 0) or (fed == "bias" and i == 1)
        if as_input:
            inputs.append(vi(nm, v.shape))
            feeds[nm] = v
        else:
            inits.append(numpy_helper.from_array(v, nm))
    node = helper.make_node(op, names, ["y"], **attrs)
    opset = 21 if op == "GroupNormalization" else 17
    data = onnx_model([node], inputs, [vi("y", None)], inits, opset=opset)
    eps = attrs.get("epsilon", 1e-5)
    full = params + [None] * (2 - len(params)) if op == "LayerNormalization" else params
    groups = xs[1] if op == "InstanceNormalization" else attrs.get("num_groups", 1)
    want = norm_ref(op, x, full, eps, attrs.get("axis", -1), groups)
    runs = run_on_each_isa(data, feeds, tmp_path)
    for max_isa, out, plan in runs:
        assert rel_error(out["y"].astype(np.float64), want) <= 3e-6, max_isa
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not any(k.startswith("ref_") for k in kernels), kernels
