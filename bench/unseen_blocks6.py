# Eighth batch of unseen CNN families (session 43; bench/export_arch.py exports them by name):
# detectors' and dense predictors' idioms not in the earlier batches — YOLOv8's C2f (Split) and
# distribution-focal box head (Softmax over a reshaped map, a fixed 1x1), YOLOX's Focus slicing,
# ShuffleNet V1 (grouped 1x1 + shuffle, an AvgPool shortcut concatenated), Xception's separable
# convs, octave convolution (AvgPool down / nearest up between two frequencies), ENet (PReLU,
# asymmetric and dilated convs, zero-padded channels), a stacked hourglass, PSPNet's
# pyramid pooling (adaptive pools + bilinear align_corners upsampling), SimpleBaseline's
# transposed-conv pose head. Written from the papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


def cbs(cin, cout, k=1, s=1, groups=1, act=nn.SiLU):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class C2f(nn.Module):
    """YOLOv8's C2f: a 1x1 to 2h, split in halves, n bottlenecks chained on the second half,
    every intermediate concatenated, a 1x1."""

    def __init__(self, cin, cout, n=1):
        super().__init__()
        self.h = cout // 2
        self.cv1 = cbs(cin, 2 * self.h)
        self.m = nn.ModuleList(nn.Sequential(cbs(self.h, self.h, 3), cbs(self.h, self.h, 3))
                               for _ in range(n))
        self.cv2 = cbs((2 + n) * self.h, cout)

    def forward(self, x):
        y = list(self.cv1(x).split((self.h, self.h), 1))
        for m in self.m:
            y.append(y[-1] + m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class YoloV8(nn.Module):
    """YOLOv8-n-like: C2f backbone, SPPF, an FPN/PAN neck, decoupled heads per level; the box
    branch's 4 x 16 bins softmaxed and integrated by a fixed 1x1 conv (DFL), classes sigmoided,
    all levels concatenated as [N, 4 + 20, anchors]."""

    def __init__(self, nc=20, reg=16):
        super().__init__()
        from export_arch import SPPF  # YOLOv5's, the same block (export_arch imports this file)
        self.nc, self.reg = nc, reg
        self.b1 = nn.Sequential(cbs(3, 16, 3, 2), cbs(16, 32, 3, 2), C2f(32, 32))
        self.b2 = nn.Sequential(cbs(32, 64, 3, 2), C2f(64, 64, 2))
        self.b3 = nn.Sequential(cbs(64, 128, 3, 2), C2f(128, 128, 2))
        self.b4 = nn.Sequential(cbs(128, 256, 3, 2), C2f(256, 256), SPPF(256, 256))
        self.up1, self.up2 = C2f(384, 128), C2f(192, 64)
        self.down1, self.pan1 = cbs(64, 64, 3, 2), C2f(192, 128)
        self.down2, self.pan2 = cbs(128, 128, 3, 2), C2f(384, 256)
        self.box = nn.ModuleList(nn.Sequential(cbs(c, 64, 3), cbs(64, 64, 3),
                                               nn.Conv2d(64, 4 * reg, 1)) for c in (64, 128, 256))
        self.cls = nn.ModuleList(nn.Sequential(cbs(c, 64, 3), cbs(64, 64, 3), nn.Conv2d(64, nc, 1))
                                 for c in (64, 128, 256))
        self.dfl = nn.Conv2d(reg, 1, 1, bias=False).requires_grad_(False)
        self.dfl.weight.data[:] = torch.arange(reg, dtype=torch.float32).view(1, reg, 1, 1)

    def forward(self, x):
        p3 = self.b2(self.b1(x))
        p4 = self.b3(p3)
        p5 = self.b4(p4)
        t4 = self.up1(torch.cat([F.interpolate(p5, scale_factor=2.0), p4], 1))
        n3 = self.up2(torch.cat([F.interpolate(t4, scale_factor=2.0), p3], 1))
        n4 = self.pan1(torch.cat([self.down1(n3), t4], 1))
        n5 = self.pan2(torch.cat([self.down2(n4), p5], 1))
        outs = []
        for f, box, cls in zip((n3, n4, n5), self.box, self.cls):
            b = box(f).flatten(2)  # [N, 4 * reg, A]
            n, _, a = b.shape
            d = b.view(n, 4, self.reg, a).transpose(2, 1).softmax(1)  # [N, reg, 4, A]
            outs.append(torch.cat([self.dfl(d).view(n, 4, a), cls(f).flatten(2).sigmoid()], 1))
        return torch.cat(outs, 2)


class Focus(nn.Module):
    """YOLOX / YOLOv5 v1's Focus stem: the four 2x2 phases by strided slicing, concatenated."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = cbs(4 * cin, cout, 3)

    def forward(self, x):
        return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                                    x[..., 1::2, 1::2]], 1))


class YoloX(nn.Module):
    """YOLOX-nano-like: Focus stem, depthwise-separable CSP-ish stages, a decoupled head (stem 1x1,
    a cls and a reg branch of depthwise-separable convs), outputs concatenated as
    [N, anchors, 4 + 1 + 20] (reg, obj sigmoid, cls sigmoid)."""

    def __init__(self, nc=20):
        super().__init__()

        def dws(cin, cout, s=1):
            return nn.Sequential(cbs(cin, cin, 3, s, groups=cin), cbs(cin, cout))

        self.stem = Focus(3, 16)
        self.s1 = nn.Sequential(dws(16, 32, 2), dws(32, 32))
        self.s2 = nn.Sequential(dws(32, 64, 2), dws(64, 64))
        self.s3 = nn.Sequential(dws(64, 128, 2), dws(128, 128))
        self.s4 = nn.Sequential(dws(128, 256, 2), dws(256, 256))
        self.heads = nn.ModuleList()
        for c in (64, 128, 256):
            self.heads.append(nn.ModuleDict({
                "stem": cbs(c, 64), "cls": nn.Sequential(dws(64, 64), dws(64, 64)),
                "reg": nn.Sequential(dws(64, 64), dws(64, 64)), "cls_out": nn.Conv2d(64, nc, 1),
                "reg_out": nn.Conv2d(64, 4, 1), "obj_out": nn.Conv2d(64, 1, 1)}))

    def forward(self, x):
        f2 = self.s2(self.s1(self.stem(x)))
        f3 = self.s3(f2)
        f4 = self.s4(f3)
        outs = []
        for f, h in zip((f2, f3, f4), self.heads):
            s = h["stem"](f)
            r = h["reg"](s)
            y = torch.cat([h["reg_out"](r), h["obj_out"](r).sigmoid(),
                           h["cls_out"](h["cls"](s)).sigmoid()], 1)
            outs.append(y.flatten(2).permute(0, 2, 1))
        return torch.cat(outs, 1)


class ShuffleV1Unit(nn.Module):
    """ShuffleNet V1's unit (g = 3): grouped 1x1 + BN + ReLU, channel shuffle, 3x3 depthwise
    (stride) + BN, grouped 1x1 + BN; stride 1 adds the input, stride 2 concatenates a 3x3 stride-2
    AvgPool of it; ReLU after."""

    def __init__(self, cin, cout, stride, groups=3, first=False):
        super().__init__()
        self.stride, self.g = stride, groups
        out = cout - cin if stride == 2 else cout
        mid = out // 4
        self.gc1 = cbs(cin, mid, groups=1 if first else groups, act=nn.ReLU)
        self.dw = cbs(mid, mid, 3, stride, groups=mid, act=None)
        self.gc2 = cbs(mid, out, groups=groups, act=None)

    def forward(self, x):
        y = self.gc1(x)
        n, c, h, w = y.shape
        y = y.view(n, self.g, c // self.g, h, w).transpose(1, 2).reshape(n, c, h, w)
        y = self.gc2(self.dw(y))
        if self.stride == 2:
            return F.relu(torch.cat([F.avg_pool2d(x, 3, 2, 1), y], 1))
        return F.relu(x + y)


class ShuffleNetV1(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(cbs(3, 24, 3, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 24
        for i, (cout, n) in enumerate(((240, 4), (480, 8), (960, 4))):
            for j in range(n):
                layers.append(ShuffleV1Unit(cin, cout, 2 if j == 0 else 1, first=(i == 0 and j == 0)))
                cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(960, 1000)

    def forward(self, x):
        return self.fc(self.body(self.stem(x)).mean((2, 3)))


class SepConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cin, 3, 1, 1, groups=cin, bias=False),
                         nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))


class XceptionBlock(nn.Module):
    """Xception's entry-flow block: (ReLU, SeparableConv, BN) x 2, a 3x3 stride-2 max pool, plus a
    1x1 stride-2 conv + BN of the input; middle-flow blocks (ReLU, SepConv, BN) x 3 + input."""

    def __init__(self, cin, cout, stride, first_relu=True):
        super().__init__()
        self.stride = stride
        reps = 2 if stride == 2 else 3
        layers, c = [], cin
        for i in range(reps):
            if i > 0 or first_relu:
                layers.append(nn.ReLU())
            layers.append(SepConv(c, cout))
            c = cout
        if stride == 2:
            layers.append(nn.MaxPool2d(3, 2, 1))
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False), nn.BatchNorm2d(cout))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x) + (self.skip(x) if self.stride == 2 else x)


class Xception(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(cbs(3, 32, 3, 2, act=nn.ReLU), cbs(32, 64, 3, act=nn.ReLU))
        self.body = nn.Sequential(XceptionBlock(64, 128, 2, first_relu=False),
                                  XceptionBlock(128, 256, 2), XceptionBlock(256, 364, 2),
                                  *[XceptionBlock(364, 364, 1) for _ in range(3)],
                                  XceptionBlock(364, 512, 2))
        self.tail = nn.Sequential(SepConv(512, 768), nn.ReLU())
        self.fc = nn.Linear(768, 1000)

    def forward(self, x):
        return self.fc(self.tail(self.body(self.stem(x))).mean((2, 3)))


class OctConv(nn.Module):
    """Octave convolution (alpha 0.5): high- and low-frequency maps (low at half resolution);
    H->H, H->L (after a 2x2 AvgPool), L->L, L->H (then nearest 2x up), summed per output; BN +
    ReLU on each."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        hi, lo, ho, lo_o = cin // 2, cin - cin // 2, cout // 2, cout - cout // 2
        self.stride = stride
        self.hh, self.hl = nn.Conv2d(hi, ho, 3, 1, 1, bias=False), nn.Conv2d(hi, lo_o, 3, 1, 1, bias=False)
        self.ll, self.lh = nn.Conv2d(lo, lo_o, 3, 1, 1, bias=False), nn.Conv2d(lo, ho, 3, 1, 1, bias=False)
        self.bh, self.bl = nn.BatchNorm2d(ho), nn.BatchNorm2d(lo_o)

    def forward(self, xs):
        h, l = xs
        if self.stride == 2:
            h, l = F.avg_pool2d(h, 2), F.avg_pool2d(l, 2)
        yh = self.hh(h) + F.interpolate(self.lh(l), scale_factor=2.0)
        yl = self.ll(l) + self.hl(F.avg_pool2d(h, 2))
        return F.relu(self.bh(yh)), F.relu(self.bl(yl))


class OctNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = cbs(3, 32, 3, 2, act=nn.ReLU)
        self.split_h, self.split_l = nn.Conv2d(32, 16, 3, 1, 1), nn.Conv2d(32, 16, 3, 1, 1)
        plan = [(32, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2),
                (256, 256, 1)]
        self.body = nn.ModuleList(OctConv(a, b, s) for a, b, s in plan)
        self.merge = cbs(256, 256, act=nn.ReLU)
        self.fc = nn.Linear(256, 1000)

    def forward(self, x):
        x = self.stem(x)
        xs = (self.split_h(x), self.split_l(F.avg_pool2d(x, 2)))
        for m in self.body:
            xs = m(xs)
        h, l = xs
        y = self.merge(torch.cat([h, F.interpolate(l, scale_factor=2.0)], 1))
        return self.fc(y.mean((2, 3)))


class EnetBottleneck(nn.Module):
    """ENet's bottleneck: 1x1 (or 2x2 stride 2) projection, a main conv (regular, dilated or
    asymmetric 5x1 + 1x5, or a 3x3 stride-1 transposed-free upsampling path), a 1x1 expansion,
    BN + PReLU; downsampling max-pools the shortcut and zero-pads its channels, upsampling
    takes a 1x1 + BN of it nearest-upsampled (PyTorch 1.13 exports no MaxUnpool, so ONNX ports
    of ENet do this)."""

    def __init__(self, cin, cout, mode="regular", dilation=1):
        super().__init__()
        mid = cout // 4
        self.mode = mode
        first = (nn.Conv2d(cin, mid, 2, 2, bias=False) if mode == "down" else
                 nn.Conv2d(cin, mid, 1, bias=False))
        if mode == "asym":
            main = [nn.Conv2d(mid, mid, (5, 1), 1, (2, 0), bias=False),
                    nn.Conv2d(mid, mid, (1, 5), 1, (0, 2), bias=False)]
        elif mode == "up":
            main = [nn.ConvTranspose2d(mid, mid, 2, 2, bias=False)]
        else:
            main = [nn.Conv2d(mid, mid, 3, 1, dilation, dilation, bias=False)]
        self.body = nn.Sequential(first, nn.BatchNorm2d(mid), nn.PReLU(), *main, nn.BatchNorm2d(mid),
                                  nn.PReLU(), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        if mode == "up":
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.act = nn.PReLU()
        self.pad = cout - cin

    def forward(self, x):
        y = self.body(x)
        if self.mode == "down":
            return self.act(F.pad(F.max_pool2d(x, 2, 2), (0, 0, 0, 0, 0, self.pad)) + y)
        if self.mode == "up":
            return self.act(F.interpolate(self.skip(x), scale_factor=2.0) + y)
        return self.act(x + y)


class ENet(nn.Module):
    """ENet (Paszke et al. 2016), shortened: the initial block (3x3 stride-2 conv of 13 channels
    concatenated with a max pool of the image), two encoder stages, a decoder of upsampling
    bottlenecks, a 2x2 transposed conv to 12 classes at full resolution."""

    def __init__(self, classes=12):
        super().__init__()
        self.init_conv = nn.Conv2d(3, 13, 3, 2, 1, bias=False)
        self.init_bn, self.init_act = nn.BatchNorm2d(16), nn.PReLU()
        self.down1 = EnetBottleneck(16, 64, "down")
        self.s1 = nn.Sequential(*[EnetBottleneck(64, 64) for _ in range(2)])
        self.down2 = EnetBottleneck(64, 128, "down")
        self.s2 = nn.Sequential(EnetBottleneck(128, 128), EnetBottleneck(128, 128, dilation=2),
                                EnetBottleneck(128, 128, "asym"), EnetBottleneck(128, 128, dilation=4))
        self.up2 = EnetBottleneck(128, 64, "up")
        self.d2 = EnetBottleneck(64, 64)
        self.up1 = EnetBottleneck(64, 16, "up")
        self.out = nn.ConvTranspose2d(16, classes, 2, 2)

    def forward(self, x):
        x = self.init_act(self.init_bn(torch.cat([self.init_conv(x), F.max_pool2d(x, 2, 2)], 1)))
        x = self.s2(self.down2(self.s1(self.down1(x))))
        return self.out(self.up1(self.d2(self.up2(x))))


class HgResidual(nn.Module):
    """The hourglass's pre-activation residual module: BN, ReLU, 1x1, BN, ReLU, 3x3, BN, ReLU,
    1x1, + input (a 1x1 when the width changes)."""

    def __init__(self, cin, cout):
        super().__init__()
        m = cout // 2
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, m, 1),
                                  nn.BatchNorm2d(m), nn.ReLU(), nn.Conv2d(m, m, 3, 1, 1),
                                  nn.BatchNorm2d(m), nn.ReLU(), nn.Conv2d(m, cout, 1))
        self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return self.skip(x) + self.body(x)


class Hourglass(nn.Module):
    def __init__(self, depth, c):
        super().__init__()
        self.up1, self.low1, self.low3 = HgResidual(c, c), HgResidual(c, c), HgResidual(c, c)
        self.low2 = Hourglass(depth - 1, c) if depth > 1 else HgResidual(c, c)

    def forward(self, x):
        low = self.low3(self.low2(self.low1(F.max_pool2d(x, 2, 2))))
        return self.up1(x) + F.interpolate(low, scale_factor=2.0)


class StackedHourglass(nn.Module):
    """Newell et al.'s stacked hourglass (2 stacks, depth 3, 128 channels) for 16 keypoints on
    a 256x256 crop: a 7x7 stride-2 stem and residuals to 64x64, each stack's heatmaps remapped
    by 1x1s and added back into the features; returns the last stack's heatmaps."""

    def __init__(self, c=128, joints=16, stacks=2):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3), nn.BatchNorm2d(64), nn.ReLU(),
                                  HgResidual(64, c), nn.MaxPool2d(2, 2), HgResidual(c, c))
        self.hgs = nn.ModuleList(Hourglass(3, c) for _ in range(stacks))
        self.feats = nn.ModuleList(nn.Sequential(HgResidual(c, c), nn.Conv2d(c, c, 1),
                                                 nn.BatchNorm2d(c), nn.ReLU()) for _ in range(stacks))
        self.heads = nn.ModuleList(nn.Conv2d(c, joints, 1) for _ in range(stacks))
        self.f2x = nn.ModuleList(nn.Conv2d(c, c, 1) for _ in range(stacks - 1))
        self.h2x = nn.ModuleList(nn.Conv2d(joints, c, 1) for _ in range(stacks - 1))

    def forward(self, x):
        x = self.stem(x)
        for i, (hg, feat, head) in enumerate(zip(self.hgs, self.feats, self.heads)):
            f = feat(hg(x))
            h = head(f)
            if i + 1 < len(self.hgs):
                x = x + self.f2x[i](f) + self.h2x[i](h)
        return h


class PyramidPooling(nn.Module):
    """PSPNet's pyramid pooling: adaptive average pools to 1, 2, 3, 6, each a 1x1 + BN + ReLU,
    bilinearly upsampled (align_corners) and concatenated with the input."""

    def __init__(self, c, bins=(1, 2, 3, 6)):
        super().__init__()
        self.stages = nn.ModuleList(nn.Sequential(nn.AdaptiveAvgPool2d(b), cbs(c, c // 4, act=nn.ReLU))
                                    for b in bins)

    def forward(self, x):
        size = x.shape[2:]
        return torch.cat([x] + [F.interpolate(s(x), size=size, mode="bilinear", align_corners=True)
                                for s in self.stages], 1)


class PSPNet(nn.Module):
    """A PSPNet-like segmenter: a ResNet-ish backbone at output stride 8 (the last stages
    dilated 2 and 4), pyramid pooling, a 3x3 + 1x1 to 21 classes, bilinear 8x upsampling. The
    input side is a multiple of 48 (PyTorch exports adaptive pools only as fixed pools, whose
    output sizes must divide the map's)."""

    def __init__(self, classes=21):
        super().__init__()

        def block(cin, cout, s=1, d=1):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, s, d, d, bias=False), nn.BatchNorm2d(cout),
                                 nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, d, d, bias=False),
                                 nn.BatchNorm2d(cout), nn.ReLU())

        self.backbone = nn.Sequential(cbs(3, 32, 3, 2, act=nn.ReLU), cbs(32, 64, 3, act=nn.ReLU),
                                      nn.MaxPool2d(3, 2, 1), block(64, 64), block(64, 128, 2),
                                      block(128, 192, 1, 2), block(192, 256, 1, 4))
        self.ppm = PyramidPooling(256)
        self.head = nn.Sequential(cbs(512, 128, 3, act=nn.ReLU), nn.Conv2d(128, classes, 1))

    def forward(self, x):
        y = self.head(self.ppm(self.backbone(x)))
        return F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=False)


class SimpleBaseline(nn.Module):
    """Xiao et al.'s SimpleBaseline pose net on a ResNet-ish backbone (256x192 crop, stride 32):
    three 4x4 stride-2 transposed convs + BN + ReLU, a 1x1 to 17 heatmaps."""

    def __init__(self, joints=17):
        super().__init__()

        def basic(cin, cout, s):
            return nn.Sequential(cbs(cin, cout, 3, s, act=nn.ReLU), cbs(cout, cout, 3, act=nn.ReLU))

        self.backbone = nn.Sequential(cbs(3, 32, 3, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1),
                                      basic(32, 64, 1), basic(64, 128, 2), basic(128, 256, 2),
                                      basic(256, 512, 2))
        layers, cin = [], 512
        for _ in range(3):
            layers += [nn.ConvTranspose2d(cin, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128),
                       nn.ReLU()]
            cin = 128
        self.deconv = nn.Sequential(*layers)
        self.out = nn.Conv2d(128, joints, 1)

    def forward(self, x):
        return self.out(self.deconv(self.backbone(x)))


# name: (class, default size (HxW), input channels, lowest opset)
UNSEEN6 = {"yolov8_like": (YoloV8, "320x320", 3, 11),
           "yolox_focus_like": (YoloX, "320x320", 3, 11),
           "shufflenetv1_like": (ShuffleNetV1, "224x224", 3, 11),
           "xception_like": (Xception, "224x224", 3, 11),
           "octconv_like": (OctNet, "224x224", 3, 11),
           "enet_like": (ENet, "256x256", 3, 11),
           "hourglass_like": (StackedHourglass, "256x256", 3, 11),
           "pspnet_like": (PSPNet, "288x288", 3, 11),
           "simplebaseline_like": (SimpleBaseline, "256x192", 3, 11)}
