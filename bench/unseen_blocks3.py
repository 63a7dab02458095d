# Fifth batch of unseen CNN families (session 40; bench/export_arch.py exports them by name):
# volumetric and 1-D nets, whose convolutions, upsamplings and transposed convolutions are 3-D
# or 1-D: a 3-D U-Net, an nnU-Net-style residual 3-D U-Net, X3D's depthwise video blocks, a
# channel-separated video net and a 1-D Wave-U-Net. Written from the papers, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv3_bn(cin, cout, k=3, s=1, groups=1, act=nn.ReLU):
    return nn.Sequential(nn.Conv3d(cin, cout, k, s, k // 2 if isinstance(k, int) else [v // 2 for v in k],
                                   groups=groups, bias=False),
                         nn.BatchNorm3d(cout), act())


class UNet3d(nn.Module):
    """3-D U-Net (Cicek et al. 2016): two 3x3x3 conv + BN + ReLU per level, 2x2x2 max pooling
    down, 2x2x2 stride-2 ConvTranspose3d up (the deepest level: trilinear upsampling + 1x1x1 conv
    instead, as many variants do), skip Concats, a 1x1x1 conv to 3 classes."""

    def __init__(self, cin=1, widths=(16, 32, 64, 128), classes=3):
        super().__init__()
        self.down, c = nn.ModuleList(), cin
        for w in widths:
            self.down.append(nn.Sequential(conv3_bn(c, w), conv3_bn(w, w)))
            c = w
        self.up, self.dec = nn.ModuleList(), nn.ModuleList()
        for i, w in enumerate(reversed(widths[:-1])):
            if i == 0:
                self.up.append(nn.Sequential(nn.Upsample(scale_factor=2, mode="trilinear"),
                                             nn.Conv3d(c, w, 1)))
            else:
                self.up.append(nn.ConvTranspose3d(c, w, 2, stride=2))
            self.dec.append(nn.Sequential(conv3_bn(2 * w, w), conv3_bn(w, w)))
            c = w
        self.head = nn.Conv3d(c, classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool3d(x, 2))
            skips.append(x)
        for up, dec, s in zip(self.up, self.dec, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), s], 1))
        return self.head(x)


class ResBlock3d(nn.Module):
    """nnU-Net's residual encoder block: conv + InstanceNorm3d + LeakyReLU(0.01) twice, a
    strided first conv, a 1x1x1 strided projection on the shortcut when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv3d(cin, cout, 3, stride, 1)
        self.n1 = nn.InstanceNorm3d(cout, affine=True)
        self.c2 = nn.Conv3d(cout, cout, 3, 1, 1)
        self.n2 = nn.InstanceNorm3d(cout, affine=True)
        self.skip = nn.Conv3d(cin, cout, 1, stride) if (cin, stride) != (cout, 1) else nn.Identity()

    def forward(self, x):
        y = F.leaky_relu(self.n1(self.c1(x)), 0.01)
        return F.leaky_relu(self.n2(self.c2(y)) + self.skip(x), 0.01)


class NNUNet3d(nn.Module):
    """nnU-Net-style residual 3-D U-Net: anisotropic first stride (1, 2, 2), strided-conv
    downsampling, ConvTranspose3d (kernel = stride) upsampling, skip Concats, and deep
    supervision heads: the output is the full-resolution head plus the upsampled (trilinear,
    align_corners) half-resolution head."""

    def __init__(self, cin=1, classes=2):
        super().__init__()
        widths, strides = (16, 32, 64, 128), ((1, 1, 1), (1, 2, 2), (2, 2, 2), (2, 2, 2))
        self.enc, c = nn.ModuleList(), cin
        for w, s in zip(widths, strides):
            self.enc.append(ResBlock3d(c, w, s))
            c = w
        self.up, self.dec, self.heads = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for w, s in zip(reversed(widths[:-1]), reversed(strides[1:])):
            self.up.append(nn.ConvTranspose3d(c, w, s, stride=s))
            self.dec.append(ResBlock3d(2 * w, w, 1))
            self.heads.append(nn.Conv3d(w, classes, 1))
            c = w

    def forward(self, x):
        skips = []
        for e in self.enc:
            x = e(x)
            skips.append(x)
        outs = []
        for up, dec, head, s in zip(self.up, self.dec, self.heads, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), s], 1))
            outs.append(head(x))
        half = F.interpolate(outs[-2], size=outs[-1].shape[2:], mode="trilinear", align_corners=True)
        return outs[-1] + 0.5 * half


class X3dBlock(nn.Module):
    """X3D's bottleneck: 1x1x1 expand + BN + ReLU, 3x3x3 depthwise (spatial stride) + BN, a
    squeeze-and-excitation (3-D global pool, two 1x1x1 convs, Sigmoid) on every other block,
    Swish, 1x1x1 project + BN, the residual (a strided 1x1x1 projection when it changes)."""

    def __init__(self, cin, cout, inner, stride, se):
        super().__init__()
        self.a = conv3_bn(cin, inner, 1)
        self.b = nn.Sequential(nn.Conv3d(inner, inner, 3, (1, stride, stride), 1, groups=inner, bias=False),
                               nn.BatchNorm3d(inner))
        self.se = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Conv3d(inner, inner // 4, 1), nn.ReLU(),
                                nn.Conv3d(inner // 4, inner, 1), nn.Sigmoid()) if se else None
        self.c = nn.Sequential(nn.Conv3d(inner, cout, 1, bias=False), nn.BatchNorm3d(cout))
        self.skip = (nn.Sequential(nn.Conv3d(cin, cout, 1, (1, stride, stride), bias=False), nn.BatchNorm3d(cout))
                     if (cin, stride) != (cout, 1) else None)

    def forward(self, x):
        y = self.b(self.a(x))
        if self.se is not None:
            y = y * self.se(y)
        y = self.c(F.silu(y))
        return F.relu(y + (x if self.skip is None else self.skip(x)))


class X3d(nn.Module):
    """X3D-XS-like: a (1,3,3) stride-(1,2,2) stem conv then a (5,1,1) depthwise temporal conv,
    four stages of X3dBlocks (widths 24, 48, 96, 192, expansion 2.25), a 1x1x1 conv to 432,
    global pool, a 2048 FC with ReLU and a classifier."""

    def __init__(self, classes=400):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, 24, (1, 3, 3), (1, 2, 2), (0, 1, 1), bias=False),
                                  nn.Conv3d(24, 24, (5, 1, 1), 1, (2, 0, 0), groups=24, bias=False),
                                  nn.BatchNorm3d(24), nn.ReLU())
        blocks, c = [], 24
        for w, depth in zip((24, 48, 96, 192), (1, 2, 3, 2)):
            for i in range(depth):
                blocks.append(X3dBlock(c, w, int(w * 2.25), 2 if i == 0 else 1, se=i % 2 == 0))
                c = w
        self.blocks = nn.Sequential(*blocks)
        self.head = conv3_bn(c, 432, 1)
        self.fc = nn.Sequential(nn.Linear(432, 2048), nn.ReLU(), nn.Linear(2048, classes))

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(x.mean((2, 3, 4)))


class CsnBlock(nn.Module):
    """ir-CSN's bottleneck: 1x1x1 reduce, a 3x3x3 channel-separated (depthwise) conv, 1x1x1
    expand, each with BN; ReLUs; a strided projection shortcut where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        mid = cout // 4
        self.body = nn.Sequential(conv3_bn(cin, mid, 1),
                                  conv3_bn(mid, mid, 3, stride, groups=mid),
                                  nn.Conv3d(mid, cout, 1, bias=False), nn.BatchNorm3d(cout))
        self.skip = (nn.Sequential(nn.Conv3d(cin, cout, 1, stride, bias=False), nn.BatchNorm3d(cout))
                     if (cin, stride) != (cout, 1) else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


class Csn(nn.Module):
    """ir-CSN-like: a (3,7,7) stride-(1,2,2) stem, a (1,3,3) max pool, stages of CsnBlocks
    (64 -> 512 channels, stride 2 in space and time from the second stage), pool, classifier."""

    def __init__(self, classes=400):
        super().__init__()
        self.stem = nn.Sequential(conv3_bn(3, 32, (3, 7, 7), (1, 2, 2)),
                                  nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)))
        blocks, c = [], 32
        for i, w in enumerate((64, 128, 256, 512)):
            blocks += [CsnBlock(c, w, 1 if i == 0 else 2), CsnBlock(w, w, 1)]
            c = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3, 4)))


class WaveUNet(nn.Module):
    """Wave-U-Net (Stoller et al. 2018) for mono source separation: 1-D convs (kernel 15) with
    LeakyReLU down, decimation by dropping every other sample, a bottleneck, linear-interpolation
    upsampling (align_corners), Concat with the skip and a kernel-5 conv up; Tanh output of 2
    sources plus the input passed through."""

    def __init__(self, levels=5, growth=16):
        super().__init__()
        self.down = nn.ModuleList(nn.Conv1d(1 if i == 0 else growth * i, growth * (i + 1), 15, padding=7)
                                  for i in range(levels))
        self.mid = nn.Conv1d(growth * levels, growth * (levels + 1), 15, padding=7)
        self.up = nn.ModuleList(nn.Conv1d(growth * (i + 2) + growth * (i + 1), growth * (i + 1), 5, padding=2)
                                for i in reversed(range(levels)))
        self.out = nn.Conv1d(growth + 1, 2, 1)

    def forward(self, x):
        inp, skips = x, []
        for d in self.down:
            x = F.leaky_relu(d(x), 0.2)
            skips.append(x)
            x = x[:, :, ::2]
        x = F.leaky_relu(self.mid(x), 0.2)
        for u, s in zip(self.up, reversed(skips)):
            x = F.interpolate(x, size=s.shape[2], mode="linear", align_corners=True)
            x = F.leaky_relu(u(torch.cat([x, s], 1)), 0.2)
        return torch.tanh(self.out(torch.cat([x, inp], 1)))


# name: (class, default size (DxHxW / L), input channels, lowest opset)
UNSEEN3 = {"unet3d_like": (UNet3d, "32x64x64", 1, 11),
           "nnunet3d_like": (NNUNet3d, "24x64x64", 1, 11),
           "x3d_like": (X3d, "8x160x160", 3, 11),
           "csn_like": (Csn, "8x112x112", 3, 11),
           "waveunet_like": (WaveUNet, "16384", 1, 11)}
