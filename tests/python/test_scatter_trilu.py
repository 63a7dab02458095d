"""ScatterElements and ScatterND (every reduction, f32 and int64, negative and repeated indices,
outputs over several tiles) and Trilu (both triangles, diagonals in and outside the matrix) on
computed tensors, against numpy on every ISA path; indices outside the axis are an error naming
the index. On a JIT ISA the scatters run on the glue kernel (jit/glue/scatter.cpp), bit-equal to
the reference kernels; Trilu with a constant k becomes a Where with a constant mask (the typed
glue kernel), with a computed k a Where of the diagonal offsets compared with k per run."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln

from helpers import run_on_each_isa

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def numpy_scatter(x, idx, upd, axis, red):
    y = x.copy()
    for j in np.ndindex(*idx.shape):
        at = list(j)
        at[axis] = idx[j] % x.shape[axis]
        at = tuple(at)
        y[at] = {"none": upd[j], "add": y[at] + upd[j], "mul": y[at] * upd[j],
                 "max": max(y[at], upd[j]), "min": min(y[at], upd[j])}[red]
    return y


@pytest.mark.parametrize("red", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(red, axis, tmp_path):
    rng = np.random.default_rng(abs(axis) * 7 + len(red))
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    shape = [3, 4, 5]
    shape[axis] = 7  # more updates than the axis: repeated indices (without a reduction the
    # last one wins, in index order, as ORT does)
    dim = x.shape[axis]
    idx = rng.integers(-dim, dim, size=shape).astype(np.int64)
    upd = rng.standard_normal(shape).astype(np.float32)
    data = model([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("ScatterElements", ["r", "i", "u"], ["y"], axis=axis,
                                   reduction=red)],
                 [("x", F32, x.shape), ("i", I64, shape), ("u", F32, shape)], [("y", F32)])
    want = numpy_scatter(np.maximum(x, 0), idx, upd, axis % 3, red)
    runs = run_on_each_isa(data, {"x": x, "i": idx, "u": upd}, tmp_path)
    check_glue(runs, "scatter_elements_f32")
    for max_isa, out, _ in runs:
        np.testing.assert_allclose(out["y"], want, rtol=1e-6, err_msg=max_isa)
        np.testing.assert_array_equal(out["y"], runs[-1][1]["y"], err_msg=max_isa)
    with kiln.Session.from_bytes(data) as s:
        bad = idx.copy()
        bad.flat[5] = dim
        with pytest.raises(kiln.InvalidArgument, match=f"index {dim} is out of range"):
            s.run({"x": x, "i": bad, "u": upd})


def check_glue(runs, kernel):
    """The JIT ISAs' plans run the node on the glue kernel; the last run is the reference's."""
    assert runs[-1][0] == "scalar"
    for max_isa, _, plan in runs[:-1]:
        kernels = [st["kernel"] for st in plan["steps"]]
        assert kernel in kernels and not any(k.startswith("ref_") for k in kernels), kernels


def numpy_scatter_nd(x, idx, upd, red):
    y = x.copy()
    q = idx.shape[-1]
    for j in np.ndindex(*idx.shape[:-1]):
        at = tuple(int(v) % x.shape[d] for d, v in enumerate(idx[j]))
        y[at] = {"none": upd[j], "add": y[at] + upd[j], "mul": y[at] * upd[j],
                 "max": np.maximum(y[at], upd[j]), "min": np.minimum(y[at], upd[j])}[red]
    return y


# (data shape, indices shape without q, q): slices of rows, of planes, single elements, and an
# output of 5 tiles (65,536 elements each) with updates spanning tile boundaries.
ND_CASES = [((6, 5, 4), (3,), 1), ((6, 5, 4), (2, 4), 2), ((6, 5, 4), (7,), 3),
            ((3, 300, 400), (2, 3), 1), ((3, 300, 400), (50,), 2)]


@pytest.mark.parametrize("red", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("case", range(len(ND_CASES)))
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_scatter_nd(red, case, dtype, tmp_path):
    xs, lead, q = ND_CASES[case]
    rng = np.random.default_rng(case * 10 + len(red))
    x = (rng.standard_normal(xs) * 8).astype(dtype)
    idx = np.stack([rng.integers(-xs[d], xs[d], size=lead) for d in range(q)], -1)
    if red == "none":  # (repeated indices: the last wins, in index order)
        idx = idx.astype(np.int64)
    us = lead + xs[q:]
    upd = (rng.standard_normal(us) * 8).astype(dtype)
    elem = F32 if dtype == np.float32 else I64
    data = model([helper.make_node("Identity", ["x"], ["r"]),
                  helper.make_node("ScatterND", ["r", "i", "u"], ["y"], reduction=red)],
                 [("x", elem, xs), ("i", I64, idx.shape), ("u", elem, us)], [("y", elem)])
    want = numpy_scatter_nd(x, idx, upd, red)
    runs = run_on_each_isa(data, {"x": x, "i": idx.astype(np.int64), "u": upd}, tmp_path)
    check_glue(runs, "scatter_nd_" + ("f32" if dtype == np.float32 else "s64"))
    for max_isa, out, _ in runs:
        np.testing.assert_array_equal(out["y"], runs[-1][1]["y"], err_msg=max_isa)
        if dtype == np.float32:
            np.testing.assert_allclose(out["y"], want, rtol=1e-6, err_msg=max_isa)
        else:
            np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
    with kiln.Session.from_bytes(data) as s:
        bad = idx.astype(np.int64).copy()
        bad.flat[-1] = -xs[q - 1] - 1
        with pytest.raises(kiln.InvalidArgument, match=f"index {-xs[q - 1] - 1} is out of range"):
            s.run({"x": x, "i": bad, "u": upd})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-7, -1, 0, 2, 9])
def test_trilu(upper, k, tmp_path):
    x = np.random.default_rng(k + 10).standard_normal((2, 3, 5, 6)).astype(np.float32)
    data = model([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("Trilu", ["r", "k"], ["y"], upper=upper)],
                 [("x", F32, x.shape), ("k", I64, [])], [("y", F32)])
    r = np.maximum(x, 0)
    want = np.triu(r, k) if upper else np.tril(r, k)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x, "k": np.array(k)}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        if max_isa != "scalar":  # (the diagonal offsets compared with k per run, then Where)
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not any(n.startswith("ref_") for n in kernels), kernels


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("upper,k", [(1, 0), (0, -2), (1, 3), (0, 8)])
def test_trilu_constant_k_runs_as_where(dtype, upper, k, tmp_path):
    rng = np.random.default_rng(k + 20)
    x = (rng.standard_normal((3, 7, 5)) * 4).astype(dtype)
    elem = {np.float32: F32, np.int64: I64, np.bool_: TensorProto.BOOL}[dtype]
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["r"]),
                           helper.make_node("Trilu", ["r", "k"], ["y"], upper=upper)], "m",
                          [helper.make_tensor_value_info("x", elem, x.shape)],
                          [helper.make_tensor_value_info("y", elem, None)],
                          initializer=[helper.make_tensor("k", I64, [], [k])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    want = np.triu(x, k) if upper else np.tril(x, k)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not any(k.startswith("ref_") for k in kernels), kernels
