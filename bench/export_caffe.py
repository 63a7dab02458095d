# Run: /usr/bin/python3 bench/export_caffe.py --out /tmp/caffe [--batch 1] [--opset 13] [model ...]
# Exports Caffe-era classifiers with cross-channel LRN (the ONNX model zoo's bvlc_alexnet,
# caffenet and bvlc_googlenet have these graphs; torchvision has none of them): BVLC AlexNet
# (grouped convs, LRN after ReLU), CaffeNet (pooling before LRN), BVLC GoogLeNet (Inception v1:
# LRN, ceil-mode pooling). Random weights (fixed seed, He-normal so activations keep their
# scale without BatchNorm) and an input of Caffe's range (N(0,1) x 50, like mean-subtracted
# pixels): LRN's alpha / size * sum(x^2) is then of the order of its bias, as in the trained
# nets. Writes OUT/NAME.onnx (LRN exported as ONNX's LRN op; with --torch-lrn as PyTorch's own
# export writes nn.LocalResponseNorm, OUT/NAME_tlrn.onnx), NAME.input.npy and PyTorch's
# output NAME.ref.npy for `kiln bench --check` and bench/zoo_bench.py. Needs Debian's
# python3-torch / -onnx.
import argparse, os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from export_util import export_case

SEED = 1234
TORCH_LRN = False


class _LrnFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        return F.local_response_norm(x, size, alpha, beta, k)

    @staticmethod
    def symbolic(g, x, size, alpha, beta, k):
        return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=k)


class LRN(nn.Module):
    """Caffe's ACROSS_CHANNELS LRN. For an odd size PyTorch's window is ONNX's."""

    def __init__(self, size=5, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        assert size % 2 == 1
        self.args = (size, alpha, beta, k)

    def forward(self, x):
        if TORCH_LRN:  # PyTorch's own export: a decomposition (3-D average pool, an If)
            return F.local_response_norm(x, *self.args)
        return _LrnFn.apply(x, *self.args)


def conv(cin, cout, k, stride=1, pad=0, groups=1):
    return [nn.Conv2d(cin, cout, k, stride, pad, groups=groups), nn.ReLU(inplace=True)]


def alexnet(pool_first=False):
    """BVLC AlexNet (227x227); pool_first: CaffeNet (pool, then LRN)."""
    def stage(layers):
        pool, norm = nn.MaxPool2d(3, 2), LRN()
        return layers + ([pool, norm] if pool_first else [norm, pool])
    return nn.Sequential(
        *stage(conv(3, 96, 11, 4)), *stage(conv(96, 256, 5, 1, 2, groups=2)),
        *conv(256, 384, 3, 1, 1), *conv(384, 384, 3, 1, 1, groups=2),
        *conv(384, 256, 3, 1, 1, groups=2), nn.MaxPool2d(3, 2), nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True), nn.Dropout(),
        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(), nn.Linear(4096, 1000),
        nn.Softmax(dim=1))


class Inception(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, cp):
        super().__init__()
        self.b1 = nn.Sequential(*conv(cin, c1, 1))
        self.b3 = nn.Sequential(*conv(cin, c3r, 1), *conv(c3r, c3, 3, 1, 1))
        self.b5 = nn.Sequential(*conv(cin, c5r, 1), *conv(c5r, c5, 5, 1, 2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), *conv(cin, cp, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


def googlenet():
    """BVLC GoogLeNet (224x224), without the training-only auxiliary heads."""
    pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)
    return nn.Sequential(
        *conv(3, 64, 7, 2, 3), pool(), LRN(), *conv(64, 64, 1), *conv(64, 192, 3, 1, 1), LRN(),
        pool(), Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64),
        pool(), Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
        Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
        Inception(528, 256, 160, 320, 32, 128, 128), pool(),
        Inception(832, 256, 160, 320, 32, 128, 128), Inception(832, 384, 192, 384, 48, 128, 128),
        nn.AvgPool2d(7, 1), nn.Flatten(), nn.Dropout(0.4), nn.Linear(1024, 1000),
        nn.Softmax(dim=1))


MODELS = {"bvlc_alexnet": (alexnet, 227), "caffenet": (lambda: alexnet(True), 227),
          "bvlc_googlenet": (googlenet, 224)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--torch-lrn", action="store_true",
                    help="export LRN as PyTorch does (a decomposition), files NAME_tlrn.*")
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    global TORCH_LRN
    TORCH_LRN = args.torch_lrn
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models or MODELS:
        make, size = MODELS[name]
        torch.manual_seed(SEED)
        net = make().eval()
        for m in net.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.uniform_(m.bias, -0.1, 0.1)
        x = np.random.default_rng(SEED).standard_normal((args.batch, 3, size, size),
                                                        dtype=np.float32) * 50
        # Logits of std ~3 (the He-scaled ones are in the hundreds: Softmax would be one-hot).
        with torch.no_grad():
            logits = net[:-1](torch.from_numpy(x))
            net[-2].weight *= 3 / float(logits.std())
            net[-2].bias *= 3 / float(logits.std())
        suffix = ("" if args.batch == 1 else f"_b{args.batch}") + ("_tlrn" if TORCH_LRN else "")
        base = os.path.join(args.out, name + suffix)
        ref = export_case(net, x, base, args.opset, "data", "prob")
        print(f"{os.path.basename(base)}: out={list(ref.shape)} max={float(ref.max()):.3g} "
              f"top1={int(ref[0].argmax())}", flush=True)


if __name__ == "__main__":
    main()
