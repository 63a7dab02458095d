// ONNX's signal ops (opset 17+), for audio CNNs whose spectrogram front end is in the graph:
//
//   DFT   along an axis, real or complex input, forward or inverse, onesided, dft_length
//         (zero-padded or truncated): once the input's shape is known (shape inference,
//         graph/passes.cpp), a product with the DFT matrix [L * C, 2 * K] on the MatMul kernels,
//         the axis moved next to the real / imaginary one and back by Transposes.
//   STFT  frames of `frame_length` every `frame_step` samples, times the window, each DFT'd:
//         a strided 2-D Conv (1 x frame_length kernel, 2 * K output channels: the DFT matrix
//         times the window, a constant when the window is) on the conv kernels, then
//         Reshape + Transpose to [batch, frames, K, 2].
//   MelWeightMatrix  computed by shape inference (its size follows its input values), as ONNX's
//         reference does (a constant for the MatMul after the spectrogram).
//
// A DFT matrix is O(n^2): lengths whose matrix would exceed kMaxDftMatrixElements are refused
// by name (Kiln has no FFT kernel). Hann / Hamming / Blackman windows are functions of other
// ops (graph/function_ops.h).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// Largest DFT or mel matrix Kiln makes (at load): 64 MiB of float32.
constexpr int64_t kMaxDftMatrixElements = int64_t(1) << 24;

// Shape inference (validation and the output's shape) of DFT and STFT, and MelWeightMatrix's
// value (its inputs must be constants; graph/dynamic.h sees to that).
void infer_dft(Graph& g, Node& n);
void infer_stft(Graph& g, Node& n);
void infer_mel_weight_matrix(Graph& g, Node& n);

// The nodes that replace a DFT or STFT whose input shapes and length inputs are known (checked
// as infer_dft / infer_stft do, throwing naming the node).
std::vector<Node> expand_spectral(Graph& g, const Node& n);

}  // namespace kiln
