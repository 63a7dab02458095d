"""Kiln against PyTorch's outputs: the zoo (tests/run_tests.sh exports it into $KILN_ZOO_DIR),
the committed fixtures, and examples/classify.py."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import kiln
from helpers import REPO, SQUEEZENET, fixture_arrays, fixture_model, rel_error

ZOO = os.environ.get("KILN_ZOO_DIR", "")
CLASSIFY = os.path.join(REPO, "examples", "classify.py")


def zoo_files(name):
    files = [os.path.join(ZOO, name + ext) for ext in (".onnx", ".input.npy", ".ref.npy")]
    if not ZOO or not all(os.path.exists(f) for f in files):
        pytest.skip(f"ZOO ABSENT: no {name} in KILN_ZOO_DIR='{ZOO}' (tests/run_tests.sh exports "
                    "it; configure with -DKILN_ZOO_DIR=...)")
    return files


@pytest.mark.parametrize("name", ["squeezenet1_1", "resnet50"])
def test_zoo_model_matches_pytorch(name):
    model, inp, ref = zoo_files(name)
    with kiln.Session(model) as s:
        y = s.run([np.load(inp)])[s.outputs[0].name]
    assert rel_error(y, np.load(ref)) <= 1e-4


@pytest.mark.parametrize("name", ["tiny_resnet_op13", "tiny_mobilenetv2_op13",
                                  "tiny_squeezenet_op13", "tiny_vgg_op11"])
def test_fixture_model_matches_pytorch(name):
    ins, refs = fixture_arrays(name, "input"), fixture_arrays(name, "output")
    with kiln.Session(fixture_model(name)) as s:
        ys = s.run(ins)
    for y, ref in zip(ys.values(), refs):
        assert rel_error(y, ref) <= 1e-4


def run_classify(*args):
    r = subprocess.run([sys.executable, CLASSIFY, *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"top-5 of output '\w+' \(\d+ values\):", lines[0]), r.stdout
    rows = [re.fullmatch(r"  #(\d)  class (\d+)  score (-?\d+\.\d+)", ln) for ln in lines[1:]]
    assert len(rows) == 5 and all(rows), r.stdout
    assert [int(m.group(1)) for m in rows] == [1, 2, 3, 4, 5]
    return [int(m.group(2)) for m in rows], [float(m.group(3)) for m in rows]


def test_classify_example_prints_pytorchs_top5():
    # The zoo's ResNet-50 when there is one, else the bundled SqueezeNet 1.1.
    model = os.path.join(ZOO, "resnet50.onnx") if ZOO else ""
    if not os.path.exists(model):
        model = SQUEEZENET
    ref = np.load(model.replace(".onnx", ".ref.npy")).reshape(-1)
    classes, scores = run_classify(model, model.replace(".onnx", ".input.npy"))
    tol = 1e-4 * np.abs(ref).max()
    np.testing.assert_allclose(scores, ref[classes], rtol=0, atol=tol)
    np.testing.assert_allclose(sorted(ref[classes], reverse=True), np.sort(ref)[::-1][:5],
                               rtol=0, atol=2 * tol)  # the 5 largest, up to near-ties
    assert scores == sorted(scores, reverse=True) and len(set(classes)) == 5


def test_classify_example_on_a_random_input():
    classes, scores = run_classify(SQUEEZENET)
    assert len(set(classes)) == 5 and all(0 <= c < 1000 for c in classes)
    assert scores == sorted(scores, reverse=True)
