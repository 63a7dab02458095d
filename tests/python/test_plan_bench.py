"""plan() and bench(): the data `kiln plan` and `kiln bench --json` report."""
import json
import os
import subprocess

import numpy as np
import pytest

import kiln
from helpers import SQUEEZENET, fixture_model

MODEL = fixture_model("tiny_resnet_op13")


@pytest.mark.parametrize("strategy, tune", [("global", "fast"), ("local", "full"),
                                            ("fixed", "fast"), ("heuristic", "none")])
def test_plan_reports_the_options_and_every_step(strategy, tune):
    with kiln.Session(MODEL, threads=1, strategy=strategy, tune=tune, accuracy="strict") as s:
        p = s.plan()
        assert (p["strategy"], p["tune"], p["accuracy"]) == (strategy, tune, "strict")
        assert p["precision"] == "f32"
        assert p["threads"] == 1 and p["isa"] == s.isa
        assert p["steps"] and all({"op", "kernel", "label"} <= set(st) for st in p["steps"])
        assert any(st["op"] == "Conv" for st in p["steps"])
        assert p == s.plan()  # the same plan every time


def test_bench_latency_and_machine():
    with kiln.Session(MODEL, threads=1) as s:
        b = s.bench(runs=7, warmup=2)
        lat = b["latency_ms"]
        assert set(lat) == {"p50", "p90", "p99", "min", "max", "mean", "stddev"}
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"] and lat["stddev"] >= 0
        assert (b["runs"], b["warmup"], b["threads"], b["threads_used"]) == (7, 2, 1, 1)
        assert b["isa"] == s.isa and b["batch"] == s.inputs[0].shape[0]
        assert b["model"] == MODEL and "layers" not in b
        assert b["inferences_per_s"] == pytest.approx(1e3 / lat["mean"])
        m = b["machine"]
        assert m["kiln_version"] == kiln.__version__ and m["cores"] >= 1 and m["cpu"]
        assert m["isa"] in ("avx512", "avx2", "scalar")


def test_bench_layers_are_the_plan_steps():
    with kiln.Session(MODEL, threads=1) as s:
        b = s.bench(runs=3, warmup=0, layers=True)
        steps = s.plan()["steps"]
        assert [layer["kernel"] for layer in b["layers"]] == [st["kernel"] for st in steps]
        # (the node names tie a layer's time to the model: bench/layer_compare.py)
        assert [layer["node"] for layer in b["layers"]] == [st["node"] for st in steps]
        assert all(layer["node"] for layer in b["layers"])
        assert all(layer["ms"] >= 0 for layer in b["layers"])
        assert b["layers_total_ms"] == pytest.approx(sum(x["ms"] for x in b["layers"]), rel=1e-3)
        assert 0 <= b["reference_ms"] <= b["layers_total_ms"]


def test_bench_inputs_are_checked_like_run():
    with kiln.Session(MODEL, threads=1) as s:
        x = np.zeros(s.inputs[0].shape, np.float32)
        assert s.bench(runs=2, inputs=[x])["runs"] == 2
        assert s.bench(runs=2, inputs={s.inputs[0].name: x})["runs"] == 2
        with pytest.raises(kiln.ShapeMismatch, match="float64"):
            s.bench(runs=2, inputs=[x.astype(np.float64)])
        with pytest.raises(kiln.InvalidArgument, match="runs must be >= 1"):
            s.bench(runs=0)
        s.close()
        for call in (s.plan, s.bench):
            with pytest.raises(kiln.Error, match="closed"):
                call()


def kind(x):
    return "number" if isinstance(x, (int, float)) and not isinstance(x, bool) else type(x)


def test_keys_are_kiln_bench_jsons(tmp_path):
    # The CLI may report more (load times, memory); what both report has the same keys.
    cli = os.environ.get("KILN_CLI")
    if not cli:
        pytest.skip("KILN_CLI (the kiln CLI, set by CTest) is not set")
    out = tmp_path / "bench.json"
    subprocess.run([cli, "bench", SQUEEZENET, "--threads", "1", "--runs", "3", "--layers",
                    "--json", str(out)], check=True, capture_output=True, timeout=120)
    theirs = json.loads(out.read_text())
    with kiln.Session(SQUEEZENET, threads=1) as s:
        ours = s.bench(runs=3, layers=True)
    for key in ("latency_ms", "runs", "warmup", "threads", "threads_used", "isa", "batch",
                "model", "layers", "layers_total_ms", "reference_ms"):
        assert key in theirs and kind(ours[key]) == kind(theirs[key]), key
    assert set(theirs["latency_ms"]) <= set(ours["latency_ms"])
    assert set(theirs["layers"][0]) == set(ours["layers"][0])
    assert (ours["batch"], ours["isa"], ours["threads_used"]) == \
           (theirs["batch"], theirs["isa"], theirs["threads_used"])
    if "machine" in theirs:
        assert theirs["machine"] == ours["machine"]


def test_precision_bf16_is_reported_and_stays_close_to_f32():
    # Whether bf16 kernels are chosen depends on the CPU (AVX512-BF16) and the measurements;
    # either way the output stays within bf16's error of the f32 output.
    with kiln.Session(MODEL, threads=1, tune="none", disable_cache=True) as f32, \
            kiln.Session(MODEL, threads=1, tune="none", disable_cache=True,
                         precision="bf16") as bf16:
        assert f32.plan()["precision"] == "f32" and bf16.plan()["precision"] == "bf16"
        info = f32.inputs[0]
        x = np.random.default_rng(3).standard_normal(info.shape).astype(np.float32)
        name, out = info.name, f32.outputs[0].name
        a, b = f32.run({name: x})[out], bf16.run({name: x})[out]
        assert np.abs(a - b).max() <= 2e-2 * np.abs(a).max()
