"""3-D CNNs (Conv3d on [N, C, D, H, W], as video networks have) run as 2-D convs over the frames
with the depth taps stacked on the channels, 3-D pools as 2-D pools and a max / mean of the depth
taps (graph/rewrite_conv3d.cpp): against PyTorch, on every
JIT ISA and the reference path, with no reference kernel in the JIT plans, no Transpose between
two convs and the elementwise ops fused into them."""
import io

import numpy as np
import pytest

import kiln

from helpers import rel_error, run_on_each_isa

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")


class Net3d(torch.nn.Module):
    """Every way a depth window differs: padded or not, strided, dilated, one tap, even taps;
    a residual; no bias; a global pool and a classifier."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv3d(3, 8, (3, 5, 5), stride=(1, 2, 2), padding=(1, 2, 2))
        self.c2 = torch.nn.Conv3d(8, 8, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        self.c3 = torch.nn.Conv3d(8, 16, (1, 3, 3), padding=(0, 1, 1), bias=False)
        self.c4 = torch.nn.Conv3d(16, 16, (2, 3, 3), dilation=(2, 1, 1), padding=(1, 1, 1))
        self.c5 = torch.nn.Conv3d(16, 16, (3, 3, 3), padding=(0, 1, 1))  # no D padding
        self.skip = torch.nn.Conv3d(8, 16, 1, stride=(2, 1, 1))
        self.fc = torch.nn.Linear(16, 5)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        y = self.c3(torch.relu(self.c2(x)))
        y = torch.relu(self.c4(y) + self.skip(x))
        y = self.c5(y)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool3d(y, 1), 1))


def export(net, x, opset=13):
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=opset, input_names=["x"], output_names=["y"])
    return buf.getvalue()


@pytest.mark.parametrize("shape,opset", [((1, 3, 9, 20, 24), 13), ((2, 3, 8, 17, 13), 17)])
def test_conv3d_net_matches_pytorch(shape, opset, tmp_path):
    torch.manual_seed(0)
    net = Net3d().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        want = net(x).numpy()
    # (An ISA this CPU lacks is left out: the avx512 case is skipped loudly below.)
    for max_isa, out, plan in run_on_each_isa(export(net, x, opset), {"x": x.numpy()}, tmp_path):
        got = out["y"]
        assert got.shape == want.shape
        assert rel_error(got, want) < 1e-5, (max_isa, rel_error(got, want))
        ops = [st["op"] for st in plan["steps"]]
        assert ops.count("Conv") == 6, ops
        # The frames stay in frames' order from conv to conv (one Transpose in, one out) and
        # the ReLUs and the residual Add are in the convs' epilogues.
        assert ops.count("Transpose") == 2 and "Relu" not in ops and "Add" not in ops, ops
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], kernels
            # One image: a depth tap of stride 1 is a run of whole frames, a view (no copy).
            slices = [st["kernel"] for st in plan["steps"] if st["op"] == "Slice"]
            views = [k for k in slices if k.startswith("view")]
            assert (len(views) >= 3) == (shape[0] == 1), slices


class PoolNet3d(torch.nn.Module):
    """3-D pools: padded, strided, one-frame and ceil-mode windows; averages with and without
    the pads counted."""

    def __init__(self, count_include_pad):
        super().__init__()
        self.c = torch.nn.Conv3d(3, 16, (1, 3, 3), padding=(0, 1, 1))
        self.p1 = torch.nn.MaxPool3d(3, stride=2, padding=1)
        self.p2 = torch.nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        self.p3 = torch.nn.MaxPool3d(2, stride=2, ceil_mode=True)
        self.a1 = torch.nn.AvgPool3d((3, 3, 3), stride=(2, 1, 1), padding=1,
                                     count_include_pad=count_include_pad)
        self.a2 = torch.nn.AvgPool3d(2, stride=(1, 2, 2), ceil_mode=True,
                                     count_include_pad=count_include_pad)

    def forward(self, x):
        x = self.c(x)
        return torch.cat([torch.flatten(t, 1) for t in (
            self.p1(x), self.p2(x), self.p3(x), self.a1(x), self.a2(x))], 1)


@pytest.mark.parametrize("count_include_pad", [False, True])
def test_pool3d_matches_pytorch(count_include_pad, tmp_path):
    torch.manual_seed(1)
    net = PoolNet3d(count_include_pad).eval()
    x = torch.randn(2, 3, 7, 11, 10)
    with torch.no_grad():
        want = net(x).numpy()
    for max_isa, out, plan in run_on_each_isa(export(net, x), {"x": x.numpy()}, tmp_path):
        assert rel_error(out["y"], want) < 1e-5, (max_isa, rel_error(out["y"], want))
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], kernels


def test_avx512_available_or_said():
    with kiln.Session.from_bytes(export(torch.nn.Conv3d(2, 2, 1), torch.randn(1, 2, 2, 2, 2)),
                                 max_isa="avx512", disable_cache=True) as s:
        if s.isa != "avx512":
            pytest.skip("this CPU has no AVX-512: the 3-D nets ran on AVX2 and the reference only")


def test_grouped_conv3d_is_refused_by_name():
    data = export(torch.nn.Conv3d(4, 4, 3, groups=2), torch.randn(1, 4, 5, 6, 6))
    with pytest.raises(kiln.Unsupported, match="grouped 3-D convolution"):
        kiln.Session.from_bytes(data, disable_cache=True)
