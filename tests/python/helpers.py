"""Paths and comparisons shared by the kiln Python tests."""
import glob
import json
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
SQUEEZENET = os.path.join(REPO, "examples", "models", "squeezenet1_1.onnx")


def has_vnni():
    """Whether this CPU has AVX512-VNNI (the int8 conv labels)."""
    from kiln import _kiln
    return "avx512_vnni" in json.loads(_kiln.machine_json())["features"]


def fixture_model(name):
    """Path of tests/fixtures/models/NAME/model.onnx."""
    return os.path.join(FIXTURES, "models", name, "model.onnx")


def fixture_arrays(name, kind):
    """The fixture's input_*.npy or output_*.npy arrays, in order."""
    files = sorted(glob.glob(os.path.join(FIXTURES, "models", name, f"{kind}_*.npy")))
    return [np.load(f) for f in files]


def rel_error(y, ref):
    return float(np.max(np.abs(y - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


def run_on_each_isa(data, feeds, tmp_path, threads=2):
    """Runs the model (bytes) once per ISA path this CPU has — AVX-512, AVX2 (capped) and the
    reference — each with its own tuning cache under tmp_path: [(max_isa, outputs, plan)]."""
    import kiln
    runs = []
    for max_isa in ("avx512", "avx2", "scalar"):
        with kiln.Session.from_bytes(data, threads=threads, max_isa=max_isa,
                                     cache_dir=str(tmp_path / max_isa)) as s:
            if max_isa != "scalar" and s.isa != max_isa:
                continue  # this CPU lacks the ISA
            runs.append((max_isa, s.run(feeds), s.plan()))
    return runs


def onnx_model(nodes, inputs, outputs, inits=(), opset=13):
    """A serialized one-graph model of `nodes` (onnx.helper) at the default-domain `opset`."""
    from onnx import helper
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def value_info(name, shape, elem_type=1):
    """A tensor's name, element type (float32 by default) and shape (None: unknown)."""
    from onnx import helper
    return helper.make_tensor_value_info(name, elem_type, shape)


def torch_case(net, x, tmp_path, opset=13):
    """Exports the PyTorch module `net` (eval mode) at input tensor x to tmp_path/m.onnx, with
    x.npy and PyTorch's output ref.npy beside it: the three paths."""
    import torch
    with torch.no_grad():
        want = net(x).numpy()
    model, xin, ref = tmp_path / "m.onnx", tmp_path / "x.npy", tmp_path / "ref.npy"
    torch.onnx.export(net, x, str(model), opset_version=opset)
    np.save(xin, x.numpy())
    np.save(ref, want)
    return model, xin, ref


def cli_bench_each_isa(cli, model, xin, ref, args, tmp_path):
    """`kiln bench MODEL --tune=none --layers --check REF ARGS` with the ISA capped to each JIT
    path (KILN_MAX_ISA), each with its own tuning cache: [(isa, stdout, max rel error)] for the
    paths this CPU has."""
    import re
    import subprocess
    runs = []
    for isa in ("avx512", "avx2"):
        env = dict(os.environ, KILN_MAX_ISA=isa, KILN_CACHE_DIR=str(tmp_path / isa))
        out = subprocess.run([cli, "bench", str(model), "--tune=none", "--runs", "2", "--layers",
                              "--input", str(xin), "--check", str(ref)] + list(args),
                             capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr
        if re.search(r"^isa: (\S+)", out.stdout, re.M).group(1) != isa:
            continue  # this CPU lacks the ISA
        runs.append((isa, out.stdout, float(re.search(r"max rel error (\S+)", out.stdout).group(1))))
    return runs
