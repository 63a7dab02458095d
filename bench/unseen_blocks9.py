# Eleventh batch of unseen CNN families (session 46; bench/export_arch.py exports them by name):
# Monodepth2's depth decoder (reflection-padded 3x3 convs with ELU, nearest upsampling, sigmoid
# disparities on a 96x320 input), FSRCNN (PReLU, a 9x9 transposed conv of stride 3 with output
# padding), HED's side outputs (transposed convs of strides 2-16 cropped to the input and fused),
# SPADE's spatially modulated instance norm, AdaIN style transfer (per-channel mean / std of one
# image moved onto another's features), DnCNN (17 layers, the noise subtracted), a RetinaNet
# head (FPN P3-P7, one set of head weights applied to every level, outputs concatenated), Tiny
# YOLOv3 (LeakyReLU 0.1, a zero-padded stride-1 max pool, route concats), SOLO-style CoordConv
# (coordinate channels from linspace, features resized to a fixed grid), MobileOne's
# train-time blocks (parallel conv + BN branches and a BN identity, summed), PeleeNet's stem
# and two-way dense layers, ESRGAN's RRDBs (dense LeakyReLU convs, residual scaling) and
# FastDepth's NNConv5 decoder. Written from the papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F

from unseen_blocks7 import cbr


def strided_stages(chs):
    """An encoder of stride-2 stages (a strided 3x3 conv-BN-ReLU, then a 3x3 one) widening
    through chs from 3 input channels."""
    stages, cin = nn.ModuleList(), 3
    for c in chs:
        stages.append(nn.Sequential(cbr(cin, c, 3, 2), cbr(c, c, 3)))
        cin = c
    return stages


def stage_outputs(stages, x):
    """Every stage's output, in order."""
    outs = []
    for s in stages:
        x = s(x)
        outs.append(x)
    return outs


def rconv(cin, cout, act=True):
    """Monodepth2's Conv3x3: reflection pad 1, 3x3 conv, ELU."""
    layers = [nn.ReflectionPad2d(1), nn.Conv2d(cin, cout, 3)]
    return nn.Sequential(*layers, nn.ELU()) if act else nn.Sequential(*layers)


class Monodepth2(nn.Module):
    """A ResNet-style encoder (strides 2..32) and Monodepth2's depth decoder: at each scale two
    reflection-padded convs with ELU around a nearest 2x upsampling and the encoder's skip,
    sigmoid disparity heads at four scales (the finest is the output, the others summed in as
    a scalar each so that they stay in the graph)."""

    def __init__(self):
        super().__init__()
        chs = (16, 24, 32, 48, 64)
        self.enc = strided_stages(chs)
        dec = (8, 16, 24, 32, 48)
        self.up0 = nn.ModuleList()
        self.up1 = nn.ModuleList()
        self.disp = nn.ModuleList()
        for i in range(4, -1, -1):
            cin = chs[-1] if i == 4 else dec[i + 1]
            self.up0.append(rconv(cin, dec[i]))
            self.up1.append(rconv(dec[i] + (chs[i - 1] if i > 0 else 0), dec[i]))
            if i < 4:
                self.disp.append(rconv(dec[i], 1, act=False))

    def forward(self, x):
        feats = stage_outputs(self.enc, x)
        y, extra, out = feats[-1], 0, None
        for k, i in enumerate(range(4, -1, -1)):
            y = F.interpolate(self.up0[k](y), scale_factor=2.0, mode="nearest")
            if i > 0:
                y = torch.cat([y, feats[i - 1]], 1)
            y = self.up1[k](y)
            if i < 4:
                d = torch.sigmoid(self.disp[k - 1](y))
                if i == 0:
                    out = d
                else:
                    extra = extra + d.mean()
        return out + extra


class FSRCNN(nn.Module):
    """FSRCNN x3: 5x5 feature extraction, 1x1 shrink, four 3x3 maps, 1x1 expand (PReLU after
    each) and a 9x9 transposed conv of stride 3 (padding 4, output padding 2)."""

    def __init__(self, d=32, s=12, m=4, scale=3):
        super().__init__()
        layers = [nn.Conv2d(1, d, 5, padding=2), nn.PReLU(d), nn.Conv2d(d, s, 1), nn.PReLU(s)]
        for _ in range(m):
            layers += [nn.Conv2d(s, s, 3, padding=1), nn.PReLU(s)]
        layers += [nn.Conv2d(s, d, 1), nn.PReLU(d)]
        self.body = nn.Sequential(*layers)
        self.up = nn.ConvTranspose2d(d, 1, 9, scale, 4, output_padding=scale - 1)

    def forward(self, x):
        return self.up(self.body(x))


class HED(nn.Module):
    """HED: a VGG-style net of five stages; each stage's side output (1x1 conv to one channel)
    is upsampled by a transposed conv of the stage's stride (kernel 2x stride), cropped to the
    input's size, and the five are fused by a 1x1 conv; sigmoid."""

    def __init__(self):
        super().__init__()
        chs, reps = (16, 32, 48, 64, 64), (2, 2, 3, 3, 3)
        self.stages = nn.ModuleList()
        self.side = nn.ModuleList()
        self.up = nn.ModuleList()
        cin = 3
        for i, (c, r) in enumerate(zip(chs, reps)):
            layers = [nn.MaxPool2d(2, 2, ceil_mode=True)] if i > 0 else []
            for _ in range(r):
                layers += [nn.Conv2d(cin, c, 3, padding=1), nn.ReLU()]
                cin = c
            self.stages.append(nn.Sequential(*layers))
            self.side.append(nn.Conv2d(c, 1, 1))
            st = 2 ** i
            self.up.append(nn.ConvTranspose2d(1, 1, 2 * st, st, bias=False) if st > 1 else None)
        self.fuse = nn.Conv2d(5, 1, 1)

    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        sides, y = [], x
        for stage, side, up in zip(self.stages, self.side, self.up):
            y = stage(y)
            s = side(y)
            if up is not None:
                s = up(s)
                off = up.stride[0] // 2
                s = s[:, :, off:off + h, off:off + w]
            sides.append(s)
        return torch.sigmoid(self.fuse(torch.cat(sides, 1)))


class SPADE(nn.Module):
    """SPADE: instance norm without affine, then x * (1 + gamma) + beta with gamma and beta
    computed per pixel by convs from a segmentation-like map resized to x's size."""

    def __init__(self, c, label_c, hidden=32):
        super().__init__()
        self.norm = nn.InstanceNorm2d(c, affine=False)
        self.shared = nn.Sequential(nn.Conv2d(label_c, hidden, 3, padding=1), nn.ReLU())
        self.gamma = nn.Conv2d(hidden, c, 3, padding=1)
        self.beta = nn.Conv2d(hidden, c, 3, padding=1)

    def forward(self, x, seg):
        a = self.shared(F.interpolate(seg, size=x.shape[2:], mode="nearest"))
        return self.norm(x) * (1 + self.gamma(a)) + self.beta(a)


class SPADEBlock(nn.Module):
    def __init__(self, cin, cout, label_c):
        super().__init__()
        self.n0, self.c0 = SPADE(cin, label_c), nn.Conv2d(cin, cout, 3, padding=1)
        self.n1, self.c1 = SPADE(cout, label_c), nn.Conv2d(cout, cout, 3, padding=1)
        self.ns, self.cs = SPADE(cin, label_c), nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x, seg):
        y = self.c0(F.leaky_relu(self.n0(x, seg), 0.2))
        y = self.c1(F.leaky_relu(self.n1(y, seg), 0.2))
        return y + self.cs(self.ns(x, seg))


class SPADEGen(nn.Module):
    """A small SPADE generator: the label map (a softmax over 8 classes computed from the input
    image, standing in for a segmentation) downsampled to a 8x8 start, SPADE residual blocks
    with nearest 2x upsampling between them, a tanh image."""

    def __init__(self, classes=8):
        super().__init__()
        self.label = nn.Conv2d(3, classes, 3, padding=1)
        self.fc = nn.Conv2d(classes, 64, 3, padding=1)
        self.blocks = nn.ModuleList([SPADEBlock(64, 64, classes), SPADEBlock(64, 32, classes),
                                     SPADEBlock(32, 16, classes), SPADEBlock(16, 16, classes)])
        self.out = nn.Conv2d(16, 3, 3, padding=1)

    def forward(self, x):
        seg = torch.softmax(self.label(x), 1)
        y = self.fc(F.interpolate(seg, size=(x.shape[2] // 8, x.shape[3] // 8), mode="nearest"))
        for i, b in enumerate(self.blocks):
            y = b(y, seg)
            if i < 3:
                y = F.interpolate(y, scale_factor=2.0, mode="nearest")
        return torch.tanh(self.out(F.leaky_relu(y, 0.2)))


def adain(c, s, eps=1e-5):
    """Adaptive instance norm: c's per-channel mean and std over H, W replaced by s's."""
    cm, sm = c.mean((2, 3), keepdim=True), s.mean((2, 3), keepdim=True)
    cs = (c.var((2, 3), keepdim=True, unbiased=False) + eps).sqrt()
    ss = (s.var((2, 3), keepdim=True, unbiased=False) + eps).sqrt()
    return (c - cm) / cs * ss + sm


class AdaINNet(nn.Module):
    """AdaIN style transfer: one encoder (reflection-padded 3x3 convs, max pools) for the
    content (channels 0-2) and the style (channels 3-5) image, AdaIN, blended with the content
    features (alpha 0.8), a mirrored decoder with nearest upsampling."""

    def __init__(self):
        super().__init__()

        def rc(cin, cout):
            return nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(cin, cout, 3), nn.ReLU())

        self.enc = nn.Sequential(nn.Conv2d(3, 3, 1), rc(3, 16), rc(16, 16), nn.MaxPool2d(2),
                                 rc(16, 32), rc(32, 32), nn.MaxPool2d(2), rc(32, 64))
        self.dec = nn.Sequential(rc(64, 32), nn.Upsample(scale_factor=2, mode="nearest"),
                                 rc(32, 32), rc(32, 16), nn.Upsample(scale_factor=2,
                                                                     mode="nearest"),
                                 rc(16, 16), nn.ReflectionPad2d(1), nn.Conv2d(16, 3, 3))

    def forward(self, x):
        c, s = self.enc(x[:, :3]), self.enc(x[:, 3:])
        t = adain(c, s)
        return self.dec(0.8 * t + 0.2 * c)


class DnCNN(nn.Module):
    """DnCNN-S: 17 3x3 conv layers of 64 channels (BN + ReLU inside), predicting the noise,
    which is subtracted from the input."""

    def __init__(self, depth=17, c=64):
        super().__init__()
        layers = [nn.Conv2d(1, c, 3, padding=1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
        layers.append(nn.Conv2d(c, 1, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return x - self.body(x)


class RetinaNetHead(nn.Module):
    """A RetinaNet: a small ResNet-style backbone (C3-C5), an FPN (lateral 1x1s, nearest top-down
    upsampling, 3x3 outputs; P6 a stride-2 conv of C5, P7 of ReLU(P6)), one classification and
    one box subnet (four 3x3 + ReLU each) shared by all five levels, outputs permuted to
    [N, H*W*A, K] and concatenated over the levels."""

    def __init__(self, classes=8, anchors=3, f=48):
        super().__init__()
        self.k, self.a = classes, anchors
        chs = (16, 32, 64, 96, 128)
        self.stages = strided_stages(chs)
        self.lat = nn.ModuleList([nn.Conv2d(c, f, 1) for c in chs[2:]])
        self.fpn = nn.ModuleList([nn.Conv2d(f, f, 3, padding=1) for _ in chs[2:]])
        self.p6 = nn.Conv2d(chs[-1], f, 3, 2, 1)
        self.p7 = nn.Conv2d(f, f, 3, 2, 1)

        def subnet(out):
            layers = []
            for _ in range(4):
                layers += [nn.Conv2d(f, f, 3, padding=1), nn.ReLU()]
            return nn.Sequential(*layers, nn.Conv2d(f, out, 3, padding=1))

        self.cls = subnet(anchors * classes)
        self.box = subnet(anchors * 4)

    def forward(self, x):
        c3, c4, c5 = stage_outputs(self.stages, x)[2:]
        p5 = self.lat[2](c5)
        p4 = self.lat[1](c4) + F.interpolate(p5, size=c4.shape[2:], mode="nearest")
        p3 = self.lat[0](c3) + F.interpolate(p4, size=c3.shape[2:], mode="nearest")
        p6 = self.p6(c5)
        levels = [self.fpn[0](p3), self.fpn[1](p4), self.fpn[2](p5), p6, self.p7(F.relu(p6))]
        n = x.shape[0]
        cls = [self.cls(p).permute(0, 2, 3, 1).reshape(n, -1, self.k) for p in levels]
        box = [self.box(p).permute(0, 2, 3, 1).reshape(n, -1, 4) for p in levels]
        return torch.cat([torch.sigmoid(torch.cat(cls, 1)), torch.cat(box, 1)], 2)


def cbl(cin, cout, k=3, s=1):
    """Darknet's conv + BN + LeakyReLU(0.1)."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.LeakyReLU(0.1))


class TinyYoloV3(nn.Module):
    """Tiny YOLOv3: 3x3 conv-BN-leaky layers with 2x2 max pools, the sixth pool of stride 1
    after a (0, 1, 0, 1) zero pad, a 1x1 route, a stride-32 head and a stride-16 head fed by the
    route upsampled (nearest) and concatenated with an earlier layer; both heads flattened and
    concatenated."""

    def __init__(self, classes=8, anchors=3):
        super().__init__()
        out = anchors * (5 + classes)
        self.l0 = nn.Sequential(cbl(3, 8), nn.MaxPool2d(2, 2), cbl(8, 16), nn.MaxPool2d(2, 2),
                                cbl(16, 32), nn.MaxPool2d(2, 2), cbl(32, 64), nn.MaxPool2d(2, 2),
                                cbl(64, 128))
        self.l1 = nn.Sequential(nn.MaxPool2d(2, 2), cbl(128, 256), nn.ZeroPad2d((0, 1, 0, 1)),
                                nn.MaxPool2d(2, 1), cbl(256, 512), cbl(512, 128, 1))
        self.head1 = nn.Sequential(cbl(128, 256), nn.Conv2d(256, out, 1))
        self.route = cbl(128, 64, 1)
        self.head2 = nn.Sequential(cbl(64 + 128, 128), nn.Conv2d(128, out, 1))

    def forward(self, x):
        a = self.l0(x)
        b = self.l1(a)
        y1 = self.head1(b)
        r = F.interpolate(self.route(b), scale_factor=2.0, mode="nearest")
        y2 = self.head2(torch.cat([r, a], 1))
        n = x.shape[0]
        return torch.cat([y1.reshape(n, y1.shape[1], -1), y2.reshape(n, y2.shape[1], -1)], 2)


def coords(x):
    """Two channels of x's pixel coordinates in [-1, 1] (SOLO's CoordConv), batch-expanded."""
    n, _, h, w = x.shape
    ys = torch.linspace(-1, 1, h)
    xs = torch.linspace(-1, 1, w)
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([xx, yy]).unsqueeze(0).expand(n, 2, h, w)


class SOLO(nn.Module):
    """SOLO-style heads on an FPN level: the mask branch on the features with two coordinate
    channels concatenated (CoordConv), upsampled 2x bilinearly; the category branch on the
    features resized (bilinear) to a fixed S x S grid; GroupNorm(8) in both heads."""

    def __init__(self, grid=12, classes=8, f=32):
        super().__init__()
        self.grid = grid
        self.backbone = nn.Sequential(cbr(3, 16, 3, 2), cbr(16, 32, 3, 2), cbr(32, f, 3, 2))

        def gn(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                                 nn.GroupNorm(8, cout), nn.ReLU())

        self.mask = nn.Sequential(gn(f + 2, f), gn(f, f), nn.Conv2d(f, grid * grid // 4, 1))
        self.cate = nn.Sequential(gn(f, f), gn(f, f), nn.Conv2d(f, classes, 3, padding=1))

    def forward(self, x):
        p = self.backbone(x)
        m = self.mask(torch.cat([p, coords(p)], 1))
        m = torch.sigmoid(F.interpolate(m, scale_factor=2.0, mode="bilinear",
                                        align_corners=False))
        c = torch.sigmoid(self.cate(F.interpolate(p, size=(self.grid, self.grid),
                                                  mode="bilinear", align_corners=False)))
        n = x.shape[0]
        return torch.cat([m.reshape(n, -1), c.reshape(n, -1)], 1)


class MobileOneBlock(nn.Module):
    """MobileOne's train-time block: k parallel conv + BN branches of kernel `k_size`, a 1x1
    conv + BN branch (3x3 blocks only) and a BN identity branch (when shapes allow), summed,
    ReLU. Depthwise (groups = channels) or pointwise."""

    def __init__(self, cin, cout, k_size, s, groups, k=3):
        super().__init__()

        def cb(ks):
            return nn.Sequential(nn.Conv2d(cin, cout, ks, s, ks // 2, groups=groups, bias=False),
                                 nn.BatchNorm2d(cout))

        self.branches = nn.ModuleList([cb(k_size) for _ in range(k)])
        self.scale = cb(1) if k_size > 1 else None
        self.skip = nn.BatchNorm2d(cout) if cin == cout and s == 1 else None

    def forward(self, x):
        y = sum(b(x) for b in self.branches)
        if self.scale is not None:
            y = y + self.scale(x)
        if self.skip is not None:
            y = y + self.skip(x)
        return F.relu(y)


class MobileOne(nn.Module):
    """A small MobileOne-S0 as trained (not reparameterised): each stage's blocks a depthwise
    3x3 MobileOneBlock then a pointwise one; GAP + FC."""

    def __init__(self, classes=10):
        super().__init__()
        layers = [MobileOneBlock(3, 24, 3, 2, 1, k=1)]
        cin = 24
        for cout, n, s in ((24, 1, 2), (48, 2, 2), (96, 2, 2), (160, 1, 2)):
            for i in range(n):
                st = s if i == 0 else 1
                layers += [MobileOneBlock(cin, cin, 3, st, cin), MobileOneBlock(cin, cout, 1, 1, 1)]
                cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.body(x).mean((2, 3)))


class PeleeStem(nn.Module):
    """PeleeNet's stem: a stride-2 3x3, then a 1x1 -> stride-2 3x3 branch beside a 2x2 max pool,
    concatenated, and a 1x1."""

    def __init__(self, c=32):
        super().__init__()
        self.c0 = cbr(3, c, 3, 2)
        self.b1 = nn.Sequential(cbr(c, c // 2, 1), cbr(c // 2, c, 3, 2))
        self.pool = nn.MaxPool2d(2, 2)
        self.c1 = cbr(2 * c, c, 1)

    def forward(self, x):
        x = self.c0(x)
        return self.c1(torch.cat([self.b1(x), self.pool(x)], 1))


class TwoWayDense(nn.Module):
    """PeleeNet's two-way dense layer: a 1x1 -> 3x3 branch and a 1x1 -> 3x3 -> 3x3 branch,
    each growth / 2 channels, concatenated with the input."""

    def __init__(self, cin, growth, bottleneck):
        super().__init__()
        g, b = growth // 2, bottleneck
        self.b1 = nn.Sequential(cbr(cin, b, 1), cbr(b, g, 3))
        self.b2 = nn.Sequential(cbr(cin, b, 1), cbr(b, g, 3), cbr(g, g, 3))

    def forward(self, x):
        return torch.cat([x, self.b1(x), self.b2(x)], 1)


class PeleeNet(nn.Module):
    def __init__(self, classes=10, growth=16):
        super().__init__()
        layers = [PeleeStem(32)]
        cin = 32
        for i, (n, bw) in enumerate(((3, 1), (4, 2), (6, 4), (4, 4))):
            for _ in range(n):
                layers.append(TwoWayDense(cin, growth, growth // 2 * bw))
                cin += growth
            layers.append(cbr(cin, cin, 1))
            if i < 3:
                layers.append(nn.AvgPool2d(2, 2))
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.body(x).mean((2, 3)))


class RDB5(nn.Module):
    """ESRGAN's residual dense block: five 3x3 convs each reading the concatenation of the input
    and every earlier output (LeakyReLU 0.2 but the last), scaled by 0.2, added to the input."""

    def __init__(self, c=32, g=16):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(c + i * g, g if i < 4 else c, 3, padding=1)
                                    for i in range(5)])

    def forward(self, x):
        feats = [x]
        for i, conv in enumerate(self.convs):
            y = conv(torch.cat(feats, 1))
            if i < 4:
                feats.append(F.leaky_relu(y, 0.2))
        return x + 0.2 * y


class RRDBNet(nn.Module):
    """ESRGAN x4: conv, RRDBs (three RDB5 and a 0.2-scaled residual each), trunk conv and long
    skip, two nearest 2x upsamplings with conv + LeakyReLU, two output convs."""

    def __init__(self, c=32, blocks=3):
        super().__init__()
        self.first = nn.Conv2d(3, c, 3, padding=1)
        self.rrdbs = nn.ModuleList([nn.ModuleList([RDB5(c) for _ in range(3)])
                                    for _ in range(blocks)])
        self.trunk = nn.Conv2d(c, c, 3, padding=1)
        self.up1 = nn.Conv2d(c, c, 3, padding=1)
        self.up2 = nn.Conv2d(c, c, 3, padding=1)
        self.hr = nn.Conv2d(c, c, 3, padding=1)
        self.last = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x):
        f = self.first(x)
        y = f
        for rrdb in self.rrdbs:
            z = y
            for rdb in rrdb:
                z = rdb(z)
            y = y + 0.2 * z
        y = f + self.trunk(y)
        y = F.leaky_relu(self.up1(F.interpolate(y, scale_factor=2.0, mode="nearest")), 0.2)
        y = F.leaky_relu(self.up2(F.interpolate(y, scale_factor=2.0, mode="nearest")), 0.2)
        return self.last(F.leaky_relu(self.hr(y), 0.2))


def dws(cin, cout, s=1, k=3):
    """A depthwise k x k conv and a 1x1, each with BN + ReLU (MobileNet's separable conv)."""
    return nn.Sequential(cbr(cin, cin, k, s, groups=cin), cbr(cin, cout, 1))


class FastDepth(nn.Module):
    """FastDepth: a MobileNet encoder (separable convs, stride 32) and the NNConv5 decoder: five
    5x5 depthwise + 1x1 stages each followed by nearest 2x upsampling, additive skips from the
    encoder, a 1x1 to one depth channel, ReLU."""

    def __init__(self):
        super().__init__()
        self.stem = cbr(3, 16, 3, 2)
        self.enc = nn.ModuleList([dws(16, 32), dws(32, 48, 2), dws(48, 48), dws(48, 64, 2),
                                  dws(64, 96, 2), dws(96, 96), dws(96, 128, 2)])
        dec = (96, 64, 48, 32, 16)
        self.dec = nn.ModuleList()
        cin = 128
        for c in dec:
            self.dec.append(dws(cin, c, k=5))
            cin = c
        self.out = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        x = self.stem(x)
        outs = []
        for e in self.enc:
            x = e(x)
            outs.append(x)
        x1, x2, x3 = outs[0], outs[2], outs[3]  # strides 2, 4, 8
        y = x
        for i, d in enumerate(self.dec):
            y = F.interpolate(d(y), scale_factor=2.0, mode="nearest")
            if i == 1:
                y = y + x3
            elif i == 2:
                y = y + x2
            elif i == 3:
                y = y + x1
        return F.relu(self.out(y))


# name: (class, default HxW, input channels, lowest opset)
UNSEEN9 = {"monodepth2_like": (Monodepth2, "96x320", 3, 11),
           "fsrcnn_like": (FSRCNN, "64x64", 1, 11),
           "hed_like": (HED, "150x150", 3, 11),
           "spade_like": (SPADEGen, "128x128", 3, 11),
           "adain_like": (AdaINNet, "128x128", 6, 11),
           "dncnn_like": (DnCNN, "96x96", 1, 11),
           "retinanet_like": (RetinaNetHead, "256x320", 3, 11),
           "tinyyolov3_like": (TinyYoloV3, "320x320", 3, 11),
           "solo_like": (SOLO, "192x256", 3, 11),
           "mobileone_like": (MobileOne, "224x224", 3, 11),
           "peleenet_like": (PeleeNet, "224x224", 3, 11),
           "esrgan_like": (RRDBNet, "48x48", 3, 11),
           "fastdepth_like": (FastDepth, "224x224", 3, 11)}
