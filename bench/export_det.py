# Run: /usr/bin/python3 bench/export_det.py --out /tmp/det [model ...]
# Exports detectors the way deployments export them, to check Kiln on them (random weights,
# fixed seed, BatchNorm statistics re-estimated as export_seg.py does):
# - torchvision's detection backbones and dense heads, box decoding and NMS left outside the
#   graph (their data-dependent shapes are what Kiln does not run): retinanet_r50_fpn_v2,
#   fcos_r50_fpn (384x512), ssd300_vgg16, ssdlite320_mbv3, frcnn_mbv3_rpn (Faster R-CNN's
#   MobileNetV3 FPN backbone and RPN head, 320x416); the class logits and box regressions
#   concatenated as one output;
# - centernet: a CenterNet-style detector with its decoding in the graph (3x3 max-pool peaks,
#   top-K over classes x pixels, floor division and % for class and pixel, torch.gather of
#   sizes and offsets at the peaks), 256x256.
# Writes OUT/NAME.onnx with .input.npy and PyTorch's output .ref.npy, for `kiln bench --check`
# and bench/zoo_bench.py. Needs python3-torch, -torchvision, -onnx.
import argparse, os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models import detection as D

from export_util import calibrate_bn, export_case

SEED = 1234


class DenseHeads(nn.Module):
    """A torchvision detector's backbone (+ FPN) and dense head outputs, concatenated."""

    def __init__(self, make, kind):
        super().__init__()
        self.m, self.kind = make(weights=None, weights_backbone=None).eval(), kind

    def forward(self, x):
        f = self.m.backbone(x)
        feats = list(f.values()) if isinstance(f, dict) else [f]
        if self.kind == "rpn":
            obj, box = self.m.rpn.head(feats)
            return torch.cat([o.flatten(1) for o in obj] + [b.flatten(1) for b in box], 1)
        o = self.m.head(feats)
        return torch.cat([o["cls_logits"], o["bbox_regression"]], 2)


class CenterNet(nn.Module):
    """A small conv backbone, heatmap / size / offset heads, and CenterNet's decoding."""

    def __init__(self, classes=20, k=50):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1),
                                  nn.ReLU(), nn.Conv2d(64, 64, 3, 1, 1), nn.ReLU())
        self.hm, self.wh, self.reg = nn.Conv2d(64, classes, 1), nn.Conv2d(64, 2, 1), nn.Conv2d(64, 2, 1)
        self.k = k

    def forward(self, x):
        f = self.body(x)
        heat, wh, reg = torch.sigmoid(self.hm(f)), self.wh(f), self.reg(f)
        b, c, h, w = heat.shape
        heat = heat * (F.max_pool2d(heat, 3, 1, 1) == heat).float()
        scores, inds = torch.topk(heat.view(b, -1), self.k)
        cls = torch.div(inds, h * w, rounding_mode="floor")
        pix = inds % (h * w)
        ys, xs = torch.div(pix, w, rounding_mode="floor").float(), (pix % w).float()
        idx = pix.unsqueeze(2).expand(b, self.k, 2)
        whk = wh.view(b, 2, -1).permute(0, 2, 1).gather(1, idx)
        regk = reg.view(b, 2, -1).permute(0, 2, 1).gather(1, idx)
        cx, cy = xs + regk[..., 0], ys + regk[..., 1]
        return torch.stack([cx - whk[..., 0] / 2, cy - whk[..., 1] / 2, cx + whk[..., 0] / 2,
                            cy + whk[..., 1] / 2, scores, cls.float()], 2)


# name: (constructor, input shape)
MODELS = {
    "retinanet_r50_fpn_v2": (lambda: DenseHeads(D.retinanet_resnet50_fpn_v2, "dense"),
                             (1, 3, 384, 512)),
    "fcos_r50_fpn": (lambda: DenseHeads(D.fcos_resnet50_fpn, "dense"), (1, 3, 384, 512)),
    "ssd300_vgg16": (lambda: DenseHeads(D.ssd300_vgg16, "dense"), (1, 3, 300, 300)),
    "ssdlite320_mbv3": (lambda: DenseHeads(D.ssdlite320_mobilenet_v3_large, "dense"),
                        (1, 3, 320, 320)),
    "frcnn_mbv3_rpn": (lambda: DenseHeads(D.fasterrcnn_mobilenet_v3_large_fpn, "rpn"),
                       (1, 3, 320, 416)),
    "centernet": (CenterNet, (1, 3, 256, 256)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models or MODELS:
        make, shape = MODELS[name]
        torch.manual_seed(SEED)
        net = make()
        nbn = calibrate_bn(net, (2, *shape[1:]), SEED + 1)
        x = np.random.default_rng(SEED).random(shape, dtype=np.float32)
        ref = export_case(net, x, os.path.join(args.out, name), args.opset, "input", "output")
        print(f"{name}: bn={nbn} out={list(ref.shape)} absmax={float(np.abs(ref).max()):.3g}",
              flush=True)


if __name__ == "__main__":
    main()
