#!/usr/bin/python3
"""Python's overhead per run: kiln.Session.run against the bare C API call, in one process.

    PYTHONPATH=build/python bench/python_overhead.py [MODEL] [--threads 1] [--rounds 400]
        [--kiln build/bench/kiln]

One session; every round times, in an order that rotates from round to round:
  c        one kiln_session_run, timed in C++ inside the extension (Session.bench's loop);
  run      s.run(feeds): the whole Python call (checks, output allocation, GIL release);
  run_out  s.run(feeds, out=bufs) into preallocated outputs.
Prints each one's median and p10, and the median over rounds of each Python call's ratio to the
C call of the same round (runs milliseconds apart see the same machine speed). With --kiln, the
`kiln bench` CLI's p50 on the same model and thread count, from its own process (before and
after), for comparison. Default MODEL: examples/models/squeezenet1_1.onnx.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli_p50(kiln_exe, model, threads, runs):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        subprocess.run([kiln_exe, "bench", model, "--threads", str(threads), "--runs", str(runs),
                        "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["latency_ms"]["p50"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?",
                    default=os.path.join(REPO, "examples", "models", "squeezenet1_1.onnx"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--kiln", help="the kiln CLI, to compare with `kiln bench`")
    a = ap.parse_args()

    before = cli_p50(a.kiln, a.model, a.threads, a.rounds) if a.kiln else None
    s = kiln.Session(a.model, threads=a.threads)
    rng = np.random.default_rng(42)
    feeds = [rng.standard_normal(t.shape, dtype=np.float32) if t.dtype == np.float32
             else np.zeros(t.shape, t.dtype) for t in s.inputs]
    bufs = [np.empty(t.shape, t.dtype) for t in s.outputs]

    def c_run():
        return s._s.time_runs(feeds, 1, 0)[0]

    def py_run():
        t0 = time.perf_counter()
        s.run(feeds)
        return (time.perf_counter() - t0) * 1e3

    def py_run_out():
        t0 = time.perf_counter()
        s.run(feeds, out=bufs)
        return (time.perf_counter() - t0) * 1e3

    kinds = {"c": c_run, "run": py_run, "run_out": py_run_out}
    for _ in range(a.warmup):
        for f in kinds.values():
            f()
    ms = {k: [] for k in kinds}
    names = list(kinds)
    for r in range(a.rounds):
        for k in names[r % 3:] + names[:r % 3]:
            ms[k].append(kinds[k]())
    after = cli_p50(a.kiln, a.model, a.threads, a.rounds) if a.kiln else None

    c = np.array(ms["c"])
    print(f"model: {a.model}  threads: {a.threads}  rounds: {a.rounds}  isa: {s.isa}  "
          f"loadavg: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k in names:
        x = np.array(ms[k])
        line = f"{k:8s} median {np.median(x):.4f} ms  p10 {np.percentile(x, 10):.4f} ms"
        if k != "c":
            ratio = np.median(x / c)
            line += (f"  per-round ratio to c: median {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)"
                     f"  median difference {np.median(x - c) * 1e3:+.1f} us")
        print(line)
    if a.kiln:
        print(f"kiln bench p50: {before:.4f} ms before, {after:.4f} ms after")
    s.close()


if __name__ == "__main__":
    sys.exit(main())
