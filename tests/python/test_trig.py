"""Sin .. Atanh (positional encodings, Fourier features) on the typed glue kernel: against numpy
in double precision (libm's float functions, within 2e-6 relative or 1e-6 absolute), bit-equal
to the reference path, NaN outside each domain; on a JIT ISA the plan has no reference kernel."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers import run_on_each_isa

OPS = {"Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
       "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
       "Acosh": np.arccosh, "Atanh": np.arctanh}


@pytest.mark.parametrize("op", list(OPS))
def test_trig_matches_numpy(op, tmp_path):
    rng = np.random.default_rng(len(op))
    x = np.concatenate([rng.uniform(-4, 4, 997), [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e4, -30.0,
                                                  np.inf, -np.inf, np.nan]]).astype(np.float32)
    x = x.reshape(1, 2, -1)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with np.errstate(all="ignore"):
        want = OPS[op](x.astype(np.float64))
    runs = run_on_each_isa(data, {"x": x}, tmp_path)
    ref = runs[-1][1]["y"]  # the reference kernel's
    finite = np.isfinite(want) & (np.abs(want) < 1e30)
    np.testing.assert_allclose(ref[finite], want[finite], rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(ref), np.isnan(want))
    for max_isa, out, plan in runs:
        np.testing.assert_array_equal(out["y"], ref, err_msg=max_isa)
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert kernels == [op.lower() + "_float32_float32__" + max_isa], kernels
