"""A channel Concat at batch 1 in a blocked layout is written in place by its inputs' producers
(runtime/plan.cpp) also where an input has other readers (GhostNet: the 1x1 conv's output feeds
the cheap depthwise conv and the concat): they read the concat's slice, whose bytes live until
the last of them. Not in place where an input is a graph output or appears twice. Against numpy,
2 threads, each ISA path, the fixed (blocked) strategy so the concat's layout is known."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from helpers import onnx_model, rel_error, value_info as vi

rng = np.random.default_rng(44)


def conv(x, w, group=1, pad=0):
    """NCHW convolution, stride 1, float64."""
    n, c, h, wd = x.shape
    m, icpg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    y = np.zeros((n, m, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1))
    opg = m // group
    for oc in range(m):
        for i in range(icpg):
            for r in range(kh):
                for s in range(kw):
                    y[:, oc] += w[oc, i, r, s] * xp[:, oc // opg * icpg + i, r:r + y.shape[2],
                                                    s:s + y.shape[3]]
    return y


@pytest.mark.parametrize("form,inplace", [("ghost", 1), ("twice", 0), ("output", 0)])
def test_inplace_concat_with_other_readers(form, inplace):
    import kiln
    c = 16
    x = rng.standard_normal((1, 8, 6, 7)).astype(np.float32)
    w1 = rng.standard_normal((c, 8, 1, 1)).astype(np.float32)
    wd = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 2 * c, 1, 1)).astype(np.float32)
    a = conv(x.astype(np.float64), w1)
    b = conv(a, wd, c, 1)
    cat = ["a", "a"] if form == "twice" else ["a", "b"]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]),
             helper.make_node("Conv", ["a", "wd"], ["b"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Concat", cat, ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w2"], ["y"])]
    outs = ["y"] + (["a"] if form == "output" else [])
    if form == "twice":  # b still computed: its channel sum is added to the output
        nodes.append(helper.make_node("ReduceSum", ["b", "axes"], ["bs"], keepdims=1))
        nodes.append(helper.make_node("Add", ["y", "bs"], ["y2"]))
        outs = ["y2"]
    inits = [numpy_helper.from_array(v, k) for k, v in (("w1", w1), ("wd", wd), ("w2", w2))]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    data = onnx_model(nodes, [vi("x", x.shape)], [vi(o, None) for o in outs], inits, 13)
    y = conv(np.concatenate([a, a if form == "twice" else b], 1), w2)
    want = {"y": y, "a": a, "y2": y + b.sum(1, keepdims=True) if form == "twice" else None}
    ran = 0
    for max_isa in ("avx512", "avx2"):
        with kiln.Session.from_bytes(data, threads=2, max_isa=max_isa, strategy="fixed",
                                     tune="none") as s:
            if s.isa != max_isa:
                continue
            ran += 1
            for _ in range(3):  # the same bytes reused run after run
                out = s.run({"x": x})
                for o in outs:
                    assert rel_error(out[o], want[o].astype(np.float32)) <= 2e-6, (max_isa, o)
            assert s.plan()["inplace_concats"] == inplace, max_isa
    if not ran:
        pytest.skip("no AVX2 or AVX-512 on this CPU: no JIT plan to check")
