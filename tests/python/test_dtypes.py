"""bool arrays in and out (numpy.bool_), and the bool ops' results against numpy."""
import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def bool_model():
    """m (bool [2, 3]) and x (float [2, 3]) -> y = Where(m & (x > 0), x, -1), nm = Not(m)."""
    g = helper.make_graph(
        [helper.make_node("Greater", ["x", "zero"], ["pos"]),
         helper.make_node("And", ["m", "pos"], ["sel"]),
         helper.make_node("Where", ["sel", "x", "minus1"], ["y"]),
         helper.make_node("Not", ["m"], ["nm"])],
        "bools",
        [helper.make_tensor_value_info("m", TensorProto.BOOL, [2, 3]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("nm", TensorProto.BOOL, [2, 3])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
         helper.make_tensor("minus1", TensorProto.FLOAT, [], [-1.0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m.SerializeToString()


def test_bool_inputs_and_outputs_are_numpy_bool():
    with kiln.Session.from_bytes(bool_model(), disable_cache=True) as s:
        assert s.inputs[0].dtype == np.bool_ and s.outputs[1].dtype == np.bool_
        m = np.array([[True, False, True], [False, True, True]])
        x = np.array([[1, 2, -3], [4, -5, 6]], np.float32)
        out = s.run({"m": m, "x": x})
        assert out["nm"].dtype == np.bool_
        np.testing.assert_array_equal(out["nm"], ~m)
        np.testing.assert_array_equal(out["y"], np.where(m & (x > 0), x, np.float32(-1)))
        with pytest.raises(kiln.ShapeMismatch, match="bool"):
            s.run({"m": m.astype(np.uint8), "x": x})


def byte_model():
    """x (uint8 [1, 3, 4, 5], an image) -> f = Cast(x, FLOAT) / 255 and q = QuantizeLinear(f,
    2 / 255) (uint8, declared so); i (int32 [3]) -> ii = i + i (int32)."""
    g = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["xf", "inv255"], ["f"]),
         helper.make_node("QuantizeLinear", ["f", "qs", "qz"], ["q"]),
         helper.make_node("Add", ["i", "i"], ["ii"])],
        "bytes",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 4, 5]),
         helper.make_tensor_value_info("i", TensorProto.INT32, [3])],
        [helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, 3, 4, 5]),
         helper.make_tensor_value_info("q", TensorProto.UINT8, [1, 3, 4, 5]),
         helper.make_tensor_value_info("ii", TensorProto.INT32, [3])],
        [helper.make_tensor("inv255", TensorProto.FLOAT, [], [1 / 255]),
         helper.make_tensor("qs", TensorProto.FLOAT, [], [2 / 255]),
         helper.make_tensor("qz", TensorProto.UINT8, [], [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m.SerializeToString()


def test_uint8_and_int32_inputs_and_outputs_keep_their_numpy_dtypes():
    with kiln.Session.from_bytes(byte_model(), disable_cache=True) as s:
        assert [i.dtype for i in s.inputs] == [np.uint8, np.int32]
        assert [o.dtype for o in s.outputs] == [np.float32, np.uint8, np.int32]
        x = np.arange(60, dtype=np.int64).reshape(1, 3, 4, 5).astype(np.uint8) * 4 + 3
        i = np.array([5, -7, 1 << 30], np.int32)
        out = s.run({"x": x, "i": i})
        f = x.astype(np.float32) * np.float32(1 / 255)
        np.testing.assert_array_equal(out["f"], f)
        assert out["q"].dtype == np.uint8 and out["ii"].dtype == np.int32
        q = np.clip(np.rint(f / np.float32(2 / 255)), 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(out["q"], q)
        np.testing.assert_array_equal(out["ii"], (i.astype(np.int64) * 2).astype(np.int32))
        with pytest.raises(kiln.ShapeMismatch, match="uint8"):
            s.run({"x": x.astype(np.float32), "i": i})
        with pytest.raises(kiln.ShapeMismatch, match="int32"):
            s.run({"x": x, "i": i.astype(np.int64)})


def test_float64_inputs_and_outputs_are_numpy_float64_computed_in_float32():
    """x (double [4]) -> y = x * k + c (double, k and c double initializers), yf = Cast(y, FLOAT):
    PyTorch writes doubles for Python float arithmetic on traced sizes."""
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "k"], ["m"]),
         helper.make_node("Add", ["m", "c"], ["y"]),
         helper.make_node("Cast", ["y"], ["yf"], to=TensorProto.FLOAT)],
        "doubles",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4]),
         helper.make_tensor_value_info("yf", TensorProto.FLOAT, [4])],
        [helper.make_tensor("k", TensorProto.DOUBLE, [4], [0.5, -3.0, 1e-3, 2.0]),
         helper.make_tensor("c", TensorProto.DOUBLE, [], [0.25])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    with kiln.Session.from_bytes(m.SerializeToString(), disable_cache=True) as s:
        assert s.inputs[0].dtype == np.float64
        assert [o.dtype for o in s.outputs] == [np.float64, np.float32]
        x = np.array([1.0, -2.0 / 3.0, 123456.789, 1e30])
        out = s.run({"x": x})
        assert out["y"].dtype == np.float64 and out["yf"].dtype == np.float32
        want = x * np.array([0.5, -3.0, 1e-3, 2.0]) + 0.25
        np.testing.assert_allclose(out["y"], want, rtol=3e-7)
        np.testing.assert_array_equal(out["y"].astype(np.float32), out["yf"])
        with pytest.raises(kiln.ShapeMismatch, match="float64"):
            s.run({"x": x.astype(np.float32)})
