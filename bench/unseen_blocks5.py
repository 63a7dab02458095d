# Seventh batch of unseen CNN families (session 42; bench/export_arch.py exports them by name):
# networks whose convs are followed by something other than ReLU / SiLU, or whose
# normalisation is not BatchNorm: YOLOv4's CSPDarknet (Conv-BN-Mish), a CycleGAN ResNet
# generator (reflection padding, InstanceNorm + ReLU, transposed convs, Tanh), a DDPM-style
# U-Net of GroupNorm + SiLU residual blocks, SRResNet (Conv-BN-PReLU, PixelShuffle). Written
# from the papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


def cbm(cin, cout, k=1, s=1):
    """YOLOv4's Conv-BN-Mish."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.Mish())


class CspStage(nn.Module):
    """CSPDarknet53's stage: a stride-2 conv, two 1x1 branches, residual blocks (1x1 then 3x3)
    on one, a 1x1 on it, the branches concatenated and mixed by a 1x1."""

    def __init__(self, cin, cout, blocks):
        super().__init__()
        h = cout // 2
        self.down = cbm(cin, cout, 3, 2)
        self.a = cbm(cout, h)
        self.b = cbm(cout, h)
        self.blocks = nn.ModuleList(nn.Sequential(cbm(h, h), cbm(h, h, 3)) for _ in range(blocks))
        self.b2 = cbm(h, h)
        self.mix = cbm(2 * h, cout)

    def forward(self, x):
        x = self.down(x)
        y = self.b(x)
        for blk in self.blocks:
            y = y + blk(y)
        return self.mix(torch.cat([self.b2(y), self.a(x)], 1))


class CspDarknet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = cbm(3, 32, 3)
        self.stages = nn.Sequential(CspStage(32, 64, 1), CspStage(64, 128, 2),
                                    CspStage(128, 256, 3), CspStage(256, 512, 3),
                                    CspStage(512, 1024, 2))
        self.fc = nn.Linear(1024, 1000)

    def forward(self, x):
        return self.fc(self.stages(self.stem(x)).mean((2, 3)))


class ResBlockIn(nn.Module):
    """CycleGAN's residual block: reflection pad, 3x3, InstanceNorm, ReLU, twice (no ReLU after
    the second), + input."""

    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c),
                                  nn.ReLU(), nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3),
                                  nn.InstanceNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


class CycleGanGenerator(nn.Module):
    """The ResNet generator: 7x7 stem, two stride-2 convs, 6 residual blocks, two stride-2
    transposed convs, 7x7 to RGB, Tanh (InstanceNorm without affine parameters, as CycleGAN)."""

    def __init__(self, f=32):
        super().__init__()
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, f, 7), nn.InstanceNorm2d(f), nn.ReLU()]
        for m in (1, 2):
            layers += [nn.Conv2d(f * m, f * m * 2, 3, 2, 1), nn.InstanceNorm2d(f * m * 2), nn.ReLU()]
        layers += [ResBlockIn(4 * f) for _ in range(6)]
        for m in (4, 2):
            layers += [nn.ConvTranspose2d(f * m, f * m // 2, 3, 2, 1, output_padding=1),
                       nn.InstanceNorm2d(f * m // 2), nn.ReLU()]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(f, 3, 7), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class GnResBlock(nn.Module):
    """DDPM's residual block: GroupNorm(32), SiLU, 3x3, twice, + the input (a 1x1 when the
    width changes)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.n1 = nn.GroupNorm(32, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, 1, 1)
        self.n2 = nn.GroupNorm(32, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        y = self.c1(F.silu(self.n1(x)))
        y = self.c2(F.silu(self.n2(y)))
        return self.skip(x) + y


class DdpmUnet(nn.Module):
    """A DDPM-style U-Net without the time embedding: residual blocks at 3 resolutions, stride-2
    conv down, nearest 2x + conv up, skip Concats, GroupNorm + SiLU + 3x3 out."""

    def __init__(self, c=64):
        super().__init__()
        self.inp = nn.Conv2d(3, c, 3, 1, 1)
        self.d1 = GnResBlock(c, c)
        self.down1 = nn.Conv2d(c, c, 3, 2, 1)
        self.d2 = GnResBlock(c, 2 * c)
        self.down2 = nn.Conv2d(2 * c, 2 * c, 3, 2, 1)
        self.mid = GnResBlock(2 * c, 2 * c)
        self.up2 = nn.Conv2d(2 * c, 2 * c, 3, 1, 1)
        self.u2 = GnResBlock(4 * c, 2 * c)
        self.up1 = nn.Conv2d(2 * c, 2 * c, 3, 1, 1)
        self.u1 = GnResBlock(3 * c, c)
        self.norm = nn.GroupNorm(32, c)
        self.out = nn.Conv2d(c, 3, 3, 1, 1)

    def forward(self, x):
        h1 = self.d1(self.inp(x))
        h2 = self.d2(self.down1(h1))
        m = self.mid(self.down2(h2))
        y = self.u2(torch.cat([self.up2(F.interpolate(m, scale_factor=2.0)), h2], 1))
        y = self.u1(torch.cat([self.up1(F.interpolate(y, scale_factor=2.0)), h1], 1))
        return self.out(F.silu(self.norm(y)))


class SrResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c), nn.PReLU(c),
                                  nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


class SrResNet(nn.Module):
    """SRResNet (SRGAN's generator), 4x: 9x9 stem + PReLU, 8 residual blocks, a conv + BN skip,
    two (conv, PixelShuffle 2, PReLU) upsamplers, 9x9 to RGB."""

    def __init__(self, c=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 9, 1, 4), nn.PReLU(c))
        self.blocks = nn.Sequential(*[SrResBlock(c) for _ in range(8)])
        self.mid = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c))
        self.up = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, 4 * c, 3, 1, 1), nn.PixelShuffle(2),
                                                nn.PReLU(c)) for _ in range(2)])
        self.out = nn.Conv2d(c, 3, 9, 1, 4)

    def forward(self, x):
        s = self.stem(x)
        return self.out(self.up(s + self.mid(self.blocks(s))))


# name: (class, default size (HxW), input channels, lowest opset)
UNSEEN5 = {"cspdarknet_mish_like": (CspDarknet, "256x256", 3, 11),
           "cyclegan_like": (CycleGanGenerator, "256x256", 3, 11),
           "ddpm_unet_like": (DdpmUnet, "64x64", 3, 11),
           "srresnet_like": (SrResNet, "96x96", 3, 11)}
