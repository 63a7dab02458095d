# Tenth batch of unseen CNN families (session 45; bench/export_arch.py exports them by name):
# U^2-Net's nested U-blocks (ceil-mode pools on odd sizes, bilinear upsampling to another
# tensor's size, dilated bottoms, sigmoid side outputs), ESPNetv2's EESP (grouped 1x1s, four
# dilated depthwise branches fused hierarchically, PReLU, input reinforcement), CGNet's context
# guided blocks, DDRNet's two resolution branches with bilateral fusion and DAPPM, IMDN's
# information distillation with contrast-aware channel attention (a per-channel std), BlazeFace
# (5x5 depthwise, asymmetric pads, channels padded with zeros on the shortcut), a PWC-Net-like
# flow estimator (a correlation cost volume from shifted products, warping by grid_sample,
# transposed-conv flow upsampling), SCNet's self-calibrated convs, HINet's half instance norm,
# LEDNet's split-shuffle blocks and attention pyramid, RDN's residual dense blocks,
# MobileNeXt's sandglass blocks and the CIFAR ResNet-20's option-A shortcuts (subsampled by a
# strided slice, channels zero-padded by F.pad). Written from the papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F

from unseen_blocks4 import Downsampler
from unseen_blocks7 import cbr


def up_to(x, ref, mode="bilinear"):
    """Resize x to ref's spatial size (PyTorch exports the size through Shape / Slice)."""
    if mode == "nearest":
        return F.interpolate(x, size=ref.shape[2:], mode="nearest")
    return F.interpolate(x, size=ref.shape[2:], mode=mode, align_corners=False)


class RSU(nn.Module):
    """U^2-Net's residual U-block of height h: an encoder of 3x3 convs with ceil-mode 2x2 max
    pools, a dilated bottom, a decoder upsampling bilinearly to each skip's size, the input's
    own conv added at the end. dilated=True is RSU-4F: dilations 1, 2, 4, 8 and no pooling."""

    def __init__(self, h, cin, mid, cout, dilated=False):
        super().__init__()
        self.h, self.dilated = h, dilated
        self.inp = cbr(cin, cout, 3)
        d = (lambda i: 2 ** i) if dilated else (lambda i: 1)
        self.enc = nn.ModuleList([cbr(cout if i == 0 else mid, mid, 3, d=d(i)) for i in range(h)])
        self.bottom = cbr(mid, mid, 3, d=2 * d(h - 1) if dilated else 2)
        self.dec = nn.ModuleList([cbr(2 * mid, cout if i == 0 else mid, 3, d=d(i))
                                  for i in range(h)])

    def forward(self, x):
        xin = self.inp(x)
        skips, y = [], xin
        for i, conv in enumerate(self.enc):
            if i > 0 and not self.dilated:
                y = F.max_pool2d(y, 2, 2, ceil_mode=True)
            y = conv(y)
            skips.append(y)
        y = self.bottom(y)
        for i in reversed(range(self.h)):
            if not self.dilated and y.shape[2:] != skips[i].shape[2:]:
                y = up_to(y, skips[i])
            y = self.dec[i](torch.cat([y, skips[i]], 1))
        return y + xin


class U2Net(nn.Module):
    """A small U^2-Net (U^2-Net-P widths): RSU-6..4 and RSU-4F encoders, a mirrored decoder,
    six side outputs upsampled to the input's size, fused by a 1x1, sigmoid."""

    def __init__(self):
        super().__init__()
        self.e = nn.ModuleList([RSU(5, 3, 16, 64), RSU(4, 64, 16, 64), RSU(3, 64, 16, 64),
                                RSU(3, 64, 16, 64, True), RSU(3, 64, 16, 64, True)])
        self.d = nn.ModuleList([RSU(3, 128, 16, 64, True), RSU(3, 128, 16, 64),
                                RSU(4, 128, 16, 64), RSU(5, 128, 16, 64)])
        self.side = nn.ModuleList([nn.Conv2d(64, 1, 3, padding=1) for _ in range(5)])
        self.fuse = nn.Conv2d(5, 1, 1)

    def forward(self, x):
        feats, y = [], x
        for i, block in enumerate(self.e):
            if 0 < i < 4:
                y = F.max_pool2d(y, 2, 2, ceil_mode=True)
            y = block(y)
            feats.append(y)
        outs = [y]
        for i, block in enumerate(self.d):
            skip = feats[3 - i]
            y = block(torch.cat([up_to(y, skip), skip], 1))
            outs.append(y)
        sides = [up_to(s(o), x) for s, o in zip(self.side, outs)]
        return torch.sigmoid(self.fuse(torch.cat(sides, 1)))


class EESP(nn.Module):
    """ESPNetv2: a grouped 1x1 reduce, four depthwise 3x3s with dilations 1..4 (stride s) whose
    outputs are added hierarchically (each to the sum before it), concatenated, BN + PReLU, a
    grouped 1x1 expand; the residual at stride 1, PReLU after."""

    def __init__(self, cin, cout, s=1, k=4, groups=4):
        super().__init__()
        n = cout // k
        self.reduce = nn.Sequential(nn.Conv2d(cin, n, 1, groups=groups, bias=False),
                                    nn.BatchNorm2d(n), nn.PReLU(n))
        self.branches = nn.ModuleList([nn.Conv2d(n, n, 3, s, d, dilation=d, groups=n, bias=False)
                                       for d in range(1, k + 1)])
        self.bn_act = nn.Sequential(nn.BatchNorm2d(cout), nn.PReLU(cout))
        self.expand = nn.Sequential(nn.Conv2d(cout, cout, 1, groups=groups, bias=False),
                                    nn.BatchNorm2d(cout))
        self.res = s == 1 and cin == cout
        self.act = nn.PReLU(cout)

    def forward(self, x):
        y = self.reduce(x)
        outs = [self.branches[0](y)]
        for b in self.branches[1:]:
            outs.append(b(y) + outs[-1])
        y = self.expand(self.bn_act(torch.cat(outs, 1)))
        return self.act(x + y if self.res else y)


class DownEESP(nn.Module):
    """ESPNetv2's strided unit: a stride-2 EESP concatenated with a 3x3 average pool of the
    input, plus the input image reinforced (average-pooled to this size, 3x3 + 1x1)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.eesp = EESP(cin, cout - cin, 2)
        self.img = nn.Sequential(cbr(3, 3, 3), cbr(3, cout, 1, act=None))
        self.act = nn.PReLU(cout)

    def forward(self, x, image):
        y = torch.cat([self.eesp(x), F.avg_pool2d(x, 3, 2, 1)], 1)
        while image.shape[2] > y.shape[2]:
            image = F.avg_pool2d(image, 3, 2, 1)
        return self.act(y + self.img(image))


class ESPNetV2(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.PReLU(32))
        self.down = nn.ModuleList([DownEESP(32, 64), DownEESP(64, 128), DownEESP(128, 256)])
        self.stages = nn.ModuleList([nn.Sequential(*[EESP(c, c) for _ in range(n)])
                                     for c, n in ((64, 0), (128, 3), (256, 3))])
        self.head = nn.Sequential(cbr(256, 512, 3, groups=4), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(512, classes))

    def forward(self, image):
        y = self.stem(image)
        for down, stage in zip(self.down, self.stages):
            y = stage(down(y, image))
        return self.head(y)


class CGBlock(nn.Module):
    """CGNet's context guided block: a 1x1 (or stride-2 3x3), a local depthwise 3x3 and a
    surrounding-context dilated depthwise 3x3, concatenated, BN + PReLU, a global context
    channel gate (GAP -> FC -> ReLU -> FC -> sigmoid), the residual at stride 1."""

    def __init__(self, cin, cout, d, s=1):
        super().__init__()
        mid = cout if s == 2 else cout // 2
        self.conv = (nn.Sequential(nn.Conv2d(cin, mid, 3, 2, 1, bias=False), nn.BatchNorm2d(mid),
                                   nn.PReLU(mid)) if s == 2 else
                     nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid),
                                   nn.PReLU(mid)))
        self.loc = nn.Conv2d(mid, mid, 3, 1, 1, groups=mid, bias=False)
        self.sur = nn.Conv2d(mid, mid, 3, 1, d, dilation=d, groups=mid, bias=False)
        self.bn_act = nn.Sequential(nn.BatchNorm2d(2 * mid), nn.PReLU(2 * mid))
        self.reduce = nn.Conv2d(2 * mid, cout, 1, bias=False) if s == 2 else nn.Identity()
        self.fc = nn.Sequential(nn.Linear(cout, cout // 8), nn.ReLU(), nn.Linear(cout // 8, cout),
                                nn.Sigmoid())
        self.res = s == 1 and cin == cout

    def forward(self, x):
        y = self.conv(x)
        y = self.reduce(self.bn_act(torch.cat([self.loc(y), self.sur(y)], 1)))
        n, c = y.shape[:2]
        y = y * self.fc(y.mean((2, 3))).view(n, c, 1, 1)
        return x + y if self.res else y


class CGNet(nn.Module):
    """CGNet-M3N21-like: three stem convs, the image injected (average-pooled) at each stage,
    CG blocks with dilation 2 then 4, a 1x1 classifier, bilinear 8x upsampling."""

    def __init__(self, classes=19):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 32, 3, 2, act=nn.PReLU), cbr(32, 32, 3, act=nn.PReLU),
                                  cbr(32, 32, 3, act=nn.PReLU))
        self.bn1 = nn.Sequential(nn.BatchNorm2d(35), nn.PReLU(35))
        self.down2 = CGBlock(35, 64, 2, 2)
        self.stage2 = nn.Sequential(*[CGBlock(64, 64, 2) for _ in range(2)])
        self.bn2 = nn.Sequential(nn.BatchNorm2d(131), nn.PReLU(131))
        self.down3 = CGBlock(131, 128, 4, 2)
        self.stage3 = nn.Sequential(*[CGBlock(128, 128, 4) for _ in range(5)])
        self.bn3 = nn.Sequential(nn.BatchNorm2d(256), nn.PReLU(256))
        self.cls = nn.Conv2d(256, classes, 1)

    def forward(self, x):
        i1 = F.avg_pool2d(x, 3, 2, 1)
        i2 = F.avg_pool2d(i1, 3, 2, 1)
        y = self.bn1(torch.cat([self.stem(x), i1], 1))
        d2 = self.down2(y)
        y = self.bn2(torch.cat([self.stage2(d2), d2, i2], 1))
        d3 = self.down3(y)
        y = self.bn3(torch.cat([self.stage3(d3), d3], 1))
        return F.interpolate(self.cls(y), size=x.shape[2:], mode="bilinear", align_corners=False)


class Basic(nn.Module):
    def __init__(self, cin, cout, s=1, d=1):
        super().__init__()
        self.a = cbr(cin, cout, 3, s, d=d)
        self.b = cbr(cout, cout, 3, d=d, act=None)
        self.short = None if s == 1 and cin == cout else cbr(cin, cout, 1, s, act=None)

    def forward(self, x):
        return F.relu(self.b(self.a(x)) + (x if self.short is None else self.short(x)))


class DAPPM(nn.Module):
    """DDRNet's deep aggregation pyramid pooling: average pools 5/2, 9/4, 17/8 and global, each
    1x1'd, upsampled and added to the previous scale, then a 3x3; all concatenated, a 1x1, plus
    a 1x1 shortcut."""

    def __init__(self, cin, mid, cout):
        super().__init__()
        self.pools = [(5, 2, 2), (9, 4, 4), (17, 8, 8)]
        self.scale0 = cbr(cin, mid, 1)
        self.scales = nn.ModuleList([cbr(cin, mid, 1) for _ in range(4)])
        self.process = nn.ModuleList([cbr(mid, mid, 3) for _ in range(4)])
        self.compress = cbr(5 * mid, cout, 1, act=None)
        self.short = cbr(cin, cout, 1, act=None)

    def forward(self, x):
        outs = [self.scale0(x)]
        for i, conv in enumerate(self.scales):
            if i < 3:
                k, s, p = self.pools[i]
                y = conv(F.avg_pool2d(x, k, s, p))
            else:
                y = conv(F.adaptive_avg_pool2d(x, 1))
            outs.append(self.process[i](up_to(y, x) + outs[-1]))
        return self.compress(torch.cat(outs, 1)) + self.short(x)


class DDRNet(nn.Module):
    """DDRNet-23-slim-like: a shared trunk to 1/8, then a high-resolution branch (1/8) and a
    low-resolution one (1/16, 1/32) exchanging features twice (low -> high: 1x1 + bilinear
    upsampling, added; high -> low: strided 3x3s, added), DAPPM on the low branch, its output
    upsampled into the high one, a segmentation head, bilinear 8x upsampling."""

    def __init__(self, classes=19, c=32):
        super().__init__()
        self.trunk = nn.Sequential(cbr(3, c, 3, 2), cbr(c, c, 3, 2), Basic(c, c), Basic(c, 2 * c, 2))
        self.low3, self.high3 = Basic(2 * c, 4 * c, 2), Basic(2 * c, 2 * c)
        self.down3 = cbr(2 * c, 4 * c, 3, 2, act=None)
        self.comp3 = cbr(4 * c, 2 * c, 1, act=None)
        self.low4, self.high4 = Basic(4 * c, 8 * c, 2), Basic(2 * c, 2 * c)
        self.down4 = nn.Sequential(cbr(2 * c, 4 * c, 3, 2), cbr(4 * c, 8 * c, 3, 2, act=None))
        self.comp4 = cbr(8 * c, 2 * c, 1, act=None)
        self.spp = DAPPM(8 * c, c, 2 * c)
        self.head = nn.Sequential(cbr(2 * c, 2 * c, 3), nn.Conv2d(2 * c, classes, 1))

    def forward(self, x):
        t = self.trunk(x)
        low, high = self.low3(F.relu(t)), self.high3(t)
        low, high = low + self.down3(F.relu(high)), high + up_to(self.comp3(F.relu(low)), high)
        low, high = self.low4(F.relu(low)), self.high4(F.relu(high))
        low, high = low + self.down4(F.relu(high)), high + up_to(self.comp4(F.relu(low)), high)
        y = high + up_to(self.spp(low), high)
        return F.interpolate(self.head(y), scale_factor=8, mode="bilinear", align_corners=False)


class CCA(nn.Module):
    """IMDN's contrast-aware channel attention: per-channel std + mean -> 1x1 -> ReLU -> 1x1 ->
    sigmoid, scaling the input."""

    def __init__(self, c, r=4):
        super().__init__()
        self.fc = nn.Sequential(nn.Conv2d(c, c // r, 1), nn.ReLU(), nn.Conv2d(c // r, c, 1),
                                nn.Sigmoid())

    def forward(self, x):
        mean = x.mean((2, 3), keepdim=True)
        std = (x - mean).pow(2).mean((2, 3), keepdim=True).sqrt()
        return x * self.fc(std + mean)


class IMDB(nn.Module):
    """IMDN's information multi-distillation block: four 3x3s, each splitting its output into a
    distilled quarter and the rest (read by the next), LeakyReLU 0.05; the distilled parts
    concatenated, CCA, a 1x1 and the residual."""

    def __init__(self, c=64):
        super().__init__()
        self.d, self.r = c // 4, c - c // 4
        self.convs = nn.ModuleList([nn.Conv2d(c if i == 0 else self.r, c if i < 3 else self.d,
                                              3, 1, 1) for i in range(4)])
        self.cca = CCA(4 * self.d)
        self.fuse = nn.Conv2d(4 * self.d, c, 1)

    def forward(self, x):
        parts, y = [], x
        for i, conv in enumerate(self.convs):
            y = F.leaky_relu(conv(y), 0.05)
            if i < 3:
                dist, y = torch.split(y, (self.d, self.r), 1)
                parts.append(dist)
            else:
                parts.append(y)
        return self.fuse(self.cca(torch.cat(parts, 1))) + x


class IMDN(nn.Module):
    """x4 super-resolution: a 3x3, six IMDBs, their outputs concatenated and fused (1x1 +
    LeakyReLU, 3x3), the long residual, a 3x3 to 48 channels and PixelShuffle(4)."""

    def __init__(self, c=64, n=6):
        super().__init__()
        self.head = nn.Conv2d(3, c, 3, 1, 1)
        self.blocks = nn.ModuleList([IMDB(c) for _ in range(n)])
        self.fuse = nn.Sequential(nn.Conv2d(n * c, c, 1), nn.LeakyReLU(0.05),
                                  nn.Conv2d(c, c, 3, 1, 1))
        self.up = nn.Sequential(nn.Conv2d(c, 3 * 16, 3, 1, 1), nn.PixelShuffle(4))

    def forward(self, x):
        h = self.head(x)
        outs, y = [], h
        for b in self.blocks:
            y = b(y)
            outs.append(y)
        return self.up(self.fuse(torch.cat(outs, 1)) + h)


class BlazeBlock(nn.Module):
    """BlazeFace: a 5x5 depthwise (stride 2 padded (1, 2, 1, 2) by hand), a 1x1; the shortcut
    max-pooled at stride 2 and its channels padded with zeros when they grow; ReLU. double=True
    adds a second depthwise + 1x1 through a narrower projection."""

    def __init__(self, cin, cout, s=1, mid=None):
        super().__init__()
        self.s, self.pad_c = s, cout - cin
        self.dw = nn.Conv2d(cin, cin, 5, s, 0 if s == 2 else 2, groups=cin)
        if mid:
            self.pw = nn.Sequential(nn.Conv2d(cin, mid, 1), nn.BatchNorm2d(mid), nn.ReLU(),
                                    nn.Conv2d(mid, mid, 5, 1, 2, groups=mid), nn.Conv2d(mid, cout, 1),
                                    nn.BatchNorm2d(cout))
        else:
            self.pw = nn.Sequential(nn.Conv2d(cin, cout, 1), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.pw(self.dw(F.pad(x, (1, 2, 1, 2)) if self.s == 2 else x))
        short = F.max_pool2d(x, 2, 2) if self.s == 2 else x
        if self.pad_c:
            short = F.pad(short, (0, 0, 0, 0, 0, self.pad_c))
        return F.relu(y + short)


class BlazeFace(nn.Module):
    """128x128 BlazeFace-like detector: single and double blaze blocks, two anchor heads
    (classification 1x1s and box 1x1s at 16x16 and 8x8) permuted, reshaped and concatenated."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 5, 2, 2), nn.BatchNorm2d(24), nn.ReLU())
        self.b16 = nn.Sequential(BlazeBlock(24, 24), BlazeBlock(24, 28), BlazeBlock(28, 32, 2),
                                 BlazeBlock(32, 36), BlazeBlock(36, 42), BlazeBlock(42, 48, 2),
                                 BlazeBlock(48, 56), BlazeBlock(56, 64), BlazeBlock(64, 72),
                                 BlazeBlock(72, 80), BlazeBlock(80, 88))
        self.b8 = nn.Sequential(BlazeBlock(88, 96, 2, 24), BlazeBlock(96, 96, 1, 24),
                                BlazeBlock(96, 96, 1, 24))
        self.cls16, self.box16 = nn.Conv2d(88, 2, 1), nn.Conv2d(88, 32, 1)
        self.cls8, self.box8 = nn.Conv2d(96, 6, 1), nn.Conv2d(96, 96, 1)

    def forward(self, x):
        f16 = self.b16(self.stem(x))
        f8 = self.b8(f16)
        n = x.shape[0]

        def flat(t, k):
            return t.permute(0, 2, 3, 1).reshape(n, -1, k)

        cls = torch.cat([flat(self.cls16(f16), 1), flat(self.cls8(f8), 1)], 1)
        box = torch.cat([flat(self.box16(f16), 16), flat(self.box8(f8), 16)], 1)
        return torch.cat([torch.sigmoid(cls), box], 2)


def correlation(f1, f2, r):
    """PWC-Net's cost volume: for every displacement within r, the channel mean of f1 times
    f2 shifted (zero-padded), stacked as (2r + 1)^2 channels."""
    h, w = f1.shape[2:]
    f2p = F.pad(f2, (r, r, r, r))
    vols = [(f1 * f2p[:, :, dy:dy + h, dx:dx + w]).mean(1, keepdim=True)
            for dy in range(2 * r + 1) for dx in range(2 * r + 1)]
    return F.leaky_relu(torch.cat(vols, 1), 0.1)


def warp(x, flow):
    """Backward warping by a flow field through grid_sample (bilinear, zeros outside)."""
    n, _, h, w = x.shape
    ys = torch.linspace(-1.0, 1.0, h).view(1, h, 1).expand(n, h, w)
    xs = torch.linspace(-1.0, 1.0, w).view(1, 1, w).expand(n, h, w)
    gx = xs + flow[:, 0] * (2.0 / (w - 1))
    gy = ys + flow[:, 1] * (2.0 / (h - 1))
    return F.grid_sample(x, torch.stack([gx, gy], 3), mode="bilinear", padding_mode="zeros",
                         align_corners=True)


class FlowEstimator(nn.Module):
    """DenseNet-style: each 3x3 (LeakyReLU 0.1) appends its output to its input; a 3x3 to the
    2-channel flow."""

    def __init__(self, cin, growth=(64, 48, 32, 16)):
        super().__init__()
        self.convs = nn.ModuleList()
        for g in growth:
            self.convs.append(nn.Conv2d(cin, g, 3, 1, 1))
            cin += g
        self.flow = nn.Conv2d(cin, 2, 3, 1, 1)

    def forward(self, x):
        for conv in self.convs:
            x = torch.cat([F.leaky_relu(conv(x), 0.1), x], 1)
        return self.flow(x)


class PWCNet(nn.Module):
    """A three-level PWC-Net-like estimator on two stacked RGB frames: a shared pyramid of
    strided 3x3s, coarse-to-fine: warp frame 2's features by the upsampled flow, correlate,
    estimate a flow refinement; flows upsampled by 4x4 stride-2 transposed convs."""

    def __init__(self, r=3):
        super().__init__()
        self.r = r
        chans = (16, 32, 64, 96)
        layers, cin = [], 3
        for c in chans:
            layers.append(nn.Sequential(nn.Conv2d(cin, c, 3, 2, 1), nn.LeakyReLU(0.1),
                                        nn.Conv2d(c, c, 3, 1, 1), nn.LeakyReLU(0.1)))
            cin = c
        self.pyramid = nn.ModuleList(layers)
        nd = (2 * r + 1) ** 2
        self.est = nn.ModuleList([FlowEstimator(nd), FlowEstimator(nd + chans[2] + 2),
                                  FlowEstimator(nd + chans[1] + 2)])
        self.upflow = nn.ModuleList([nn.ConvTranspose2d(2, 2, 4, 2, 1) for _ in range(2)])

    def feats(self, img):
        out, y = [], img
        for layer in self.pyramid:
            y = layer(y)
            out.append(y)
        return out

    def forward(self, x):
        a, b = self.feats(x[:, :3]), self.feats(x[:, 3:])
        flow = self.est[0](correlation(a[3], b[3], self.r))
        for i, lvl in enumerate((2, 1)):
            up = self.upflow[i](flow) * 2.0
            corr = correlation(a[lvl], warp(b[lvl], up), self.r)
            flow = up + self.est[i + 1](torch.cat([corr, a[lvl], up], 1))
        return flow


class SCConv(nn.Module):
    """SCNet's self-calibrated conv on half the channels: sigmoid(x + up(conv(avgpool4(x))))
    gates a 3x3 of x, then a 3x3; the other half through a plain 3x3; concatenated."""

    def __init__(self, c, s=1, r=4):
        super().__init__()
        h = c // 2
        self.r, self.s = r, s
        self.k1 = cbr(h, h, 3, s, act=None)
        self.k2 = cbr(h, h, 3, act=None)
        self.k3 = cbr(h, h, 3, act=None)
        self.k4 = cbr(h, h, 3, s, act=None)

    def forward(self, x):
        a, b = torch.chunk(x, 2, 1)
        gate = torch.sigmoid(a + up_to(self.k2(F.avg_pool2d(a, self.r, self.r)), a, "nearest"))
        a = self.k4(self.k3(a) * gate)
        return F.relu(torch.cat([a, self.k1(b)], 1))


class SCBottleneck(nn.Module):
    def __init__(self, cin, mid, s=1):
        super().__init__()
        self.reduce = cbr(cin, mid, 1)
        self.sc = SCConv(mid, s)
        self.expand = cbr(mid, 4 * mid, 1, act=None)
        self.short = None if s == 1 and cin == 4 * mid else cbr(cin, 4 * mid, 1, s, act=None)

    def forward(self, x):
        y = self.expand(self.sc(self.reduce(x)))
        return F.relu(y + (x if self.short is None else self.short(x)))


class SCNet(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 32, 3, 2), cbr(32, 64, 3), nn.MaxPool2d(3, 2, 1))
        self.body = nn.Sequential(SCBottleneck(64, 32), SCBottleneck(128, 32),
                                  SCBottleneck(128, 64, 2), SCBottleneck(256, 64),
                                  SCBottleneck(256, 128, 2), SCBottleneck(512, 128, 2))
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(self.body(self.stem(x)).mean((2, 3)))


class HINBlock(nn.Module):
    """HINet's half instance normalization block: a 3x3, instance norm (affine) on the first
    half of the channels only, LeakyReLU 0.2, a 3x3, LeakyReLU, plus a 1x1 of the input."""

    def __init__(self, cin, cout, use_hin=True):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(cin, cout, 3, 1, 1), nn.Conv2d(cout, cout, 3, 1, 1)
        self.norm = nn.InstanceNorm2d(cout // 2, affine=True) if use_hin else None
        self.id = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        y = self.c1(x)
        if self.norm is not None:
            a, b = torch.chunk(y, 2, 1)
            y = torch.cat([self.norm(a), b], 1)
        y = F.leaky_relu(self.c2(F.leaky_relu(y, 0.2)), 0.2)
        return y + self.id(x)


class HINet(nn.Module):
    """A one-stage HINet-like denoiser: a U-Net of HIN blocks (4x4 stride-2 convs down, 2x2
    transposed convs up, HIN in the encoder only), the supervised attention module (the image
    estimate, sigmoid(conv(image)) gating the features) and the input's residual."""

    def __init__(self, c=32, depth=3):
        super().__init__()
        self.head = nn.Conv2d(3, c, 3, 1, 1)
        self.enc = nn.ModuleList([HINBlock(c * 2 ** i, c * 2 ** i) for i in range(depth)])
        self.down = nn.ModuleList([nn.Conv2d(c * 2 ** i, c * 2 ** (i + 1), 4, 2, 1)
                                   for i in range(depth - 1)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c * 2 ** (i + 1), c * 2 ** i, 2, 2)
                                 for i in reversed(range(depth - 1))])
        self.dec = nn.ModuleList([HINBlock(c * 2 ** (i + 1), c * 2 ** i, False)
                                  for i in reversed(range(depth - 1))])
        self.sam1, self.sam2 = nn.Conv2d(c, 3, 3, 1, 1), nn.Conv2d(3, c, 3, 1, 1)
        self.tail = nn.Conv2d(c, 3, 3, 1, 1)

    def forward(self, x):
        y, skips = self.head(x), []
        for i, block in enumerate(self.enc):
            y = block(y)
            if i < len(self.down):
                skips.append(y)
                y = self.down[i](y)
        for up, block in zip(self.up, self.dec):
            y = block(torch.cat([up(y), skips.pop()], 1))
        img = self.sam1(y) + x
        y = y * torch.sigmoid(self.sam2(img)) + y
        return self.tail(y) + img


def shuffle(x, g=2):
    n, c, h, w = x.shape
    return x.view(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)


class SSnbt(nn.Module):
    """LEDNet's split-shuffle non-bottleneck: the channels split in two, each half through 3x1
    -> ReLU -> 1x3 -> BN -> ReLU -> dilated 3x1 -> ReLU -> dilated 1x3 -> BN (the two halves in
    opposite orders), concatenated, the residual, ReLU, a channel shuffle."""

    def __init__(self, c, d):
        super().__init__()
        h = c // 2

        def branch(first_vertical):
            ks = [(3, 1), (1, 3)] if first_vertical else [(1, 3), (3, 1)]
            pad = lambda k, dd: (dd * (k[0] // 2), dd * (k[1] // 2))
            return nn.Sequential(
                nn.Conv2d(h, h, ks[0], padding=pad(ks[0], 1)), nn.ReLU(),
                nn.Conv2d(h, h, ks[1], padding=pad(ks[1], 1), bias=False), nn.BatchNorm2d(h),
                nn.ReLU(),
                nn.Conv2d(h, h, ks[0], padding=pad(ks[0], d), dilation=(d, 1) if ks[0][0] == 3
                          else (1, d)), nn.ReLU(),
                nn.Conv2d(h, h, ks[1], padding=pad(ks[1], d), dilation=(d, 1) if ks[1][0] == 3
                          else (1, d), bias=False), nn.BatchNorm2d(h))

        self.a, self.b = branch(True), branch(False)

    def forward(self, x):
        a, b = torch.chunk(x, 2, 1)
        return shuffle(F.relu(torch.cat([self.a(a), self.b(b)], 1) + x))


class APN(nn.Module):
    """LEDNet's attention pyramid network: a 3x3 / 5x5 / 7x7 pyramid of stride-2 convs, summed
    while upsampling, multiplying a 1x1 of the input; plus a global-pool branch."""

    def __init__(self, c, classes):
        super().__init__()
        self.d1 = cbr(c, c, 3, 2)
        self.d2 = cbr(c, c, 5, 2)
        self.d3 = nn.Sequential(cbr(c, c, 7, 2), cbr(c, classes, 7))
        self.c2, self.c1 = cbr(c, classes, 5), cbr(c, classes, 3)
        self.mid = cbr(c, classes, 1)
        self.glob = cbr(c, classes, 1)

    def forward(self, x):
        d1 = self.d1(x)
        d2 = self.d2(d1)
        y = up_to(self.d3(d2), d2) + self.c2(d2)
        y = up_to(y, d1) + self.c1(d1)
        y = up_to(y, x) * self.mid(x)
        return y + up_to(self.glob(F.adaptive_avg_pool2d(x, 1)), x)


class LEDNet(nn.Module):
    def __init__(self, classes=19):
        super().__init__()
        # ENet / ERFNet downsampling: a stride-2 3x3 concatenated with a 2x2 max pool.
        layers = [Downsampler(3, 32), SSnbt(32, 1), SSnbt(32, 1), Downsampler(32, 64),
                  SSnbt(64, 1), Downsampler(64, 128)]
        layers += [SSnbt(128, d) for d in (1, 2, 5, 9, 2, 5, 9, 17)]
        self.enc = nn.Sequential(*layers)
        self.apn = APN(128, classes)

    def forward(self, x):
        y = self.apn(self.enc(x))
        return F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=False)


class RDB(nn.Module):
    """RDN's residual dense block: each 3x3 + ReLU reads the concatenation of the input and all
    earlier outputs; a 1x1 local feature fusion and the local residual."""

    def __init__(self, c, growth, n):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(c + i * growth, growth, 3, 1, 1) for i in range(n)])
        self.lff = nn.Conv2d(c + n * growth, c, 1)

    def forward(self, x):
        feats = [x]
        for conv in self.convs:
            feats.append(F.relu(conv(torch.cat(feats, 1))))
        return self.lff(torch.cat(feats, 1)) + x


class RDN(nn.Module):
    """x2 super-resolution: two shallow 3x3s, RDBs whose outputs are concatenated (global
    feature fusion: 1x1 then 3x3), the global residual, 3x3 + PixelShuffle(2), a 3x3 to RGB."""

    def __init__(self, c=32, growth=16, blocks=6, layers=4):
        super().__init__()
        self.sfe1, self.sfe2 = nn.Conv2d(3, c, 3, 1, 1), nn.Conv2d(c, c, 3, 1, 1)
        self.rdbs = nn.ModuleList([RDB(c, growth, layers) for _ in range(blocks)])
        self.gff = nn.Sequential(nn.Conv2d(blocks * c, c, 1), nn.Conv2d(c, c, 3, 1, 1))
        self.up = nn.Sequential(nn.Conv2d(c, 4 * c, 3, 1, 1), nn.PixelShuffle(2),
                                nn.Conv2d(c, 3, 3, 1, 1))

    def forward(self, x):
        f1 = self.sfe1(x)
        y, outs = self.sfe2(f1), []
        for rdb in self.rdbs:
            y = rdb(y)
            outs.append(y)
        return self.up(self.gff(torch.cat(outs, 1)) + f1)


class Sandglass(nn.Module):
    """MobileNeXt: depthwise 3x3 + ReLU6 on the wide tensor, a linear 1x1 reduce, a 1x1 expand +
    ReLU6, a depthwise 3x3 (stride s, linear); the residual between the wide tensors."""

    def __init__(self, cin, cout, s, t):
        super().__init__()
        mid = cin // t
        self.body = nn.Sequential(cbr(cin, cin, 3, groups=cin, act=nn.ReLU6),
                                  cbr(cin, mid, 1, act=None), cbr(mid, cout, 1, act=nn.ReLU6),
                                  cbr(cout, cout, 3, s, groups=cout, act=None))
        self.res = s == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


class MobileNeXt(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        cfg = [(32, 96, 2, 2), (96, 144, 1, 6), (144, 192, 2, 6), (192, 192, 1, 6),
               (192, 288, 2, 6), (288, 288, 1, 6), (288, 384, 1, 6), (384, 576, 2, 6),
               (576, 576, 1, 6), (576, 960, 1, 6)]
        self.stem = cbr(3, 32, 3, 2, act=nn.ReLU6)
        self.body = nn.Sequential(*[Sandglass(*c) for c in cfg])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(960, classes))

    def forward(self, x):
        return self.head(self.body(self.stem(x)))


class CifarBlock(nn.Module):
    """He et al.'s CIFAR ResNet block with the option-A shortcut: at a stride-2 block the input
    subsampled by x[:, :, ::2, ::2] and its channels zero-padded on both sides by F.pad (no
    projection conv)."""

    def __init__(self, cin, cout, s):
        super().__init__()
        self.a = cbr(cin, cout, 3, s)
        self.b = cbr(cout, cout, 3, act=None)
        self.s, self.pad = s, (cout - cin) // 2

    def forward(self, x):
        short = x
        if self.s == 2 or self.pad:
            short = F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(self.b(self.a(x)) + short)


class ResNet20Cifar(nn.Module):
    """ResNet-20 for 32x32 images: 16 / 32 / 64 channels, three blocks each."""

    def __init__(self, classes=10):
        super().__init__()
        layers = [cbr(3, 16, 3)]
        cin = 16
        for cout, s in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(CifarBlock(cin, cout, s if i == 0 else 1))
                cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.body(x).mean((2, 3)))


# name: (class, default HxW, input channels, lowest opset)
UNSEEN8 = {"u2net_like": (U2Net, "200x200", 3, 11),
           "espnetv2_like": (ESPNetV2, "224x224", 3, 11),
           "cgnet_like": (CGNet, "256x512", 3, 11),
           "ddrnet_like": (DDRNet, "256x512", 3, 11),
           "imdn_like": (IMDN, "96x96", 3, 11),
           "blazeface_like": (BlazeFace, "128x128", 3, 11),
           "pwcnet_like": (PWCNet, "128x192", 6, 16),
           "scnet_like": (SCNet, "224x224", 3, 11),
           "hinet_like": (HINet, "128x128", 3, 11),
           "lednet_like": (LEDNet, "256x512", 3, 11),
           "rdn_like": (RDN, "64x64", 3, 11),
           "mobilenext_like": (MobileNeXt, "224x224", 3, 11),
           "resnet20_cifar_like": (ResNet20Cifar, "32x32", 3, 11)}
