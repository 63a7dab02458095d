# Run: /usr/bin/python3 bench/export_tf.py --out /tmp/tf [--opsets 13,17] [--size 224] [model ...]
# Exports torchvision's vision transformers (vit_b_16, swin_t; any torchvision classification
# model name works) with random weights (fixed seed) to OUT/NAME_opK.onnx with
# OUT/NAME_opK.input.npy and PyTorch's output OUT/NAME_opK.ref.npy, for issue 17's accuracy
# checks. torchvision zero-initialises some parameters (ViT's head and class token), which makes
# the logits all zero and the comparison meaningless: every all-zero parameter is redrawn from
# N(0, 0.02) first. Needs Debian's python3-torch/-torchvision/-onnx.
import argparse, os, time

import numpy as np
import onnx
import torch
import torchvision.models as tvm

MODELS = ["vit_b_16", "swin_t"]
SEED = 1234


def redraw_zero_params(net):
    g = torch.Generator().manual_seed(SEED + 2)
    n = 0
    with torch.no_grad():
        for p in net.parameters():
            if p.numel() > 1 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models or MODELS:
        torch.manual_seed(SEED)
        net = getattr(tvm, name)(weights=None).eval()
        redrawn = redraw_zero_params(net)
        x = np.random.default_rng(SEED).standard_normal((1, 3, args.size, args.size),
                                                        dtype=np.float32)
        with torch.no_grad():
            ref = net(torch.from_numpy(x)).numpy()
        for opset in (int(o) for o in args.opsets.split(",")):
            base = os.path.join(args.out, f"{name}_op{opset}")
            t0 = time.time()
            torch.onnx.export(net, torch.from_numpy(x), base + ".onnx", opset_version=opset,
                              input_names=["input"], output_names=["output"],
                              do_constant_folding=True)
            onnx.checker.check_model(base + ".onnx")
            np.save(base + ".input.npy", x)
            np.save(base + ".ref.npy", ref)
            print(f"{os.path.basename(base)}: redrawn={redrawn} out={list(ref.shape)} "
                  f"absmax={float(np.abs(ref).max()):.3g} export {time.time() - t0:.0f} s",
                  flush=True)


if __name__ == "__main__":
    main()
