"""Runs a model with Kiln on an input .npy (or a random one) and prints the top-5 of output 0.
Usage: python3 classify.py MODEL.onnx [INPUT.npy]"""
import sys

import numpy as np

import kiln

with kiln.Session(sys.argv[1]) as s:
    shape = s.inputs[0].shape
    x = np.load(sys.argv[2]) if len(sys.argv) > 2 else np.random.default_rng(0).standard_normal(
        shape, dtype=np.float32)
    out = s.outputs[0].name
    y = s.run([x])[out].reshape(-1)
    print(f"top-5 of output '{out}' ({y.size} values):")
    for rank, c in enumerate(np.argsort(-y, kind="stable")[:5], 1):
        print(f"  #{rank}  class {c}  score {y[c]:.6f}")
