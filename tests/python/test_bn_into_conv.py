"""A BatchNormalization whose consumers are all unpadded Convs with constant weights (a pre-norm
before 1x1 convs, as VAN writes it) folds into those convs' weights and bias — no BN step, one
conv step each — against numpy on every ISA path; with a padded consumer (whose border taps read
zeros, not the BN's shift) it stays, with the same results."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi

rng = np.random.default_rng(33)


def const(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def conv_ref(x, w, b, group=1, pad=0):
    """Direct NCHW convolution, stride 1, in float64."""
    n, c, h, wd = x.shape
    m, icpg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    opg = m // group
    for oc in range(m):
        g = oc // opg
        for i in range(icpg):
            for r in range(kh):
                for s in range(kw):
                    y[:, oc] += w[oc, i, r, s] * xp[:, g * icpg + i, r:r + oh, s:s + ow]
        y[:, oc] += b[oc]
    return y


@pytest.mark.parametrize("consumers,folds", [
    ([(1, 1, 0)], True),                 # one 1x1
    ([(1, 1, 0), (3, 1, 0)], True),      # a 1x1 and an unpadded 3x3
    ([(1, 4, 0)], True),                 # grouped 1x1
    ([(1, 1, 0), (3, 1, 1)], False),     # one consumer padded: stays
])
def test_batchnorm_into_consumer_convs(consumers, folds, tmp_path):
    c, m = 8, 12
    x = rng.standard_normal((2, c, 9, 10)).astype(np.float32)
    scale, bias = rng.uniform(0.5, 1.5, c), rng.standard_normal(c)
    mean, var = rng.standard_normal(c), rng.uniform(0.5, 2.0, c)
    nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["n"],
                              epsilon=1e-4)]
    inits = [const("scale", scale), const("bias", bias), const("mean", mean), const("var", var)]
    xn = (x.astype(np.float64) - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-4)
    xn = xn * scale[:, None, None] + bias[:, None, None]
    outs, wants = [], []
    for k, (ks, group, pad) in enumerate(consumers):
        w = rng.standard_normal((m, c // group, ks, ks)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        inits += [const(f"w{k}", w), const(f"b{k}", b)]
        nodes.append(helper.make_node("Conv", ["n", f"w{k}", f"b{k}"], [f"y{k}"], group=group,
                                      pads=[pad] * 4, kernel_shape=[ks, ks]))
        outs.append(f"y{k}")
        wants.append(conv_ref(xn, w, b, group, pad).astype(np.float32))
    data = onnx_model(nodes, [vi("x", x.shape)], [vi(o, None) for o in outs], inits, 13)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        for o, want in zip(outs, wants):
            assert rel_error(out[o], want) <= 3e-6, (max_isa, o)
        ops = [st["op"] for st in plan["steps"] if not st["kernel"].startswith("reorder")]
        assert ("BatchNormalization" not in ops) == folds, (max_isa, ops)
        assert ops.count("Conv") == len(consumers), (max_isa, ops)
