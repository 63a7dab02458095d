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
