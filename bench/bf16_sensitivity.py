#!/usr/bin/python3
"""Where bf16's error comes from in a random-weight torchvision CNN (make_models.py's weights).

    bench/bf16_sensitivity.py MODEL [--make-models PATH]

Runs the model in PyTorch (f32) with the inputs and weights of chosen Conv2d / Linear layers
rounded to bf16 (forward pre-hooks), on one random-normal input, and prints max|y - y_f32| /
max|y_f32| with every layer rounded, the ten layers whose rounding alone moves the output most
(with their share of the MACs), and how many layers / MACs a greedy choice (least error per MAC
first, errors added in quadrature) keeps in bf16 within 3e-2 and 2e-2, measured. The evidence
behind Kiln's bf16 guard (runtime/selection.cpp guard_bf16; bench/NOTES.md, "bf16 guard").
Needs Debian's python3-torch and python3-torchvision; a few minutes per model."""
import argparse
import importlib.util
import os

import numpy as np
import torch
import torchvision.models as tvm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--make-models",
                    default=os.path.join(here, "..", "..", "shared", "peers", "make_models.py"))
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("make_models", a.make_models)
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    torch.manual_seed(mm.SEED)
    hw = mm.SIZE.get(a.model, 224)
    net = getattr(tvm, a.model)(weights=None, **mm.KWARGS.get(a.model, {}))
    mm.calibrate_bn(net, hw)
    net.eval()

    def rb(t):
        return t.to(torch.bfloat16).to(torch.float32)

    layers = [m for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    w32 = {id(m): m.weight.data.clone() for m in layers}
    active = set()
    macs = {}

    def round_input(m, inp):
        if id(m) in active:
            return (rb(inp[0]),) + tuple(inp[1:])

    def count(m, inp, out):
        per = m.weight[0].numel() if isinstance(m, torch.nn.Conv2d) else m.in_features
        macs[id(m)] = out.numel() * per

    for m in layers:
        m.register_forward_pre_hook(round_input)
    hooks = [m.register_forward_hook(count) for m in layers]
    x = torch.randn(1, 3, hw, hw, generator=torch.Generator().manual_seed(7))

    def run(rounded):
        active.clear()
        active.update(id(m) for m in rounded)
        for m in layers:
            m.weight.data = rb(w32[id(m)]) if id(m) in active else w32[id(m)]
        with torch.no_grad():
            return net(x).numpy().astype(np.float64)

    ref = run([])
    for h in hooks:
        h.remove()

    def err(y):
        return np.abs(y - ref).max() / np.abs(ref).max()

    every = err(run(layers))
    e = np.array([err(run([m])) for m in layers])
    f = np.array([macs[id(m)] for m in layers], dtype=float)
    print(f"{a.model}: {len(layers)} layers; all in bf16: {every:.3e} "
          f"(alone, in quadrature: {np.sqrt((e ** 2).sum()):.3e})")
    print("largest alone (layer: error / share of MACs):",
          " ".join(f"{i}:{e[i]:.1e}/{f[i] / f.sum() * 100:.1f}%" for i in np.argsort(-e)[:10]))
    for budget in (3e-2, 2e-2):
        keep, total = [], 0.0
        for i in np.argsort(e ** 2 / f):
            if total + e[i] ** 2 <= (budget / 1.2) ** 2:
                total += e[i] ** 2
                keep.append(i)
        measured = err(run([layers[i] for i in keep]))
        print(f"budget {budget}: {len(keep)} of {len(layers)} layers in bf16, "
              f"{f[keep].sum() / f.sum() * 100:.1f}% of the MACs, measured {measured:.3e}")


if __name__ == "__main__":
    main()
