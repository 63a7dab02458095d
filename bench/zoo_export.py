#!/usr/bin/python3
"""Export the benchmark zoo: torchvision CNNs with random weights, ready for `kiln run`.

    /usr/bin/python3 bench/zoo_export.py --out ~/kiln-zoo [resnet18 resnet50 ...]

Writes OUT/NAME.onnx, OUT/NAME.input.npy (1x3x224x224, N(0,1)) and OUT/NAME.ref.npy (PyTorch's
output), plus OUT/summary.json. Same seed, BatchNorm calibration and export settings as
shared/peers/make_models.py (the ONNX Runtime comparison), so both sides run identical models.
Needs Debian's python3-torch, python3-torchvision, python3-onnx (hence /usr/bin/python3).
Keep the output outside the repository (vgg16 alone is ~530 MB)."""
import argparse
import collections
import json
import os
import time
import warnings

import numpy as np
import onnx
import torch
import torchvision.models as tvm

MODELS = {  # name: (constructor kwargs, input H=W)
    "resnet18": ({}, 224),
    "resnet50": ({}, 224),
    "mobilenet_v2": ({}, 224),
    "vgg16": ({}, 224),
    "squeezenet1_1": ({}, 224),
}
SEED = 1234
OPSET = 13


def calibrate_bn(net, hw, iters=4, batch=8):
    """Re-estimate BatchNorm running stats on random N(0,1) batches (weights stay random).

    With the default statistics (mean 0, var 1) eval-mode BN is the identity, so activations of
    random nets vanish or explode and output comparisons mean nothing."""
    bns = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    g = torch.Generator().manual_seed(SEED + 1)
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    net.train()
    with torch.no_grad():
        for _ in range(iters):
            net(torch.randn(batch, 3, hw, hw, generator=g))
    net.eval()
    return len(bns)


def _dims(vi):
    dims = vi.type.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return None
    return [d.dim_value for d in dims]


def count_macs(model):
    """MACs of Conv / Gemm / MatMul nodes from ONNX shape inference."""
    g = onnx.shape_inference.infer_shapes(model).graph
    vis = {v.name: v for v in list(g.value_info) + list(g.input) + list(g.output)}
    inits = {t.name: list(t.dims) for t in g.initializer}
    shape = lambda n: inits.get(n) or (_dims(vis[n]) if n in vis else None)
    macs = collections.Counter()
    for n in g.node:
        if n.op_type == "Conv":
            w, y = shape(n.input[1]), shape(n.output[0])  # w: [Cout, Cin/group, kh, kw]
            if w and y:
                macs["Conv"] += int(np.prod(y)) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul"):
            a, y = shape(n.input[0]), shape(n.output[0])
            if a and y:
                trans_a = any(at.name == "transA" and at.i for at in n.attribute)
                macs[n.op_type] += int(np.prod(y)) * (a[-2] if trans_a else a[-1])
    return macs


def export_model(name, out, calibrate=True):
    """Export one zoo model into `out`; returns its summary row."""
    kwargs, hw = MODELS[name]
    torch.manual_seed(SEED)
    net = getattr(tvm, name)(weights=None, **kwargs).eval()
    nbn = calibrate_bn(net, hw) if calibrate else 0
    x = np.random.default_rng(SEED).standard_normal((1, 3, hw, hw), dtype=np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    path = os.path.join(out, f"{name}.onnx")
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, torch.from_numpy(x), path, opset_version=OPSET,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True)
    export_s = time.time() - t0
    np.save(os.path.join(out, f"{name}.input.npy"), x)
    np.save(os.path.join(out, f"{name}.ref.npy"), ref)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    macs = count_macs(m)
    gmacs = sum(macs.values()) / 1e9
    return {
        "input": [1, 3, hw, hw],
        "bn_calibrated": nbn,
        "params_M": round(sum(p.numel() for p in net.parameters()) / 1e6, 3),
        "GMACs": round(gmacs, 3),
        "GFLOPs(2*MAC)": round(2 * gmacs, 3),
        "macs_by_op": {k: round(v / 1e9, 3) for k, v in macs.items()},
        "ops": dict(collections.Counter(n.op_type for n in m.graph.node).most_common()),
        "nodes": len(m.graph.node),
        "ref_absmax": float(np.abs(ref).max()),
        "ref_std": float(ref.std()),
        "onnx_MB": round(os.path.getsize(path) / 2**20, 1),
        "export_s": round(export_s, 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (keep it outside the repo)")
    ap.add_argument("--no-bn-calib", action="store_true",
                    help="keep default BN statistics (mean 0, var 1)")
    ap.add_argument("models", nargs="*", default=list(MODELS), metavar="MODEL",
                    help=f"subset of {', '.join(MODELS)} (default: all)")
    args = ap.parse_args()
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    summary = {}
    for name in args.models:
        summary[name] = export_model(name, args.out, not args.no_bn_calib)
        print(f"== {name}: {json.dumps(summary[name])}", flush=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
