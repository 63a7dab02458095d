# Run: /usr/bin/python3 bench/export_audio.py --out /tmp/audio [--batch 1] [--seconds 1]
# Exports an audio-tagging CNN whose log-mel front end is in the graph, the form ONNX's signal
# ops (opset 17) give it: waveform [B, samples, 1] -> HannWindow -> STFT (512-point frames every
# 160 samples, 16 kHz) -> ReduceSumSquare (power) -> MatMul with MelWeightMatrix (64 mels,
# 50 Hz - 8 kHz) -> Log(x + 1e-6) -> a PANNs Cnn10-style network (four blocks of two 3x3 conv +
# BN + ReLU and a 2x2 average pool, 64 to 512 channels; mean over mels, max + mean over time,
# two FC layers to 527 class logits: PANNs' sigmoid left out so that --check sees errors
# instead of saturated ones). PyTorch 1.13 cannot export torch.stft, so the CNN is exported
# from PyTorch and the front end written with onnx.helper in front of it. Writes
# OUT/audio_cnn[_bB_Ns].onnx with .input.npy and .ref.npy (numpy's float64 FFT for the front end,
# PyTorch for the CNN) for `kiln bench --check` and bench/zoo_bench.py.
import argparse, os, sys, tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import helper, numpy_helper

from export_util import calibrate_bn

# ONNX's signal ops in numpy: the oracle tests/python/test_spectral.py checks Kiln against.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import onnx_signal as sig  # noqa: E402

SEED = 4321
RATE, N_FFT, HOP, MELS, FMIN, FMAX = 16000, 512, 160, 64, 50.0, 8000.0


class Cnn10(nn.Module):
    def __init__(self, classes=527):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
                                 nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                                 nn.BatchNorm2d(cout), nn.ReLU(), nn.AvgPool2d(2))

        self.blocks = nn.Sequential(block(1, 64), block(64, 128), block(128, 256),
                                    block(256, 512))
        self.fc1, self.fc2 = nn.Linear(512, 512), nn.Linear(512, classes)

    def forward(self, x):  # [B, 1, frames, mels]
        x = self.blocks(x).mean(dim=3)
        x = x.max(dim=2)[0] + x.mean(dim=2)
        return self.fc2(torch.relu(self.fc1(x)))


def log_mel(wave):
    """The front end in float64: [B, samples, 1] -> [B, 1, frames, mels]."""
    spec = sig.stft(wave, HOP, sig.window("HannWindow", N_FFT, 1), N_FFT, 1)
    mel = sig.mel_weight_matrix(MELS, N_FFT, RATE, FMIN, FMAX)
    return np.log((spec ** 2).sum(-1) @ mel + 1e-6)[:, None]


def front_end(cnn, batch, samples):
    """cnn (an onnx model reading 'logmel') with the front end in front, reading 'waveform'."""
    scalar = lambda name, v, dt=np.int64: numpy_helper.from_array(np.array(v, dtype=dt), name)
    inits = [scalar("n_fft", N_FFT), scalar("hop", HOP), scalar("mels", MELS),
             scalar("rate", RATE), scalar("fmin", FMIN, np.float32),
             scalar("fmax", FMAX, np.float32), scalar("eps", 1e-6, np.float32),
             numpy_helper.from_array(np.array([1], np.int64), "channel_axis")]
    nodes = [helper.make_node("HannWindow", ["n_fft"], ["window"]),
             helper.make_node("STFT", ["waveform", "hop", "window"], ["spectrum"]),
             helper.make_node("ReduceSumSquare", ["spectrum"], ["power"], axes=[-1], keepdims=0),
             helper.make_node("MelWeightMatrix", ["mels", "n_fft", "rate", "fmin", "fmax"],
                              ["mel_weights"]),
             helper.make_node("MatMul", ["power", "mel_weights"], ["mel"]),
             helper.make_node("Add", ["mel", "eps"], ["mel_eps"]),
             helper.make_node("Log", ["mel_eps"], ["log_mel"]),
             helper.make_node("Unsqueeze", ["log_mel", "channel_axis"], ["logmel"])]
    g = cnn.graph
    wave = helper.make_tensor_value_info("waveform", onnx.TensorProto.FLOAT, [batch, samples, 1])
    graph = helper.make_graph(nodes + list(g.node), "audio_cnn", [wave], list(g.output),
                              initializer=inits + list(g.initializer))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    samples = int(args.seconds * RATE)
    frames = (samples - N_FFT) // HOP + 1
    torch.manual_seed(SEED)
    net = Cnn10()
    calibrate_bn(net, (2, 1, frames, MELS), SEED + 1)
    rng = np.random.default_rng(SEED)
    wave = (rng.standard_normal((args.batch, samples, 1)) * 0.1).astype(np.float32)
    x = log_mel(wave)
    with torch.no_grad():
        ref = net(torch.from_numpy(x.astype(np.float32))).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cnn.onnx")
        torch.onnx.export(net, torch.from_numpy(x.astype(np.float32)), path, opset_version=17,
                          input_names=["logmel"], output_names=["output"],
                          do_constant_folding=True)
        model = front_end(onnx.load(path), args.batch, samples)
    onnx.checker.check_model(model)
    suffix = "" if (args.batch, args.seconds) == (1, 1.0) else f"_b{args.batch}_{args.seconds:g}s"
    base = os.path.join(args.out, "audio_cnn" + suffix)
    onnx.save(model, base + ".onnx")
    np.save(base + ".input.npy", wave)
    np.save(base + ".ref.npy", ref)
    print(f"{os.path.basename(base)}: frames={frames} out={list(ref.shape)} "
          f"absmax={float(np.abs(ref).max()):.3g}", flush=True)


if __name__ == "__main__":
    main()
