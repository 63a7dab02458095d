# Run: /usr/bin/python3 bench/export_arch.py --out /tmp/arch [--batch 1] [--size HxW] [--opset 13]
#          [model ...]
# Exports CNN architectures that are neither torchvision classifiers nor in any target list,
# written here from their papers (random weights, fixed seed, BatchNorm statistics re-estimated
# as export_seg.py does), to check Kiln on graphs nobody tuned for:
# - yolov5s: a YOLOv5-s style detector (CSP blocks with SiLU, SPPF's chained 5x5 max pools,
#   nearest 2x upsampling, a PAN neck, three detection heads reshaped / permuted / sigmoided);
# - unet: U-Net (double 3x3 conv + BN + ReLU, max-pool down, 2x2 ConvTranspose up, skip Concats);
# - style: Johnson et al.'s fast style transfer net (reflection Pad, InstanceNormalization,
#   residual blocks, nearest upsampling + conv, Tanh);
# - espcn: ESPCN super-resolution (Tanh convs, PixelShuffle = DepthToSpace);
# - raft_small: torchvision's RAFT-small optical flow (4 refinement iterations; the two frames
#   stacked as one 6-channel input; GridSample lookups into a correlation pyramid, a ConvGRU;
#   opset >= 16);
# - crnn: Shi et al.'s CRNN text recogniser (a VGG-style conv stack, two bidirectional LSTMs);
# - condconv: CondConv (Yang et al. 2019) blocks: each image's 3x3 weights mixed from 4 experts by
#   its own routing (GAP -> FC -> Sigmoid), batches as one grouped conv (groups = batch): convs
#   whose weights are computed every run;
# - ghostnet_like, res2net_like, sknet_like, mobilevit_like, convnextv2_like, poolformer_like,
#   hrnet_like: small classifiers of those families' blocks (unseen_net).
# Writes OUT/NAME[_bB_HxW].onnx with .input.npy and PyTorch's output .ref.npy (the first output
# for several) for `kiln bench --check` and bench/zoo_bench.py. Needs python3-torch / -onnx.
import argparse, os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from export_util import calibrate_bn, export_case

SEED = 1234


def cbs(cin, cout, k=1, s=1, p=None):
    """Conv + BN + SiLU (YOLOv5's Conv)."""
    p = k // 2 if p is None else p
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout),
                         nn.SiLU())


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut=True):
        super().__init__()
        self.cv1, self.cv2, self.add = cbs(c, c, 1), cbs(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, cin, cout, n=1, shortcut=True):
        super().__init__()
        h = cout // 2
        self.cv1, self.cv2, self.cv3 = cbs(cin, h), cbs(cin, h), cbs(2 * h, cout)
        self.m = nn.Sequential(*[Bottleneck(h, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.cv1, self.cv2 = cbs(cin, cin // 2), cbs(cin * 2, cout)

    def forward(self, x):
        x = self.cv1(x)
        y1 = F.max_pool2d(x, 5, 1, 2)
        y2 = F.max_pool2d(y1, 5, 1, 2)
        return self.cv2(torch.cat([x, y1, y2, F.max_pool2d(y2, 5, 1, 2)], 1))


class YoloV5s(nn.Module):
    """Width 0.5 / depth 0.33 of YOLOv5 v6: backbone, PAN neck, 3 anchors x 85 outputs."""

    def __init__(self, nc=80):
        super().__init__()
        self.b = nn.ModuleList([
            cbs(3, 32, 6, 2, 2), cbs(32, 64, 3, 2), C3(64, 64, 1), cbs(64, 128, 3, 2),
            C3(128, 128, 2), cbs(128, 256, 3, 2), C3(256, 256, 3), cbs(256, 512, 3, 2),
            C3(512, 512, 1), SPPF(512, 512)])
        self.h10, self.h13 = cbs(512, 256), C3(512, 256, 1, False)
        self.h14, self.h17 = cbs(256, 128), C3(256, 128, 1, False)
        self.h18, self.h20 = cbs(128, 128, 3, 2), C3(256, 256, 1, False)
        self.h21, self.h23 = cbs(256, 256, 3, 2), C3(512, 512, 1, False)
        self.no = nc + 5
        self.det = nn.ModuleList([nn.Conv2d(c, 3 * self.no, 1) for c in (128, 256, 512)])

    def forward(self, x):
        feats = []
        for i, m in enumerate(self.b):
            x = m(x)
            feats.append(x)
        p4, p3 = feats[6], feats[4]
        x10 = self.h10(x)
        x13 = self.h13(torch.cat([F.interpolate(x10, scale_factor=2.0, mode="nearest"), p4], 1))
        x14 = self.h14(x13)
        x17 = self.h17(torch.cat([F.interpolate(x14, scale_factor=2.0, mode="nearest"), p3], 1))
        x20 = self.h20(torch.cat([self.h18(x17), x14], 1))
        x23 = self.h23(torch.cat([self.h21(x20), x10], 1))
        outs = []
        for conv, f in zip(self.det, (x17, x20, x23)):
            y = conv(f)
            n, _, h, w = y.shape
            y = y.view(n, 3, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            outs.append(y.reshape(n, -1, self.no))
        return torch.cat(outs, 1)


def double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, cin=3, classes=2, w=(64, 128, 256, 512, 1024)):
        super().__init__()
        self.downs = nn.ModuleList([double_conv(cin, w[0])] +
                                   [double_conv(w[i], w[i + 1]) for i in range(4)])
        self.ups = nn.ModuleList([nn.ConvTranspose2d(w[i + 1], w[i], 2, 2) for i in range(4)])
        self.convs = nn.ModuleList([double_conv(2 * w[i], w[i]) for i in range(4)])
        self.out = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.downs):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for i in reversed(range(4)):
            x = self.convs[i](torch.cat([skips[i], self.ups[i](x)], 1))
        return self.out(x)


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, k, s=1, upsample=False, norm=True, relu=True):
        super().__init__()
        self.up, self.pad = upsample, k // 2
        self.conv = nn.Conv2d(cin, cout, k, s)
        self.norm = nn.InstanceNorm2d(cout, affine=True) if norm else None
        self.relu = relu

    def forward(self, x):
        if self.up:
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        x = self.conv(F.pad(x, [self.pad] * 4, mode="reflect"))
        if self.norm is not None:
            x = self.norm(x)
        return F.relu(x) if self.relu else x


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = ConvLayer(c, c, 3), ConvLayer(c, c, 3, relu=False)

    def forward(self, x):
        return x + self.b(self.a(x))


class StyleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            ConvLayer(3, 32, 9), ConvLayer(32, 64, 3, 2), ConvLayer(64, 128, 3, 2),
            *[Residual(128) for _ in range(5)], ConvLayer(128, 64, 3, upsample=True),
            ConvLayer(64, 32, 3, upsample=True), ConvLayer(32, 3, 9, norm=False, relu=False))

    def forward(self, x):
        return torch.tanh(self.net(x))


class ESPCN(nn.Module):
    def __init__(self, scale=3, c=3):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c, 64, 5, 1, 2), nn.Tanh(), nn.Conv2d(64, 32, 3, 1, 1),
                                 nn.Tanh(), nn.Conv2d(32, c * scale * scale, 3, 1, 1),
                                 nn.PixelShuffle(scale))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


class RaftSmall(nn.Module):
    """torchvision's raft_small on frames stacked along channels: its last flow estimate."""

    def __init__(self, iters=4):
        super().__init__()
        import torchvision
        self.raft, self.iters = torchvision.models.optical_flow.raft_small(weights=None), iters

    def forward(self, x):
        return self.raft(x[:, :3], x[:, 3:], num_flow_updates=self.iters)[-1]


class CRNN(nn.Module):
    """Shi et al.'s CRNN text recogniser: a VGG-style conv stack over a 32-pixel-high line image
    (pools of 2x1 late keep the columns), the columns as a sequence into two bidirectional
    LSTMs of 256 units, per-column scores over 37 symbols (CTC's blank included)."""

    def __init__(self, classes=37):
        super().__init__()
        def block(cin, cout, bn=False):
            return [nn.Conv2d(cin, cout, 3, 1, 1)] + ([nn.BatchNorm2d(cout)] if bn else []) + [
                nn.ReLU()]
        self.cnn = nn.Sequential(
            *block(1, 64), nn.MaxPool2d(2), *block(64, 128), nn.MaxPool2d(2),
            *block(128, 256, True), *block(256, 256), nn.MaxPool2d((2, 1)),
            *block(256, 512, True), *block(512, 512), nn.MaxPool2d((2, 1)),
            nn.Conv2d(512, 512, 2), nn.BatchNorm2d(512), nn.ReLU())
        self.rnn = nn.LSTM(512, 256, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # [W, N, C]
        return self.fc(self.rnn(f)[0])


class CondConv2d(nn.Module):
    """A 3x3 conv whose weights are sum_e r_e W_e, r = Sigmoid(FC(GAP(x))) per image."""

    def __init__(self, cin, cout, stride=1, experts=4):
        super().__init__()
        self.cin, self.cout, self.stride = cin, cout, stride
        self.route = nn.Linear(cin, experts)
        self.bank = nn.Parameter(torch.randn(experts, cout * cin * 9) * (2.0 / (cin * 9)) ** 0.5)

    def forward(self, x):
        b, _, h, w = x.shape
        r = torch.sigmoid(self.route(x.mean((2, 3))))  # [B, E]
        wt = (r @ self.bank).reshape(b * self.cout, self.cin, 3, 3)
        y = F.conv2d(x.reshape(1, b * self.cin, h, w), wt, None, self.stride, 1, groups=b)
        return y.reshape(b, self.cout, y.shape[2], y.shape[3])


class CondConvNet(nn.Module):
    """A stem conv, then CondConv + BN + ReLU blocks (two per stage, 64-256 channels), GAP, FC."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.ReLU())
        layers, cin = [], 32
        for cout in (64, 128, 256):
            for stride in (2, 1):
                layers += [CondConv2d(cin, cout, stride), nn.BatchNorm2d(cout), nn.ReLU()]
                cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.body(self.stem(x)).mean((2, 3)))


# Blocks of further CNN families (not in torchvision), each a small classifier of a stem, four
# stages of its block and a GAP + FC head (unseen_net below).


class GhostBlock(nn.Module):
    """GhostNet: half the channels from a 1x1 conv, half from a cheap 3x3 depthwise of those,
    concatenated; an SE in the middle; a stride-2 depthwise when downsampling."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        h = cout // 2
        self.primary = nn.Sequential(nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU())
        self.cheap = nn.Sequential(nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False),
                                   nn.BatchNorm2d(h), nn.ReLU())
        self.down = (nn.Sequential(nn.Conv2d(cout, cout, 3, stride, 1, groups=cout, bias=False),
                                   nn.BatchNorm2d(cout)) if stride > 1 else nn.Identity())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cout, cout // 4, 1), nn.ReLU(),
                                nn.Conv2d(cout // 4, cout, 1), nn.Hardsigmoid())
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        p = self.primary(x)
        y = self.down(torch.cat([p, self.cheap(p)], 1))
        return y * self.se(y) + self.short(x)


class Res2Block(nn.Module):
    """Res2Net: the 1x1's output split in 4; each part after the first gets a 3x3 conv of itself
    plus the previous part's output; concatenated, a 1x1, the residual."""

    def __init__(self, cin, cout, stride, scale=4):
        super().__init__()
        w = cout // scale
        self.scale, self.stride = scale, stride
        self.reduce = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv2d(w, w, 3, stride, 1, bias=False),
                                                 nn.BatchNorm2d(w), nn.ReLU())
                                   for _ in range(scale - 1))
        self.pool = nn.AvgPool2d(3, stride, 1)
        self.expand = nn.Sequential(nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        parts = torch.split(self.reduce(x), self.reduce[0].out_channels // self.scale, 1)
        outs, prev = [], None
        for i, conv in enumerate(self.convs):
            prev = conv(parts[i] if prev is None or self.stride > 1 else parts[i] + prev)
            outs.append(prev)
        outs.append(self.pool(parts[-1]) if self.stride > 1 else parts[-1])
        return F.relu(self.expand(torch.cat(outs, 1)) + self.short(x))


class SKBlock(nn.Module):
    """SKNet's selective kernel: a 3x3 and a dilated 3x3 grouped branch, their sum squeezed to
    attention weights softmaxed over the two branches, the weighted sum."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.b = nn.ModuleList(nn.Sequential(nn.Conv2d(cin, cout, 3, stride, d, dilation=d, groups=8,
                                                       bias=False), nn.BatchNorm2d(cout), nn.ReLU())
                               for d in (1, 2))
        self.fc = nn.Sequential(nn.Linear(cout, cout // 4), nn.ReLU(), nn.Linear(cout // 4, 2 * cout))

    def forward(self, x):
        u = [b(x) for b in self.b]
        a = self.fc((u[0] + u[1]).mean((2, 3))).reshape(x.shape[0], 2, -1).softmax(1)
        return u[0] * a[:, 0, :, None, None] + u[1] * a[:, 1, :, None, None]


class MobileViTBlock(nn.Module):
    """MobileViT: local 3x3 + 1x1, the map unfolded into 2x2 patches (reshape / permute), a
    transformer layer over patches, folded back, fused with the input by a 3x3."""

    def __init__(self, cin, cout, stride, d=64):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                                  nn.SiLU())
        self.local = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
                                   nn.SiLU(), nn.Conv2d(cout, d, 1, bias=False))
        self.tf = nn.TransformerEncoderLayer(d, 4, 2 * d, 0.0, batch_first=True,
                                             activation="gelu", norm_first=True)
        self.proj = nn.Conv2d(d, cout, 1, bias=False)
        self.fuse = nn.Conv2d(2 * cout, cout, 3, 1, 1)

    def forward(self, x):
        x = self.down(x)
        y = self.local(x)
        n, d, h, w = y.shape
        p = y.reshape(n, d, h // 2, 2, w // 2, 2).permute(0, 3, 5, 2, 4, 1).reshape(n * 4, -1, d)
        p = self.tf(p).reshape(n, 2, 2, h // 2, w // 2, d).permute(0, 5, 3, 1, 4, 2)
        return self.fuse(torch.cat([x, self.proj(p.reshape(n, d, h, w))], 1))


class ConvNeXtV2Block(nn.Module):
    """ConvNeXt V2: 7x7 depthwise, channels-last LayerNorm, Linear, GELU, global response
    normalisation (per-channel L2 over the map, divided by its channel mean), Linear."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 2 if stride > 1 else 1, stride)
        self.dw = nn.Conv2d(cout, cout, 7, 1, 3, groups=cout)
        self.norm = nn.LayerNorm(cout, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(cout, 4 * cout), nn.Linear(4 * cout, cout)
        self.gamma = nn.Parameter(torch.randn(4 * cout) * 0.1)
        self.beta = nn.Parameter(torch.randn(4 * cout) * 0.1)

    def forward(self, x):
        x = self.down(x)
        y = F.gelu(self.fc1(self.norm(self.dw(x).permute(0, 2, 3, 1))))
        gx = torch.norm(y, p=2, dim=(1, 2), keepdim=True)
        y = self.gamma * (y * (gx / (gx.mean(dim=-1, keepdim=True) + 1e-6))) + self.beta + y
        return x + self.fc2(y).permute(0, 3, 1, 2)


class PoolFormerBlock(nn.Module):
    """PoolFormer: x + (AvgPool3x3(GN(x)) - GN(x)), then x + MLP(GN(x)) of 1x1 convs with GELU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 3, stride, 1)
        self.n1, self.n2 = nn.GroupNorm(1, cout), nn.GroupNorm(1, cout)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.mlp = nn.Sequential(nn.Conv2d(cout, 4 * cout, 1), nn.GELU(), nn.Conv2d(4 * cout, cout, 1))

    def forward(self, x):
        x = self.down(x)
        y = self.n1(x)
        x = x + self.pool(y) - y
        return x + self.mlp(self.n2(x))


class HRFuse(nn.Module):
    """HRNet-style exchange: a full- and a half-resolution branch of basic blocks, each fused
    with the other (the low one upsampled 2x nearest after a 1x1, the high one by a strided 3x3)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.enter = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                                   nn.ReLU())
        self.low_in = nn.Conv2d(cout, 2 * cout, 3, 2, 1)
        self.hi = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1), nn.ReLU())
        self.lo = nn.Sequential(nn.Conv2d(2 * cout, 2 * cout, 3, 1, 1), nn.ReLU())
        self.lo2hi = nn.Conv2d(2 * cout, cout, 1)
        self.hi2lo = nn.Conv2d(cout, 2 * cout, 3, 2, 1)

    def forward(self, x):
        x = self.enter(x)
        h, l = self.hi(x), self.lo(self.low_in(x))
        h2 = F.relu(h + F.interpolate(self.lo2hi(l), scale_factor=2, mode="nearest"))
        l2 = F.relu(l + self.hi2lo(h))
        return h2 + F.interpolate(self.lo2hi(l2), scale_factor=2, mode="nearest")


def unseen_net(block, widths=(32, 64, 128, 256)):
    """A classifier made of `block`: a 3x3 stride-2 stem, one block per width (stride 2 after the
    first), GAP, FC."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(widths[0]), nn.ReLU())
            cin, blocks = widths[0], []
            for i, w in enumerate(widths):
                blocks.append(block(cin, w, 1 if i == 0 else 2))
                cin = w
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, 1000)

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean((2, 3)))

    return Net


# name: (class, default HxW, input channels, lowest opset)
MODELS = {"yolov5s": (YoloV5s, "640x640", 3, 7), "unet": (UNet, "256x256", 3, 7),
          "style": (StyleNet, "256x256", 3, 7), "espcn": (ESPCN, "224x224", 3, 7),
          "raft_small": (RaftSmall, "128x160", 6, 16), "crnn": (CRNN, "32x128", 1, 7),
          "condconv": (CondConvNet, "224x224", 3, 7),
          "ghostnet_like": (unseen_net(GhostBlock), "224x224", 3, 7),
          "res2net_like": (unseen_net(Res2Block), "224x224", 3, 7),
          "sknet_like": (unseen_net(SKBlock), "224x224", 3, 7),
          "mobilevit_like": (unseen_net(MobileViTBlock), "256x256", 3, 14),
          "convnextv2_like": (unseen_net(ConvNeXtV2Block), "224x224", 3, 7),
          "poolformer_like": (unseen_net(PoolFormerBlock), "224x224", 3, 7),
          "hrnet_like": (unseen_net(HRFuse), "224x224", 3, 11)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", help="HxW (default: the model's, MODELS)")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models or MODELS:
        make, default, channels, min_opset = MODELS[name]
        size = args.size or default
        hw = tuple(int(v) for v in size.split("x"))
        suffix = "" if (args.batch, size) == (1, default) else f"_b{args.batch}_{size}"
        torch.manual_seed(SEED)
        net = make()
        nbn = calibrate_bn(net, (2, channels, *hw), SEED + 1)
        x = np.random.default_rng(SEED).standard_normal((args.batch, channels, *hw),
                                                        dtype=np.float32)
        base = os.path.join(args.out, name + suffix)
        ref = export_case(net, x, base, max(args.opset, min_opset), "input", "output")
        print(f"{os.path.basename(base)}: bn={nbn} out={list(ref.shape)} "
              f"absmax={float(np.abs(ref).max()):.3g}", flush=True)


if __name__ == "__main__":
    main()
