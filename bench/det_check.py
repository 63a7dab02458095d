#!/usr/bin/env python3
# Run: PYTHONPATH=build/python /usr/bin/python3 bench/det_check.py DIR [--threads 2] [--runs 10]
#      [--ref pytorch|ort]
# Compares Kiln's detections with PyTorch's (or, --ref ort, ONNX Runtime's: DIR/NAME.ort<i>.npy
# as bench/ort_outputs.js writes them) on the full detectors bench/export_det.py writes
# (DIR/*_full.onnx with .input.npy and .ref.npy / .ref1.npy / .ref2.npy ... = boxes, scores,
# labels, then per-detection extras: Mask R-CNN's masks, keypoint R-CNN's keypoints and their
# scores). Their counts are decided per run (graph/dynamic.h), and near-equal scores may order
# or cut differently in float32, so detections are matched, not compared by position: a reference
# detection is found when Kiln has one of the same label whose box differs by at most --tol of
# the image size. Prints per model: both counts, the share of the reference's detections found,
# the largest score difference over the matched ones (and per extra output its largest
# difference over them), and Kiln's median run time.
import argparse
import glob
import os
import time

import numpy as np

import kiln


def match(kb, ks, kl, rb, rs, rl, tol):
    """[(kiln index, reference index)] of the reference detections found, in reference order."""
    used = np.zeros(len(kb), bool)
    pairs = []
    for i, (b, s, lab) in enumerate(zip(rb, rs, rl)):
        d = np.abs(kb - b).max(1) if len(kb) else np.zeros(0)
        cand = np.where((d <= tol) & (kl == lab) & ~used)[0]
        if len(cand):
            j = cand[np.argmin(np.abs(ks[cand] - s))]
            used[j] = True
            pairs.append((j, i))
    return pairs


def references(base, ref):
    """The reference outputs in order: PyTorch's .ref.npy, .ref1.npy, ... or ORT's .ort<i>.npy."""
    name = (lambda i: ".ref.npy" if i == 0 else f".ref{i}.npy") if ref == "pytorch" else \
        (lambda i: f".ort{i}.npy")
    out = []
    while os.path.exists(base + name(len(out))):
        out.append(np.load(base + name(len(out))))
    if len(out) < 3:
        raise SystemExit(f"{base}: no {ref} reference outputs (boxes, scores, labels)")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tol", type=float, default=1e-4, help="box tolerance, share of image size")
    ap.add_argument("--ref", choices=("pytorch", "ort"), default="pytorch")
    args = ap.parse_args()
    for path in sorted(glob.glob(os.path.join(args.dir, "*_full.onnx"))):
        base = path[:-5]
        x = np.load(base + ".input.npy")
        refs = references(base, args.ref)
        with kiln.Session(path, threads=args.threads) as s:
            names = [o.name for o in s.outputs]
            out = s.run({"input": x})
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                s.run({"input": x})
                times.append((time.perf_counter() - t0) * 1e3)
        got = [out[n] for n in names]
        pairs = match(*got[:3], *refs[:3], args.tol * max(x.shape[2:]))
        diff = lambda k: max((float(np.abs(got[k][j].astype(np.float64) - refs[k][i]).max())
                              for j, i in pairs), default=0.0)
        extras = "".join(f"; max {names[k]} diff {diff(k):.3g}" for k in range(3, len(refs)))
        share = len(pairs) / len(refs[0]) if len(refs[0]) else 1.0
        print(f"{os.path.basename(base)}: detections kiln {len(got[0])} {args.ref} "
              f"{len(refs[0])}; {args.ref}'s found {100 * share:.1f}%; max score diff "
              f"{diff(1):.2e}{extras}; p50 {np.median(times):.2f} ms ({args.threads} threads)",
              flush=True)


if __name__ == "__main__":
    main()
