"""Models whose output sizes depend on the data: NonZero (boolean indexing), NonMaxSuppression
(torchvision.ops.nms / batched_nms), GatherND, an If on a computed condition, shape inputs
(Reshape's shape, Slice's starts, TopK's K) fed at run time. The network runs
planned; the nodes from the first data-dependent op on run per run (graph/dynamic.h). Against
PyTorch / numpy on every ISA path, several inputs per model (each gives another output size),
empty results included."""
import io

import numpy as np
import pytest
import torch
import torch.nn as nn
import torchvision
from onnx import TensorProto, helper

import kiln

from helpers import run_on_each_isa


def export(module, args, names, opset=17):
    f = io.BytesIO()
    torch.onnx.export(module, args, f, opset_version=opset, input_names=names[0],
                      output_names=names[1])
    return f.getvalue()


def run_each(data, feeds_list, tmp_path):
    """[(max_isa, [outputs per feeds])] over this CPU's ISA paths, one session each."""
    res = []
    for max_isa in ("avx512", "avx2", "scalar"):
        with kiln.Session.from_bytes(data, threads=2, max_isa=max_isa,
                                     cache_dir=str(tmp_path / max_isa)) as s:
            if max_isa != "scalar" and s.isa != max_isa:
                continue  # this CPU lacks the ISA
            res.append((max_isa, [s.run(f) for f in feeds_list]))
    return res


def check_y_each(data, feeds, ref, tmp_path, tol):
    """Output y of every feed against ref(x) (shape, then values within tol) on every ISA path."""
    for max_isa, outs in run_each(data, feeds, tmp_path):
        for f, out in zip(feeds, outs):
            want = ref(f["x"])
            assert out["y"].shape == want.shape, (max_isa, out["y"].shape, want.shape)
            np.testing.assert_allclose(out["y"], want, rtol=tol, atol=tol, err_msg=max_isa)


class Threshold(nn.Module):
    """Boolean indexing: the feature rows at pixels where the input's channel 0 passes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x, t):
        h = torch.relu(self.conv(x)).permute(0, 2, 3, 1)  # [N, H, W, C]
        keep = x[:, 0] > t  # exact, so the count does not hang on rounding
        return h[keep], keep.nonzero()


def test_boolean_index_follows_the_data(tmp_path):
    m = Threshold().eval()
    x0 = torch.zeros(2, 3, 9, 11)
    data = export(m, (x0, torch.tensor(0.5)), (["x", "t"], ["rows", "where"]))
    rng = np.random.default_rng(1)
    feeds = []
    for t in (0.0, 1.0, 2.5, 100.0):  # ~half, a sixth, a few, none of the pixels
        x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
        feeds.append({"x": x, "t": np.array(t, np.float32)})
    for max_isa, outs in run_each(data, feeds, tmp_path):
        for f, out in zip(feeds, outs):
            with torch.no_grad():
                rows, where = m(torch.from_numpy(f["x"]), torch.from_numpy(f["t"]))
            assert out["where"].dtype == np.int64
            np.testing.assert_array_equal(out["where"], where.numpy(), err_msg=max_isa)
            assert out["rows"].shape == tuple(rows.shape), max_isa
            np.testing.assert_allclose(out["rows"], rows.numpy(), rtol=1e-5, atol=1e-5,
                                       err_msg=max_isa)
    with kiln.Session.from_bytes(data, threads=1) as s:
        assert [o.shape for o in s.outputs] == [(-1, 8), (-1, 3)]
        with pytest.raises(kiln.InvalidArgument, match="size each run decides"):
            s.run(feeds[0], out={"rows": np.zeros((1, 8), np.float32)})


class Nms(nn.Module):
    """Scores from a small network, a score threshold, then torchvision's NMS (batched when
    labels are given: per class, through the coordinate offset trick)."""

    def __init__(self, batched):
        super().__init__()
        torch.manual_seed(2)
        self.score = nn.Linear(6, 1)
        self.batched = batched

    def forward(self, boxes, feats, labels):
        s = torch.sigmoid(self.score(feats))[:, 0]
        keep = s > 0.3
        b, s, lab = boxes[keep], s[keep], labels[keep]
        if self.batched:
            k = torchvision.ops.batched_nms(b, s, lab, 0.45)
        else:
            k = torchvision.ops.nms(b, s, 0.45)
        return b[k], s[k], lab[k]


def random_boxes(rng, n, spread):
    xy = rng.uniform(0, spread, (n, 2))
    wh = rng.uniform(4, 40, (n, 2))
    return np.concatenate([xy, xy + wh], 1).astype(np.float32)


@pytest.mark.parametrize("batched", [False, True])
def test_nms_matches_torchvision(batched, tmp_path):
    n = 300
    m = Nms(batched).eval()
    args = (torch.zeros(n, 4), torch.zeros(n, 6), torch.zeros(n, dtype=torch.int64))
    data = export(m, args, (["boxes", "feats", "labels"], ["b", "s", "l"]))
    rng = np.random.default_rng(3)
    feeds = []
    for spread, shift in ((60, 0), (400, 0), (200, 0.5), (200, -40)):  # dense .. none kept
        feeds.append({"boxes": random_boxes(rng, n, spread),
                      "feats": (rng.standard_normal((n, 6)) + shift).astype(np.float32),
                      "labels": rng.integers(0, 4, n).astype(np.int64)})
    counts = set()
    for max_isa, outs in run_each(data, feeds, tmp_path):
        for f, out in zip(feeds, outs):
            with torch.no_grad():
                b, s, lab = m(*[torch.from_numpy(v) for v in f.values()])
            counts.add(len(s))
            # Scores come from a JIT Linear + Sigmoid: near-ties may order differently, so
            # compare as sets of boxes (exact: boxes are copied, never computed).
            assert out["b"].shape == tuple(b.shape), (max_isa, out["b"].shape, b.shape)
            got = sorted(map(tuple, out["b"].tolist()))
            assert got == sorted(map(tuple, b.numpy().tolist())), max_isa
            np.testing.assert_allclose(np.sort(out["s"]), np.sort(s.numpy()), rtol=1e-5,
                                       err_msg=max_isa)
            assert sorted(out["l"].tolist()) == sorted(lab.tolist()), max_isa
    assert 0 in counts and max(counts) > 20, counts  # the inputs cover empty and many


def nms_node_model(center):
    """NonMaxSuppression as ONNX defines it, every input given at run time."""
    I64, F32 = TensorProto.INT64, TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("Relu", ["scores"], ["s"]),
         helper.make_node("NonMaxSuppression", ["boxes", "s", "max", "iou", "thr"], ["sel"],
                          center_point_box=center)],
        "m", [helper.make_tensor_value_info("boxes", F32, [2, 50, 4]),
              helper.make_tensor_value_info("scores", F32, [2, 3, 50]),
              helper.make_tensor_value_info("max", I64, [1]),
              helper.make_tensor_value_info("iou", F32, [1]),
              helper.make_tensor_value_info("thr", F32, [1])],
        [helper.make_tensor_value_info("sel", I64, [None, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def numpy_nms(boxes, scores, max_out, iou, thr, center):
    """ONNX NonMaxSuppression, written from the spec."""
    if center:
        c, wh = boxes[..., :2], boxes[..., 2:] / 2
        boxes = np.concatenate([c - wh, c + wh], -1)[..., [1, 0, 3, 2]]
    lo = np.minimum(boxes[..., :2], boxes[..., 2:])
    hi = np.maximum(boxes[..., :2], boxes[..., 2:])
    out = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in sorted(range(len(s)), key=lambda i: (-s[i], i)) if s[i] > thr]
            kept = []
            for i in order:
                if len(kept) >= max_out:
                    break
                ok = True
                for k in kept:
                    inter = np.prod(np.clip(np.minimum(hi[b, i], hi[b, k]) -
                                            np.maximum(lo[b, i], lo[b, k]), 0, None))
                    a = np.prod(hi[b, i] - lo[b, i]) + np.prod(hi[b, k] - lo[b, k]) - inter
                    if inter > 0 and inter / a > iou:
                        ok = False
                        break
                if ok:
                    kept.append(i)
                    out.append((b, c, i))
    return np.array(out, np.int64).reshape(-1, 3)


@pytest.mark.parametrize("center", [0, 1])
def test_nms_node_matches_the_spec(center, tmp_path):
    data = nms_node_model(center)
    rng = np.random.default_rng(4 + center)
    feeds = []
    for max_out, iou, thr in ((5, 0.5, 0.2), (100, 0.3, 0.0), (100, 0.9, 0.6), (0, 0.5, 0.0),
                              (10, 0.5, 2.0)):
        boxes = rng.uniform(0, 50, (2, 50, 4)).astype(np.float32)
        feeds.append({"boxes": boxes, "scores": rng.uniform(-0.2, 1, (2, 3, 50)).astype(np.float32),
                      "max": np.array([max_out]), "iou": np.array([iou], np.float32),
                      "thr": np.array([thr], np.float32)})
    bad = dict(feeds[1], boxes=feeds[1]["boxes"].copy())  # a NaN and an infinite corner
    bad["boxes"][0, 3, 1], bad["boxes"][1, 7, 2] = np.nan, np.inf
    feeds.append(bad)
    for max_isa, outs in run_each(data, feeds, tmp_path):
        for f, out in zip(feeds, outs):
            want = numpy_nms(f["boxes"], np.maximum(f["scores"], 0), f["max"][0], f["iou"][0],
                             f["thr"][0], center)
            np.testing.assert_array_equal(out["sel"], want, err_msg=f"{max_isa} {f['max']}")


def test_whole_model_after_the_data_dependent_op(tmp_path):
    """NonZero of the model input itself: nothing is planned, the tail is the whole model."""
    g = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["i"]),
         helper.make_node("Transpose", ["i"], ["t"]),
         helper.make_node("GatherND", ["x", "t"], ["v"])],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [None])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, -4, 5]], np.float32)
    for max_isa, outs in run_each(data, [{"x": x}, {"x": np.zeros((3, 4), np.float32)}],
                                  tmp_path):
        np.testing.assert_array_equal(outs[0]["v"], x[x != 0], err_msg=max_isa)
        assert outs[1]["v"].shape == (0,), max_isa


def test_if_on_a_computed_condition(tmp_path):
    """An If whose condition the data decides (torchvision's `if boxes.numel() == 0`) runs in
    the tail: each run takes the branch its data picks."""
    F32 = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["o"])], "then", [],
                               [helper.make_tensor_value_info("o", F32, [4])])
    else_g = helper.make_graph([helper.make_node("Add", ["r", "r"], ["o2"])], "else", [],
                               [helper.make_tensor_value_info("o2", F32, [4])])
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("ReduceSum", ["r"], ["sum"], keepdims=0),
         helper.make_node("Greater", ["sum", "ten"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        "m", [helper.make_tensor_value_info("x", F32, [4])],
        [helper.make_tensor_value_info("y", F32, [4])],
        initializer=[helper.make_tensor("ten", F32, [], [10.0])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    big, small = np.array([5, -1, 7, 2], np.float32), np.array([1, -1, 2, 0], np.float32)
    for max_isa, outs in run_each(data, [{"x": big}, {"x": small}], tmp_path):
        np.testing.assert_array_equal(outs[0]["y"], -np.maximum(big, 0), err_msg=max_isa)
        np.testing.assert_array_equal(outs[1]["y"], 2 * np.maximum(small, 0), err_msg=max_isa)


def test_an_unsupported_op_after_the_data_dependent_one_is_refused_at_load():
    g = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["i"]),
         helper.make_node("Det", ["b"], ["u"]),
         helper.make_node("Cast", ["i"], ["b"], to=TensorProto.BOOL)],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [None])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(kiln.Unsupported, match="Det"):
        kiln.Session.from_bytes(data)


def test_nms_ties_and_exact_overlaps(tmp_path):
    """Equal scores: the lower index first; an IoU exactly at the threshold does not suppress."""
    boxes = np.array([[[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [30, 20, 40, 30],
                       [0, 0, 4, 4], [0, 0, 4, 2]] + [[100, 100, 101, 101]] * 44], np.float32)
    scores = np.full((2, 3, 50), -1, np.float32)  # Relu'd to 0: below the threshold
    scores[0, 0, :6] = [0.9, 0.9, 0.8, 0.7, 0.6, 0.5]
    boxes = np.concatenate([boxes, boxes])
    feeds = {"boxes": boxes, "scores": scores, "max": np.array([10]),
             "iou": np.array([0.5], np.float32), "thr": np.array([0.1], np.float32)}
    # b1 overlaps b0 by 81/119 > 0.5 and loses the tie; b3 only touches b2; b4 / b5 overlap by
    # exactly 8/16.
    want = np.array([[0, 0, 0], [0, 0, 2], [0, 0, 3], [0, 0, 4], [0, 0, 5]])
    for max_isa, outs in run_each(nms_node_model(0), [feeds], tmp_path):
        np.testing.assert_array_equal(outs[0]["sel"], want, err_msg=max_isa)


def nonzero_model(out_dims, out_type=TensorProto.INT64):
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["i"])],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("i", out_type, out_dims)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_concurrent_runs_each_get_their_own_sizes():
    import threading
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(8).astype(np.float32) for _ in range(16)]
    got = [None] * len(xs)
    with kiln.Session.from_bytes(nonzero_model([1, None]), threads=2) as s:
        def work(k):
            for i in range(k, len(xs), 4):
                for _ in range(20):
                    got[i] = s.run({"x": xs[i]})["i"]
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert s.plan()["tail"]["nodes"] == 1 and "NonZero" in s.plan()["tail"]["first"]
        prof = s.bench(runs=3, warmup=0, layers=True)
        assert prof["tail_ms"] > 0 and prof["reference_ms"] >= prof["tail_ms"]
    for x, y in zip(xs, got):
        np.testing.assert_array_equal(y, np.array(np.nonzero(x > 0)))


def test_what_the_model_declares_is_checked():
    x = np.array([1, -1, 2, -2, 3, 0, 0, 4], np.float32)  # four > 0
    with kiln.Session.from_bytes(nonzero_model([1, 4])) as s:  # declares what this x gives
        np.testing.assert_array_equal(s.run({"x": x})["i"], [[0, 2, 4, 7]])
        with pytest.raises(kiln.InvalidModel, match=r"'i' was computed as int64\[1,3\]"):
            s.run({"x": np.where(x == 4, 0, x).astype(np.float32)})
    with pytest.raises(kiln.Unsupported, match="'i'.*declares no element type"):
        kiln.Session.from_bytes(nonzero_model([1, None], TensorProto.UINT16))
    with pytest.raises(kiln.InvalidModel, match=r"declares float32"):
        with kiln.Session.from_bytes(nonzero_model([1, None], TensorProto.FLOAT)) as s:
            s.run({"x": x})


class Labels(nn.Module):
    """torch.unique of computed labels (which classes a detector found), with the inverse
    and counts, and of rows along an axis."""

    def forward(self, x):
        lab = torch.argmax(x, 1)  # [N]
        u, inv, cnt = torch.unique(lab, sorted=True, return_inverse=True, return_counts=True)
        rows = torch.unique(torch.round(x[:, :2]), dim=0)
        return u, inv, cnt, rows


def test_unique_of_computed_values(tmp_path):
    m = Labels().eval()
    data = export(m, (torch.zeros(40, 5),), (["x"], ["u", "inv", "cnt", "rows"]))
    rng = np.random.default_rng(9)
    feeds = [{"x": rng.standard_normal((40, 5)).astype(np.float32)},
             {"x": np.tile(np.float32([0, 0, 3, 0, 0]), (40, 1))}]  # one class, one row
    for max_isa, outs in run_each(data, feeds, tmp_path):
        for f, out in zip(feeds, outs):
            want = [t.numpy() for t in m(torch.from_numpy(f["x"]))]
            for name, w in zip(("u", "inv", "cnt", "rows"), want):
                np.testing.assert_array_equal(out[name], w, err_msg=f"{max_isa} {name}")



@pytest.mark.parametrize("mode", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_torchvision(mode, ratio, tmp_path):
    """RoiAlign against torchvision.ops.roi_align (aligned = half_pixel: ONNX's opset-16 default;
    torchvision's own exports write aligned=False boxes with no mode, which ONNX Runtime and
    Kiln both read as half_pixel)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4, 20, 24)).astype(np.float32)
    xy = rng.uniform(-6, 44, (9, 2))
    wh = rng.uniform(0.2, 30, (9, 2))  # tiny regions, and some past the image's edges
    rois = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    bidx = rng.integers(0, 2, 9).astype(np.int64)
    F32 = TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("RoiAlign", ["r", "rois", "b"], ["y"], output_height=5, output_width=4,
                          sampling_ratio=ratio, spatial_scale=0.5,
                          coordinate_transformation_mode=mode)],
        "m", [helper.make_tensor_value_info("x", F32, x.shape),
              helper.make_tensor_value_info("rois", F32, rois.shape),
              helper.make_tensor_value_info("b", TensorProto.INT64, bidx.shape)],
        [helper.make_tensor_value_info("y", F32, None)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()
    boxes = torch.from_numpy(np.concatenate([bidx[:, None], rois], 1).astype(np.float32))
    want = torchvision.ops.roi_align(torch.relu(torch.from_numpy(x)), boxes, (5, 4), 0.5, ratio,
                                     aligned=mode == "half_pixel").numpy()
    for max_isa, out, _ in run_on_each_isa(data, {"x": x, "rois": rois, "b": bidx}, tmp_path):
        np.testing.assert_allclose(out["y"], want, rtol=1e-4, atol=1e-5, err_msg=max_isa)
    with kiln.Session.from_bytes(data) as s:
        with pytest.raises(kiln.InvalidArgument, match="batch index 2 of region 0"):
            s.run({"x": x, "rois": rois, "b": np.where(np.arange(9) == 0, 2, bidx)})


def fc_tail_model(k, n, gemm, trans_b, bias):
    """Rows of x picked by a computed mask (so their number follows the data), then a fully
    connected layer on them: Gemm (alpha, beta, transB, bias) or MatMul, then Relu."""
    rng = np.random.default_rng(k + n)
    w = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())]
    if gemm:
        ins = ["rows", "w"] + (["c"] if bias else [])
        if bias:
            inits.append(helper.make_tensor("c", TensorProto.FLOAT, [n], c))
        fc = helper.make_node("Gemm", ins, ["f"], transB=int(trans_b), alpha=0.5, beta=2.0)
    else:
        fc = helper.make_node("MatMul", ["rows", "w"], ["f"])
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "one"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["m"]),
         helper.make_node("NonZero", ["m"], ["i"]),
         helper.make_node("Squeeze", ["i", "zero_i"], ["i1"]),
         helper.make_node("Gather", ["x", "i1"], ["rows"], axis=0), fc,
         helper.make_node("Relu", ["f"], ["y"])],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [200, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
        initializer=inits + [helper.make_tensor("one", TensorProto.INT64, [1], [1]),
                             helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                             helper.make_tensor("zero_i", TensorProto.INT64, [1], [0])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()

    def ref(x):
        r = x[x.sum(1) > 0].astype(np.float64)
        if not gemm:
            return np.maximum(r @ w, 0)
        f = 0.5 * (r @ (w.T if trans_b else w)) + (2.0 * c if bias else 0)
        return np.maximum(f, 0)
    return data, ref


@pytest.mark.parametrize("gemm,trans_b,bias", [(True, True, True), (True, False, False),
                                               (False, False, False)])
def test_fully_connected_layers_in_the_tail(gemm, trans_b, bias, tmp_path):
    """The tail runs them on the FC family's kernels, made per row bucket: row counts below,
    at and past a bucket's edge (32, 33), and none."""
    k, n = 300, 70
    data, ref = fc_tail_model(k, n, gemm, trans_b, bias)
    rng = np.random.default_rng(11)
    feeds = []
    for rows in (1, 5, 32, 33, 150, 0):
        x = -np.abs(rng.standard_normal((200, k))).astype(np.float32)
        pick = rng.choice(200, rows, replace=False)
        x[pick] = -x[pick]  # exactly these rows sum above 0
        feeds.append({"x": x})
    check_y_each(data, feeds, ref, tmp_path, 2e-4)


def conv_tail_model(c, m, conv, convt):
    """x [8, c, 9, 10] -> the images whose sum is > 0 (NonZero, Gather) -> Conv to m channels
    (attributes `conv`) + Relu -> ConvTranspose (`convt`): both layers in the tail, constant
    weights."""
    rng = np.random.default_rng(5)
    k, kt = conv["kernel_shape"], convt["kernel_shape"]
    w = (rng.standard_normal((m, c, *k)) / np.sqrt(c * k[0] * k[1])).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    wt = (rng.standard_normal((m, 5, *kt)) / np.sqrt(m)).astype(np.float32)
    bt = rng.standard_normal(5).astype(np.float32) if convt.pop("bias") else None
    from onnx import numpy_helper
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (wt, "wt"))]
    if bt is not None:
        inits.append(numpy_helper.from_array(bt, "bt"))
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["nz"]),
             helper.make_node("Squeeze", ["nz", "ax0"], ["idx"]),
             helper.make_node("Gather", ["x", "idx"], ["xs"], axis=0),
             helper.make_node("Conv", ["xs", "w", "b"], ["h"], **conv),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "wt"] + (["bt"] if bt is not None else []),
                              ["y"], **convt)]
    inits += [numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes"),
              numpy_helper.from_array(np.array(0, np.float32), "zero"),
              numpy_helper.from_array(np.array([0], np.int64), "ax0")]
    g = helper.make_graph(nodes, "convtail", [helper.make_tensor_value_info("x", 1, (8, c, 9, 10))],
                          [helper.make_tensor_value_info("y", 1, None)], initializer=inits)
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()

    def ref(x):
        xs = torch.from_numpy(x[x.sum((1, 2, 3)) > 0]).double()
        pads = conv.get("pads", [0, 0, 0, 0])  # [top, left, bottom, right]
        xs = torch.nn.functional.pad(xs, (pads[1], pads[3], pads[0], pads[2]))
        h = torch.nn.functional.conv2d(xs, torch.from_numpy(w).double(),
                                       torch.from_numpy(b).double(), conv.get("strides", 1),
                                       0, conv.get("dilations", 1))
        y = torch.nn.functional.conv_transpose2d(
            torch.relu(h), torch.from_numpy(wt).double(),
            None if bt is None else torch.from_numpy(bt).double(), convt.get("strides", 1),
            tuple(convt.get("pads", [0] * 4)[:2]), convt.get("output_padding", 0), 1,
            convt.get("dilations", 1))
        return y.numpy()
    return data, ref


@pytest.mark.parametrize("c,m,conv,convt", [
    # Mask R-CNN's head: 3x3 of whole 16-channel blocks (Winograd on AVX-512), then 2x2 s2
    (32, 32, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     dict(kernel_shape=[2, 2], strides=[2, 2], bias=True)),
    (16, 12, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # channels not whole blocks: im2col
     dict(kernel_shape=[2, 2], strides=[2, 2], bias=True)),
    (6, 12, dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 2, 0], dilations=[1, 2]),
     dict(kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1], bias=False)),  # keypoints'
    (5, 12, dict(kernel_shape=[1, 1]),
     dict(kernel_shape=[3, 3], strides=[2, 3], pads=[1, 0, 1, 0], output_padding=[1, 2],
          dilations=[2, 1], bias=True)),
])
def test_convolutions_in_the_tail(c, m, conv, convt, tmp_path):
    """Conv and ConvTranspose after a data-dependent op run on JIT kernels one image at a time
    (Conv: Winograd or im2col; ConvTranspose: the FC family's and col2im): strides, dilations,
    asymmetric and output padding, against PyTorch in double; image counts 0, 1 (one image's
    tiles over the threads) and past the thread count (images over the threads)."""
    data, ref = conv_tail_model(c, m, conv, convt)
    rng = np.random.default_rng(3)
    feeds = []
    for count in (1, 5, 0, 8):
        x = rng.standard_normal((8, c, 9, 10)).astype(np.float32)
        sign = np.where(np.arange(8) < count, 1, -1).astype(np.float32)
        x = np.abs(x) * sign[:, None, None, None]  # exactly the first `count` sum above 0
        feeds.append({"x": x})
    check_y_each(data, feeds, ref, tmp_path, 1e-4)


def test_roi_align_in_the_tail_over_the_threads(tmp_path):
    """RoiAlign on the regions a computed mask keeps (so it runs in the tail, its regions spread
    over the threads in ranges): against torchvision for region counts 0, 3 (too few to split)
    and 37, at 1 and 2 threads."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 16, 18)).astype(np.float32)
    xy = rng.uniform(-4, 30, (40, 2))
    rois = np.concatenate([xy, xy + rng.uniform(0.5, 20, (40, 2))], 1).astype(np.float32)
    bidx = rng.integers(0, 2, 40).astype(np.int64)
    F32 = TensorProto.FLOAT
    from onnx import numpy_helper
    g = helper.make_graph(
        [helper.make_node("Greater", ["keep", "zero"], ["pos"]),
         helper.make_node("NonZero", ["pos"], ["nz"]),
         helper.make_node("Squeeze", ["nz", "ax0"], ["idx"]),
         helper.make_node("Gather", ["rois", "idx"], ["r"], axis=0),
         helper.make_node("Gather", ["b", "idx"], ["rb"], axis=0),
         helper.make_node("RoiAlign", ["x", "r", "rb"], ["y"], output_height=3, output_width=5,
                          sampling_ratio=2, spatial_scale=0.5)],
        "m", [helper.make_tensor_value_info("x", F32, x.shape),
              helper.make_tensor_value_info("rois", F32, rois.shape),
              helper.make_tensor_value_info("b", TensorProto.INT64, bidx.shape),
              helper.make_tensor_value_info("keep", F32, (40,))],
        [helper.make_tensor_value_info("y", F32, None)],
        initializer=[numpy_helper.from_array(np.array(0, np.float32), "zero"),
                     numpy_helper.from_array(np.array([0], np.int64), "ax0")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()
    for threads in (1, 2):
        with kiln.Session.from_bytes(data, threads=threads, cache_dir=str(tmp_path)) as s:
            for count in (37, 0, 3):
                keep = np.where(rng.permutation(40) < count, 1, -1).astype(np.float32)
                sel = keep > 0
                boxes = torch.from_numpy(np.concatenate([bidx[sel, None], rois[sel]], 1)
                                         .astype(np.float32))
                want = torchvision.ops.roi_align(torch.from_numpy(x), boxes, (3, 5), 0.5, 2,
                                                 aligned=True).numpy()
                out = s.run({"x": x, "rois": rois, "b": bidx, "keep": keep})["y"]
                assert out.shape == want.shape, (threads, out.shape, want.shape)
                np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=str(threads))


def test_shape_inputs_fed_at_run_time(tmp_path):
    """A conv, then Reshape / Slice / TopK whose shape, starts and K are graph inputs (their
    OpInfo::shape_inputs): the conv is planned, the rest runs per run with the sizes given."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Reshape", ["c", "shape"], ["r"]),
         helper.make_node("Slice", ["r", "start", "end", "axis"], ["s"]),
         helper.make_node("TopK", ["s", "k"], ["y", "i"], axis=-1)],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("start", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
                     helper.make_tensor("end", TensorProto.INT64, [1], [1 << 40]),
                     helper.make_tensor("axis", TensorProto.INT64, [1], [1])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    conv = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    cases = [((8, 18), 3, 5), ((4, 36), 10, 1), ((-1, 48), 0, 48)]
    feeds = [{"x": x, "shape": np.array(s, np.int64), "start": np.array([b], np.int64),
              "k": np.array([k], np.int64)} for s, b, k in cases]
    for max_isa, outs in run_each(data, feeds, tmp_path):
        for (shape, start, k), out in zip(cases, outs):
            s = conv.reshape(shape)[:, start:]
            want = -np.sort(-s, axis=-1)[:, :k]
            assert out["y"].shape == want.shape, (max_isa, out["y"].shape, want.shape)
            np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5, err_msg=max_isa)
    with kiln.Session.from_bytes(data, threads=1, disable_cache=True) as s:
        kernels = [st["kernel"] for st in s.plan()["steps"]]
        assert any(k.startswith("conv_") for k in kernels), kernels  # (the planned part)
