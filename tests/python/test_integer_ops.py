"""DynamicQuantizeLinear, ConvInteger and MatMulInteger (ONNX Runtime's dynamic quantization
writes them; graph/integer_ops.h expands them into float ops) against numpy references of the
ONNX definitions, exactly, on every ISA path and the reference kernels."""
import numpy as np
import pytest

import kiln
from helpers import run_on_each_isa

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "integer_ops", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m.SerializeToString()


def dynamic_quantize_ref(x):
    """The ONNX reference: uint8, ties to even, scale 1/255 for an all-zero input."""
    lo = np.float32(min(0.0, x.min()))
    hi = np.float32(max(0.0, x.max()))
    scale = np.float32(np.float32(1.0) if hi == lo else hi - lo) / np.float32(255)
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255)
    return y.astype(np.uint8), np.float32(scale), np.uint8(zp)


def test_dynamic_quantize_linear_matches_the_onnx_definition(tmp_path):
    data = model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 7])],
                 [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3, 5, 7]),
                  helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                  helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    rng = np.random.default_rng(5)
    base = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    # mixed signs, all positive (zero point 0), all negative (zero point 255), all zero, halves
    cases = [base, base + 5, base - 5, np.zeros_like(base),
             (np.round(base * 4) / 4).astype(np.float32)]
    for x in cases:
        y, s, z = dynamic_quantize_ref(x)
        for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
            assert out["y"].dtype == np.uint8 and out["z"].dtype == np.uint8
            assert out["s"] == s and out["z"] == z, (max_isa, out["s"], s, out["z"], z)
            np.testing.assert_array_equal(out["y"], y, err_msg=max_isa)


def conv_int_ref(x, w, xz, wz, stride, pad, group):
    """int64 sums of (x - xz)(w - wz): x [N, C, H, W], w [M, C / group, k, k], wz per M."""
    xi = np.pad(x.astype(np.int64) - int(xz), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wi = w.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    n, c, h, wd = xi.shape
    m, cg, k, _ = wi.shape
    oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    for o in range(m):
        g = o // (m // group)
        for i in range(oh):
            for j in range(ow):
                win = xi[:, g * cg:(g + 1) * cg, i * stride:i * stride + k, j * stride:j * stride + k]
                y[:, o, i, j] = (win * wi[o]).sum(axis=(1, 2, 3))
    return y


# (The last two are cases Winograd could take, stride 1 and stride 2 (winograd_s2, whose error
# is an exact family's in f32 but whose weight transform halves sums): the int32 sums leave the
# graph, so it must not.)
@pytest.mark.parametrize("wtype,group,stride,m,c,hw", [
    (np.int8, 1, 2, 6, 4, (9, 8)), (np.uint8, 1, 2, 6, 4, (9, 8)), (np.int8, 2, 2, 6, 4, (9, 8)),
    (np.int8, 1, 1, 32, 32, (28, 28)), (np.int8, 1, 2, 64, 64, (56, 56))])
def test_conv_integer_sums_exactly(tmp_path, wtype, group, stride, m, c, hw):
    rng = np.random.default_rng(7)
    k = 3
    info = np.iinfo(wtype)
    w = rng.integers(info.min, info.max + 1, (m, c // group, k, k)).astype(wtype)
    # per output channel weight zero points (uint8 weights), else per tensor
    wz = (rng.integers(100, 156, m) if wtype == np.uint8 else np.array(3)).astype(wtype)
    xz = np.uint8(117)
    data = model(
        [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1],
                          strides=[stride, stride], group=group)],
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, c, *hw])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(wz, "wz"),
         numpy_helper.from_array(np.array(xz), "xz")])
    x = rng.integers(0, 256, (2, c, *hw)).astype(np.uint8)
    want = conv_int_ref(x, w, xz, np.broadcast_to(wz, (m,)), stride, 1, group)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert out["y"].dtype == np.int32
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        kernels = [st["kernel"] for st in plan["steps"]]
        assert not any("winograd" in k for k in kernels), kernels


def test_matmul_integer_per_row_and_per_column_zero_points(tmp_path):
    rng = np.random.default_rng(9)
    b = rng.integers(-128, 128, (16, 5)).astype(np.int8)
    bz = rng.integers(-4, 5, 5).astype(np.int8)  # per column
    az = rng.integers(120, 136, 3).astype(np.uint8)  # per row
    data = model([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                 [helper.make_tensor_value_info("a", TensorProto.UINT8, [3, 16])],
                 [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 5])],
                 [numpy_helper.from_array(b, "b"), numpy_helper.from_array(az, "az"),
                  numpy_helper.from_array(bz, "bz")])
    a = rng.integers(0, 256, (3, 16)).astype(np.uint8)
    want = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - bz[None, :])
    for max_isa, out, _ in run_on_each_isa(data, {"a": a}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)


def test_dynamically_quantized_conv_as_onnx_runtime_writes_it(tmp_path):
    """x -> DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul(x_scale * w_scale) + bias, the
    float input's own quantization, against numpy; no reference kernel on the JIT paths."""
    rng = np.random.default_rng(11)
    w = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    ws = np.float32(0.01)
    bias = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    data = model(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
         helper.make_node("ConvInteger", ["xq", "w", "xz"], ["acc"], pads=[1, 1, 1, 1]),
         helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["xs", "ws"], ["scale"]),
         helper.make_node("Mul", ["accf", "scale"], ["yb"]),
         helper.make_node("Add", ["yb", "bias"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 12])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(ws), "ws"),
         numpy_helper.from_array(bias, "bias")])
    x = rng.standard_normal((1, 3, 10, 12)).astype(np.float32)
    xq, xs, xz = dynamic_quantize_ref(x)
    acc = conv_int_ref(xq, w, xz, np.zeros(8), 1, 1, 1).astype(np.float32)
    want = acc * (xs * ws) + bias
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        # (The sums read as float: a Winograd conv may compute them, to ~1e-6 of the output.)
        err = np.abs(out["y"] - want).max() / np.abs(want).max()
        assert err <= 2e-5, (max_isa, err)
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)
