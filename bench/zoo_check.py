#!/usr/bin/python3
"""Run `kiln` on every zoo model in a folder and compare with PyTorch's reference output.

    bench/zoo_check.py DIR [--kiln PATH] [--threshold 1e-4] [MODEL ...]

For each DIR/NAME.onnx with DIR/NAME.input.npy and DIR/NAME.ref.npy (bench/zoo_export.py's
layout) it runs `kiln run DIR/NAME.onnx --input DIR/NAME.input.npy --output TMP/NAME.out.npy`
and prints max|out - ref| / max|ref| with PASS/FAIL. Exit status: 0 if every model passes,
1 if any fails, 2 on a usage error, 77 (CTest: skipped) when --require-isa names an ISA that
kiln does not run on this CPU (with KILN_MAX_ISA and --kiln-arg as given). The kiln binary: --kiln, else $KILN, else build/bench/kiln.
Needs only NumPy (any python3 that has it; /usr/bin/python3 does)."""
import argparse
import glob
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_kiln(arg):
    path = arg or os.environ.get("KILN") or "build/bench/kiln"
    if not os.path.isabs(path) and not os.path.exists(path):
        path = os.path.join(REPO, path)  # default relative to the repo, wherever we run from
    return path


def compare(out_path, ref):
    """max|out - ref| / max|ref|, or an error string."""
    try:
        out = np.load(out_path)
    except (OSError, ValueError) as e:
        return None, f"cannot read {out_path}: {e}"
    if out.shape != ref.shape:
        return None, f"shape {list(out.shape)} != ref {list(ref.shape)}"
    if not np.isfinite(out).all():
        return None, "output has NaN/Inf"
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64)).max()
    return float(diff / max(float(np.abs(ref).max()), 1e-30)), ""


def running_isa(kiln, model, kiln_args):
    """The ISA `kiln info` reports it generates code for (the live CPU under the caps)."""
    r = subprocess.run([kiln, "info", model, "--tune", "none"] + kiln_args,
                       capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("isa: "):
            return line.split()[1]
    return "unknown (kiln info exited %d)" % r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="folder written by bench/zoo_export.py")
    ap.add_argument("models", nargs="*", help="model names (default: every NAME.onnx in DIR)")
    ap.add_argument("--kiln", help="kiln binary (default $KILN or build/bench/kiln)")
    ap.add_argument("--threshold", type=float, default=1e-4,
                    help="max relative error to pass (default 1e-4)")
    ap.add_argument("--kiln-arg", action="append", default=[],
                    help="extra argument for `kiln run` (repeatable), e.g. --kiln-arg=--reference")
    ap.add_argument("--tmp", default="/tmp", help="where NAME.out.npy go (default /tmp)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per model")
    ap.add_argument("--require-isa", help="skip (exit 77) unless kiln runs this ISA here")
    args = ap.parse_args()

    kiln = find_kiln(args.kiln)
    if not os.access(kiln, os.X_OK):
        print(f"zoo_check: kiln binary not found or not executable: {kiln}", file=sys.stderr)
        return 2
    names = args.models or sorted(os.path.basename(p)[:-5]
                                  for p in glob.glob(os.path.join(args.dir, "*.onnx")))
    if not names:
        print(f"zoo_check: no .onnx models in {args.dir}", file=sys.stderr)
        return 2

    if args.require_isa:
        isa = running_isa(kiln, os.path.join(args.dir, names[0] + ".onnx"), args.kiln_arg)
        if isa != args.require_isa:
            print(f"SKIPPED: the {args.require_isa} path cannot run on this CPU "
                  f"(kiln runs {isa})", flush=True)
            return 77

    failed = 0
    for name in names:
        model, inp, refp = (os.path.join(args.dir, name + ext)
                            for ext in (".onnx", ".input.npy", ".ref.npy"))
        out = os.path.join(args.tmp, f"{name}.out.npy")
        missing = [p for p in (model, inp, refp) if not os.path.exists(p)]
        err, msg, secs = None, "", 0.0
        if missing:
            msg = "missing " + ", ".join(missing)
        else:
            if os.path.exists(out):
                os.remove(out)  # never compare a stale output
            cmd = [kiln, "run", model, "--input", inp, "--output", out] + args.kiln_arg
            t0 = time.time()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                secs = time.time() - t0
                if r.returncode != 0:
                    last = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or [""]
                    msg = f"kiln exited {r.returncode}: {last[0]}"
                else:
                    err, msg = compare(out, np.load(refp))
            except subprocess.TimeoutExpired:
                msg = f"timed out after {args.timeout:g} s"
        ok = err is not None and err <= args.threshold
        failed += not ok
        shown = f"{err:.3e}" if err is not None else "-"
        print(f"{name:16s} rel_err {shown:>10s}  {'PASS' if ok else 'FAIL'}  ({secs:.1f} s)"
              + (f"  {msg}" if msg else ""), flush=True)
    print(f"{len(names) - failed}/{len(names)} passed (threshold {args.threshold:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
