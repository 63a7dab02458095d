# Ninth batch of unseen CNN families (session 44; bench/export_arch.py exports them by name):
# MobileNetV4's universal inverted bottlenecks (an extra depthwise conv before the expand 1x1),
# FasterNet's partial convolution (a 3x3 over a quarter of the channels, the rest passed through),
# HarDNet's harmonic dense connections, DLA's aggregation trees, BiSeNet's two paths with
# attention refinement and feature fusion, Fast-SCNN (learning to downsample, pyramid pooling,
# feature fusion), CenterNet's transposed-conv upsampling and three heads, PP-LCNet (hardswish,
# 5x5 depthwise convs, hardsigmoid SE, a 1x1 "FC" before the classifier) and YOLOv7's ELAN and
# MP blocks. Written from the papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


def cbr(cin, cout, k=1, s=1, groups=1, act=nn.ReLU, d=1):
    layers = [nn.Conv2d(cin, cout, k, s, d * (k // 2), dilation=d, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class UIB(nn.Module):
    """MobileNetV4's universal inverted bottleneck: an optional depthwise conv before the expand
    1x1 (ExtraDW / ConvNext-like), an optional one after it (IB / ExtraDW), the project 1x1."""

    def __init__(self, cin, cout, expand, start_k, mid_k, s):
        super().__init__()
        mid = cin * expand
        self.start = cbr(cin, cin, start_k, s if not mid_k else 1, cin, None) if start_k else None
        self.exp = cbr(cin, mid, 1)
        self.mid = cbr(mid, mid, mid_k, s, mid) if mid_k else None
        self.proj = cbr(mid, cout, 1, act=None)
        self.res = s == 1 and cin == cout

    def forward(self, x):
        y = self.start(x) if self.start else x
        y = self.exp(y)
        y = self.mid(y) if self.mid else y
        y = self.proj(y)
        return x + y if self.res else y


class MobileNetV4(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        cfg = [(32, 48, 4, 3, 5, 2), (48, 48, 2, 3, 3, 1),  # ExtraDW
               (48, 80, 4, 3, 5, 2), (80, 80, 2, 3, 3, 1),
               (80, 80, 4, 0, 3, 1),  # IB
               (80, 160, 6, 5, 5, 2), (160, 160, 4, 0, 0, 1),  # FFN
               (160, 160, 4, 3, 0, 1)]  # ConvNext-like
        self.stem = nn.Sequential(cbr(3, 32, 3, 2), cbr(32, 32, 3, 2))
        self.body = nn.Sequential(*[UIB(*c) for c in cfg])
        self.head = nn.Sequential(cbr(160, 640, 1), nn.AdaptiveAvgPool2d(1), cbr(640, 1280, 1),
                                  nn.Flatten(), nn.Linear(1280, classes))

    def forward(self, x):
        return self.head(self.body(self.stem(x)))


class PConvBlock(nn.Module):
    """FasterNet: a 3x3 conv over the first quarter of the channels (the rest as they are),
    then a 1x1 to 2x, BN, ReLU, a 1x1 back, and the residual."""

    def __init__(self, c):
        super().__init__()
        self.cp = c // 4
        self.pconv = nn.Conv2d(self.cp, self.cp, 3, 1, 1, bias=False)
        self.mlp = nn.Sequential(cbr(c, 2 * c, 1), nn.Conv2d(2 * c, c, 1, bias=False))

    def forward(self, x):
        a, b = torch.split(x, [self.cp, x.shape[1] - self.cp], 1)
        return x + self.mlp(torch.cat((self.pconv(a), b), 1))


class FasterNet(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        dims, depth = (40, 80, 160, 320), (1, 2, 4, 1)
        layers = [nn.Conv2d(3, dims[0], 4, 4, bias=False), nn.BatchNorm2d(dims[0])]
        for i, (c, n) in enumerate(zip(dims, depth)):
            if i:
                layers += [nn.Conv2d(dims[i - 1], c, 2, 2, bias=False), nn.BatchNorm2d(c)]
            layers += [PConvBlock(c) for _ in range(n)]
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(320, 1280, 1, bias=False),
                                  nn.ReLU(), nn.Flatten(), nn.Linear(1280, classes))

    def forward(self, x):
        return self.head(self.body(x))


class HarDBlock(nn.Module):
    """HarDNet: layer k reads the concatenation of layers k - 2^n (n >= 0, k divisible by 2^n);
    the block's output concatenates the odd layers and the last."""

    def __init__(self, cin, growth, n):
        super().__init__()
        self.links, self.layers, widths = [], nn.ModuleList(), [cin]
        for k in range(1, n + 1):
            link = [k - 2 ** i for i in range(8) if k % (2 ** i) == 0 and k - 2 ** i >= 0]
            w = int(growth * 1.7 ** (len(link) - 1))
            self.links.append(link)
            self.layers.append(cbr(sum(widths[j] for j in link), w, 3))
            widths.append(w)
        self.out_ids = [k for k in range(1, n + 1) if k % 2 == 1 or k == n]
        self.cout = sum(widths[k] for k in self.out_ids)

    def forward(self, x):
        outs = [x]
        for link, layer in zip(self.links, self.layers):
            xs = [outs[j] for j in link]
            outs.append(layer(torch.cat(xs, 1) if len(xs) > 1 else xs[0]))
        return torch.cat([outs[k] for k in self.out_ids], 1)


class HarDNet(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        layers, c = [cbr(3, 24, 3, 2), cbr(24, 48, 3), nn.MaxPool2d(3, 2, 1)], 48
        for growth, n, cout, down in ((10, 4, 96, True), (16, 8, 160, True), (20, 8, 320, False)):
            blk = HarDBlock(c, growth, n)
            layers += [blk, cbr(blk.cout, cout, 1)]
            if down:
                layers.append(nn.AvgPool2d(2, 2))
            c = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(self.body(x).mean((2, 3)))


class Basic(nn.Module):
    def __init__(self, cin, cout, s=1):
        super().__init__()
        self.a, self.b = cbr(cin, cout, 3, s), cbr(cout, cout, 3, act=None)
        self.short = None if s == 1 and cin == cout else nn.Sequential(
            nn.MaxPool2d(s, s) if s > 1 else nn.Identity(), cbr(cin, cout, 1, act=None))

    def forward(self, x):
        r = x if self.short is None else self.short(x)
        return F.relu(self.b(self.a(x)) + r)


class Tree(nn.Module):
    """DLA's hierarchical aggregation: two subtrees (or blocks), their outputs (and, at the root,
    the downsampled input) concatenated into an aggregation node (1x1, BN, ReLU, + residual)."""

    def __init__(self, levels, cin, cout, s, root_extra=0):
        super().__init__()
        if levels == 1:
            self.t1, self.t2 = Basic(cin, cout, s), Basic(cout, cout)
        else:
            self.t1 = Tree(levels - 1, cin, cout, s)
            self.t2 = Tree(levels - 1, cout, cout, 1, root_extra=cout)
        self.levels = levels
        self.root = cbr(2 * cout + root_extra, cout, 1) if levels == 1 else None
        self.down = nn.MaxPool2d(s, s) if s > 1 else nn.Identity()

    def forward(self, x, children=None):
        children = [] if children is None else children
        x1 = self.t1(x)
        if self.levels == 1:
            x2 = self.t2(x1)
            return self.root(torch.cat([x2, x1] + children, 1)) + x2
        return self.t2(x1, children=[x1])


class DLA(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 16, 7), cbr(16, 32, 3, 2))
        self.l3 = Tree(1, 32, 64, 2)
        self.l4 = Tree(2, 64, 128, 2)
        self.l5 = Tree(1, 128, 256, 2)
        self.fc = nn.Conv2d(256, classes, 1)

    def forward(self, x):
        y = self.l5(self.l4(self.l3(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(y, 1)).flatten(1)


class ARM(nn.Module):
    """BiSeNet's attention refinement: a 3x3, then scaled by sigmoid(BN(1x1(GAP)))."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = cbr(cin, cout, 3)
        self.att = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cout, cout, 1, bias=False),
                                 nn.BatchNorm2d(cout), nn.Sigmoid())

    def forward(self, x):
        y = self.conv(x)
        return y * self.att(y)


class BiSeNet(nn.Module):
    """BiSeNet V1: a spatial path (three stride-2 convs), a context path (a small ResNet, ARMs on
    its last two stages plus the global context), the feature fusion module (concat, conv, an
    SE-like gate, x * g + x), a classifier upsampled 8x bilinearly to the input."""

    def __init__(self, classes=19):
        super().__init__()
        self.sp = nn.Sequential(cbr(3, 64, 7, 2), cbr(64, 64, 3, 2), cbr(64, 64, 3, 2),
                                cbr(64, 128, 1))
        self.c1 = nn.Sequential(cbr(3, 32, 3, 2), nn.MaxPool2d(3, 2, 1), Basic(32, 64, 1))
        self.c2, self.c3, self.c4 = Basic(64, 128, 2), Basic(128, 256, 2), Basic(256, 512, 2)
        self.arm16, self.arm32 = ARM(256, 128), ARM(512, 128)
        self.gc = nn.Sequential(nn.AdaptiveAvgPool2d(1), cbr(512, 128, 1))
        self.h32, self.h16 = cbr(128, 128, 3), cbr(128, 128, 3)
        self.ffm = cbr(256, 256, 1)
        self.gate = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(256, 64, 1), nn.ReLU(),
                                  nn.Conv2d(64, 256, 1), nn.Sigmoid())
        self.cls = nn.Sequential(cbr(256, 64, 3), nn.Conv2d(64, classes, 1))

    def forward(self, x):
        h, w = x.shape[2:]
        sp = self.sp(x)
        c2 = self.c2(self.c1(x))
        c16 = self.c3(c2)
        c32 = self.c4(c16)
        a32 = self.arm32(c32) + self.gc(c32)
        u32 = self.h32(F.interpolate(a32, size=c16.shape[2:], mode="nearest"))
        a16 = self.arm16(c16) + u32
        u16 = self.h16(F.interpolate(a16, size=sp.shape[2:], mode="nearest"))
        f = self.ffm(torch.cat((sp, u16), 1))
        f = f * self.gate(f) + f
        return F.interpolate(self.cls(f), size=(h, w), mode="bilinear", align_corners=False)


def dsconv(cin, cout, s=1):
    return nn.Sequential(cbr(cin, cin, 3, s, cin), cbr(cin, cout, 1))


class Bottleneck(nn.Module):
    def __init__(self, cin, cout, t, s):
        super().__init__()
        self.b = nn.Sequential(cbr(cin, cin * t, 1), cbr(cin * t, cin * t, 3, s, cin * t),
                               cbr(cin * t, cout, 1, act=None))
        self.res = s == 1 and cin == cout

    def forward(self, x):
        return x + self.b(x) if self.res else self.b(x)


class FastSCNN(nn.Module):
    """Fast-SCNN: learning to downsample (conv + two depthwise-separable convs, all stride 2),
    a global feature extractor of inverted residuals, pyramid pooling (adaptive pools 1, 2, 3, 6,
    1x1 each, bilinear back, concatenated), feature fusion (the low branch upsampled 4x,
    depthwise, 1x1, + the high branch's 1x1), a classifier upsampled to the input."""

    def __init__(self, classes=19):
        super().__init__()
        self.lds = nn.Sequential(cbr(3, 32, 3, 2), dsconv(32, 48, 2), dsconv(48, 64, 2))
        self.gfe = nn.Sequential(Bottleneck(64, 64, 6, 2), Bottleneck(64, 64, 6, 1),
                                 Bottleneck(64, 96, 6, 2), Bottleneck(96, 96, 6, 1),
                                 Bottleneck(96, 128, 6, 1))
        self.ppm = nn.ModuleList(cbr(128, 32, 1) for _ in range(4))
        self.ppm_out = cbr(256, 128, 1)
        self.low = nn.Sequential(cbr(128, 128, 3, 1, 128), nn.Conv2d(128, 128, 1))
        self.high = nn.Conv2d(64, 128, 1)
        self.cls = nn.Sequential(dsconv(128, 128), dsconv(128, 128), nn.Conv2d(128, classes, 1))

    def forward(self, x):
        h, w = x.shape[2:]
        hi = self.lds(x)
        lo = self.gfe(hi)
        size = lo.shape[2:]
        pools = [F.interpolate(m(F.adaptive_avg_pool2d(lo, b)), size=size, mode="bilinear",
                               align_corners=True) for m, b in zip(self.ppm, (1, 2, 3, 6))]
        lo = self.ppm_out(torch.cat([lo] + pools, 1))
        lo = F.interpolate(lo, size=hi.shape[2:], mode="bilinear", align_corners=True)
        f = F.relu(self.low(lo) + self.high(hi))
        return F.interpolate(self.cls(f), size=(h, w), mode="bilinear", align_corners=True)


class CenterNet(nn.Module):
    """CenterNet (ResNet-18 style): a residual backbone to stride 32, three 4x4 stride-2
    transposed convs back to stride 4, three heads (class heatmap with a sigmoid, box size,
    offset) concatenated."""

    def __init__(self, classes=20):
        super().__init__()
        self.back = nn.Sequential(cbr(3, 32, 7, 2), nn.MaxPool2d(3, 2, 1), Basic(32, 32),
                                  Basic(32, 64, 2), Basic(64, 128, 2), Basic(128, 256, 2))
        ups, c = [], 256
        for cout in (128, 64, 64):
            ups += [cbr(c, cout, 3), nn.ConvTranspose2d(cout, cout, 4, 2, 1, bias=False),
                    nn.BatchNorm2d(cout), nn.ReLU()]
            c = cout
        self.up = nn.Sequential(*ups)
        self.heads = nn.ModuleList(nn.Sequential(nn.Conv2d(64, 64, 3, 1, 1), nn.ReLU(),
                                                 nn.Conv2d(64, k, 1)) for k in (classes, 2, 2))

    def forward(self, x):
        f = self.up(self.back(x))
        hm, wh, off = (h(f) for h in self.heads)
        return torch.cat((torch.sigmoid(hm), wh, off), 1)


class LCBlock(nn.Module):
    def __init__(self, cin, cout, k, s, se):
        super().__init__()
        self.dw = cbr(cin, cin, k, s, cin, nn.Hardswish)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cin // 4, 1), nn.ReLU(),
                                nn.Conv2d(cin // 4, cin, 1), nn.Hardsigmoid()) if se else None
        self.pw = cbr(cin, cout, 1, act=nn.Hardswish)

    def forward(self, x):
        y = self.dw(x)
        if self.se is not None:
            y = y * self.se(y)
        return self.pw(y)


class PPLCNet(nn.Module):
    """PP-LCNet x1.0: depthwise-separable blocks with hardswish, 5x5 depthwise convs and SE
    (ReLU / hardsigmoid) in the last stage, GAP then a 1x1 conv to 1280 with hardswish."""

    def __init__(self, classes=100):
        super().__init__()
        cfg = [(16, 32, 3, 1, 0), (32, 64, 3, 2, 0), (64, 64, 3, 1, 0), (64, 128, 3, 2, 0),
               (128, 128, 3, 1, 0), (128, 256, 3, 2, 0)] + [(256, 256, 5, 1, 0)] * 5 + \
              [(256, 512, 5, 2, 1), (512, 512, 5, 1, 1)]
        self.stem = cbr(3, 16, 3, 2, act=nn.Hardswish)
        self.body = nn.Sequential(*[LCBlock(*c) for c in cfg])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(512, 1280, 1, bias=False),
                                  nn.Hardswish(), nn.Flatten(), nn.Linear(1280, classes))

    def forward(self, x):
        return self.head(self.body(self.stem(x)))


class ELAN(nn.Module):
    """YOLOv7's ELAN: two 1x1 branches, the second followed by four 3x3s; the 1x1s and every
    second 3x3 concatenated, a 1x1."""

    def __init__(self, cin, mid, cout):
        super().__init__()
        self.a, self.b = cbr(cin, mid, 1, act=nn.SiLU), cbr(cin, mid, 1, act=nn.SiLU)
        self.cs = nn.ModuleList(cbr(mid, mid, 3, act=nn.SiLU) for _ in range(4))
        self.out = cbr(4 * mid, cout, 1, act=nn.SiLU)

    def forward(self, x):
        outs = [self.a(x), self.b(x)]
        y = outs[-1]
        for i, c in enumerate(self.cs):
            y = c(y)
            if i % 2:
                outs.append(y)
        return self.out(torch.cat(outs[::-1], 1))


class MP(nn.Module):
    """YOLOv7's MP downsampling: maxpool + 1x1 against 1x1 + 3x3 stride 2, concatenated."""

    def __init__(self, c):
        super().__init__()
        self.a = nn.Sequential(nn.MaxPool2d(2, 2), cbr(c, c // 2, 1, act=nn.SiLU))
        self.b = nn.Sequential(cbr(c, c // 2, 1, act=nn.SiLU), cbr(c // 2, c // 2, 3, 2,
                                                                   act=nn.SiLU))

    def forward(self, x):
        return torch.cat((self.b(x), self.a(x)), 1)


class YoloV7(nn.Module):
    """A YOLOv7-tiny-like backbone and head: ELANs and MPs, detection 1x1s on three levels
    (nearest upsampling and concatenation between them), outputs flattened and concatenated."""

    def __init__(self, na=3, nc=20):
        super().__init__()
        no = na * (nc + 5)
        self.stem = nn.Sequential(cbr(3, 32, 3, 2, act=nn.SiLU), cbr(32, 64, 3, 2, act=nn.SiLU))
        self.s2 = nn.Sequential(ELAN(64, 32, 64), MP(64))
        self.s3 = nn.Sequential(ELAN(64, 64, 128), MP(128))
        self.s4 = nn.Sequential(ELAN(128, 128, 256), MP(256), ELAN(256, 128, 256))
        self.lat3, self.lat2 = cbr(256, 128, 1, act=nn.SiLU), cbr(128, 64, 1, act=nn.SiLU)
        self.h3, self.h2 = ELAN(256, 64, 128), ELAN(128, 32, 64)
        self.det = nn.ModuleList(nn.Conv2d(c, no, 1) for c in (64, 128, 256))

    def forward(self, x):
        p2 = self.s2(self.stem(x))
        p3 = self.s3(p2)
        p4 = self.s4(p3)
        t3 = self.h3(torch.cat((F.interpolate(self.lat3(p4), scale_factor=2.0), p3), 1))
        t2 = self.h2(torch.cat((F.interpolate(self.lat2(t3), scale_factor=2.0), p2), 1))
        return torch.cat([d(f).flatten(2) for d, f in zip(self.det, (t2, t3, p4))], 2)


UNSEEN7 = {"mobilenetv4_like": (MobileNetV4, "224x224", 3, 11),
           "fasternet_like": (FasterNet, "224x224", 3, 11),
           "hardnet_like": (HarDNet, "224x224", 3, 11),
           "dla_like": (DLA, "224x224", 3, 11),
           "bisenet_like": (BiSeNet, "256x512", 3, 11),
           "fastscnn_like": (FastSCNN, "384x768", 3, 11),
           "centernet_like": (CenterNet, "384x384", 3, 11),
           "pplcnet_like": (PPLCNet, "224x224", 3, 11),
           "yolov7_like": (YoloV7, "320x320", 3, 11)}
