"""Tanh, Mish (as opsets before 18 export it: x * tanh(softplus(x))), ELU and SELU after convs
of every kind and after a Linear, end to end: through the CLI with each conv family forced
where it applies (`kiln bench --family=F`), on every JIT ISA path, in f32 and in bf16. The
activations run in the convs' epilogues (no step of their own in the plan) and the outputs
match PyTorch."""
import os
import re

import pytest
from helpers import cli_bench_each_isa, torch_case

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
