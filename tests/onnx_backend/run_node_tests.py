#!/usr/bin/env python3
"""Runs ONNX's own backend node tests (Debian's libonnx-testdata) through Kiln.

Each case is a directory with model.onnx and test_data_set_*/{input,output}_*.pb. A case
passes when every output matches within rtol/atol (numpy.allclose semantics, NaN == NaN),
is *refused* when Kiln rejects the model at load with KILN_UNSUPPORTED (or cannot take the
input dtype), is *wrong* when it runs and an output differs, and is a *crash/error* on any
other failure. Prints per-case lines with --verbose, the counts, and exits 1 when any case is
wrong or errored (refusals are expected for what Kiln does not run; --expect-pass N makes
fewer passes than N an error too, so a regression cannot hide as a refusal).
"""
import argparse
import glob
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DIR = "/usr/share/libonnx-testdata/data/node"


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def close(got, want, rtol, atol):
    if got.shape != want.shape:
        return False, f"shape {got.shape} != expected {want.shape}"
    # The declared dtype, except 16-bit floats: Kiln returns those as float32.
    if got.dtype != want.dtype and not (want.dtype in (np.float16, np.uint16) and got.dtype == np.float32):
        return False, f"dtype {got.dtype} != expected {want.dtype}"
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        ok = np.array_equal(got.astype(want.dtype), want)
        return ok, "" if ok else "integer/bool values differ"
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    ok = np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if ok:
        return True, ""
    with np.errstate(invalid="ignore"):
        err = np.nanmax(np.abs(g - w)) if g.size else 0.0
    return False, f"max abs diff {err:.3g}"


def run_case(kiln, case, rtol, atol, max_isa, ref_ops=None, tune="none"):
    """Returns (status, message); status in pass/refused/wrong/error. ref_ops (a dict): the ops
    of plan steps that ran on a reference kernel get this case's name appended."""
    model_path = os.path.join(case, "model.onnx")
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
    try:
        sess = kiln.Session(model_path, threads=1, tune=tune, disable_cache=True,
                            max_isa=max_isa)
    except kiln.Unsupported as e:
        return "refused", str(e).splitlines()[0]
    except kiln.Error as e:
        return "error", f"load: {type(e).__name__}: {e}"
    with sess:
        if ref_ops is not None:
            for st in sess.plan()["steps"]:
                if st["kernel"].startswith("ref_"):
                    ref_ops.setdefault(st["op"], []).append(os.path.basename(case))
        for ds in sets:
            ins = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")),
                                              key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
            outs = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")),
                                               key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
            feed = []
            for meta, x in zip(sess.inputs, ins):
                if x.dtype == np.float16 and np.dtype(meta.dtype) == np.float32:
                    x = x.astype(np.float32)  # Kiln widens float16 inputs (README)
                if np.dtype(meta.dtype) != x.dtype:
                    return "refused", f"input {meta.name} dtype {x.dtype} (Kiln: {meta.dtype})"
                feed.append(np.require(x, requirements="C"))
            try:
                res = sess.run(feed)
                got = [res[o.name] for o in sess.outputs]
            except kiln.Error as e:
                return "error", f"run: {type(e).__name__}: {e}"
            if len(got) < len(outs):
                return "wrong", f"{len(got)} outputs, expected {len(outs)}"
            for i, (g, w) in enumerate(zip(got, outs)):
                ok, why = close(np.asarray(g), w, rtol, atol)
                if not ok:
                    return "wrong", f"{os.path.basename(ds)} output {i}: {why}"
    return "pass", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("--show", default="wrong,error",
                    help="statuses whose cases are listed (comma list; 'all')")
    ap.add_argument("--max-isa", default=None, choices=["scalar", "avx2", "avx512"],
                    help="cap the kernels' ISA (scalar = the reference kernels)")
    ap.add_argument("--expect-pass", type=int, default=0)
    ap.add_argument("--ref-kernels", action="store_true",
                    help="list the ops that ran on reference kernels in the loaded cases (with "
                         "--tune none a tiny node may keep its reference kernel where the cost "
                         "model prices the layout conversions around a JIT one higher)")
    ap.add_argument("--tune", default="none", choices=["none", "fast", "full"])
    ap.add_argument("--python-path", default="", help="folder holding the kiln package")
    args = ap.parse_args()
    if args.python_path:
        # A build of selected targets (the sanitizer builds) has no extension module: skip
        # loudly (exit 77, CTest's skip), as tests/python/conftest.py does.
        if not glob.glob(os.path.join(args.python_path, "kiln", "_kiln*.so")):
            print(f"SKIPPED: the kiln extension module was not built in "
                  f"{args.python_path}/kiln (build the kiln_python target)", file=sys.stderr)
            return 77
        sys.path.insert(0, args.python_path)
    import kiln

    if not os.path.isdir(args.dir):
        print(f"SKIPPED: {args.dir} not found (Debian package libonnx-testdata)")
        return 77
    cases = sorted(d for d in glob.glob(os.path.join(args.dir, "test_*"))
                   if args.filter in os.path.basename(d))
    counts = {"pass": 0, "refused": 0, "wrong": 0, "error": 0}
    show = set(counts) if args.show == "all" else set(args.show.split(","))
    ref_ops = {} if args.ref_kernels else None
    for case in cases:
        status, msg = run_case(kiln, case, args.rtol, args.atol, args.max_isa, ref_ops,
                               args.tune)
        counts[status] += 1
        if args.verbose or status in show:
            print(f"{status:8s} {os.path.basename(case)}  {msg}")
    for op, names in sorted((ref_ops or {}).items()):
        print(f"reference kernel: {op:20s} {len(names):3d} cases, e.g. {', '.join(names[:3])}")
    isa = args.max_isa or "best ISA"
    print(f"onnx node tests ({isa}): {len(cases)} cases: {counts['pass']} pass, {counts['refused']} "
          f"refused, {counts['wrong']} wrong, {counts['error']} error")
    bad = counts["wrong"] + counts["error"]
    if counts["pass"] < args.expect_pass:
        print(f"FAIL: {counts['pass']} passes, expected at least {args.expect_pass}")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
