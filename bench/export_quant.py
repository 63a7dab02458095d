#!/usr/bin/env python3
"""Exports torchvision classifiers quantized by PyTorch itself (random weights, fixed seeds),
for Kiln's and ONNX Runtime's int8 paths on the files PyTorch users have:

    /usr/bin/python3 bench/export_quant.py --out DIR [--mode eager|fx] [--engine qnnpack|onednn]
        [model ...]

eager: torchvision.models.quantization's quantizable model, fuse_model(), the engine's default
qconfig (qnnpack: per-tensor weights, onednn: per-channel), prepare, convert; fx: prepare_fx /
convert_fx on the plain torchvision model. BatchNorm statistics are re-estimated first (as
../shared/peers/make_models.py does), observers calibrated on four random batches. Writes
DIR/PREFIX_NAME.onnx (opset 13; PREFIX q_ = eager qnnpack, qc_ = eager onednn, fx_ = fx) with
.input.npy and PyTorch's quantized output .ref.npy, for bench/accuracy.py and bench/zoo_bench.py
(and bench/qoperator.py to rewrite them in the operator form). Needs Debian's
python3-torch / -torchvision / -onnx; PyTorch 1.13 has no fbgemm engine here.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_util import calibrate_bn  # noqa: E402

SEED = 1234
DEFAULT = {"eager": ["resnet18", "resnet50", "googlenet", "inception_v3", "mobilenet_v2",
                     "mobilenet_v3_large"],
           "fx": ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "regnet_x_400mf"]}


def build(name, mode, engine, shape):
    tq = torch.ao.quantization
    if mode == "eager":
        kw = {"init_weights": True} if name in ("googlenet", "inception_v3") else {}
        net = getattr(torchvision.models.quantization, name)(weights=None, quantize=False, **kw)
        if name in ("googlenet", "inception_v3"):  # no auxiliary classifiers at inference
            net.aux_logits, net.AuxLogits, net.aux1, net.aux2 = False, None, None, None
    else:
        net = getattr(torchvision.models, name)(weights=None)
    calibrate_bn(net, (2,) + shape[1:], SEED + 1)
    net.eval()
    g = torch.Generator().manual_seed(SEED + 1)
    batches = [torch.randn(*shape, generator=g) for _ in range(4)]
    if mode == "eager":
        net.fuse_model()
        net.qconfig = tq.get_default_qconfig(engine)
        tq.prepare(net, inplace=True)
    else:
        from torch.ao.quantization.quantize_fx import prepare_fx
        net = prepare_fx(net, tq.get_default_qconfig_mapping(engine), (batches[0],))
    with torch.no_grad():
        for x in batches:
            net(x)
    if mode == "eager":
        return tq.convert(net, inplace=True)
    from torch.ao.quantization.quantize_fx import convert_fx
    return convert_fx(net)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["eager", "fx"], default="eager")
    ap.add_argument("--engine", choices=["qnnpack", "onednn"], default="qnnpack")
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    if args.engine not in torch.backends.quantized.supported_engines:
        sys.exit(f"this PyTorch has no {args.engine} engine")
    torch.backends.quantized.engine = args.engine
    os.makedirs(args.out, exist_ok=True)
    prefix = "fx_" if args.mode == "fx" else {"qnnpack": "q_", "onednn": "qc_"}[args.engine]
    for name in args.models or DEFAULT[args.mode]:
        torch.manual_seed(SEED)
        shape = (1, 3, 299, 299) if name == "inception_v3" else (1, 3, 224, 224)
        try:
            net = build(name, args.mode, args.engine, shape)
            x = np.random.default_rng(SEED).standard_normal(shape, dtype=np.float32)
            with torch.no_grad():
                ref = net(torch.from_numpy(x)).numpy()
            base = os.path.join(args.out, prefix + name)
            torch.onnx.export(net, torch.from_numpy(x), base + ".onnx", opset_version=13,
                              input_names=["input"], output_names=["output"])
            np.save(base + ".input.npy", x)
            np.save(base + ".ref.npy", ref)
            print("wrote", base + ".onnx", flush=True)
        except Exception as e:  # (PyTorch's exporter refuses some: say which and go on)
            print(f"{name}: not exported: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
