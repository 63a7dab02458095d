# Run: /usr/bin/python3 bench/export_seg.py --out /tmp/seg [--sizes 320x320,256x384] [--opsets 13,17] [model ...]
# Exports torchvision's segmentation networks (random weights, fixed seed, BatchNorm statistics
# re-estimated on random batches like ../shared/peers/make_models.py, 21 classes, no aux head)
# wrapped to return only `out`, to OUT/NAME_HxW_opK.onnx with OUT/NAME_HxW_opK.input.npy and
# PyTorch's output OUT/NAME_HxW_opK.ref.npy. Needs Debian's python3-torch/-torchvision/-onnx.
import argparse, os

import numpy as np
import torch
import torchvision.models.segmentation as seg

from export_util import calibrate_bn, export_case

MODELS = ["fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large",
          "lraspp_mobilenet_v3_large"]
SEED = 1234


class OutOnly(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="320x320,256x384")
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models or MODELS:
        torch.manual_seed(SEED)
        net = getattr(seg, name)(weights=None, weights_backbone=None, num_classes=21,
                                 aux_loss=False)
        # (Smaller batches than make_models.py's: these networks are 10-50x a classifier's work.)
        nbn = calibrate_bn(net, (4, 3, 160, 160), SEED + 1)
        model = OutOnly(net).eval()
        for size in args.sizes.split(","):
            h, w = (int(v) for v in size.split("x"))
            x = np.random.default_rng(SEED).standard_normal((1, 3, h, w), dtype=np.float32)
            for opset in (int(o) for o in args.opsets.split(",")):
                base = os.path.join(args.out, f"{name}_{h}x{w}_op{opset}")
                ref = export_case(model, x, base, opset, "input", "out")
                print(f"{os.path.basename(base)}: bn={nbn} out={list(ref.shape)} "
                      f"absmax={float(np.abs(ref).max()):.3g}", flush=True)


if __name__ == "__main__":
    main()
