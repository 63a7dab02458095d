#!/usr/bin/env python3
# Run: PYTHONPATH=build/python /usr/bin/python3 bench/det_check.py DIR [--threads 2] [--runs 10]
# Compares Kiln's detections with PyTorch's on the full detectors bench/export_det.py writes
# (DIR/*_full.onnx with .input.npy and .ref.npy / .ref1.npy / .ref2.npy = boxes, scores, labels).
# Their counts are decided per run (graph/dynamic.h), and near-equal scores may order or cut
# differently in float32, so detections are matched, not compared by position: a PyTorch
# detection is found when Kiln has one of the same label whose box differs by at most --tol of
# the image size. Prints per model: both counts, the share of PyTorch's detections found, the
# largest score difference over the matched ones, and Kiln's median run time.
import argparse
import glob
import os
import time

import numpy as np

import kiln


def match(kb, ks, kl, rb, rs, rl, tol):
    """(share of reference detections matched, max |score| difference over the matches)."""
    used = np.zeros(len(kb), bool)
    found, worst = 0, 0.0
    for b, s, lab in zip(rb, rs, rl):
        d = np.abs(kb - b).max(1) if len(kb) else np.zeros(0)
        cand = np.where((d <= tol) & (kl == lab) & ~used)[0]
        if len(cand):
            j = cand[np.argmin(np.abs(ks[cand] - s))]
            used[j] = True
            found += 1
            worst = max(worst, abs(float(ks[j]) - float(s)))
    return (found / len(rb) if len(rb) else 1.0), worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tol", type=float, default=1e-4, help="box tolerance, share of image size")
    args = ap.parse_args()
    for path in sorted(glob.glob(os.path.join(args.dir, "*_full.onnx"))):
        base = path[:-5]
        x = np.load(base + ".input.npy")
        rb, rs, rl = (np.load(base + s) for s in (".ref.npy", ".ref1.npy", ".ref2.npy"))
        with kiln.Session(path, threads=args.threads) as s:
            out = s.run({"input": x})
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                s.run({"input": x})
                times.append((time.perf_counter() - t0) * 1e3)
        kb, ks, kl = out["boxes"], out["scores"], out["labels"]
        share, worst = match(kb, ks, kl, rb, rs, rl, args.tol * max(x.shape[2:]))
        print(f"{os.path.basename(base)}: detections kiln {len(kb)} pytorch {len(rb)}; "
              f"pytorch's found {100 * share:.1f}%; max score diff {worst:.2e}; "
              f"p50 {np.median(times):.2f} ms ({args.threads} threads)", flush=True)


if __name__ == "__main__":
    main()
