#!/usr/bin/python3
"""Kiln's output error against PyTorch under each --accuracy mode, for every model of a folder.

    bench/accuracy.py DIR [MODEL ...] [--modes strict,default,fast] [--ort] [--kiln PATH]
                      [--threads N] [--cache DIR] [--kiln-arg ARG ...] [--top5]

For each DIR/NAME.onnx with NAME.input.npy and NAME.ref.npy (bench/zoo_export.py's or
make_models.py's layout) it runs `kiln run` once per mode and prints max|kiln - ref| / max|ref|.
With --ort it also runs ONNX Runtime (../shared/peers/ort_bench.js; ORT_NODE_DIR must point at
onnxruntime-node) and prints its error, the tolerance max(1e-4, 2 x ORT's) and whether each
mode meets it. --top5 (classifiers: outputs [N, classes]) also prints, per mode, whether
PyTorch's top-1 class of every image is among Kiln's top 5 ("top5" or "MISS"), the check of
reduced precisions (`--kiln-arg=--precision --kiln-arg=bf16`). Every mode of one call shares one tuning cache (a fresh temporary folder unless
--cache is given): kernel times are measured once, plans are kept per mode.
Needs only NumPy."""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_BENCH = os.path.join(os.path.dirname(REPO), "shared", "peers", "ort_bench.js")


def rel_error(out_path, ref):
    out = np.load(out_path).astype(np.float64)
    if out.shape != ref.shape or not np.isfinite(out).all():
        return None
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


def top1_in_top5(out_path, ref):
    """Whether every image's reference top-1 class is among the output's top 5."""
    out = np.load(out_path)
    if out.shape != ref.shape or out.ndim != 2:
        return False
    top5 = np.argsort(-out, axis=1)[:, :5]
    return all(int(np.argmax(r)) in t for r, t in zip(ref, top5))


def kiln_error(kiln, model, inp, ref, mode, args, cache):
    """(error, top-1 in top-5) of one `kiln run`; (None, False) when it fails."""
    out = os.path.join(cache, "out.npy")
    if os.path.exists(out):
        os.remove(out)
    cmd = [kiln, "run", model, "--input", inp, "--output", out, "--accuracy", mode,
           "--threads", str(args.threads), "--cache", cache] + args.kiln_arg
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0:
        return None, False
    return rel_error(out, ref), top1_in_top5(out, ref)


def ort_error(folder, name, args):
    """ONNX Runtime's max|ort - ref| / max|ref| as ort_bench.js prints it."""
    r = subprocess.run(["node", args.ort_bench, "--models", folder, "--threads", "1", "--runs",
                        "1", name], capture_output=True, text=True, timeout=args.timeout)
    m = re.search(r"\(rel ([0-9.eE+-]+)\)", r.stdout)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("models", nargs="*", help="model names (default: every NAME.onnx in DIR)")
    ap.add_argument("--modes", default="strict,default,fast")
    ap.add_argument("--kiln", default=os.environ.get("KILN", os.path.join(REPO, "build/bench/kiln")))
    ap.add_argument("--kiln-arg", action="append", default=[], help="extra `kiln run` argument")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", help="tuning cache folder (default: a fresh temporary one)")
    ap.add_argument("--ort", action="store_true", help="also ONNX Runtime's error")
    ap.add_argument("--ort-bench", default=ORT_BENCH)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--top5", action="store_true",
                    help="also whether the reference top-1 class is in Kiln's top 5")
    args = ap.parse_args()
    modes = args.modes.split(",")
    names = args.models or sorted(os.path.basename(p)[:-5]
                                  for p in glob.glob(os.path.join(args.dir, "*.onnx")))
    tmp = tempfile.TemporaryDirectory(prefix="kiln-acc-")
    cache = args.cache or tmp.name
    fmt = lambda e: f"{e:10.2e}" if e is not None else f"{'-':>10s}"
    head = f"{'model':20s}" + "".join(f"{m:>10s}" + ("    top5" if args.top5 else "")
                                      for m in modes)
    if args.ort:
        head += f"{'ort':>10s}{'limit':>10s}  within"
    print(head, flush=True)
    failed = 0
    for name in names:
        base = os.path.join(args.dir, name)
        ref = np.load(base + ".ref.npy").astype(np.float64)
        res = [kiln_error(args.kiln, base + ".onnx", base + ".input.npy", ref, m, args, cache)
               for m in modes]
        errs = [e for e, _ in res]
        line = f"{name:20s}" + "".join(
            fmt(e) + ((f"{'top5':>8s}" if t else f"{'MISS':>8s}") if args.top5 else "")
            for e, t in res)
        if args.ort:
            ort = ort_error(args.dir, name, args)
            limit = max(1e-4, 2 * ort) if ort is not None else 1e-4
            ok = [e is not None and e <= limit for e in errs]
            failed += not all(ok)
            line += fmt(ort) + fmt(limit) + "  " + ",".join(
                m for m, o in zip(modes, ok) if o)
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
