"""Activations after Instance / Group / LayerNormalization (InstanceNorm + ReLU of style-transfer
and GAN generators, GroupNorm + SiLU of diffusion U-Nets, LayerNorm + GELU / Tanh), end to end
through the CLI on every JIT ISA path: they run in the normalisation's kernel (no step of
their own in the plan) and the outputs match PyTorch."""
import os
import re

import pytest
from helpers import cli_bench_each_isa, torch_case

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")
F = torch.nn.functional


class Norms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(6, 24, 3, padding=1)
        self.inorm = torch.nn.InstanceNorm2d(24, affine=True)
        self.b = torch.nn.Conv2d(24, 32, 3, padding=1)
        self.gnorm = torch.nn.GroupNorm(8, 32)
        self.c = torch.nn.Conv2d(32, 20, 1)
        self.gnorm2 = torch.nn.GroupNorm(4, 20)
        self.lnorm = torch.nn.LayerNorm(17)

    def forward(self, x):
        y = F.relu(self.inorm(self.a(x)))
        y = F.silu(self.gnorm(self.b(y)))
        y = torch.tanh(self.gnorm2(self.c(y)))
        return F.gelu(self.lnorm(y))  # LayerNorm over W (17)


ACT_STEP = re.compile(r"^\s*\d+\s+(Relu|Sigmoid|Mul|Tanh|Gelu|Erf|Div|Add)\s", re.M)


def test_activations_fused_into_norms_match_pytorch(tmp_path):
    cli = os.environ.get("KILN_CLI")
    if not cli:
        pytest.skip("KILN_CLI (the kiln CLI, set by CTest) is not set")
    torch.manual_seed(7)
    net = Norms().eval()
    with torch.no_grad():  # affine parameters off their defaults
        for m in (net.inorm, net.gnorm, net.gnorm2, net.lnorm):
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
    model, xin, ref = torch_case(net, torch.randn(2, 6, 13, 17), tmp_path)
    runs = cli_bench_each_isa(cli, model, xin, ref, [], tmp_path)
    assert runs, "no JIT ISA path on this CPU"
    for isa, stdout, err in runs:
        assert err < 2e-5, (isa, err)
        assert not ACT_STEP.findall(stdout), stdout
        assert "ref_" not in stdout, stdout
        assert len(re.findall(r"(groupnorm|layernorm)_f32_\S*_(relu|swish|tanh|gelu)_", stdout)) == 4, stdout
