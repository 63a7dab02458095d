"""PReLU after convs and a Linear (face recognisers, MTCNN, SRResNet): a per-channel slope runs
in the conv / GEMM epilogue (`prelu` post-op), a single slope as a leaky ReLU; against
PyTorch on every JIT ISA path and on the reference path, with no PRelu step left in the JIT
plans (but the one after a PixelShuffle, which no conv produces)."""
import io

import pytest

import kiln

from helpers import rel_error, run_on_each_isa

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")


class PreluNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 20, 3, padding=1)
        self.pa = torch.nn.PReLU(20)
        self.b = torch.nn.Conv2d(20, 20, 3, padding=1, groups=20)  # depthwise
        self.pb = torch.nn.PReLU(20)
        self.c = torch.nn.Conv2d(20, 36, 1)
        self.pc = torch.nn.PReLU()  # one slope
        self.d = torch.nn.Conv2d(36, 36, 3, stride=2, padding=1, groups=4)
        self.pd = torch.nn.PReLU(36)
        self.up = torch.nn.Conv2d(36, 16 * 4, 3, padding=1)
        self.shuffle = torch.nn.PixelShuffle(2)
        self.pu = torch.nn.PReLU(16)
        self.fc = torch.nn.Linear(16, 24)
        self.pf = torch.nn.PReLU(24)

    def forward(self, x):
        y = self.pa(self.a(x))
        y = self.pb(self.b(y)) + y
        y = self.pd(self.d(self.pc(self.c(y))))
        y = self.pu(self.shuffle(self.up(y)))
        return self.pf(self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1)))


def test_prelu_in_the_epilogue_matches_pytorch(tmp_path):
    torch.manual_seed(5)
    net = PreluNet().eval()
    with torch.no_grad():  # slopes of both signs, off PyTorch's 0.25
        for m in net.modules():
            if isinstance(m, torch.nn.PReLU):
                m.weight.uniform_(-0.5, 1.5)
    x = torch.randn(2, 3, 17, 15)
    with torch.no_grad():
        want = net(x).numpy()
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=13, input_names=["x"], output_names=["y"])
    runs = run_on_each_isa(buf.getvalue(), {"x": x.numpy()}, tmp_path)
    assert [isa for isa, _, _ in runs][-1] == "scalar"
    for isa, out, plan in runs:
        assert rel_error(out["y"], want) < 1e-5, isa
        if isa == "scalar":
            continue
        steps = plan["steps"]
        assert not [st for st in steps if st["kernel"].startswith("ref_")], isa
        assert [st["op"] for st in steps].count("PRelu") == 1, (isa, steps)
