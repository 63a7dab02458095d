#!/usr/bin/python3
"""Error of Winograd convolution with bf16 operands, against direct bf16, on one 3x3 conv.

    /usr/bin/python3 bench/winograd_bf16_error.py

A measurement for issue 19 (bench/NOTES.md, session 51), not a test: a 64 -> 64 channel 3x3
conv at 56x56 (ReLU'd normal input, Kaiming-normal weights) computed in float64 (the
reference), directly with input and weights rounded to bf16 (what Kiln's bf16 kernels do), and
as Winograd F(2x2, 3x3) and F(4x4, 3x3) (Lavin's matrices, points 0, +-1, +-2) with the
transformed input V and weights U kept in f32 or rounded to bf16 before the per-point GEMMs,
which accumulate in f32. Prints max |y - ref| / max |ref| and the rms ratio of each.
Needs NumPy and Debian's python3-torch (for the bf16 rounding)."""
import numpy as np
import torch

C, K, H = 64, 64, 56
rng = np.random.default_rng(0)
x = np.maximum(rng.standard_normal((C, H, H)), 0)
w = rng.standard_normal((K, C, 3, 3)) * np.sqrt(2 / (9 * C))
xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))

# (B^T, G, A^T) of F(m x m, 3 x 3).
WINOGRAD = {
    2: (np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float),
        np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float)),
    4: (np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], float)),
}


def bf16(a):
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    return t.to(torch.bfloat16).float().numpy().astype(np.float64)


def f32(a):
    return a.astype(np.float32).astype(np.float64)


def direct(xp, w):
    out = np.zeros((K, H, H))
    for i in range(3):
        for j in range(3):
            out += np.einsum('kc,chw->khw', w[:, :, i, j], xp[:, i:i + H, j:j + H])
    return out


def winograd(m, round_v, round_u):
    bt, g, at = WINOGRAD[m]
    a, tiles = m + 2, H // m
    u = round_u(np.einsum('ij,kcjl,ml->kcim', g, w, g))  # [K, C, a, a]
    v = np.zeros((C, tiles, tiles, a, a))
    for ty in range(tiles):
        for tx in range(tiles):
            d = np.zeros((C, a, a))
            s = xp[:, ty * m:ty * m + a, tx * m:tx * m + a]
            d[:, :s.shape[1], :s.shape[2]] = s
            v[:, ty, tx] = np.einsum('ij,cjl,ml->cim', bt, d, bt)
    v = round_v(v)
    prod = f32(np.einsum('kcij,ctsij->ktsij', u, v))  # the GEMMs accumulate in f32
    y = np.einsum('ij,ktsjl,ml->ktsim', at, prod, at)  # [K, T, T, m, m]
    return y.transpose(0, 1, 3, 2, 4).reshape(K, tiles * m, tiles * m)


ref = direct(xp, w)


def report(name, y):
    mx = np.abs(y - ref).max() / np.abs(ref).max()
    rms = np.sqrt(((y - ref) ** 2).mean()) / np.sqrt((ref ** 2).mean())
    print(f'{name:22s} max {mx:.2e}  rms {rms:.2e}')


report('direct bf16', direct(bf16(xp), bf16(w)))
for m in (2, 4):
    report(f'F({m}x{m}) f32', winograd(m, f32, f32))
    report(f'F({m}x{m}) bf16 U and V', winograd(m, bf16, bf16))
    report(f'F({m}x{m}) bf16 V only', winograd(m, bf16, f32))
