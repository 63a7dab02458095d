"""numpy transcriptions of ONNX's signal-op definitions, the oracle for tests/python/test_spectral.py
and bench/export_audio.py's reference outputs."""
import numpy as np


def mel_weight_matrix(mels, dft, rate, lo, hi):
    """ONNX's MelWeightMatrix [dft // 2 + 1, mels], as its operator test computes it
    (onnx/backend/test/case/node/melweightmatrix.py): mels + 2 points evenly spaced on the mel
    scale in steps of the range over mels + 2, mapped to DFT bins, a triangle per mel bin."""
    bins = dft // 2 + 1
    lo_mel, hi_mel = (2595 * np.log10(1 + f / 700) for f in (lo, hi))
    points = np.arange(mels + 2) * (hi_mel - lo_mel) / (mels + 2) + lo_mel
    points = (((dft + 1) * 700 * (np.power(10, points / 2595) - 1)) // rate).astype(int)
    out = np.zeros((bins, mels))
    for i in range(mels):
        left, centre, right = points[i:i + 3]
        if centre == left:
            out[centre, i] = 1
        else:
            out[left:centre + 1, i] = (np.arange(left, centre + 1) - left) / (centre - left)
        if right > centre:
            out[centre:right, i] = (right - np.arange(centre, right)) / (right - centre)
    return out


def window(kind, size, periodic):
    """HannWindow / HammingWindow / BlackmanWindow: a0 - a1 cos(x) + a2 cos(2x) over
    x = 2 pi i / N (periodic) or / (N - 1)."""
    a = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
         "BlackmanWindow": (0.42, 0.5, 0.08)}[kind]
    x = 2 * np.pi * np.arange(size) / (size if periodic else size - 1)
    return a[0] - a[1] * np.cos(x) + a[2] * np.cos(2 * x)


def as_complex(x):
    """[..., 1] real or [..., 2] (real, imaginary) float arrays as complex128."""
    x = x.astype(np.float64)
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def split_complex(z):
    return np.stack([z.real, z.imag], axis=-1)


def stft(x, step, win, length, onesided):
    """ONNX's STFT of x [B, samples, 1 or 2]: frames of `length` every `step` samples times
    `win` (None: ones), each DFT'd -> [B, frames, bins, 2] (float64)."""
    z = as_complex(x)
    w = np.ones(length) if win is None else np.asarray(win, dtype=np.float64)
    frames = (z.shape[1] - length) // step + 1
    f = np.stack([z[:, i * step:i * step + length] * w for i in range(frames)], axis=1)
    s = np.fft.fft(f, axis=-1)
    return split_complex(s[..., :length // 2 + 1] if onesided else s)
