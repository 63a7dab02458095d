"""1-D CNNs (Conv1d, ConvTranspose1d, MaxPool1d, AvgPool1d on [N, C, L]) run as their 2-D forms
on [N, C, 1, L] (graph/canonicalize.cpp lift_1d): against PyTorch, on every JIT ISA and the
reference path, with no reference kernel in the JIT plans and no Squeeze / Unsqueeze pair left
between two lifted convs."""
import io

import numpy as np
import pytest

import kiln

from helpers import rel_error, run_on_each_isa

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")


class Net1d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(8, 16, 5, padding=2)
        self.c2 = torch.nn.Conv1d(16, 16, 3, stride=2, dilation=2, padding=2, groups=4)
        self.c3 = torch.nn.Conv1d(16, 16, 3, padding=1, groups=16)  # depthwise
        self.pool = torch.nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True)
        self.up = torch.nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1, output_padding=1)
        self.avg = torch.nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False)
        self.c4 = torch.nn.Conv1d(8, 4, 1)

    def forward(self, x):
        x = self.c3(self.c2(torch.relu(self.c1(x))))  # c2 -> c3: no op between (pair dropped)
        return self.c4(self.avg(self.up(self.pool(x))))


def export_with_bn(cls, seed, shape):
    """cls() with non-trivial BatchNorm statistics, exported at opset 13: (bytes, x, output)."""
    torch.manual_seed(seed)
    net = cls()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    net.eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        want = net(x).numpy()
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=13, input_names=["x"], output_names=["y"])
    return buf.getvalue(), x, want


class BnNet1d(torch.nn.Module):
    """The usual 1-D block: Conv1d -> BatchNorm1d -> ReLU, twice, then pools."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv1d(4, 12, 7, padding=3), torch.nn.BatchNorm1d(12), torch.nn.ReLU(),
            torch.nn.Conv1d(12, 12, 3, padding=1), torch.nn.BatchNorm1d(12), torch.nn.ReLU(),
            torch.nn.MaxPool1d(2), torch.nn.AdaptiveAvgPool1d(1))

    def forward(self, x):
        return self.body(x)


def test_conv_bn_relu_1d_folds(tmp_path):
    """BatchNorm1d, ReLU and the global pool after a lifted conv move before its Squeeze:
    folded, fused, and on the 2-D kernels."""
    data, x, want = export_with_bn(BnNet1d, 1, (3, 4, 64))
    with kiln.Session.from_bytes(data, threads=2, cache_dir=str(tmp_path)) as s:
        got = s.run({"x": x.numpy()})["y"]
        ops = [st["op"] for st in s.plan()["steps"]]
        kernels = [st["kernel"] for st in s.plan()["steps"]]
        isa = s.isa
    assert got.shape == want.shape
    assert rel_error(got, want) < 1e-5
    if isa != "scalar":
        assert not [k for k in kernels if k.startswith("ref_")], kernels
    assert "BatchNormalization" not in ops and "Relu" not in ops, ops
    assert ops.count("Squeeze") + ops.count("Unsqueeze") == 2, ops


@pytest.mark.parametrize("length,opset", [(100, 13), (37, 17)])
def test_conv1d_net_matches_pytorch(length, opset, tmp_path):
    torch.manual_seed(0)
    net = Net1d().eval()
    x = torch.randn(2, 8, length)
    with torch.no_grad():
        want = net(x).numpy()
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=opset, input_names=["x"], output_names=["y"])
    # Kernels measured as by default (the cost model alone may keep a tiny pool on the
    # reference kernel rather than convert layouts around it). An ISA this CPU lacks is left
    # out (the avx512 case is skipped loudly below).
    for max_isa, out, plan in run_on_each_isa(buf.getvalue(), {"x": x.numpy()}, tmp_path):
        got = out["y"]
        assert got.shape == want.shape
        assert rel_error(got, want) < 1e-5, (max_isa, rel_error(got, want))
        ops = [st["op"] for st in plan["steps"]]
        assert ops.count("Squeeze") + ops.count("Unsqueeze") <= 2 * 4, ops  # c2-c3 pair gone
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], kernels


def test_avx512_available_or_said():
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "d",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    with kiln.Session.from_bytes(helper.make_model(g).SerializeToString(), max_isa="avx512",
                                 disable_cache=True) as s:
        if s.isa != "avx512":
            pytest.skip("this CPU has no AVX-512: the 1-D nets ran on AVX2 and the reference only")


class BnHead(torch.nn.Module):
    """BatchNorm1d with no conv before it: on [N, C, L] (the input) and on [N, C] (a Linear's
    output, as re-identification heads have)."""

    def __init__(self):
        super().__init__()
        self.bn3 = torch.nn.BatchNorm1d(6)
        self.fc = torch.nn.Linear(6 * 20, 32)
        self.bn2 = torch.nn.BatchNorm1d(32)

    def forward(self, x):
        return torch.relu(self.bn2(self.fc(torch.flatten(self.bn3(x), 1))))


def test_batchnorm_rank_2_and_3(tmp_path):
    data, x, want = export_with_bn(BnHead, 2, (4, 6, 20))
    for max_isa in ("avx512", "avx2", "scalar"):
        with kiln.Session.from_bytes(data, threads=2, max_isa=max_isa,
                                     cache_dir=str(tmp_path / max_isa)) as s:
            if max_isa != "scalar" and s.isa != max_isa:
                continue
            got = s.run({"x": x.numpy()})["y"]
            kernels = [st["kernel"] for st in s.plan()["steps"]]
        assert rel_error(got, want) < 1e-5, (max_isa, rel_error(got, want))
        if max_isa != "scalar":
            assert not [k for k in kernels if k.startswith("ref_")], kernels
