"""GridSample (spatial transformers, optical flow warps) against PyTorch's grid_sample: every
mode, padding mode and align_corners, grids reaching outside the image (and NaN), batch 2,
channel counts that are not whole vectors; on every JIT ISA (the glue kernel,
jit/glue/grid_sample.cpp) and the reference path."""
import io

import numpy as np
import pytest

import kiln

from helpers import rel_error, run_on_each_isa

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")
F = torch.nn.functional


class Warp(torch.nn.Module):
    """A conv, then its output sampled at a grid computed from the input (an STN's form)."""

    def __init__(self, mode, padding, align, channels):
        super().__init__()
        self.args = dict(mode=mode, padding_mode=padding, align_corners=align)
        self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.loc = torch.nn.Conv2d(3, 2, 5, stride=2, padding=2)

    def forward(self, x):
        grid = torch.tanh(self.loc(x)).permute(0, 2, 3, 1) * 1.4  # past the edges too
        return F.grid_sample(self.conv(x), grid, **self.args)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_matches_pytorch(mode, padding, align, tmp_path):
    torch.manual_seed(0)
    channels = 21 if align else 16
    net = Warp(mode, padding, align, channels).eval()
    x = torch.randn(2, 3, 19, 26)
    with torch.no_grad():
        want = net(x).numpy()
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=16, input_names=["x"], output_names=["y"])
    for max_isa, out, plan in run_on_each_isa(buf.getvalue(), {"x": x.numpy()}, tmp_path):
        assert rel_error(out["y"], want) < 2e-5, (max_isa, rel_error(out["y"], want))
        kernels = [st["kernel"] for st in plan["steps"] if st["op"] == "GridSample"]
        assert len(kernels) == 1
        if max_isa != "scalar":
            assert kernels[0].startswith("grid_sample_"), kernels


def test_grid_outside_and_nan_reads_zero(tmp_path):
    """A constant grid with points far outside the image and a NaN: zeros padding gives 0 there
    (PyTorch gives 0 for the far points; a NaN coordinate reads nothing in Kiln)."""
    from onnx import TensorProto, helper, numpy_helper
    grid = np.array([[[[0.0, 0.0], [5.0, -7.0]], [[np.nan, 0.2], [1e30, 1e30]]]], np.float32)
    g = helper.make_graph(
        [helper.make_node("GridSample", ["x", "grid"], ["y"], align_corners=0)], "gs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 5, 4, 6))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(grid, "grid")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()
    x = np.random.default_rng(0).standard_normal((1, 5, 4, 6)).astype(np.float32)
    want = F.grid_sample(torch.from_numpy(x), torch.from_numpy(np.nan_to_num(grid, nan=40.0)),
                         align_corners=False).numpy()
    for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_allclose(out["y"], want, rtol=1e-6, atol=1e-6, err_msg=max_isa)
