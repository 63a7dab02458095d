"""Tanh, Mish (as opsets before 18 export it: x * tanh(softplus(x))), ELU and SELU after convs
of every kind and after a Linear, end to end: through the CLI with each conv family forced
where it applies (`kiln bench --family=F`), on every JIT ISA path, in f32 and in bf16. The
activations run in the convs' epilogues (no step of their own in the plan) and the outputs
match PyTorch. An activation after a conv's Reshape / Transpose / PixelShuffle (YOLOv5's head,
ESPCN's output) moves before them into the conv, on every JIT ISA and the reference path."""
import io
import os
import re

import pytest
from helpers import cli_bench_each_isa, rel_error, run_on_each_isa, torch_case

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")
F = torch.nn.functional


class Acts(torch.nn.Module):
    """A dense 3x3, a depthwise, a 1x1, a grouped 3x3 and a 1x5 conv, a strided one and a
    Linear, each followed by one of the activations (channel counts off the vector width)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(8, 24, 3, padding=1)
        self.b = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24)
        self.c = torch.nn.Conv2d(24, 36, 1)
        self.d = torch.nn.Conv2d(36, 36, 3, padding=1, groups=4, bias=False)
        self.e = torch.nn.Conv2d(36, 20, (1, 5), padding=(0, 2))
        self.f = torch.nn.Conv2d(20, 20, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(20, 10)

    def forward(self, x):
        y = torch.tanh(self.a(x))
        y = F.mish(self.b(y))
        y = F.elu(self.c(y), 0.7)
        y = F.selu(self.d(y))
        y = torch.tanh(self.e(y))
        y = F.mish(self.f(y))
        return torch.tanh(self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)))


ACT_STEP = re.compile(r"^\s*\d+\s+(Tanh|Softplus|Mul|Elu|Selu|Mish)\s", re.M)


@pytest.mark.parametrize("family", ["", "direct", "im2col", "winograd4", "gemm1x1", "grouped",
                                    "winograd1d"])
@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_activations_fused_into_convs_match_pytorch(family, precision, tmp_path):
    cli = os.environ.get("KILN_CLI")
    if not cli:
        pytest.skip("KILN_CLI (the kiln CLI, set by CTest) is not set")
    torch.manual_seed(3)
    model, xin, ref = torch_case(Acts().eval(), torch.randn(2, 8, 15, 21), tmp_path)
    args = ["--family=" + family] if family else []
    if precision == "bf16":
        args += ["--precision", "bf16"]
    ran = []
    for isa, stdout, err in cli_bench_each_isa(cli, model, xin, ref, args, tmp_path):
        ran.append(isa)
        assert err < (3e-2 if precision == "bf16" else 2e-5), (isa, err)
        assert not ACT_STEP.findall(stdout), stdout
        assert "ref_" not in stdout, stdout
    if not ran:
        pytest.fail("no JIT ISA path on this CPU")


class Heads(torch.nn.Module):
    """YOLOv5's detection head (conv, view to [N, anchors, outputs, H, W], permute, sigmoid) and
    ESPCN's output (conv, PixelShuffle, sigmoid): the activation after the moves."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Conv2d(8, 3 * 7, 1)
        self.sr = torch.nn.Conv2d(8, 3 * 4, 3, padding=1)
        self.shuffle = torch.nn.PixelShuffle(2)

    def forward(self, x):
        n, _, h, w = x.shape
        det = torch.sigmoid(self.head(x).view(n, 3, 7, h, w).permute(0, 1, 3, 4, 2))
        return det.reshape(n, -1), torch.sigmoid(self.shuffle(self.sr(x)))


def test_activation_after_moves_runs_in_the_conv(tmp_path):
    torch.manual_seed(9)
    net = Heads().eval()
    x = torch.randn(2, 8, 6, 10)
    with torch.no_grad():
        want = [t.numpy() for t in net(x)]
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=13, input_names=["x"],
                      output_names=["det", "sr"])
    runs = run_on_each_isa(buf.getvalue(), {"x": x.numpy()}, tmp_path)
    for isa, out, plan in runs:
        assert rel_error(out["det"], want[0]) < 1e-5, isa
        assert rel_error(out["sr"], want[1]) < 1e-5, isa
        ops = [st["op"] for st in plan["steps"]]
        assert "Sigmoid" not in ops, (isa, ops)
