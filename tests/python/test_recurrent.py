"""LSTM, GRU and RNN (graph/recurrent.h: the input projection on the MatMul kernels, the time loop
on jit/glue/recurrent.cpp) against a numpy transcription of ONNX's definitions, on every ISA
path: forward, reverse and bidirectional; batch rows in and across the kernel's blocks of 4;
hidden sizes off the vector width; biases, initial states, peepholes, sequence lengths, clip,
linear_before_reset, layout 1 and non-default activations; weights as graph inputs (the reference
time loop). PyTorch's nn.LSTM / GRU / RNN exports (two layers, batch_first, bidirectional) and a
small CRNN (convs, then a bidirectional LSTM over the columns) against PyTorch."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from helpers import rel_error, run_on_each_isa

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def act(name, alpha=None, beta=None):
    if name == "Sigmoid":
        return lambda x: 1 / (1 + np.exp(-x))
    if name == "Tanh":
        return np.tanh
    if name == "Relu":
        return lambda x: np.maximum(x, 0)
    if name == "LeakyRelu":
        return lambda x: np.where(x >= 0, x, x * alpha)
    if name == "HardSigmoid":
        return lambda x: np.clip(alpha * x + beta, 0, 1)
    if name == "Softsign":
        return lambda x: x / (1 + np.abs(x))
    raise ValueError(name)


def reference(cell, x, w, r, b=None, lens=None, h0=None, c0=None, p=None, direction="forward",
              clip=None, lbr=0, acts=None, layout=0):
    """ONNX's LSTM / GRU / RNN in float64: (Y, Y_h, Y_c)."""
    x = x.astype(np.float64) if layout == 0 else np.swapaxes(x, 0, 1).astype(np.float64)
    if h0 is not None and layout:
        h0 = np.swapaxes(h0, 0, 1)
    if c0 is not None and layout:
        c0 = np.swapaxes(c0, 0, 1)
    T, N, _ = x.shape
    D, H = w.shape[0], r.shape[2]
    y = np.zeros((T, D, N, H))
    y_h = np.zeros((D, N, H))
    y_c = np.zeros((D, N, H))
    per = len(DEFAULT_ACTS[cell])
    for d in range(D):
        f = acts[d * per:(d + 1) * per]
        cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
        F = [lambda v, g=g: g(cl(v)) for g in f]
        wb = b[d, :GATES[cell] * H] if b is not None else 0
        rb = b[d, GATES[cell] * H:] if b is not None else 0
        back = direction == "reverse" or d == 1
        for n in range(N):
            L = T if lens is None else int(lens[n])
            h = h0[d, n].astype(np.float64) if h0 is not None else np.zeros(H)
            c = c0[d, n].astype(np.float64) if c0 is not None else np.zeros(H)
            for s in range(L):
                t = L - 1 - s if back else s
                xw = w[d] @ x[t, n] + wb
                if cell == "LSTM":
                    g = xw + r[d] @ h + rb
                    pi, po, pf = np.split(p[d], 3) if p is not None else (0, 0, 0)
                    i = F[0](g[:H] + pi * c)
                    fg = F[0](g[2 * H:3 * H] + pf * c)
                    cc = F[1](g[3 * H:])
                    c = fg * c + i * cc
                    o = F[0](g[H:2 * H] + po * c)
                    h = o * F[2](c)
                elif cell == "GRU":
                    rec = r[d] @ h + rb
                    z = F[0](xw[:H] + rec[:H])
                    rr = F[0](xw[H:2 * H] + rec[H:2 * H])
                    if lbr:
                        hh = F[1](xw[2 * H:] + rr * rec[2 * H:])
                    else:
                        rbh = rb[2 * H:] if b is not None else 0
                        hh = F[1](xw[2 * H:] + r[d][2 * H:] @ (rr * h) + rbh)
                    h = (1 - z) * hh + z * h
                else:
                    h = F[0](xw + r[d] @ h + rb)
                y[t, d, n] = h
            y_h[d, n], y_c[d, n] = h, c
    if layout:
        return np.transpose(y, (2, 0, 1, 3)), np.swapaxes(y_h, 0, 1), np.swapaxes(y_c, 0, 1)
    return y, y_h, y_c


def build(cell, T, N, I, H, direction="forward", bias=True, lens=None, h0=False, c0=False,
          peep=False, clip=None, lbr=None, acts=None, layout=0, const_weights=True, seed=0,
          outputs=("Y", "Y_h", "Y_c")):
    """(model bytes, feeds, reference outputs by name)."""
    rng = np.random.default_rng(seed)
    D, G = (2 if direction == "bidirectional" else 1), GATES[cell]
    x = rng.standard_normal((T, N, I) if layout == 0 else (N, T, I)).astype(np.float32)
    w = (rng.standard_normal((D, G * H, I)) * 0.4).astype(np.float32)
    r = (rng.standard_normal((D, G * H, H)) * 0.4).astype(np.float32)
    arrays = {"W": w, "R": r}
    names = ["X", "W", "R", "", "", "", "", ""]
    state_shape = (D, N, H) if layout == 0 else (N, D, H)
    kw = {}
    if bias:
        arrays["B"] = kw["b"] = (rng.standard_normal((D, 2 * G * H)) * 0.3).astype(np.float32)
        names[3] = "B"
    if lens is not None:
        arrays["L"] = kw["lens"] = np.array(lens, np.int32)
        names[4] = "L"
    if h0:
        arrays["H0"] = kw["h0"] = rng.standard_normal(state_shape).astype(np.float32)
        names[5] = "H0"
    if c0:
        arrays["C0"] = kw["c0"] = rng.standard_normal(state_shape).astype(np.float32)
        names[6] = "C0"
    if peep:
        arrays["P"] = kw["p"] = (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32)
        names[7] = "P"
    n_in = 8 if cell == "LSTM" else 6
    names = names[:n_in]
    while names[-1] == "":
        names.pop()
    attrs = {"hidden_size": H, "direction": direction}
    if clip:
        attrs["clip"] = clip
    if lbr is not None:
        attrs["linear_before_reset"] = lbr
    if layout:
        attrs["layout"] = layout
    fns = [act(a) for a in DEFAULT_ACTS[cell]] * D
    if acts:
        attrs["activations"] = [a[0] for a in acts]
        alphas = [a[1] for a in acts if a[1] is not None]
        betas = [a[2] for a in acts if len(a) > 2]
        if alphas:
            attrs["activation_alpha"] = alphas
        if betas:
            attrs["activation_beta"] = betas
        fns = [act(*a) for a in acts]
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:3 if cell == "LSTM" else 2]]
    while outs[-1] == "":
        outs.pop()
    node = helper.make_node(cell, names, outs, **attrs)
    feeds = {"X": x}
    inits, inputs = [], [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)]
    for k, v in arrays.items():
        if const_weights or k not in ("W", "R"):
            inits.append(numpy_helper.from_array(v, k))
        else:
            inputs.append(helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape))
            feeds[k] = v
    graph = helper.make_graph([node], "m", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outs if o], initializer=inits)
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()
    y, y_h, y_c = reference(cell, x, w, r, direction=direction, clip=clip, lbr=lbr or 0,
                            acts=fns, layout=layout, **kw)
    return data, feeds, {"Y": y, "Y_h": y_h, "Y_c": y_c}


def check(data, feeds, want, tol=2e-5, ref_free=True, tmp_path=None):
    for max_isa, out, plan in run_on_each_isa(data, feeds, tmp_path):
        assert out, max_isa
        for name, got in out.items():
            assert got.shape == want[name].shape, (max_isa, name)
            assert rel_error(got, want[name]) <= tol, (max_isa, name, rel_error(got, want[name]))
        kernels = [st["kernel"] for st in plan["steps"]]
        if max_isa != "scalar" and ref_free:
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)
            assert [k for k in kernels if k.startswith("recurrence_")], (max_isa, kernels)


CASES = [
    # cell, T, N, I, H, extra
    ("LSTM", 5, 1, 3, 4, {}),
    ("LSTM", 7, 3, 10, 20, {"direction": "bidirectional", "h0": True, "c0": True}),
    ("LSTM", 6, 6, 8, 37, {"direction": "reverse", "peep": True, "h0": True, "c0": True}),
    ("LSTM", 9, 5, 16, 64, {"direction": "bidirectional", "lens": [9, 4, 1, 7, 0], "peep": True}),
    ("LSTM", 4, 2, 5, 17, {"clip": 0.7, "bias": False, "layout": 1, "h0": True, "c0": True}),
    ("LSTM", 6, 4, 6, 12, {"acts": [("HardSigmoid", 0.3, 0.45), ("LeakyRelu", 0.05),
                                    ("Softsign", None)]}),
    ("GRU", 6, 1, 4, 5, {}),
    ("GRU", 8, 5, 7, 33, {"direction": "bidirectional", "h0": True, "lbr": 1}),
    ("GRU", 5, 9, 12, 24, {"direction": "reverse", "lens": [5, 3, 2, 5, 1, 4, 5, 0, 2]}),
    ("GRU", 5, 3, 6, 16, {"lbr": 0, "layout": 1, "h0": True, "clip": 1.5, "bias": False}),
    ("RNN", 6, 2, 3, 9, {}),
    ("RNN", 7, 6, 11, 40, {"direction": "bidirectional", "h0": True, "lens": [7, 6, 5, 4, 3, 7]}),
    ("RNN", 5, 3, 4, 8, {"acts": [("Relu", None)], "layout": 1}),
]


@pytest.mark.parametrize("cell,T,N,I,H,extra", CASES)
def test_recurrent_against_numpy(cell, T, N, I, H, extra, tmp_path):
    data, feeds, want = build(cell, T, N, I, H, seed=T * N + H, **extra)
    check(data, feeds, want, tmp_path=tmp_path)


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_only_the_last_state(cell, tmp_path):
    """A model reading Y_h alone (Y is made but read by nothing)."""
    data, feeds, want = build(cell, 6, 3, 5, 10, direction="bidirectional", outputs=("Y_h",))
    check(data, feeds, {"Y_h": want["Y_h"]}, tmp_path=tmp_path)


def test_weights_as_inputs(tmp_path):
    """W and R fed each run (ONNX's own operator tests do): the time loop on the reference."""
    data, feeds, want = build("LSTM", 5, 2, 4, 6, direction="bidirectional", const_weights=False,
                              peep=True)
    check(data, feeds, want, ref_free=False, tmp_path=tmp_path)


def test_bad_sequence_length_is_an_error(tmp_path):
    data, feeds, _ = build("GRU", 4, 2, 3, 5, lens=[4, 2])
    for max_isa in ("avx512", "avx2", "scalar"):
        # The lengths are an initializer: a bad one is found when the model is built, or run.
        bad = data.replace(np.array([4, 2], np.int32).tobytes(), np.array([4, 9], np.int32).tobytes())
        with pytest.raises(kiln.Error, match="sequence_lens"):
            with kiln.Session.from_bytes(bad, max_isa=max_isa, cache_dir=str(tmp_path)) as s:
                s.run(feeds)


@pytest.mark.parametrize("attrs,match", [
    ({"activations": ["Affine", "Tanh", "Tanh"]}, "activation 'Affine'"),
    ({"input_forget": 1}, "input_forget"),
    ({"activations": ["Sigmoid", "Tanh"]}, "activations lists 2"),
    ({"direction": "sideways"}, "direction 'sideways'"),
])
def test_refused_attributes(attrs, match):
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=3, **attrs)
    graph = helper.make_graph(
        [node], "m", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (2, 1, 2))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.zeros((1, 12, 2), np.float32), "W"),
                     numpy_helper.from_array(np.zeros((1, 12, 3), np.float32), "R")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()
    with pytest.raises(kiln.Error, match=match):
        kiln.Session.from_bytes(data)


def torch_export(module, args, tmp_path, names):
    import torch
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(module, args, path, input_names=names[0], output_names=names[1],
                      opset_version=14)
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_pytorch_stacks(kind, tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cls = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN": torch.nn.RNN}[kind]
    kw = {"nonlinearity": "relu"} if kind == "RNN" else {}
    m = cls(12, 21, num_layers=2, batch_first=True, bidirectional=True, **kw).eval()
    x = torch.randn(3, 9, 12)
    with torch.no_grad():
        want = m(x)[0].numpy()
    data = torch_export(m, (x,), tmp_path, (["x"], ["y"]))
    for max_isa, out, plan in run_on_each_isa(data, {"x": x.numpy()}, tmp_path):
        assert rel_error(out["y"], want) <= 3e-5, max_isa
        if max_isa != "scalar":
            assert not [s["kernel"] for s in plan["steps"] if s["kernel"].startswith("ref_")]


def test_pytorch_crnn(tmp_path):
    """A CRNN text recogniser's shape: convs over a 32 x 100 line image, the columns as a
    sequence, a bidirectional LSTM, per-column class scores."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Crnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 48, 3, padding=1), nn.ReLU(), nn.MaxPool2d((8, 1)))
            self.rnn = nn.LSTM(48, 32, bidirectional=True)
            self.fc = nn.Linear(64, 37)

        def forward(self, x):
            f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # [W, N, C]
            return self.fc(self.rnn(f)[0])

    torch.manual_seed(1)
    m = Crnn().eval()
    x = torch.randn(2, 1, 32, 100)
    with torch.no_grad():
        want = m(x).numpy()
    data = torch_export(m, (x,), tmp_path, (["image"], ["scores"]))
    for max_isa, out, plan in run_on_each_isa(data, {"image": x.numpy()}, tmp_path):
        assert out["scores"].shape == (25, 2, 37)
        assert rel_error(out["scores"], want) <= 3e-5, max_isa
        if max_isa != "scalar":
            assert not [s["kernel"] for s in plan["steps"] if s["kernel"].startswith("ref_")]
