"""Pad of tensors of rank other than 4 (BoTNet's relative-position logits pad a 3-D tensor; 1-D
signals, 5-D volumes) on the pad glue kernel, viewed as a 4-D Pad in row-major order: constant
pads on any dims, every mode on the last two, the axes input, against numpy
on every ISA path; over rank 4 with a padded leading dim the reference kernel still answers."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi

rng = np.random.default_rng(5)


def numpy_pad(x, begin, end, mode, value):
    width = list(zip(begin, end))
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    return np.pad(x, width, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


CASES = [
    ((7,), [2], [3]),
    ((5, 9), [0, 4], [0, 2]),
    ((3, 4, 11), [0, 0, 0], [0, 0, 10]),  # (BoTNet's rel_to_abs)
    ((2, 6, 8), [1, 2, 0], [0, 1, 3]),
    ((2, 3, 4, 5, 6), [0, 0, 1, 0, 2], [0, 0, 0, 2, 1]),
    ((2, 2, 3, 4, 5, 6), [0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1]),
    ((1, 16), [0, 0], [0, 5]),
]


@pytest.mark.parametrize("shape,begin,end", CASES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_any_rank(shape, begin, end, mode, tmp_path):
    x = rng.standard_normal(shape).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(begin + end, np.int64), "pads"),
             numpy_helper.from_array(np.array(0.75, np.float32), "value")]
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode=mode)
    data = onnx_model([node], [vi("x", shape)], [vi("y", None)], inits, 19)
    want = numpy_pad(x, begin, end, mode, 0.75).astype(np.float32)
    # (The kernel mirrors along the last two dims only: other pads of reflect / edge / wrap stay
    # on the reference kernel.)
    glue = mode == "constant" or not any(begin[:-2] + end[:-2])
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert out["y"].shape == want.shape, max_isa
        assert rel_error(out["y"], want) == 0, max_isa
        kernels = [st["kernel"] for st in plan["steps"]]
        if max_isa != "scalar" and glue:
            assert any(k.startswith("pad_") for k in kernels), (max_isa, kernels)
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)


def test_pad_axes_input(tmp_path):
    """Pads given for some axes (negative ones included) only."""
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array([1, 2, 3, 0], np.int64), "pads"),
             numpy_helper.from_array(np.array([-1, 0], np.int64), "axes")]
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"])
    data = onnx_model([node], [vi("x", x.shape)], [vi("y", None)], inits, 19)
    want = np.pad(x, [(2, 0), (0, 0), (1, 3)])
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert rel_error(out["y"], want) == 0, max_isa
        if max_isa != "scalar":
            assert [st["kernel"][:4] for st in plan["steps"]] == ["pad_"], max_isa


def test_pad_rank5_padded_leading_dim(tmp_path):
    """A padded dim among the merged leading ones: no 4-D view, the reference kernel."""
    x = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array([1, 0, 0, 0, 0, 0, 0, 0, 1, 0], np.int64), "pads")]
    data = onnx_model([helper.make_node("Pad", ["x", "pads"], ["y"])], [vi("x", x.shape)],
                      [vi("y", None)], inits, 13)
    want = np.pad(x, [(1, 0), (0, 0), (0, 0), (0, 1), (0, 0)])
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert rel_error(out["y"], want) == 0, max_isa
