// The operator table: which ONNX ops Kiln supports, and each op's shape inference, which is
// also its validation (attribute ranges, input counts, dtypes, shape compatibility).
//
// Canonical forms. The importer rewrites every opset 1..28 variant (opsets 1-6: their legacy
// attributes, graph/canonicalize.cpp canonicalize_legacy) into ONE form per op (the
// opset-18 form; opsets 19-28 changed no supported op's semantics: they added dtypes, AveragePool
// dilations (refused unless 1), Pad mode wrap (refused), QuantizeLinear's precision (refused
// unless float32) and Swish, imported as x * Sigmoid(alpha x)), so inference, reference kernels
// and JIT kernels handle a single form:
//   Clip        inputs (x, min?, max?) — opset < 11 attributes min/max become constant inputs.
//   Split       inputs (x, split?) + attr axis (default 0); opset < 13 attribute `split` becomes
//               a constant input; without `split`, outputs split equally (opset 18: the last
//               chunk may be smaller, ceil(dim / n)).
//   Slice       inputs (data, starts, ends, axes?, steps?) — opset < 10 attributes become inputs.
//   Squeeze     inputs (x, axes?) — opset < 13 attribute becomes an input. Same for Unsqueeze
//               (axes required there).
//   ReduceMean  inputs (x, axes?) + attrs keepdims (1), noop_with_empty_axes (0) — opset < 18
//               attribute `axes` becomes an input. Same for every Reduce* op (ReduceSum: opset
//               < 13).
//   ArgMax / ArgMin  attr axis made non-negative; keepdims (1), select_last_index (0).
//   Pad         inputs (x, pads, constant_value?) + attr mode ("constant" only) — opset < 11
//               attributes pads/value become inputs.
//   Softmax     attr axis always present after import; opset < 13 models also get attr
//               `coerce_2d` = 1: the input is viewed as 2-D [prod(d<axis), prod(d>=axis)] and
//               softmax runs over the second dim (old semantics); otherwise over `axis` only.
//               Same for LogSoftmax and Hardmax.
//   Dropout     inputs (x, ratio?, training_mode?); only inference is supported (identity).
//   BatchNormalization  inputs (x, scale, B, mean, var) + attr epsilon (1e-5); one output.
//               Opset < 9 spatial = 0 with statistics [C, D...] (per activation, constant)
//               becomes Mul(x, a) and Add(., b) at import; with [C] it is spatial = 1.
//   LayerNormalization  inputs (x, scale, B?) + attrs axis (made non-negative), epsilon (1e-5)
//               and Kiln's `norm_dims` (made explicit): the normalised dims are
//               [axis, axis + norm_dims); ONNX's form normalises [axis, rank), so norm_dims =
//               rank - axis there; graph passes write norm_dims = 1 for a LayerNorm over the
//               channels of an NCHW tensor (ConvNeXt's LayerNorm2d). scale / B hold the
//               normalised dims (leading 1s allowed). Only output Y.
//   InstanceNormalization / GroupNormalization  inputs (x, scale, B) + attrs epsilon (1e-5),
//               num_groups (GroupNormalization); scale / B hold one value per channel ([C]):
//               opset < 21 GroupNormalization's per-group ones are expanded by inference.
//   LRN         as ONNX (size, alpha, beta, bias) + Kiln's `window_lo` where a graph pass set
//               it: channel c's window is [c - window_lo, c - window_lo + size - 1]; ONNX's
//               form has window_lo = floor((size - 1) / 2), PyTorch's (fuse_lrn) size / 2.
//   Gemm        inputs (A, B, C?) + transA, transB, alpha, beta.
//   Conv        inputs (x, w, b?) + auto_pad, dilations, group, kernel_shape, pads, strides, all
//               made explicit by inference: after inference, every Conv/MaxPool/AveragePool node
//               has attrs kernel_shape, strides, dilations and pads (begin..., end...) set to
//               explicit values and auto_pad removed, so kernels never re-derive them.
//   MaxPool / AveragePool   likewise explicit; ceil_mode, count_include_pad kept.
//   ConvTranspose  inputs (x, w, b?) + kernel_shape, strides, dilations, group and pads
//               (begin..., end...) made explicit by inference; auto_pad, output_shape and
//               output_padding become pads (output_padding folded into the end pads, which may
//               be negative), so out = s * (in - 1) + (k - 1) * d + 1 - pad_begin - pad_end.
//   Reshape     inputs (data, shape) + allowzero (0).
//   Shape       inputs (x) + start/end (opset 15) — always folded to a constant.
//   Resize      inputs (X, roi?, scales?, sizes?) and the opset-19 attributes explicit: mode,
//               coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside,
//               extrapolation_value, antialias, keep_aspect_ratio_policy (axes when given).
//               Opset 10 Resize and Upsample (attr or input scales) become this form with
//               coordinate mode asymmetric, nearest_mode floor (ceil when all scales downsample).
//               scales / sizes (and tf_crop_and_resize's roi) must be constant at load.
//   DepthToSpace / SpaceToDepth  as ONNX (blocksize, mode DCR/CRD); run as a 6-D Transpose.
//   Constant    value / value_float / value_floats / value_int / value_ints — folded at import.
//   ChannelShuffle  internal (graph/channel_shuffle.h), never in a model.
//   SubpixelInterleave  internal (graph/subpixel.h, graph/rewrite_convt.cpp): a
//               ConvTranspose's phase planes interleaved into its output.
//   SoftmaxAttention  internal (graph/rewrites.cpp fuse_attention): inputs (A, B, V[, bias])
//               + attrs scale (1) and divide (0): Y = Softmax(A x B * scale, or / scale with
//               divide, [+ bias,] over the last axis) x V, MatMul's batch broadcasting; the
//               bias broadcasts to the scores without widening them, its last dim N.
//   Cast        attr `to` kept as the ONNX code; to float16 = a float32 rounded to half
//               precision, to int32 = an int64 wrapped to 32 bits (Kiln has no f16/i32
//               tensors); `saturate` (opset 19, float8 only) ignored. CastLike: to = input 1's
//               dtype.
//   Expand / Tile / ConstantOfShape  shape / repeats inputs constant. Range: all three inputs
//               constant (its length depends on them), so it is always folded; Size likewise.
//   Mod         attr fmod (0): 0 = the divisor's sign (integers only), 1 = C fmod.
// Supported dtypes: f32 everywhere; i64 for shape arithmetic (Shape, Gather, Concat, Slice,
// Squeeze, Unsqueeze, Reshape, Add/Sub/Mul/Div, Identity, Cast-free paths); bool (one byte,
// 0/1) from the comparisons, IsNaN/IsInf and Not/And/Or/Xor, into Where, Cast and the data
// movers Expand/Tile/Identity. int32 initializers are widened to i64 at import;
// float16/bfloat16 initializers, inputs and outputs to f32.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// Validates `node` and sets shape/dtype (shape_known) on its outputs. Inputs are already
// inferred. May read constant inputs (Reshape's shape, Slice's starts, ...) and rewrite the
// node's attributes into their explicit form (see above). Throws Error naming the node.
using InferFn = void (*)(Graph& g, Node& node);

struct OpInfo {
  std::string_view name;
  InferFn infer;
  int min_inputs, max_inputs;    // counting omitted optional inputs
  int min_outputs, max_outputs;  // outputs the model may declare
  // What of the ONNX op Kiln does not implement, or the form it must take (a constant input,
  // a single output): shown in README.md's operator table (supported_ops_markdown).
  std::string_view limits = {};
  bool internal = false;  // made by Kiln's passes only; a model may not use it
  // Output sizes follow the input values: inference computes the outputs (all inputs constant)
  // or, at load, leaves the node to the run-time tail (graph/dynamic.h).
  bool data_dependent = false;
  // Inputs (bit i: input i) whose values decide the output's size (Range's bounds, STFT's
  // frame_step): at load they must be constants, or the node and what reads it run in the
  // run-time tail (graph/dynamic.h), where every input is known. (supported_ops_markdown says
  // so in the op's README row.)
  unsigned shape_inputs = 0;
};

const OpInfo* find_op(std::string_view op);  // nullptr if unsupported
const std::vector<OpInfo>& all_ops();

// README.md's "Supported operators" section: the opsets, dtypes and shape rules, then one row
// per ONNX op of the table (inputs, outputs, limits). tests/graph/test_ops_doc.cpp checks the
// README holds exactly this text.
std::string supported_ops_markdown();

}  // namespace kiln
