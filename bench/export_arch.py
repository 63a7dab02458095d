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
#   hrnet_like and the second batch in bench/unseen_blocks.py (UNSEEN): small classifiers of
#   those families' blocks;
# - the fourth batch in bench/unseen_blocks2.py (UNSEEN2): restoration, attention, large-kernel
#   and gating blocks as classifiers, and whole models with other inputs / outputs
#   (super-resolution, a text detector, a face embedder and proposal net, a GAN generator,
#   attention U-Net, a denoiser);
# - the fifth batch in bench/unseen_blocks3.py (UNSEEN3): volumetric and 1-D nets (3-D U-Nets,
#   X3D / CSN video blocks, Wave-U-Net); --size is then DxHxW or L;
# - the sixth batch in bench/unseen_blocks4.py (UNSEEN4): nets of factorised and 1-D convs
#   (ERFNet, Inception-v4-like, a dilated TCN, Wav2Letter-like);
# - the seventh batch in bench/unseen_blocks5.py (UNSEEN5): other activations and norms
#   (CSPDarknet's Mish, a CycleGAN generator, a DDPM-style GroupNorm U-Net, SRResNet's PReLU);
# - the eighth batch in bench/unseen_blocks6.py (UNSEEN6): detector, segmenter and pose idioms
#   (YOLOv8's C2f / DFL head, YOLOX's Focus, ShuffleNet V1, Xception, octave convs, ENet's
#   MaxUnpool, a stacked hourglass, PSPNet's pyramid pooling, SimpleBaseline's deconv head);
# - the ninth batch in bench/unseen_blocks7.py (UNSEEN7): MobileNetV4's UIBs, FasterNet's partial
#   convs, HarDNet, DLA's trees, BiSeNet, Fast-SCNN, CenterNet, PP-LCNet, YOLOv7's ELAN / MP;
# - the tenth batch in bench/unseen_blocks8.py (UNSEEN8): U^2-Net, ESPNetv2, CGNet, DDRNet, IMDN,
#   BlazeFace, a PWC-Net-like flow net, SCNet, HINet, LEDNet, RDN, MobileNeXt, CIFAR ResNet-20;
# - the eleventh batch in bench/unseen_blocks9.py (UNSEEN9): Monodepth2, FSRCNN, HED, SPADE,
#   AdaIN, DnCNN, a RetinaNet head, Tiny YOLOv3, SOLO's CoordConv, MobileOne (train-time),
#   PeleeNet, ESRGAN, FastDepth;
# - the twelfth batch in bench/unseen_blocks10.py (UNSEEN10): OpenPose, LPRNet, TSM, a PointPillars
#   backbone, MODNet, an FCOS head, ICNet, a net of prime channel counts, StyleGAN2, pix2pix;
# - the thirteenth batch in bench/unseen_blocks11.py (UNSEEN11): NAFNet, RCAN, UNet++, DeepLabV3+,
#   MobileViTv2, STDC, RIFE, SRCNN, PP-PicoDet, RTMDet.
# Writes OUT/NAME[_bB_HxW].onnx with .input.npy and PyTorch's output .ref.npy (the first output
# for several) for `kiln bench --check` and bench/zoo_bench.py. Needs python3-torch / -onnx.
import argparse, os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from export_util import calibrate_bn, export_case
from unseen_blocks import UNSEEN
from unseen_blocks2 import UNSEEN2
from unseen_blocks3 import UNSEEN3
from unseen_blocks4 import UNSEEN4
from unseen_blocks5 import UNSEEN5
from unseen_blocks6 import UNSEEN6
from unseen_blocks7 import UNSEEN7
from unseen_blocks8 import UNSEEN8
from unseen_blocks9 import UNSEEN9
from unseen_blocks10 import UNSEEN10
from unseen_blocks11 import UNSEEN11

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


# name: (class, default HxW, input channels, lowest opset)
MODELS = {"yolov5s": (YoloV5s, "640x640", 3, 7), "unet": (UNet, "256x256", 3, 7),
          "style": (StyleNet, "256x256", 3, 7), "espcn": (ESPCN, "224x224", 3, 7),
          "raft_small": (RaftSmall, "128x160", 6, 16), "crnn": (CRNN, "32x128", 1, 7),
          "condconv": (CondConvNet, "224x224", 3, 7),
          **UNSEEN, **UNSEEN2, **UNSEEN3, **UNSEEN4, **UNSEEN5, **UNSEEN6,
          **UNSEEN7, **UNSEEN8, **UNSEEN9, **UNSEEN10, **UNSEEN11}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", help="HxW, DxHxW or L as the model takes (default: MODELS)")
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
