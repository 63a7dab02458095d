// ONNX ops that ONNX itself defines as functions of other ops, expanded at import into those
// ops (so they run on the kernels those have, folded at load where their inputs allow):
//   Shrink                     Where(x < -lambd, x + bias, Where(x > lambd, x - bias, 0))
//   MeanVarianceNormalization  (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over `axes`
//                              (ONNX's function body, term for term)
//   EyeLike                    Cast(Equal(row + k, column)) over Range()s of x's dims (a
//                              constant: shapes are known at load)
//   Compress                   Gather(x, Squeeze(NonZero(condition)), axis) (x flattened
//                              without an axis; the output's size follows the data)
//   ReverseSequence            GatherElements(x, t < len ? len - 1 - t : t) along time
//   Hann / Hamming / BlackmanWindow  a0 - a1 cos(x) + a2 cos(2x) over a Range of angles
// and Scatter (opsets 9-10) is ScatterElements under its old name. OneHot, whose output rank and
// depth its expansion needs, expands at shape inference (graph/passes.cpp) into
//   Where(Equal(Unsqueeze(indices < 0 ? indices + depth : indices, axis), 0 .. depth - 1 along
//   axis), on_value, off_value)
// (an index outside [-depth, depth) matches no class: all off_value, as ONNX defines).
#pragma once

#include <vector>

#include "graph/ir.h"

namespace kiln {

// Appends n's expansion to `out` when n is one of those ops; returns false otherwise.
bool expand_function_op(Graph& g, Node& n, std::vector<Node>& out);

// OneHot's shape inference (depth a constant: graph/dynamic.h sees to that) and, once its
// inputs are inferred, its expansion.
void infer_one_hot(Graph& g, Node& n);
std::vector<Node> expand_one_hot(Graph& g, const Node& n);

// BatchNormalization, Layer-, Instance- and GroupNormalization whose scale or bias (BN: any of
// its four parameters) is computed, not a constant: their kernels take constants. Expanded once
// inferred: BN into y = x * a + (B - mean * a) with a = scale / sqrt(var + eps) computed per run
// on the [C] vectors; the others into the normalisation with ones / no bias in place of the
// computed ones, then a broadcast Mul by the scale and Add of the bias (AdaIN-style
// conditioning, FiLM, weights fed as graph inputs).
bool computed_affine(const Graph& g, const Node& n);
std::vector<Node> expand_computed_affine(Graph& g, const Node& n);

// A BatchNormalization in training mode (training_mode=1; before opset 14, any statistics
// output), as PyTorch exports F.batch_norm(training=True) (NFNet / BiT weight-standardised convs,
// statistics of the batch at inference). Expanded once inferred: Y normalised by the batch's own
// per-channel mean and population variance (the mean / var inputs feed only the running
// statistics outputs, mean * momentum + batch statistic * (1 - momentum); opsets < 14's saved
// mean / var are the batch's), as ONNX's reference defines it.
bool batch_norm_training(const Graph& g, const Node& n);
std::vector<Node> expand_batch_norm_training(Graph& g, const Node& n);

// Trilu of a computed f32 / int64 / bool tensor, expanded once inferred into Where(kept, x, 0):
// the [rows, cols] mask of the kept triangle a constant for a constant k, else the constant
// diagonal offsets j - i compared with k per run (Where's glue kernel broadcasts it over the
// leading dims); matrices over kMaxTriluMask elements stay on the reference kernel rather than
// get a constant that size at load.
constexpr int64_t kMaxTriluMask = int64_t(1) << 22;
bool trilu_as_where(const Graph& g, const Node& n);
std::vector<Node> expand_trilu(Graph& g, const Node& n);

// The expansions made once a node is inferred (graph/passes.cpp): computed_affine,
// trilu_as_where, a Dropout's mask output (all true: inference drops nothing) as an Expand of a
// true, LayerNormalization's Mean / InvStdDev outputs as ReduceMeans beside the normalisation,
// batch_norm_training.
bool expand_at_inference(const Graph& g, const Node& n);
std::vector<Node> expand_inferred(Graph& g, const Node& n);

}  // namespace kiln
