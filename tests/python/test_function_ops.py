"""Ops ONNX defines as functions, expanded at import (graph/function_ops.h), against numpy on every
ISA path: Shrink (hard and soft), MeanVarianceNormalization (default and given axes), EyeLike
(diagonal offsets, the input's type or the dtype attribute), Compress (constant and computed
conditions, shorter than the axis, no axis), ReverseSequence (either axis order, constant and
computed lengths), Scatter (opsets 9-10); and OneHot, expanded at shape inference (int64 and float
indices, negative and out-of-range ones, every axis, depth constant or fed at run time), as are a
Dropout's mask output, LayerNormalization's Mean / InvStdDev outputs and BatchNormalization in
training mode (every rank, opsets before and after 14's training_mode, weight standardisation)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=13):
    return onnx_model(nodes, inputs, outputs, inits, opset)


def check(data, feeds, want, tmp_path, tol=1e-6, ref_free=True):
    for max_isa, out, plan in run_on_each_isa(data, feeds, tmp_path):
        for name, w in want.items():
            assert out[name].shape == w.shape, (max_isa, name, out[name].shape)
            assert out[name].dtype == w.dtype, (max_isa, name, out[name].dtype)
            if w.size:
                assert rel_error(out[name].astype(np.float64), w.astype(np.float64)) <= tol, \
                    (max_isa, name)
        if max_isa != "scalar" and ref_free:
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)


rng = np.random.default_rng(11)


@pytest.mark.parametrize("lambd,bias", [(1.5, 0.0), (1.5, 1.5), (0.5, -0.25)])
def test_shrink(lambd, bias, tmp_path):
    x = (rng.standard_normal((2, 3, 7, 5)) * 2).astype(np.float32)
    x.flat[:3] = [lambd, -lambd, 0]  # (the boundaries: not shrunk past, zero)
    data = model([helper.make_node("Shrink", ["x"], ["y"], lambd=lambd, bias=bias)],
                 [vi("x", x.shape)], [vi("y", None)])
    want = np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype(np.float32)
    check(data, {"x": x}, {"y": want}, tmp_path)


@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5), None), ((3, 6, 10), [1]),
                                        ((2, 5, 4, 3), [2, 3])])
def test_mean_variance_normalization(shape, axes, tmp_path):
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    attrs = {} if axes is None else {"axes": axes}
    data = model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)],
                 [vi("x", shape)], [vi("y", None)])
    ax = tuple(axes or [0, 2, 3])
    mean = x.astype(np.float64).mean(axis=ax, keepdims=True)
    sd = np.sqrt((x.astype(np.float64) ** 2).mean(axis=ax, keepdims=True) - mean ** 2)
    check(data, {"x": x}, {"y": ((x - mean) / (sd + 1e-9)).astype(np.float32)}, tmp_path,
          tol=2e-5)


@pytest.mark.parametrize("shape,k,dtype,itype", [((4, 5), 1, None, F), ((6, 3), -2, None,
                                                  TensorProto.INT64), ((3, 3), 0, F,
                                                  TensorProto.INT32)])
def test_eye_like(shape, k, dtype, itype, tmp_path):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    otype = itype if dtype is None else dtype
    data = model([helper.make_node("EyeLike", ["x"], ["y"], **attrs),
                  helper.make_node("Identity", ["x"], ["x2"])],
                 [vi("x", shape, itype)], [vi("y", None, otype), vi("x2", None, itype)])
    np_type = {F: np.float32, TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}
    x = np.ones(shape, np_type[itype])
    check(data, {"x": x}, {"y": np.eye(*shape, k=k, dtype=np_type[otype])}, tmp_path)


@pytest.mark.parametrize("axis,cond,computed", [(0, [1, 0, 1], False), (1, [0, 1, 1, 0, 1], True),
                                                (2, [1, 0], True), (None, [0, 1, 1, 0, 1, 1], True),
                                                (-1, [0, 0, 0, 0], True)])
def test_compress(axis, cond, computed, tmp_path):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    c = np.array(cond, bool)
    attrs = {} if axis is None else {"axis": axis}
    inputs, inits, feeds = [vi("x", x.shape)], [], {"x": x}
    if computed:
        inputs.append(vi("c", c.shape, TensorProto.BOOL))
        feeds["c"] = c
    else:
        inits.append(numpy_helper.from_array(c, "c"))
    data = model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)], inputs,
                 [vi("y", None)], inits)
    want = np.compress(c, x, axis=axis)
    # (A computed condition: the selection and gather run after the planned part, as any
    # output whose size the data decides.)
    check(data, feeds, {"y": want}, tmp_path, ref_free=not computed)


def test_scatter_old_name(tmp_path):
    data_ = rng.standard_normal((3, 5)).astype(np.float32)
    idx = np.array([[1, 3], [0, 4], [2, 2]], np.int64)
    upd = rng.standard_normal((3, 2)).astype(np.float32)
    data = model([helper.make_node("Scatter", ["d", "i", "u"], ["y"], axis=1)],
                 [vi("d", data_.shape), vi("i", idx.shape, TensorProto.INT64),
                  vi("u", upd.shape)], [vi("y", None)], opset=10)
    want = data_.copy()
    for r in range(3):
        for j in range(2):
            want[r, idx[r, j]] = upd[r, j]
    check(data, {"d": data_, "i": idx, "u": upd}, {"y": want}, tmp_path, ref_free=False)


@pytest.mark.parametrize("shape,time_axis,lens,computed", [
    ((5, 3, 4), 0, [5, 2, 0], False), ((3, 6, 2, 2), 1, [6, 1, 4], True), ((4, 4), 1, [1, 2, 3, 4],
                                                                           True)])
def test_reverse_sequence(shape, time_axis, lens, computed, tmp_path):
    x = rng.standard_normal(shape).astype(np.float32)
    seq = np.array(lens, np.int64)
    inputs, inits, feeds = [vi("x", shape)], [], {"x": x}
    if computed:
        inputs.append(vi("l", seq.shape, TensorProto.INT64))
        feeds["l"] = seq
    else:
        inits.append(numpy_helper.from_array(seq, "l"))
    data = model([helper.make_node("ReverseSequence", ["x", "l"], ["y"], time_axis=time_axis,
                                   batch_axis=1 - time_axis)], inputs, [vi("y", None)], inits)
    want = x.copy()
    for b, n in enumerate(lens):
        if time_axis == 0:
            want[:n, b] = x[:n, b][::-1]
        else:
            want[b, :n] = x[b, :n][::-1]
    check(data, feeds, {"y": want}, tmp_path)


def numpy_one_hot(idx, depth, values, axis):
    i = idx.astype(np.int64)
    i = np.where(i < 0, i + depth, i)
    a = axis if axis >= 0 else axis + idx.ndim + 1
    classes = np.arange(depth).reshape([depth if d == a else 1 for d in range(idx.ndim + 1)])
    return np.where(np.expand_dims(i, a) == classes, values[1], values[0]).astype(values.dtype)


# (indices shape and dtype, depth and its dtype, values dtype, axis, depth fed at run time)
@pytest.mark.parametrize("shape,itype,depth,dtype,vtype,axis,computed", [
    ((2, 3), np.int64, 5, np.int64, np.float32, -1, False),
    ((4,), np.float32, 7.0, np.float32, np.int64, 0, False),
    ((2, 3, 4), np.int64, 6, np.int64, np.float32, 1, False),
    ((3, 5), np.int64, 4, np.int64, np.float32, -2, True)])
def test_one_hot(shape, itype, depth, dtype, vtype, axis, computed, tmp_path):
    d = int(depth)
    # Every class, negative indices (wrapping), and indices outside [-depth, depth): all off.
    idx = rng.integers(-d - 2, d + 2, size=shape).astype(itype)
    idx.flat[:3] = [0, -1, d]
    values = np.array([-2, 3], vtype)
    dep = np.array(depth, dtype)
    inputs, inits, feeds = [vi("i", shape, 7 if itype == np.int64 else 1)], [], {"i": idx}
    if computed:
        inputs.append(vi("d", [], 7 if dtype == np.int64 else 1))
        feeds["d"] = dep
    else:
        inits.append(numpy_helper.from_array(dep, "d"))
    inits.append(numpy_helper.from_array(values, "v"))
    data = model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=axis)], inputs,
                 [vi("y", None)], inits, opset=11)
    want = numpy_one_hot(idx, d, values, axis)
    # (A depth fed at run time sizes the output per run: the per-run tail, reference kernels.)
    check(data, feeds, {"y": want}, tmp_path, tol=0, ref_free=not computed)


@pytest.mark.parametrize("opset", [12, 13])
def test_dropout_mask_output(opset, tmp_path):
    """Inference drops nothing: y is x, the mask all true (an Expand of a true, no reference
    kernel)."""
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    data = model([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("Dropout", ["r"], ["y", "mask"])],
                 [vi("x", x.shape)], [vi("y", None), vi("mask", None, TensorProto.BOOL)],
                 opset=opset)
    check(data, {"x": x}, {"y": np.maximum(x, 0), "mask": np.ones(x.shape, bool)}, tmp_path)


@pytest.mark.parametrize("axis,shape", [(-1, (2, 5, 24)), (1, (3, 4, 6)), (2, (2, 3, 4, 8))])
@pytest.mark.parametrize("scale", ["constant", "input"])
def test_layer_norm_statistics_outputs(axis, shape, scale, tmp_path):
    """Mean and InvStdDev (ONNX's function body over the normalised dims) beside Y."""
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    norm = shape[axis:] if axis >= 0 else shape[axis:]
    w = rng.standard_normal(norm).astype(np.float32)
    inputs, inits, feeds = [vi("x", shape)], [], {"x": x}
    if scale == "input":
        inputs.append(vi("w", w.shape))
        feeds["w"] = w
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    node = helper.make_node("LayerNormalization", ["x", "w"], ["y", "mean", "inv"], axis=axis,
                            epsilon=1e-4)
    data = model([node], inputs, [vi("y", None), vi("mean", None), vi("inv", None)], inits,
                 opset=17)
    xd = x.astype(np.float64)
    axes = tuple(range(axis % len(shape), len(shape)))
    mean = xd.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((xd - mean) ** 2).mean(axis=axes, keepdims=True) + 1e-4)
    want = {"y": ((xd - mean) * inv * w).astype(np.float32), "mean": mean.astype(np.float32),
            "inv": inv.astype(np.float32)}
    check(data, feeds, want, tmp_path, tol=1e-5)


def numpy_bn_training(x, scale, bias, mean, var, eps, momentum):
    xd = x.astype(np.float64)
    ax = tuple(d for d in range(x.ndim) if d != 1)
    at = (1, -1) + (1,) * (x.ndim - 2)
    bm, bv = xd.mean(axis=ax), xd.var(axis=ax)
    y = (xd - bm.reshape(at)) / np.sqrt(bv.reshape(at) + eps) * scale.reshape(at) + bias.reshape(at)
    f = lambda a: a.astype(np.float32)
    return {"y": f(y), "rm": f(mean * momentum + bm * (1 - momentum)),
            "rv": f(var * momentum + bv * (1 - momentum)), "sm": f(bm), "sv": f(bv)}


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 17), (2, 5, 7, 6), (1, 4, 3, 5, 2)])
@pytest.mark.parametrize("opset,outputs", [(15, 1), (15, 3), (13, 5), (13, 2), (9, 3)])
def test_batch_norm_training(shape, opset, outputs, tmp_path):
    """Training mode (training_mode=1; before opset 14, statistics outputs asked for): Y from the
    batch's own statistics, whatever the mean / var inputs; the running statistics with momentum;
    opsets < 14's saved mean / var."""
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    scale, bias, mean, var = (rng.standard_normal(c).astype(np.float32) for _ in range(4))
    var = np.abs(var) + 0.5
    names = ["y", "rm", "rv", "sm", "sv"][:outputs]
    attrs = {"epsilon": 1e-3, "momentum": 0.8}
    if opset >= 14:
        attrs["training_mode"] = 1
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], names, **attrs)
    inits = [numpy_helper.from_array(a, n) for a, n in ((scale, "s"), (bias, "b"), (mean, "m"),
                                                        (var, "v"))]
    data = model([node], [vi("x", shape)], [vi(n, None) for n in names], inits, opset=opset)
    if opset < 14 and outputs == 1:
        return  # (inference then: the other tests)
    want = numpy_bn_training(x, scale, bias, mean, var, 1e-3, 0.8)
    check(data, {"x": x}, {n: want[n] for n in names}, tmp_path, tol=2e-5)


def test_batch_norm_training_standardised_conv(tmp_path):
    """NFNet / BiT's weight-standardised conv as PyTorch exports F.batch_norm(training=True) over
    the weights: folded at load (constant weights), the conv on a JIT kernel."""
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    gain = (rng.standard_normal(8) * 0.1 + 1).astype(np.float32)
    x = rng.standard_normal((1, 3, 12, 10)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in (
        (w, "w"), (gain, "g"), (np.zeros(8, np.float32), "z"), (np.ones(8, np.float32), "one"),
        (np.array([1, 8, 27], np.int64), "flat"), (np.array(w.shape, np.int64), "wshape"))]
    nodes = [helper.make_node("Reshape", ["w", "flat"], ["wf"]),
             helper.make_node("BatchNormalization", ["wf", "g", "z", "z", "one"],
                              ["wn", "rm", "rv"], epsilon=1e-6, momentum=0.0, training_mode=1),
             helper.make_node("Reshape", ["wn", "wshape"], ["ws"]),
             helper.make_node("Conv", ["x", "ws"], ["y"], pads=[1, 1, 1, 1])]
    data = model(nodes, [vi("x", x.shape)], [vi("y", None)], inits, opset=15)
    wd = w.astype(np.float64).reshape(8, -1)
    ws = ((wd - wd.mean(1, keepdims=True)) / np.sqrt(wd.var(1, keepdims=True) + 1e-6)
          * gain[:, None]).reshape(w.shape)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((1, 8, 12, 10))
    for i in range(3):
        for j in range(3):
            y += np.einsum("oc,nchw->nohw", ws[:, :, i, j], xp[:, :, i:i + 12, j:j + 10])
    check(data, {"x": x}, {"y": y.astype(np.float32)}, tmp_path, tol=2e-5)


@pytest.mark.parametrize("opset,training,outputs,match", [
    (15, 0, 3, "only with training_mode=1"), (15, 1, 5, "defines at most 3")])
def test_batch_norm_training_refused(opset, training, outputs, match):
    names = ["y", "rm", "rv", "sm", "sv"][:outputs]
    inits = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in "sbmv"]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], names,
                            training_mode=training)
    data = model([node], [vi("x", (1, 3, 4, 4))], [vi(n, None) for n in names], inits,
                 opset=opset)
    with pytest.raises(kiln.InvalidModel, match=match):
        kiln.Session.from_bytes(data)
