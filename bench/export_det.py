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
# - *_full: the whole torchvision detector as torch.onnx.export writes it (Faster R-CNN's
#   MobileNetV3 320 FPN too: proposals, RoiAlign, box head), box decoding, score
#   thresholds, per-class NMS (NonZero, NonMaxSuppression, an If on the number of boxes) and the
#   top detections in the graph: outputs boxes [N, 4], scores [N], labels [N] with N decided per
#   run (Kiln runs them from the first data-dependent op on per run, graph/dynamic.h). Score
#   thresholds are set low (random weights give low scores) so that NMS has thousands of boxes.
#   Mask R-CNN and keypoint R-CNN (ResNet-50 FPN, 320x320) also output masks [N, 1, 320, 320] /
#   keypoints [N, 17, 3] and their scores [N, 17], from heads run on every detection and a Loop
#   over the detections.
# Writes OUT/NAME.onnx with .input.npy and PyTorch's output .ref.npy (the full detectors also
# .ref1.npy, .ref2.npy: scores and labels), for `kiln bench --check`, bench/zoo_bench.py and
# bench/det_check.py. Needs python3-torch, -torchvision, -onnx.
import argparse, os

import numpy as np
import onnx
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


class DenseView(DenseHeads):
    """DenseHeads over a detector already built (to calibrate a Full one's BatchNorms: the
    whole detector cannot run in train mode without targets)."""

    def __init__(self, m):
        nn.Module.__init__(self)
        self.m, self.kind = m, "rpn" if hasattr(m, "rpn") else "dense"


class Full(nn.Module):
    """A whole torchvision detector: image 0's boxes, scores and labels (and `extra` outputs:
    masks, keypoints)."""

    def __init__(self, make, extra=(), **kw):
        super().__init__()
        self.m = make(weights=None, weights_backbone=None, **kw).eval()
        self.keys = ["boxes", "scores", "labels", *extra]

    def forward(self, x):
        d = self.m(x)[0]
        return tuple(d[k] for k in self.keys)


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
    # min_size / max_size = the input's, so the detector's transform does not resize it.
    "retinanet_full": (lambda: Full(D.retinanet_resnet50_fpn_v2, score_thresh=0.0, min_size=384,
                                    max_size=512), (1, 3, 384, 512)),
    "fcos_full": (lambda: Full(D.fcos_resnet50_fpn, score_thresh=0.0, min_size=384,
                               max_size=512), (1, 3, 384, 512)),
    "ssd300_full": (lambda: Full(D.ssd300_vgg16, score_thresh=0.0), (1, 3, 300, 300)),
    "ssdlite320_full": (lambda: Full(D.ssdlite320_mobilenet_v3_large), (1, 3, 320, 320)),
    # two-stage: RPN proposals, RoiAlign (MultiScaleRoIAlign), the box head on each proposal
    "frcnn_mbv3_320_full": (lambda: Full(D.fasterrcnn_mobilenet_v3_large_320_fpn,
                                         box_score_thresh=0.0), (1, 3, 320, 320)),
    # + a mask / keypoint head on each detection, and a Loop over the detections pasting the
    # masks into the image / finding each keypoint's heatmap peak
    "maskrcnn_full": (lambda: Full(D.maskrcnn_resnet50_fpn, ["masks"], box_score_thresh=0.0,
                                   min_size=320, max_size=320), (1, 3, 320, 320)),
    "keypointrcnn_full": (lambda: Full(D.keypointrcnn_resnet50_fpn,
                                       ["keypoints", "keypoints_scores"], box_score_thresh=0.0,
                                       min_size=320, max_size=320), (1, 3, 320, 320)),
}


def export_full(net, x, base, opset):
    """A full detector: BASE.onnx, .input.npy, and PyTorch's boxes / scores / labels (/ extras)
    as .ref.npy / .ref1.npy / .ref2.npy ...; returns the boxes."""
    with torch.no_grad():
        refs = [t.numpy() for t in net(torch.from_numpy(x))]
    torch.onnx.export(net, torch.from_numpy(x), base + ".onnx", opset_version=opset,
                      input_names=["input"], output_names=net.keys)
    onnx.checker.check_model(onnx.load(base + ".onnx"))
    np.save(base + ".input.npy", x)
    for i, r in enumerate(refs):
        np.save(base + (".ref.npy" if i == 0 else f".ref{i}.npy"), r)
    return refs[0]


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
        nbn = calibrate_bn(DenseView(net.m) if isinstance(net, Full) else net, (2, *shape[1:]),
                           SEED + 1)
        net.eval()
        x = np.random.default_rng(SEED).random(shape, dtype=np.float32)
        base = os.path.join(args.out, name)
        if isinstance(net, Full):
            ref = export_full(net, x, base, args.opset)
        else:
            ref = export_case(net, x, base, args.opset, "input", "output")
        print(f"{name}: bn={nbn} out={list(ref.shape)} absmax={float(np.abs(ref).max()):.3g}",
              flush=True)


if __name__ == "__main__":
    main()
