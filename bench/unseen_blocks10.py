# Twelfth batch of unseen CNN families (session 47; bench/export_arch.py exports them by name):
# OpenPose's CPM stages (7x7 convs on stride-8 features, heatmaps and PAFs concatenated back),
# LPRNet (MaxPool3d over [channels, H, W], strided along the channels, and a global context
# normalised by its mean square), TSM (frames stacked on the channels, a temporal shift of
# channel slices along the frames), a PointPillars BEV backbone (transposed convs of kernel =
# stride 1, 2, 4 to one resolution, concatenated heads), MODNet (IBNorm: batch norm on half the
# channels, instance norm on the rest; the input resized inside the graph), an FCOS head
# (GroupNorm towers shared across FPN levels, a learnable scale per level and Exp), ICNet's
# cascade (three resolutions of the input resized in the graph, cascade feature fusion with a
# dilated conv), a net of prime channel counts and odd windows (13 / 29 / 61 / 97 channels,
# groups of 13, a stride-3 conv, asymmetric zero padding, ceil-mode pooling, a dilated
# depthwise conv), StyleGAN2's modulated convs (weights computed from the latent every run,
# demodulated, run as a conv grouped by image; noise injection) and pix2pix's U-Net (4x4
# stride-2 convs with LeakyReLU, 4x4 transposed convs, skip concats, Tanh). Written from the
# papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F

from unseen_blocks7 import cbr


class OpenPose(nn.Module):
    """A VGG-style front to stride 8, CPM stage 1 (3x3 convs, then 1x1 heads for 19 heatmaps
    and 38 PAFs) and two refinement stages of five 7x7 convs each on the features concatenated
    with the previous stage's maps. Output: the last stage's maps, concatenated."""

    def __init__(self):
        super().__init__()
        front, cin = [], 3
        for c in (32, 64, 96):
            front += [nn.Conv2d(cin, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(),
                      nn.MaxPool2d(2, 2)]
            cin = c
        self.front = nn.Sequential(*front, nn.Conv2d(96, 64, 3, 1, 1), nn.ReLU())
        self.stages = nn.ModuleList()
        for s in range(3):
            cin, k, n, mid = (64, 3, 3, 64) if s == 0 else (64 + 19 + 38, 7, 5, 64)
            layers = []
            for i in range(n):
                layers += [nn.Conv2d(cin if i == 0 else mid, mid, k, 1, k // 2), nn.ReLU()]
            heads = nn.ModuleList([nn.Sequential(*layers, nn.Conv2d(mid, 64, 1), nn.ReLU(),
                                                 nn.Conv2d(64, o, 1)) for o in (19, 38)])
            self.stages.append(heads)

    def forward(self, x):
        f = self.front(x)
        y = f
        for heads in self.stages:
            maps = torch.cat([h(y) for h in heads], 1)
            y = torch.cat([f, maps], 1)
        return maps


class SmallBasic(nn.Module):
    """LPRNet's small basic block: 1x1 to a quarter, 3x1, 1x3, 1x1 out (ReLUs between)."""

    def __init__(self, cin, cout):
        super().__init__()
        q = cout // 4
        self.b = nn.Sequential(nn.Conv2d(cin, q, 1), nn.ReLU(), nn.Conv2d(q, q, (3, 1), 1, (1, 0)),
                               nn.ReLU(), nn.Conv2d(q, q, (1, 3), 1, (0, 1)), nn.ReLU(),
                               nn.Conv2d(q, cout, 1))

    def forward(self, x):
        return self.b(x)


class LPRNet(nn.Module):
    """LPRNet on a 24x94 plate: a 3x3 stem, small basic blocks, MaxPool3d on [N, 1, C, H, W]
    windows (the second and third strided along the channels), dropout (eval), a 1x4 and a
    13x1 conv to per-column class scores; the global context: each branch average-pooled to
    the final 4 x 18 grid and divided by its mean square, concatenated, a 1x1 conv, the mean over H."""

    def __init__(self, classes=37):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU())
        self.b1 = nn.Sequential(SmallBasic(64, 128), nn.BatchNorm2d(128), nn.ReLU())
        self.b2 = nn.Sequential(SmallBasic(64, 256), nn.BatchNorm2d(256), nn.ReLU(),
                                SmallBasic(256, 256), nn.BatchNorm2d(256), nn.ReLU())
        self.tail = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(64, 256, (1, 4)),
                                  nn.BatchNorm2d(256), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Conv2d(256, classes, (13, 1)), nn.BatchNorm2d(classes),
                                  nn.ReLU())
        self.container = nn.Conv2d(64 + 128 + 64 + classes, classes, 1)

    @staticmethod
    def pool3d(x, k, s):
        return F.max_pool3d(x.unsqueeze(1), k, s).squeeze(1)

    def forward(self, x):
        x0 = self.stem(x)                                   # 64 x 22 x 92
        x1 = self.b1(self.pool3d(x0, (1, 3, 3), (1, 1, 1)))  # 128 x 20 x 90
        x2 = self.b2(self.pool3d(x1, (1, 3, 3), (2, 1, 2)))  # 256 x 18 x 44 (C halved: 64)
        x2 = self.pool3d(x2, (1, 3, 3), (4, 1, 2))           # 64 x 16 x 21
        x3 = self.tail(x2)                                   # classes x 4 x 18
        ctx = []
        for f, k in ((x0, (5, 5)), (x1, (5, 5)), (x2, (4, 4)), (x3, None)):
            f = F.avg_pool2d(f, k, (k[0], k[1] if f is not x2 else 1)) if k else f
            ctx.append(f / torch.mean(f * f))
        return self.container(torch.cat(ctx, 1)).mean(2)


class TSM(nn.Module):
    """TSM on 8 frames stacked on the channels ([N, 3 x 8, H, W] -> [N x 8, 3, H, W]): residual
    blocks whose first conv reads the temporally shifted input (an eighth of the channels from
    the next frame, an eighth from the previous, zeros at the ends), the frames' class scores
    averaged."""

    T = 8

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 32, 3, 2), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.ModuleList()
        for cin, cout, s in ((32, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2)):
            self.blocks.append(nn.ModuleList([
                nn.Sequential(cbr(cin, cout, 3, s), cbr(cout, cout, 3, act=None)),
                cbr(cin, cout, 1, s, act=None) if (cin, s) != (cout, 1) else nn.Identity()]))
        self.fc = nn.Linear(128, classes)

    def shift(self, x):
        nt, c, h, w = x.shape
        x = x.reshape(nt // self.T, self.T, c, h, w)
        f = c // 8
        z = torch.zeros_like(x[:, :1, :f])
        left = torch.cat([x[:, 1:, :f], z], 1)
        right = torch.cat([z, x[:, :-1, f:2 * f]], 1)
        return torch.cat([left, right, x[:, :, 2 * f:]], 2).reshape(nt, c, h, w)

    def forward(self, x):
        n, tc, h, w = x.shape
        x = self.stem(x.reshape(n * self.T, tc // self.T, h, w))
        for body, skip in self.blocks:
            x = torch.relu(body(self.shift(x)) + skip(x))
        y = self.fc(x.mean((2, 3)))
        return y.reshape(n, self.T, -1).mean(1)


class PointPillarsBEV(nn.Module):
    """PointPillars' backbone on a 64-channel pseudo-image: three stride-2 blocks (64, 128, 256
    channels), each brought to the first block's resolution by a transposed conv of kernel =
    stride (1, 2, 4) with BN and ReLU, concatenated; 1x1 heads for classes (2 anchors x 3),
    boxes (2 x 7) and directions (2 x 2), concatenated."""

    def __init__(self):
        super().__init__()
        self.down = nn.ModuleList()
        cin = 64
        for c, n in ((64, 3), (128, 5), (256, 5)):
            layers = [cbr(cin, c, 3, 2)] + [cbr(c, c, 3) for _ in range(n)]
            self.down.append(nn.Sequential(*layers))
            cin = c
        self.up = nn.ModuleList([
            nn.Sequential(nn.ConvTranspose2d(c, 128, s, s, bias=False), nn.BatchNorm2d(128),
                          nn.ReLU()) for c, s in ((64, 1), (128, 2), (256, 4))])
        self.head = nn.Conv2d(384, 6 + 14 + 4, 1)

    def forward(self, x):
        ups = []
        for d, u in zip(self.down, self.up):
            x = d(x)
            ups.append(u(x))
        return self.head(torch.cat(ups, 1))


class IBNorm(nn.Module):
    """MODNet's IBNorm: BatchNorm on the first half of the channels, InstanceNorm (affine) on
    the rest."""

    def __init__(self, c):
        super().__init__()
        self.h = c // 2
        self.bn = nn.BatchNorm2d(self.h)
        self.inorm = nn.InstanceNorm2d(c - self.h, affine=True)

    def forward(self, x):
        return torch.cat([self.bn(x[:, :self.h]), self.inorm(x[:, self.h:])], 1)


def cibr(cin, cout, k=3, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), IBNorm(cout), nn.ReLU())


class MODNet(nn.Module):
    """MODNet's three branches on a small MobileNet-style encoder: the semantic branch (an SE
    block on the stride-32 features, 1/8 prediction), the detail branch (the input resized to
    half inside the graph, concatenated with stride-2 features and the upsampled semantic
    features) and the fusion branch; a sigmoid matte."""

    def __init__(self):
        super().__init__()
        chs, self.enc, cin = (16, 24, 32, 64, 96), nn.ModuleList(), 3
        for c in chs:
            self.enc.append(nn.Sequential(cbr(cin, cin, 3, 2, groups=cin), cbr(cin, c, 1)))
            cin = c
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(96, 24, 1), nn.ReLU(),
                                nn.Conv2d(24, 96, 1), nn.Sigmoid())
        self.lr8 = cibr(96, 32, 5)
        self.lr = nn.Conv2d(32, 1, 3, 1, 1)
        self.hr_in = cibr(3 + 16, 16, 3)
        self.hr = nn.Sequential(cibr(16 + 32, 16, 3), cibr(16, 16, 3))
        self.hr_out = nn.Conv2d(16, 1, 3, 1, 1)
        self.fuse = nn.Sequential(cibr(32 + 16, 16, 5), nn.Conv2d(16, 1, 1))

    def forward(self, x):
        feats, y = [], x
        for e in self.enc:
            y = e(y)
            feats.append(y)
        s = feats[-1] * self.se(feats[-1])
        lr8 = self.lr8(F.interpolate(s, scale_factor=4.0, mode="bilinear", align_corners=False))
        lr = torch.sigmoid(self.lr(lr8))
        x2 = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False)
        hr2 = self.hr_in(torch.cat([x2, feats[0]], 1))
        up = F.interpolate(lr8, scale_factor=4.0, mode="bilinear", align_corners=False)
        hr2 = self.hr(torch.cat([hr2, up], 1))
        detail = torch.sigmoid(self.hr_out(hr2))
        f = self.fuse(torch.cat([F.interpolate(lr8, scale_factor=8.0, mode="bilinear",
                                               align_corners=False),
                                 F.interpolate(hr2, scale_factor=2.0, mode="bilinear",
                                               align_corners=False)], 1))
        return torch.sigmoid(f) + 0 * (lr.mean() + detail.mean())


class FCOSHead(nn.Module):
    """A stride-8/16/32 FPN on a small encoder and FCOS's head: classification and regression
    towers of two 3x3 conv + GroupNorm(8) + ReLU shared across levels, a learnable scale per
    level before Exp, centerness; per level [N, 4 + classes + 1, H x W], concatenated."""

    def __init__(self, classes=8):
        super().__init__()
        self.enc = nn.ModuleList()
        cin = 3
        for c, s in ((24, 4), (48, 2), (96, 2), (128, 2)):
            self.enc.append(nn.Sequential(cbr(cin, c, 3, 2 if s == 2 else 4), cbr(c, c, 3)))
            cin = c
        self.lat = nn.ModuleList([nn.Conv2d(c, 64, 1) for c in (48, 96, 128)])
        self.out = nn.ModuleList([nn.Conv2d(64, 64, 3, 1, 1) for _ in range(3)])

        def tower():
            return nn.Sequential(*[m for _ in range(2) for m in (nn.Conv2d(64, 64, 3, 1, 1),
                                                                  nn.GroupNorm(8, 64),
                                                                  nn.ReLU())])
        self.cls_tower, self.reg_tower = tower(), tower()
        self.cls = nn.Conv2d(64, classes, 3, 1, 1)
        self.reg = nn.Conv2d(64, 4, 3, 1, 1)
        self.ctr = nn.Conv2d(64, 1, 3, 1, 1)
        self.scales = nn.Parameter(torch.tensor([1.0, 0.8, 1.2]))

    def forward(self, x):
        feats = []
        for e in self.enc:
            x = e(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(self.lat, feats[1:])]
        p = [None, None, lat[2]]
        for i in (1, 0):
            p[i] = lat[i] + F.interpolate(p[i + 1], scale_factor=2.0, mode="nearest")
        outs = []
        for i, f in enumerate(p):
            f = self.out[i](f)
            c, r = self.cls_tower(f), self.reg_tower(f)
            reg = torch.exp(self.scales[i] * self.reg(r))
            y = torch.cat([reg, torch.sigmoid(self.cls(c)), self.ctr(r)], 1)
            outs.append(y.flatten(2))
        return torch.cat(outs, 2)


class CFF(nn.Module):
    """ICNet's cascade feature fusion: the low-resolution input upsampled 2x (bilinear) through
    a dilated 3x3 conv + BN, the high-resolution one through a 1x1 conv + BN, summed, ReLU."""

    def __init__(self, clow, chigh, cout):
        super().__init__()
        self.low = cbr(clow, cout, 3, d=2, act=None)
        self.high = cbr(chigh, cout, 1, act=None)

    def forward(self, low, high):
        low = F.interpolate(low, size=high.shape[2:], mode="bilinear", align_corners=True)
        return torch.relu(self.low(low) + self.high(high))


class ICNet(nn.Module):
    """ICNet: the input at 1, 1/2 and 1/4 (bilinear resizes in the graph), a deep branch on the
    quarter input (to 1/32, dilated convs, pyramid pooling summed), a shared shallow branch at
    1/2, three light convs at full resolution, two cascade fusions, a classifier upsampled 4x."""

    def __init__(self, classes=11):
        super().__init__()
        self.sub1 = nn.Sequential(cbr(3, 16, 3, 2), cbr(16, 16, 3, 2), cbr(16, 32, 3, 2))
        self.sub2 = nn.Sequential(cbr(3, 16, 3, 2), cbr(16, 32, 3, 2), cbr(32, 64, 3, 2))
        self.sub4 = nn.Sequential(cbr(64, 64, 3, 2), cbr(64, 128, 3, 1, d=2),
                                  cbr(128, 128, 3, 1, d=4))
        self.pool_proj = cbr(128, 64, 1)
        self.cff24 = CFF(64, 64, 64)
        self.cff12 = CFF(64, 32, 64)
        self.cls = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        x2 = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=True)
        x4 = F.interpolate(x2, scale_factor=0.5, mode="bilinear", align_corners=True)
        f2 = self.sub2(x2)                        # 1/16
        f4 = self.sub4(self.sub2(x4))             # 1/32 (sub2 shared, as ICNet's)
        h, w = f4.shape[2:]
        ppm = f4
        for b in (1, 2):
            ppm = ppm + F.interpolate(F.adaptive_avg_pool2d(f4, b), size=(h, w),
                                      mode="bilinear", align_corners=True)
        f4 = self.pool_proj(ppm)
        f24 = self.cff24(f4, f2)
        f124 = self.cff12(f24, self.sub1(x))      # 1/8
        y = self.cls(F.interpolate(f124, scale_factor=2.0, mode="bilinear", align_corners=True))
        return F.interpolate(y, scale_factor=4.0, mode="bilinear", align_corners=True)


class OddChannels(nn.Module):
    """Channel counts no kernel is tuned for (13, 29, 61, 91, 97), groups of 13 channels, a
    stride-3 conv, asymmetric zero padding, a ceil-mode max pool, a dilated depthwise conv, an
    inverted residual with expansion 5 and a classifier of 11 classes."""

    def __init__(self, classes=11):
        super().__init__()
        self.stem = nn.Sequential(nn.ZeroPad2d((1, 2, 0, 1)), nn.Conv2d(3, 13, 3, 2, bias=False),
                                  nn.BatchNorm2d(13), nn.ReLU6())
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.ir = nn.Sequential(cbr(13, 65, 1, act=nn.ReLU6), cbr(65, 65, 3, groups=65, d=2,
                                                                 act=nn.ReLU6),
                                cbr(65, 13, 1, act=None))
        self.c3 = cbr(13, 29, 3, 3)
        self.up = cbr(29, 91, 1)
        self.grouped = cbr(91, 91, 3, 1, groups=7)  # 13 channels per group
        self.c5 = cbr(91, 61, 5, 2)
        self.c6 = cbr(61, 97, 3, 1, groups=1)
        self.fc = nn.Linear(97, classes)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = x + self.ir(x)
        x = self.up(self.c3(x))
        x = x + self.grouped(x)
        x = self.c6(self.c5(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ModConv(nn.Module):
    """StyleGAN2's modulated conv: the style (an affine of the latent) scales the weights' input
    channels per image, demodulation rescales each output filter to unit norm, the batch runs as
    one conv grouped by image."""

    def __init__(self, cin, cout, k, wdim, demod=True):
        super().__init__()
        self.cin, self.cout, self.k, self.demod = cin, cout, k, demod
        self.weight = nn.Parameter(torch.randn(1, cout, cin, k, k) / (cin * k * k) ** 0.5)
        self.affine = nn.Linear(wdim, cin)
        nn.init.ones_(self.affine.bias)

    def forward(self, x, w):
        b, _, h, wd = x.shape
        s = self.affine(w)
        wt = self.weight * s.reshape(b, 1, self.cin, 1, 1)
        if self.demod:
            wt = wt * torch.rsqrt((wt * wt).sum((2, 3, 4), keepdim=True) + 1e-8)
        y = F.conv2d(x.reshape(1, b * self.cin, h, wd),
                     wt.reshape(b * self.cout, self.cin, self.k, self.k), None, 1, self.k // 2,
                     groups=b)
        return y.reshape(b, self.cout, h, wd)


class StyleGAN2(nn.Module):
    """A small StyleGAN2 synthesis net: a 4-layer mapping MLP (LeakyReLU 0.2) from a 64-d
    latent given as [N, 64, 1, 1], a learned 4x4 constant, per resolution (4 -> 32) a bilinear
    2x upsampling and two modulated 3x3 convs, each with a fixed noise image scaled by a
    learned strength, bias and LeakyReLU x sqrt(2); modulated 1x1 toRGBs summed through
    upsampled skips."""

    def __init__(self, wdim=64):
        super().__init__()
        self.mapping = nn.Sequential(*[m for _ in range(4)
                                       for m in (nn.Linear(wdim, wdim), nn.LeakyReLU(0.2))])
        self.const = nn.Parameter(torch.randn(1, 64, 4, 4))
        self.convs, self.rgbs, self.biases, self.noise_str = (nn.ModuleList(), nn.ModuleList(),
                                                              nn.ParameterList(),
                                                              nn.ParameterList())
        self.noises = []
        cin, res = 64, 4
        for cout in (64, 48, 32, 24):
            for j in range(2 if res > 4 else 1):
                self.convs.append(ModConv(cin if j == 0 else cout, cout, 3, wdim))
                self.biases.append(nn.Parameter(torch.randn(cout) * 0.1))
                self.noise_str.append(nn.Parameter(torch.tensor(0.1)))
                g = torch.Generator().manual_seed(len(self.noises))
                self.register_buffer(f"noise{len(self.noises)}",
                                     torch.randn(1, 1, res, res, generator=g))
                self.noises.append(f"noise{len(self.noises)}")
            self.rgbs.append(ModConv(cout, 3, 1, wdim, demod=False))
            cin, res = cout, res * 2

    def forward(self, z):
        w = self.mapping(z.flatten(1))
        x = self.const.expand(z.shape[0], -1, -1, -1)
        rgb, i = None, 0
        for r, to_rgb in enumerate(self.rgbs):
            if r > 0:
                x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
            for _ in range(2 if r > 0 else 1):
                x = self.convs[i](x, w) + self.noise_str[i] * getattr(self, self.noises[i])
                x = F.leaky_relu(x + self.biases[i].reshape(1, -1, 1, 1), 0.2) * 2 ** 0.5
                i += 1
            y = to_rgb(x, w)
            rgb = y if rgb is None else y + F.interpolate(rgb, scale_factor=2.0,
                                                          mode="bilinear", align_corners=False)
        return rgb


class Pix2Pix(nn.Module):
    """pix2pix's U-Net generator (5 levels): 4x4 stride-2 convs with LeakyReLU 0.2 and BN down,
    4x4 stride-2 transposed convs with ReLU, BN and (eval) dropout up, skip concats, Tanh."""

    def __init__(self):
        super().__init__()
        chs = (32, 64, 128, 128, 128)
        self.down = nn.ModuleList()
        cin = 3
        for i, c in enumerate(chs):
            layers = [nn.LeakyReLU(0.2)] if i else []
            layers += [nn.Conv2d(cin, c, 4, 2, 1, bias=False)]
            if 0 < i < len(chs) - 1:
                layers.append(nn.BatchNorm2d(c))
            self.down.append(nn.Sequential(*layers))
            cin = c
        self.up = nn.ModuleList()
        for i in range(len(chs) - 1, 0, -1):
            cin = chs[i] * (1 if i == len(chs) - 1 else 2)
            self.up.append(nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(cin, chs[i - 1], 4, 2, 1,
                                                                       bias=False),
                                         nn.BatchNorm2d(chs[i - 1]), nn.Dropout(0.5)))
        self.last = nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(chs[0] * 2, 3, 4, 2, 1),
                                  nn.Tanh())

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
        for i, u in enumerate(self.up):
            x = u(x if i == 0 else torch.cat([x, skips[-1 - i]], 1))
        return self.last(torch.cat([x, skips[0]], 1))


# name: (class, default HxW, input channels, lowest opset)
UNSEEN10 = {"openpose_like": (OpenPose, "184x184", 3, 11),
            "lprnet_like": (LPRNet, "24x94", 3, 11),
            "tsm_like": (TSM, "112x112", 24, 11),
            "pointpillars_like": (PointPillarsBEV, "128x128", 64, 11),
            "modnet_like": (MODNet, "256x256", 3, 11),
            "fcos_like": (FCOSHead, "256x320", 3, 11),
            "icnet_like": (ICNet, "256x512", 3, 11),
            "oddchannels_like": (OddChannels, "181x157", 3, 11),
            "stylegan2_like": (StyleGAN2, "1x1", 64, 11),
            "pix2pix_like": (Pix2Pix, "128x128", 3, 11)}
