"""Detection decoding without reference kernels: GatherElements (torch.gather), Gather with
computed indices, int64 Add / Sub / Mul / Div / Mod (floor division and % on top-K indices),
int64 Expand, float Mod and Pow with a computed exponent. Against numpy and PyTorch on every
ISA path; on a JIT ISA the plan has no reference kernel. A computed index outside its axis and
an integer division by zero are errors that name the problem."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import kiln

from helpers import run_on_each_isa

I64, F32 = TensorProto.INT64, TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def no_ref_kernels(max_isa, plan):
    if max_isa != "scalar":
        kernels = [st["kernel"] for st in plan["steps"]]
        assert not [k for k in kernels if k.startswith("ref_")], kernels


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("data,index,axis", [
    ((3, 5, 7), (3, 5, 7), 0), ((3, 5, 7), (2, 9, 4), 1), ((3, 5, 7), (3, 4, 11), -1),
    ((1, 400, 2), (1, 50, 2), 1), ((6,), (20,), 0)])
def test_gather_elements(dtype, data, index, axis, tmp_path):
    rng = np.random.default_rng(len(index) + axis)
    x = (rng.standard_normal(data) * 100).astype(dtype)
    dim = data[axis]
    idx = rng.integers(-dim, dim, size=index).astype(np.int64)
    t = F32 if dtype == np.float32 else I64
    data_ = model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)],
                  [("x", t, data), ("i", I64, index)], [("y", t)])
    # numpy's take_along_axis wants the other axes equal: index the data's leading slices.
    sub = x[tuple(slice(0, n) if a != axis % len(data) else slice(None)
                  for a, n in enumerate(index))]
    want = np.take_along_axis(sub, np.where(idx < 0, idx + dim, idx), axis=axis)
    for max_isa, out, plan in run_on_each_isa(data_, {"x": x, "i": idx}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


def test_gather_elements_constant_indices(tmp_path):
    x = np.random.default_rng(0).standard_normal((3, 5, 4)).astype(np.float32)
    idx = np.random.default_rng(1).integers(-5, 5, size=(3, 7, 4)).astype(np.int64)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("GatherElements", ["r", "i"], ["y"], axis=1)]
    data = model(nodes, [("x", F32, x.shape)], [("y", F32)], [numpy_helper.from_array(idx, "i")])
    want = np.take_along_axis(np.maximum(x, 0), np.where(idx < 0, idx + 5, idx), axis=1)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


@pytest.mark.parametrize("op", ["GatherElements", "Gather"])
def test_gather_index_out_of_range_is_an_error(op, tmp_path):
    x = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    idx = np.zeros((2, 4, 3) if op == "GatherElements" else (4,), np.int64)
    data = model([helper.make_node(op, ["x", "i"], ["y"], axis=1)],
                 [("x", F32, x.shape), ("i", I64, idx.shape)], [("y", F32)])
    for max_isa in ("avx512", "avx2", "scalar"):
        with kiln.Session.from_bytes(data, threads=2, max_isa=max_isa,
                                     cache_dir=str(tmp_path)) as s:
            s.run({"x": x, "i": idx})  # fine
            bad = idx.copy()
            bad.flat[-1] = 5
            with pytest.raises(kiln.Error, match="index 5 is out of range"):
                s.run({"x": x, "i": bad})


def test_gather_computed_rows(tmp_path):
    """Gather at the indices of a TopK (the picks of a decoder) on both axes."""
    x = np.random.default_rng(2).standard_normal((2, 40, 6)).astype(np.float32)
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], axes=[2], keepdims=0),
             helper.make_node("TopK", ["m", "k"], ["v", "i"], axis=1),
             helper.make_node("Flatten", ["i"], ["f"], axis=0),
             helper.make_node("Gather", ["x", "f"], ["rows"], axis=1),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("Gather", ["xt", "f"], ["cols"], axis=2)]
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    data = model(nodes, [("x", F32, x.shape)], [("rows", F32), ("cols", F32), ("f", I64)], [k])
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert out["f"].shape == (1, 6)
        np.testing.assert_array_equal(out["rows"], np.take(x, out["f"], axis=1), err_msg=max_isa)
        np.testing.assert_array_equal(out["cols"], np.take(x.transpose(0, 2, 1), out["f"], axis=2),
                                      err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


def int_reference(op, a, b, fmod):
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape, np.int64)
    for i, (p, q) in enumerate(zip(a.flat, b.flat)):
        p, q = int(p), int(q)
        if op == "Add":
            r = p + q
        elif op == "Sub":
            r = p - q
        elif op == "Mul":
            r = p * q
        elif op == "Div":
            r = abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1)
        else:
            r = abs(p) % abs(q) * (1 if p >= 0 else -1)  # the dividend's sign
            if not fmod and r != 0 and (r < 0) != (q < 0):
                r += q
        out.flat[i] = (r + 2**63) % 2**64 - 2**63  # wraps
    return out


@pytest.mark.parametrize("op,fmod", [("Add", 0), ("Sub", 0), ("Mul", 0), ("Div", 0), ("Mod", 0),
                                     ("Mod", 1)])
def test_int64_arithmetic(op, fmod, tmp_path):
    rng = np.random.default_rng(len(op) + fmod)
    a = rng.integers(-50, 50, size=(3, 1, 17)).astype(np.int64)
    b = rng.integers(1, 9, size=(5, 17)).astype(np.int64) * rng.choice([-1, 1], size=(5, 17))
    a[0, 0, :3] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -7]
    b[0, :3] = [-1, 2, 2]
    attrs = {"fmod": fmod} if op == "Mod" else {}
    data = model([helper.make_node(op, ["a", "b"], ["y"], **attrs)],
                 [("a", I64, a.shape), ("b", I64, b.shape)], [("y", I64)])
    want = int_reference(op, a, b, fmod)
    for max_isa, out, plan in run_on_each_isa(data, {"a": a, "b": b}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_int64_division_by_zero_is_an_error(op, tmp_path):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    data = model([helper.make_node(op, ["a", "b"], ["y"])],
                 [("a", I64, a.shape), ("b", I64, (4,))], [("y", I64)])
    for max_isa in ("avx512", "avx2", "scalar"):
        with kiln.Session.from_bytes(data, threads=2, max_isa=max_isa,
                                     cache_dir=str(tmp_path)) as s:
            s.run({"a": a, "b": np.array([1, 2, 3, 4], np.int64)})
            with pytest.raises(kiln.Error, match="by zero"):
                s.run({"a": a, "b": np.array([1, 2, 0, 4], np.int64)})


def test_float_pow_with_a_computed_exponent(tmp_path):
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, size=(2, 3, 1, 4, 5)).astype(np.float32)
    e = rng.integers(-2, 4, size=(1, 1, 6, 1, 5)).astype(np.float32)
    e[0, 0, 0] = 2.0  # x^2 as x * x
    e[0, 0, 1] = 0.5  # NaN for negative bases, as std::pow
    data = model([helper.make_node("Pow", ["x", "e"], ["y"])],
                 [("x", F32, x.shape), ("e", F32, e.shape)], [("y", F32)])
    runs = run_on_each_isa(data, {"x": x, "e": e}, tmp_path)
    want = runs[-1][1]["y"]  # the reference kernel's
    with np.errstate(invalid="ignore"):  # (the NaNs wanted)
        np.testing.assert_allclose(want, np.power(x, e), rtol=1e-6)
    for max_isa, out, plan in runs:
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


def test_int64_expand_and_float_mod(tmp_path):
    a = np.array([[3], [-4]], np.int64)
    x = np.random.default_rng(5).standard_normal((2, 3, 1, 1, 4)).astype(np.float32) * 10
    m = np.random.default_rng(6).uniform(1, 3, size=(1, 1, 2, 5, 1)).astype(np.float32)
    shape = numpy_helper.from_array(np.array([2, 5], np.int64), "s")
    nodes = [helper.make_node("Expand", ["a", "s"], ["e"]),
             helper.make_node("Mod", ["x", "m"], ["r"], fmod=1)]
    data = model(nodes, [("a", I64, a.shape), ("x", F32, x.shape), ("m", F32, m.shape)],
                 [("e", I64), ("r", F32)], [shape])
    for max_isa, out, plan in run_on_each_isa(data, {"a": a, "x": x, "m": m}, tmp_path):
        np.testing.assert_array_equal(out["e"], np.broadcast_to(a, (2, 5)), err_msg=max_isa)
        np.testing.assert_array_equal(out["r"], np.fmod(x, m), err_msg=max_isa)
        no_ref_kernels(max_isa, plan)


class CenterNetDecoder(nn.Module):
    """CenterNet's decoding: 3x3 max-pool peaks, top-K over classes x pixels, class and pixel
    by floor division and %, size and offset gathered at the peaks (torch.gather)."""

    def __init__(self, k=30):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 1, 1),
                                  nn.ReLU())
        self.hm, self.wh, self.k = nn.Conv2d(16, 5, 1), nn.Conv2d(16, 2, 1), k

    def forward(self, x):
        f = self.body(x)
        heat, wh = torch.sigmoid(self.hm(f)), self.wh(f)
        b, c, h, w = heat.shape
        heat = heat * (F.max_pool2d(heat, 3, 1, 1) == heat).float()
        scores, inds = torch.topk(heat.view(b, -1), self.k)
        cls = torch.div(inds, h * w, rounding_mode="floor")
        pix = inds % (h * w)
        ys, xs = torch.div(pix, w, rounding_mode="floor"), pix % w
        size = wh.view(b, 2, -1).permute(0, 2, 1).gather(1, pix.unsqueeze(2).expand(b, self.k, 2))
        return torch.cat([xs.float().unsqueeze(2), ys.float().unsqueeze(2), size,
                          scores.unsqueeze(2), cls.float().unsqueeze(2)], 2)


def test_centernet_decoder_matches_pytorch(tmp_path):
    torch.manual_seed(0)
    m = CenterNetDecoder().eval()
    x = torch.rand(1, 3, 64, 80)
    with torch.no_grad():
        want = m(x).numpy()
    path = tmp_path / "centernet.onnx"
    torch.onnx.export(m, x, str(path), opset_version=13, input_names=["x"], output_names=["y"])
    data = path.read_bytes()
    for max_isa, out, plan in run_on_each_isa(data, {"x": x.numpy()}, tmp_path):
        np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5, err_msg=max_isa)
        no_ref_kernels(max_isa, plan)
