"""TopK and CumSum (detection decoders, positional encodings) against numpy: TopK largest and
smallest over any axis with ties (lower index first) and opset 9's attribute k; CumSum inclusive
/ exclusive, forward / reversed, float32 and int64. Both run on the reference kernel (a
vectorised path does not exist yet: bench/NOTES.md, session 29)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import run_on_each_isa


def model(node, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph([node], "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def topk_reference(x, k, axis, largest):
    # Stable sort on the key: ties keep the lower index first.
    key = -x if largest else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


@pytest.mark.parametrize("shape,k,axis,largest", [
    ((2, 1000), 5, -1, 1), ((3, 7, 4), 3, 1, 0), ((2, 6, 5), 5, 2, 1), ((4, 9), 4, 0, 0)])
def test_topk(shape, k, axis, largest, tmp_path):
    rng = np.random.default_rng(k)
    x = rng.integers(-4, 5, size=shape).astype(np.float32)  # many ties
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    data = model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                 [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                 [numpy_helper.from_array(np.array([k], np.int64), "k")])
    want_v, want_i = topk_reference(x, k, axis, largest)
    for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["v"], want_v, err_msg=max_isa)
        np.testing.assert_array_equal(out["i"], want_i, err_msg=max_isa)


def test_topk_opset9_attribute(tmp_path):
    x = np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32)
    node = helper.make_node("TopK", ["x"], ["v", "i"], k=4)
    data = model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                 [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("i", TensorProto.INT64, None)], opset=9)
    want_v, want_i = topk_reference(x, 4, -1, 1)
    for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["v"], want_v, err_msg=max_isa)
        np.testing.assert_array_equal(out["i"], want_i, err_msg=max_isa)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("axis,exclusive,reverse", [(3, 0, 0), (1, 1, 0), (-2, 0, 1), (0, 1, 1)])
def test_cumsum(dtype, axis, exclusive, reverse, tmp_path):
    shape = (2, 5, 3, 7)
    x = np.random.default_rng(axis + 7).integers(-9, 10, size=shape).astype(dtype)
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT64
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    data = model(node, [helper.make_tensor_value_info("x", elem, shape)],
                 [helper.make_tensor_value_info("y", elem, None)],
                 [numpy_helper.from_array(np.array(axis, np.int64), "axis")])
    v = np.flip(x, axis) if reverse else x
    want = np.cumsum(v, axis=axis)
    if exclusive:
        want = want - v
    if reverse:
        want = np.flip(want, axis)
    for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["y"], want.astype(dtype), err_msg=max_isa)
