# Run: /usr/bin/python3 bench/export_video.py --out /tmp/vid [--shape DxHxW] [--batch 1]
#          [--opset 13] [model ...]
# Exports torchvision's video classifiers (3-D CNNs; random weights, fixed seed, BatchNorm
# statistics re-estimated on random clips as export_seg.py does) to OUT/NAME[_bB_DxHxW].onnx
# with OUT/NAME....input.npy and PyTorch's output OUT/NAME....ref.npy, for `kiln bench --check`
# and bench/zoo_bench.py. Needs Debian's python3-torch/-torchvision/-onnx.
import argparse, os

import numpy as np
import torch
import torchvision.models.video as video

from export_util import calibrate_bn, export_case

# Default clip (frames x height x width) per model: S3D's last pool needs 224x224 frames.
MODELS = {"r3d_18": "16x112x112", "mc3_18": "16x112x112", "r2plus1d_18": "16x112x112",
          "s3d": "16x224x224"}
SEED = 1234


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", help="frames x height x width (default: the model's, MODELS)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models or MODELS:
        size = args.shape or MODELS.get(name, "16x112x112")
        shape = tuple(int(v) for v in size.split("x"))
        suffix = "" if (args.batch, size) == (1, MODELS.get(name)) else f"_b{args.batch}_{size}"
        torch.manual_seed(SEED)
        net = getattr(video, name)(weights=None)
        nbn = calibrate_bn(net, (2, 3, *shape), SEED + 1)
        x = np.random.default_rng(SEED).standard_normal((args.batch, 3, *shape), dtype=np.float32)
        base = os.path.join(args.out, name + suffix)
        ref = export_case(net, x, base, args.opset, "input", "output")
        print(f"{os.path.basename(base)}: bn={nbn} out={list(ref.shape)} "
              f"absmax={float(np.abs(ref).max()):.3g}", flush=True)


if __name__ == "__main__":
    main()
