"""The Winograd families of other kernels than 3x3 (jit/winograd/) end to end: F(m, r) along
one axis (winograd1d) on networks with factorised 1 x 7 / 7 x 1 convs (Inception-v3's blocks)
and 1-D convs (a dilated TCN), F(2x2, 5x5) (winograd5x5) on 5x5 convs, the stride-2 form
(winograd_s2) on stride-2 3x3 convs; through the CLI with the
family forced wherever it applies (`kiln bench --family=F`), on every JIT ISA path: each conv
of the family's shape runs on it, and the outputs match PyTorch."""
import os
import re

import pytest
from helpers import cli_bench_each_isa, torch_case

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")


class Factorised(torch.nn.Module):
    """Inception-v3's 7x7 branch (1x7 then 7x1, 3x1 / 1x3 of the last blocks), a 5-tap pair
    without bias, channel counts off the vector width, a residual add, a classifier."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(24, 40, (1, 7), padding=(0, 3))
        self.b = torch.nn.Conv2d(40, 24, (7, 1), padding=(3, 0))
        self.c = torch.nn.Conv2d(24, 33, (3, 1), padding=(1, 0))
        self.d = torch.nn.Conv2d(33, 24, (1, 3), padding=(0, 1))
        self.e = torch.nn.Conv2d(24, 20, (1, 5), padding=(0, 2), bias=False)
        self.f = torch.nn.Conv2d(20, 24, (5, 1), padding=(1, 0))  # shrinks H by 2
        self.fc = torch.nn.Linear(24, 6)

    def forward(self, x):
        y = torch.relu(self.b(torch.relu(self.a(x))))
        y = torch.relu(self.d(torch.relu(self.c(y))) + x)
        y = self.f(self.e(y))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Tcn(torch.nn.Module):
    """1-D convs (lifted to 1 x r by the importer): 3, 5, 7 taps, dilations 1, 2, 4."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(8, 32, 7, padding=3)
        self.c2 = torch.nn.Conv1d(32, 32, 3, dilation=2, padding=2)
        self.c3 = torch.nn.Conv1d(32, 48, 5, dilation=4, padding=8)
        self.c4 = torch.nn.Conv1d(48, 16, 3)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y)) + y
        return self.c4(torch.relu(self.c3(y)))


class FiveByFive(torch.nn.Module):
    """AlexNet's conv2 / Inception's 5x5 branch shapes, small: padded, unpadded, dilated,
    grouped, no bias, a residual."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(24, 48, 5, padding=2)
        self.b = torch.nn.Conv2d(48, 48, 5, padding=4, dilation=2, groups=2)
        self.c = torch.nn.Conv2d(48, 24, 5, bias=False)

    def forward(self, x):
        y = torch.relu(self.a(x))
        y = torch.relu(self.b(y) + y)
        return self.c(y)


class StrideTwo(torch.nn.Module):
    """Stride-2 3x3 convs as CNNs downsample: "same" padding on an odd size, TF's asymmetric
    SAME (a Pad of 0 before, 1 after along W, folded into the conv), grouped (2 groups of 24),
    no padding without bias, a residual after a stride-2 conv."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(20, 48, 3, stride=2, padding=1)
        self.b = torch.nn.Conv2d(48, 48, 3, stride=2, padding=1, groups=2)
        self.c = torch.nn.Conv2d(48, 33, 3, stride=2, bias=False)
        self.d = torch.nn.Conv2d(20, 48, 3, stride=2)

    def forward(self, x):
        y = torch.relu(self.a(x)) + self.d(torch.nn.functional.pad(x, (0, 1, 1, 1)))
        return self.c(torch.relu(self.b(y)))


def conv_kernels(layers):
    """The kernel of every Conv step of `kiln bench --layers`."""
    return [m.group(1) for m in re.finditer(r"^\s*\d+\s+Conv\s+(\S+)", layers, re.M)]


@pytest.mark.parametrize("name", ["factorised", "tcn", "five", "stride2"])
def test_winograd_family_forced_matches_pytorch(name, tmp_path):
    cli = os.environ.get("KILN_CLI")
    if not cli:
        pytest.skip("KILN_CLI (the kiln CLI, set by CTest) is not set")
    torch.manual_seed(11)
    net, x, family, convs = {
        "factorised": (Factorised(), torch.randn(2, 24, 13, 17), "winograd1d", 6),
        "tcn": (Tcn(), torch.randn(1, 8, 150), "winograd1d", 4),
        "five": (FiveByFive(), torch.randn(2, 24, 19, 22), "winograd5x5", 3),
        "stride2": (StrideTwo(), torch.randn(2, 20, 29, 34), "winograd_s2", 4),
    }[name]
    model, xin, ref = torch_case(net.eval(), x, tmp_path)
    ran = []
    for isa, stdout, err in cli_bench_each_isa(cli, model, xin, ref, ["--family=" + family],
                                               tmp_path):
        ran.append(isa)
        assert err < 1e-5, (isa, err)
        kernels = conv_kernels(stdout)
        assert len(kernels) == convs, kernels
        assert all(family in k for k in kernels), kernels
    if not ran:
        pytest.fail("no JIT ISA path on this CPU")
