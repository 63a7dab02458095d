"""Opsets 1-6 (the ONNX model zoo's Caffe2-era files; graph/canonicalize.cpp canonicalize_legacy):
their legacy attributes against numpy on every ISA path — broadcast / axis on elementwise ops
(B aligned at an axis of A, constant or computed), PRelu's per-channel slope, consumed_inputs,
is_test, Reshape's shape attribute, Concat without an axis, Cast to a type name, Pad's paddings,
Gemm's broadcast — a Caffe2-style network at opset 5 against the same network at opset 13, and
the forms refused by name."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=6):
    return onnx_model(nodes, inputs, outputs, inits, opset)


def check(data, feeds, want, tol=1e-6, tmp_path=None):
    for max_isa, out, plan in run_on_each_isa(data, feeds, tmp_path):
        for name, w in want.items():
            assert out[name].shape == w.shape, (max_isa, name)
            assert out[name].dtype == w.dtype, (max_isa, name)
            assert rel_error(out[name].astype(np.float64), w.astype(np.float64)) <= tol, \
                (max_isa, name)
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)


rng = np.random.default_rng(7)
X = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Div", np.divide)])
def test_broadcast_from_an_axis(op, fn, tmp_path):
    b_const = (rng.random(3) + 0.5).astype(np.float32)            # [C], axis 1
    b_in = (rng.random((3, 4)) + 0.5).astype(np.float32)          # [C, H], computed, axis 1
    b_tail = (rng.random(5) + 0.5).astype(np.float32)             # [W], no axis: suffix
    b_neg = (rng.random((4, 1)) + 0.5).astype(np.float32)         # [H, 1], axis -2
    nodes = [helper.make_node(op, ["x", "bc"], ["y1"], broadcast=1, axis=1),
             helper.make_node(op, ["x", "bi"], ["y2"], broadcast=1, axis=1),
             helper.make_node(op, ["x", "bt"], ["y3"], broadcast=1),
             helper.make_node(op, ["x", "bn"], ["y4"], broadcast=1, axis=-2),
             helper.make_node(op, ["x", "x"], ["y5"], broadcast=0, consumed_inputs=[0, 0])]
    data = model(nodes, [vi("x", X.shape), vi("bi", b_in.shape)],
                 [vi(f"y{i}", None) for i in range(1, 6)],
                 [numpy_helper.from_array(b_const, "bc"), numpy_helper.from_array(b_tail, "bt"),
                  numpy_helper.from_array(b_neg, "bn")], opset=5)
    want = {"y1": fn(X, b_const[:, None, None]), "y2": fn(X, b_in[:, :, None]),
            "y3": fn(X, b_tail), "y4": fn(X, b_neg), "y5": fn(X, X)}
    check(data, {"x": X, "bi": b_in}, {k: v.astype(np.float32) for k, v in want.items()},
          tmp_path=tmp_path)


def test_broadcast_that_does_not_fit():
    data = model([helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)],
                 [vi("x", X.shape)], [vi("y", None)],
                 [numpy_helper.from_array(np.ones(5, np.float32), "b")])
    with pytest.raises(kiln.InvalidModel, match=r"broadcast from axis 1: input 1's shape \[5\]"):
        kiln.Session.from_bytes(data)


def test_prelu_slope_per_channel(tmp_path):
    slope = np.array([0.1, -0.2, 0.3], np.float32)
    data = model([helper.make_node("PRelu", ["x", "s"], ["y"])], [vi("x", X.shape)],
                 [vi("y", None)], [numpy_helper.from_array(slope, "s")])
    want = np.where(X >= 0, X, X * slope[:, None, None])
    check(data, {"x": X}, {"y": want}, tmp_path=tmp_path)


def test_shape_and_type_attributes(tmp_path):
    """Reshape's shape attribute (opsets < 5), Concat without an axis (< 4), Cast to a type name
    (< 6), Pad's paddings (1), Dropout's is_test (< 7)."""
    nodes = [helper.make_node("Reshape", ["x"], ["r"], shape=[2, 3, 20]),
             helper.make_node("Concat", ["x", "x"], ["c"]),
             helper.make_node("Cast", ["x"], ["i"], to="INT64"),
             helper.make_node("Pad", ["x"], ["p"], paddings=[0, 0, 1, 2, 0, 0, 1, 0], value=1.5),
             helper.make_node("Dropout", ["x"], ["d"], is_test=1, ratio=0.3)]
    data = model(nodes, [vi("x", X.shape)],
                 [vi("r", None), vi("c", None), vi("i", None, TensorProto.INT64), vi("p", None),
                  vi("d", None)], opset=1)
    want = {"r": X.reshape(2, 3, 20), "c": np.concatenate([X, X], 1),
            "i": X.astype(np.int64),
            "p": np.pad(X, [(0, 0), (0, 0), (1, 1), (2, 0)], constant_values=1.5),
            "d": X}
    check(data, {"x": X}, want, tmp_path=tmp_path)


def caffe2_net(opset):
    """conv -> BatchNormalization -> Relu -> per-channel scale and bias (Mul / Add) -> max pool
    -> flatten -> Gemm -> Softmax, at `opset` in its own forms."""
    r = np.random.default_rng(3)
    w = (r.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    bn = [r.random(8).astype(np.float32) + 0.5, r.standard_normal(8).astype(np.float32) * 0.1,
          r.standard_normal(8).astype(np.float32) * 0.1, r.random(8).astype(np.float32) + 0.5]
    scale, bias = r.random(8).astype(np.float32) + 0.5, r.standard_normal(8).astype(np.float32)
    fc_w = (r.standard_normal((10, 8 * 4 * 4)) * 0.1).astype(np.float32)
    fc_b = r.standard_normal(10).astype(np.float32)
    legacy = opset < 7
    inits = [numpy_helper.from_array(w, "w")] + [
        numpy_helper.from_array(v, n) for v, n in zip(bn, ["g", "beta", "mean", "var"])] + [
        numpy_helper.from_array(scale if legacy else scale.reshape(8, 1, 1), "s"),
        numpy_helper.from_array(bias if legacy else bias.reshape(8, 1, 1), "t"),
        numpy_helper.from_array(fc_w, "fw"), numpy_helper.from_array(fc_b, "fb")]
    bn_attrs = {"is_test": 1, "epsilon": 1e-3, "spatial": 1} if legacy else {"epsilon": 1e-3}
    if opset < 6:
        bn_attrs["consumed_inputs"] = [0, 0, 0, 1, 1]
    bcast = {"broadcast": 1, "axis": 1} if legacy else {}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["b"],
                              **bn_attrs),
             helper.make_node("Relu", ["b"], ["r"], **({"consumed_inputs": [0]} if opset < 6
                                                      else {})),
             helper.make_node("Mul", ["r", "s"], ["m"], **bcast),
             helper.make_node("Add", ["m", "t"], ["a"], **bcast),
             helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["z"], transB=1,
                              **({"broadcast": 1} if legacy else {})),
             helper.make_node("Softmax", ["z"], ["y"])]
    return model(nodes, [vi("x", (2, 3, 8, 8))], [vi("y", None)], inits, opset=opset)


def test_caffe2_style_network(tmp_path):
    x = np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with kiln.Session.from_bytes(caffe2_net(13), max_isa="scalar") as s:
        want = s.run({"x": x})["y"]
    check(caffe2_net(5), {"x": x}, {"y": want}, tol=2e-6, tmp_path=tmp_path)


@pytest.mark.parametrize("node,opset,match", [
    (helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=2.0), 1,
     "opset 1 form of Upsample"),
    (helper.make_node("Relu", ["x"], ["y"], kiln_legacy_axis=1), 13, "kiln_legacy_axis"),
])
def test_refused(node, opset, match):
    data = model([node], [vi("x", X.shape)], [vi("y", None)], opset=opset)
    with pytest.raises(kiln.Error, match=match):
        kiln.Session.from_bytes(data)
