"""Sin .. Atanh (positional encodings, Fourier features): against numpy in double precision
(libm's float functions, within 2e-6 relative or 1e-6 absolute), NaN outside each domain; on a
JIT ISA the plan has no reference kernel. Tan .. Atanh run on the typed glue kernel, bit-equal to
the reference path; Sin and Cos on the vectorised elementwise kernel, within 2 ulp of it
(tests/jit/test_glue_unary.cpp measures them over the whole float range)."""
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
    vectorised = op in ("Sin", "Cos")
    for max_isa, out, plan in runs:
        if vectorised and max_isa != "scalar":
            np.testing.assert_array_equal(np.isnan(out["y"]), np.isnan(ref), err_msg=max_isa)
            ok = np.isnan(ref) | (np.abs(out["y"] - ref) <= 2 * np.spacing(np.abs(ref)))
            assert ok.all(), (max_isa, x[~ok], out["y"][~ok], ref[~ok])
        else:
            np.testing.assert_array_equal(out["y"], ref, err_msg=max_isa)
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            name = f"eltwise_{op.lower()}_f32__" if vectorised else op.lower() + "_float32_float32__"
            assert kernels == [name + max_isa], kernels
