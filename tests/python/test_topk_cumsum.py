"""TopK and CumSum (detection decoders, positional encodings) against numpy, on every ISA path:
TopK largest and smallest over any axis with ties (lower index first), NaNs, small k (the
sorted buffer) and large k (the heap), an output read by nothing and opset 9's
attribute k; CumSum inclusive / exclusive, forward / reversed, float32 and int64, rows shorter
and longer than a vector. On a JIT ISA the plan holds no reference kernel (jit/glue/topk.cpp,
jit/glue/cumsum.cpp)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import run_on_each_isa


def model(node, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph([node], "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def no_ref_kernels(max_isa, plan):
    if max_isa != "scalar":
        kernels = [st["kernel"] for st in plan["steps"]]
        assert not [k for k in kernels if k.startswith("ref_")], kernels


def topk_reference(x, k, axis, largest):
    # Stable sort on the key (NaN first): ties keep the lower index first.
    key = np.where(np.isnan(x), -np.inf, -x if largest else x)
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


@pytest.mark.parametrize("shape,k,axis,largest,values", [
    ((2, 1000), 5, -1, 1, "ties"), ((3, 7, 4), 3, 1, 0, "ties"), ((2, 6, 5), 5, 2, 1, "ties"),
    ((4, 9), 4, 0, 0, "ties"), ((3, 1000), 5, -1, 0, "normal"), ((2, 1000), 64, 1, 1, "normal"),
    ((2, 300), 65, 1, 0, "ties"), ((2, 37), 37, 1, 1, "normal"), ((2, 200, 33), 7, 1, 1, "normal"),
    ((5, 100), 3, 1, 1, "nan"), ((5, 100), 3, 1, 0, "nan"), ((4, 50), 20, 1, 0, "nan"),
    ((3, 77), 10, 1, 1, "ascending"), ((3, 77), 10, 1, 0, "ascending")])
def test_topk(shape, k, axis, largest, values, tmp_path):
    rng = np.random.default_rng(k)
    if values == "ties":
        x = rng.integers(-4, 5, size=shape).astype(np.float32)
    elif values == "ascending":  # every element enters the buffer of the largest
        x = np.broadcast_to(np.arange(shape[-1], dtype=np.float32), shape).copy()
    else:
        x = rng.standard_normal(shape).astype(np.float32)
    if values == "nan":
        x[rng.random(shape) < 0.05] = np.nan
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    data = model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                 [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                 [numpy_helper.from_array(np.array([k], np.int64), "k")])
    want_v, want_i = topk_reference(x, k, axis, largest)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["v"], want_v, err_msg=max_isa)
        np.testing.assert_array_equal(out["i"], want_i, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


@pytest.mark.parametrize("wanted", ["v", "i"])
def test_topk_one_output(wanted, tmp_path):
    x = np.random.default_rng(1).standard_normal((3, 40)).astype(np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)  # one read by nothing
    info = helper.make_tensor_value_info(wanted, TensorProto.FLOAT if wanted == "v"
                                         else TensorProto.INT64, None)
    data = model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)], [info],
                 [numpy_helper.from_array(np.array([6], np.int64), "k")])
    want = topk_reference(x, 6, 1, 1)[0 if wanted == "v" else 1]
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out[wanted], want, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


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
@pytest.mark.parametrize("shape,axis,exclusive,reverse", [
    ((2, 5, 3, 7), 3, 0, 0), ((2, 5, 3, 7), 1, 1, 0), ((2, 5, 3, 7), -2, 0, 1),
    ((2, 5, 3, 7), 0, 1, 1), ((3, 53), 1, 0, 0), ((3, 53), 1, 1, 0), ((3, 53), 1, 0, 1),
    ((3, 53), 1, 1, 1), ((2, 16), 1, 1, 1), ((4, 1), 1, 1, 0), ((2, 40, 1100), 1, 0, 1)])
def test_cumsum(dtype, shape, axis, exclusive, reverse, tmp_path):
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
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["y"], want.astype(dtype), err_msg=max_isa)
        no_ref_kernels(max_isa, plan)
