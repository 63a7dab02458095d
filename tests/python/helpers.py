"""Paths and comparisons shared by the kiln Python tests."""
import glob
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
SQUEEZENET = os.path.join(REPO, "examples", "models", "squeezenet1_1.onnx")


def fixture_model(name):
    """Path of tests/fixtures/models/NAME/model.onnx."""
    return os.path.join(FIXTURES, "models", name, "model.onnx")


def fixture_arrays(name, kind):
    """The fixture's input_*.npy or output_*.npy arrays, in order."""
    files = sorted(glob.glob(os.path.join(FIXTURES, "models", name, f"{kind}_*.npy")))
    return [np.load(f) for f in files]


def rel_error(y, ref):
    return float(np.max(np.abs(y - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
