"""ONNX's signal ops (graph/spectral.h) against numpy's FFT on every ISA path: DFT (real and
complex input, every axis, forward and inverse, onesided, dft_length padding and truncating,
opset 17's axis attribute and opset 20's axis input), STFT (constant and computed windows,
frame_length only, complex signals, steps that do not divide the frame), the Hann / Hamming /
Blackman windows (a constant at load, or computed per run from a size fed at run time),
MelWeightMatrix (ONNX's definition transcribed), and a small audio CNN whose log-mel front end is
in the graph, against PyTorch; the errors a user gets for what Kiln refuses."""
import numpy as np
import pytest
import torch
import torch.nn.functional as tf
from onnx import TensorProto, helper, numpy_helper

import kiln
from helpers import onnx_model, rel_error, run_on_each_isa, value_info as vi
import onnx_signal as sig

I64 = TensorProto.INT64
rng = np.random.default_rng(17)


def check(data, feeds, want, tmp_path, tol):
    for max_isa, out, plan in run_on_each_isa(data, feeds, tmp_path):
        got = out["y"]
        assert got.shape == want.shape, (max_isa, got.shape, want.shape)
        assert rel_error(got.astype(np.float64), want) <= tol, (max_isa, rel_error(got, want))
        if max_isa != "scalar":
            kernels = [st["kernel"] for st in plan["steps"]]
            assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)


def scalar(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def numpy_dft(x, axis, n, inverse, onesided):
    z = sig.as_complex(x.astype(np.float64))
    z = (np.fft.ifft if inverse else np.fft.fft)(z, n=n, axis=axis)
    if onesided:
        z = np.take(z, np.arange(n // 2 + 1), axis=axis)
    return sig.split_complex(z)


# (shape, axis, dft_length, inverse, onesided): real and complex, every signal axis, lengths
# padded and truncated, odd and even.
DFT_CASES = [((2, 16, 1), 1, None, 0, 0), ((2, 16, 1), 1, None, 0, 1), ((3, 15, 2), 1, None, 1, 0),
             ((2, 6, 10, 1), 2, 13, 0, 1), ((2, 9, 4, 2), 1, 6, 0, 0), ((1, 5, 7, 3, 2), 2, None, 1, 0),
             ((4, 40, 1), 1, 64, 0, 1), ((1, 3, 33, 2), 2, 32, 0, 0)]


@pytest.mark.parametrize("shape,axis,length,inverse,onesided", DFT_CASES)
@pytest.mark.parametrize("opset", [17, 20])
def test_dft(shape, axis, length, inverse, onesided, opset, tmp_path):
    x = rng.standard_normal(shape).astype(np.float32)
    inputs, inits = ["x", "n" if length else ""], []
    attrs = {"inverse": inverse, "onesided": onesided}
    if length:
        inits.append(scalar("n", length))
    if opset >= 20:  # (the axis an input, counted from the back here)
        inputs.append("axis")
        inits.append(scalar("axis", axis - len(shape)))
    else:
        attrs["axis"] = axis
    data = onnx_model([helper.make_node("DFT", inputs, ["y"], **attrs)], [vi("x", shape)],
                      [vi("y", None)], inits, opset=opset)
    want = numpy_dft(x, axis, length or shape[axis], inverse, onesided)
    check(data, {"x": x}, want, tmp_path, tol=2e-6)


# (batch, samples, parts, step, length, window: none / constant / input, onesided)
STFT_CASES = [(1, 128, 1, 8, 16, "none", 1), (2, 400, 1, 160, 400, "constant", 1),
              (2, 1000, 1, 100, 256, "constant", 1), (1, 300, 1, 33, 64, "input", 1),
              (2, 90, 2, 7, 20, "constant", 0), (1, 77, 1, 5, 12, "input", 0)]


@pytest.mark.parametrize("batch,samples,parts,step,length,window,onesided", STFT_CASES)
def test_stft(batch, samples, parts, step, length, window, onesided, tmp_path):
    x = rng.standard_normal((batch, samples, parts)).astype(np.float32)
    w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / length)).astype(np.float32)
    inputs = [vi("x", x.shape)]
    inits = [scalar("step", step)]
    feeds = {"x": x}
    if window == "none":
        names = ["x", "step", "", "len"]
        inits.append(scalar("len", length))
    else:
        names = ["x", "step", "w"]
        if window == "constant":
            inits.append(numpy_helper.from_array(w, "w"))
        else:
            inputs.append(vi("w", [length]))
            feeds["w"] = w
    data = onnx_model([helper.make_node("STFT", names, ["y"], onesided=onesided)], inputs,
                      [vi("y", None)], inits, opset=17)
    want = sig.stft(x, step, None if window == "none" else w, length, onesided)
    # (A computed window multiplies the conv's weights per run: the im2col family packs them
    # per run.)
    check(data, feeds, want, tmp_path, tol=4e-6)


@pytest.mark.parametrize("kind", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [10, 400])
def test_windows(kind, periodic, size, tmp_path):
    want = sig.window(kind, size, periodic)
    node = helper.make_node(kind, ["size"], ["y"], periodic=periodic)
    # A constant size: the window is a constant of the plan (no step computes it).
    data = onnx_model([node], [], [vi("y", None)], [scalar("size", size)], opset=17)
    with kiln.Session.from_bytes(data, threads=1, disable_cache=True) as s:
        assert rel_error(s.run({})["y"].astype(np.float64), want) <= 1e-6
        assert not s.plan()["steps"], s.plan()["steps"]
    # A size fed at run time: the window's length follows it, computed per run.
    data = onnx_model([node], [vi("size", [], I64)], [vi("y", None)], opset=17)
    with kiln.Session.from_bytes(data, threads=1, disable_cache=True) as s:
        for n in (size, 7):
            got = s.run({"size": np.array(n, dtype=np.int64)})["y"]
            assert rel_error(got.astype(np.float64), sig.window(kind, n, periodic)) <= 1e-6


def mel_model(mels, dft, rate, lo, hi):
    """A model computing MelWeightMatrix of constant inputs."""
    ins = [scalar("m", mels), scalar("d", dft), scalar("r", rate),
           numpy_helper.from_array(np.array(lo, np.float32), "lo"),
           numpy_helper.from_array(np.array(hi, np.float32), "hi")]
    return onnx_model([helper.make_node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["y"])], [],
                      [vi("y", None)], ins, opset=17)


@pytest.mark.parametrize("mels,dft,rate,lo,hi", [(8, 16, 8192, 0, 4096), (40, 400, 16000, 20, 8000),
                                                 (64, 1024, 22050, 0, 11025), (13, 256, 8000, 300, 3400)])
def test_mel_weight_matrix(mels, dft, rate, lo, hi):
    with kiln.Session.from_bytes(mel_model(mels, dft, rate, lo, hi), threads=1, disable_cache=True) as s:
        got = s.run({})["y"]
    want = sig.mel_weight_matrix(mels, dft, rate, lo, hi)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-6
    assert want.max() == 1  # (a test that means something: triangles peak at 1)


def test_audio_cnn(tmp_path):
    """Waveform -> STFT (Hann window op) -> power -> mel (MelWeightMatrix op) -> log -> two
    convs -> pool -> classifier, against numpy's FFT and PyTorch's convs; nothing on a reference
    kernel."""
    samples, n_fft, hop, mels = 4000, 256, 64, 40
    w1 = (rng.standard_normal((16, 1, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    fc = (rng.standard_normal((32, 10)) * 0.1).astype(np.float32)
    inits = [scalar("n_fft", n_fft), scalar("hop", hop), scalar("mels", mels),
             scalar("rate", 16000), numpy_helper.from_array(np.array(20, np.float32), "lo"),
             numpy_helper.from_array(np.array(8000, np.float32), "hi"),
             numpy_helper.from_array(np.array([-1], np.int64), "last"),
             numpy_helper.from_array(np.array([1], np.int64), "chan"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(fc, "fc")]
    nodes = [helper.make_node("HannWindow", ["n_fft"], ["win"]),
             helper.make_node("STFT", ["x", "hop", "win"], ["spec"]),
             helper.make_node("ReduceSumSquare", ["spec", "last"], ["power"], keepdims=0),
             helper.make_node("MelWeightMatrix", ["mels", "n_fft", "rate", "lo", "hi"], ["melw"]),
             helper.make_node("MatMul", ["power", "melw"], ["mel"]),
             helper.make_node("Add", ["mel", "eps"], ["mel_eps"]),
             helper.make_node("Log", ["mel_eps"], ["logmel"]),
             helper.make_node("Unsqueeze", ["logmel", "chan"], ["img"]),
             helper.make_node("Conv", ["img", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    x = rng.standard_normal((2, samples, 1)).astype(np.float32)
    data = onnx_model(nodes, [vi("x", x.shape)], [vi("y", None)], inits, opset=18)

    win = sig.window("HannWindow", n_fft, 1)
    spec = sig.stft(x, hop, win, n_fft, 1)
    logmel = np.log((spec ** 2).sum(-1) @ sig.mel_weight_matrix(mels, n_fft, 16000, 20, 8000) + 1e-6)
    t = torch.from_numpy(logmel[:, None])
    h = tf.max_pool2d(tf.relu(tf.conv2d(t, torch.from_numpy(w1).double(), padding=1)), 2)
    h = tf.relu(tf.conv2d(h, torch.from_numpy(w2).double(), padding=1)).mean(dim=(2, 3))
    want = (h.numpy() @ fc.astype(np.float64))
    check(data, {"x": x}, want, tmp_path, tol=1e-4)


def refused(data, *words):
    with pytest.raises(kiln.Error) as e:
        kiln.Session.from_bytes(data, threads=1, disable_cache=True)
    for w in words:
        assert w in str(e.value), str(e.value)
    return e.value


def test_errors():
    # A DFT whose matrix would be too large (no FFT kernel): refused, naming the sizes.
    big = onnx_model([helper.make_node("DFT", ["x"], ["y"], axis=1)], [vi("x", [1, 8192, 1])],
                     [vi("y", None)], opset=17)
    assert isinstance(refused(big, "DFT", "8192 x 16384", "no FFT kernel"), kiln.Unsupported)
    # Frames longer than the signal; onesided output of a complex signal; no frame length.
    short = onnx_model([helper.make_node("STFT", ["x", "s", "", "n"], ["y"])],
                       [vi("x", [1, 50, 1])], [vi("y", None)], [scalar("s", 4), scalar("n", 64)],
                       opset=17)
    refused(short, "64 samples", "50-sample signal")
    cplx = onnx_model([helper.make_node("STFT", ["x", "s", "", "n"], ["y"], onesided=1)],
                      [vi("x", [1, 50, 2])], [vi("y", None)], [scalar("s", 4), scalar("n", 8)],
                      opset=17)
    refused(cplx, "onesided needs a real signal")
    none = onnx_model([helper.make_node("STFT", ["x", "s"], ["y"])], [vi("x", [1, 50, 1])],
                      [vi("y", None)], [scalar("s", 4)], opset=17)
    refused(none, "needs a window or a frame_length")
    # Mel points past the spectrum (upper edge above the Nyquist frequency).
    refused(mel_model(8, 16, 8000, 0, 7000), "MelWeightMatrix", "past the 9 DFT bins")
    # Sizes that would make a huge matrix at load, or overflow: refused, nothing allocated.
    refused(mel_model(1000, 100000, 100000, 0, 50000), "50001 x 1000 matrix", "2^24")
    huge = onnx_model([helper.make_node("DFT", ["x", "n"], ["y"], axis=1)], [vi("x", [1, 64, 1])],
                      [vi("y", None)], [scalar("n", 1 << 40)], opset=17)
    refused(huge, "dft_length must be a scalar in [1, 2^31]")
