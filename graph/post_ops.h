// Elementwise chains fused into a Conv / Gemm / MatMul node (its epilogue), applied per output
// element right after the accumulation, before the single store.
//
// Representation on the node (written by fuse_epilogues, read by every kernel):
//   attr "post_ops"   strings, one per op, in order: relu, leaky_relu, clip, sigmoid, swish,
//                     hardswish, hardsigmoid, add, scale_shift, gelu (tanh, sqrt, erf, pow, exp,
//                     log, ... gelu_tanh, sin, cos, linear: the glue kernels' vocabulary, of which
//                     only epilogue_glue_kind's are fused into a conv epilogue)
//   attr "post_alpha" floats, same length: leaky_relu slope, clip min, hardsigmoid alpha, pow
//                     exponent, elu / selu / celu alpha, thresholded_relu alpha, linear alpha
//   attr "post_beta"  floats, same length: clip max, hardsigmoid beta, selu gamma, linear beta
//   extra node inputs after the op's own ones, in post-op order: `add` takes one (a tensor of
//   the output's shape: the residual), `scale_shift` takes two (per-output-channel scale and
//   shift, 1-D [C]), `prelu` one (the per-output-channel slope, 1-D [C]).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/ir.h"
#include "graph/quant.h"

namespace kiln {

struct PostOp {
  enum class Kind {
    relu,
    leaky_relu,
    clip,
    sigmoid,
    swish,
    hardswish,
    hardsigmoid,
    add,
    scale_shift,
    gelu,  // x * 0.5 * (1 + erf(x / sqrt 2)), ONNX Gelu with approximate = "none"
    // The glue kernels' vocabulary (elementwise_post_op; the conv epilogues compute only
    // epilogue_glue_kind's of these):
    tanh,
    sqrt,
    erf,
    pow,  // std::pow(x, alpha) (x * x for alpha = 2, as the reference Pow), alpha finite
    exp,
    log,
    neg,
    abs,
    reciprocal,
    floor,
    ceil,
    round,             // to the nearest integer, halves to even (ONNX Round)
    elu,               // x < 0 ? alpha expm1(x) : x
    selu,              // x <= 0 ? beta (alpha expm1(x)) : beta x (beta is ONNX's gamma)
    celu,              // x > 0 ? x : alpha expm1(x / alpha)
    softplus,          // log(1 + exp(x)), as max(x, 0) + log1p(exp(-|x|))
    softsign,          // x / (1 + |x|), +-1 at +-inf
    mish,              // x tanh(softplus(x))
    thresholded_relu,  // x > alpha ? x : 0
    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): ONNX Gelu with approximate = "tanh"
    gelu_tanh,
    // QuantizeLinear alone, per tensor (graph/quant.h quantize_value): alpha = scale, beta =
    // zero point; the integer, held as float32 (a QuantizeLinear left unpaired).
    quantize_u8,
    quantize_s8,
    // QuantizeLinear then DequantizeLinear, per tensor (graph/quant.h): alpha = scale, beta =
    // zero point; to uint8 / int8. Fused into epilogues too (a QDQ model's conv output).
    quant_dequant_u8,
    quant_dequant_s8,
    // Standalone only, as tanh .. gelu_tanh (after the quantize kinds: the enum's numbers stay).
    sin,
    cos,
    // x * alpha + beta, two roundings (standalone only: a Mul / Add / Sub by a scalar constant
    // fused after another elementwise op; graph/fuse.cpp makes alpha 1 or beta 0, so it is
    // exact either way).
    linear,
    // x < 0 ? x * slope[c] : x, ONNX PRelu with a per-output-channel slope: one extra input
    // (1-D [C]), the conv / GEMM epilogues only.
    prelu,
  };
  Kind kind = Kind::relu;
  float alpha = 0, beta = 0;
  int input = -1;  // node input index: the residual (add), the scale (scale_shift; shift = +1)
                   // or the slope (prelu)
};

const char* post_op_name(PostOp::Kind k);
// A quantize-dequantize post-op: whether k is one, its integers' range, and its zero point on
// the uint8 grid Kiln holds such values on (an int8 grid shifted by 128: jit/layout.h
// nChw16c_u8).
inline bool is_quant_dequant(PostOp::Kind k) {
  return k == PostOp::Kind::quant_dequant_u8 || k == PostOp::Kind::quant_dequant_s8;
}
// (Also the range of a quantize_u8 / quantize_s8 post-op's integers.)
inline QuantRange quant_dequant_range(PostOp::Kind k) {
  const bool s8 = k == PostOp::Kind::quant_dequant_s8 || k == PostOp::Kind::quantize_s8;
  return quant_range(s8 ? kOnnxInt8 : kOnnxUint8);
}
inline float quant_dequant_u8_zero(const PostOp& op) {
  return op.beta + (op.kind == PostOp::Kind::quant_dequant_s8 ? 128.f : 0.f);
}
// The kinds past the first block (tanh ... quantize_s8, sin, cos, linear): the standalone
// elementwise kernels' vocabulary, which unary_post_op does not return.
inline bool glue_kind(PostOp::Kind k) {
  return (k >= PostOp::Kind::tanh && k <= PostOp::Kind::quantize_s8) ||
         (k >= PostOp::Kind::sin && k <= PostOp::Kind::linear);
}
// The parameters that change a kind's result, as post_ops_str writes them after its name and
// ConvProblem::parse reads them back: 2 (alpha, beta), 1 (alpha) or 0.
inline int post_op_params(PostOp::Kind k) {
  using K = PostOp::Kind;
  if (k == K::clip || k == K::hardsigmoid || k == K::selu || k == K::linear || is_quant_dequant(k))
    return 2;
  if (k == K::leaky_relu || k == K::pow || k == K::elu || k == K::celu || k == K::thresholded_relu)
    return 1;
  return 0;
}
// The node inputs a post-op reads: the residual of `add`, scale and shift of `scale_shift`,
// the slope of `prelu`.
inline int extra_inputs(PostOp::Kind k) {
  using K = PostOp::Kind;
  return k == K::scale_shift ? 2 : k == K::add || k == K::prelu ? 1 : 0;
}
// The kinds with per-output-channel operands (PostOpArgs::scale / shift).
inline bool per_channel(PostOp::Kind k) {
  return k == PostOp::Kind::scale_shift || k == PostOp::Kind::prelu;
}
// The kinds the conv / GEMM epilogues (jit/epilogue.h) also compute among glue_kind's: the
// activations that follow convs in real networks (GAN / super-resolution outputs, YOLO's Mish,
// ELU nets, tanh-GELU after a Linear).
inline bool epilogue_glue_kind(PostOp::Kind k) {
  using K = PostOp::Kind;
  return k == K::tanh || k == K::elu || k == K::selu || k == K::mish || k == K::gelu_tanh;
}
// The kinds only the standalone elementwise kernels compute, never a conv epilogue.
inline bool glue_only(PostOp::Kind k) {
  return glue_kind(k) && !epilogue_glue_kind(k);
}
// The most post-ops one node carries: fuse_epilogues stops there (a longer chain would leave
// the node to the reference kernel), and the JIT epilogues' operand blocks hold that many.
constexpr int kMaxPostOps = 8;
// Parses the node's post-op attributes (empty when it has none). `first_extra_input` is the
// index of the first extra input (3 for Conv and Gemm, 2 for MatMul). Throws naming the node
// when the attributes are inconsistent.
std::vector<PostOp> parse_post_ops(const Node& n, int first_extra_input);
// The post-op a unary elementwise node computes: Relu, LeakyRelu, Sigmoid, HardSigmoid,
// HardSwish, Gelu (exact form), QuantizeDequantize, or Clip whose bounds are absent or constant
// f32 scalars; nothing otherwise.
std::optional<PostOp> unary_post_op(const Graph& g, const Node& n);
// unary_post_op's ops plus the kinds only the standalone elementwise kernels compute: Tanh,
// Sqrt, Erf, Exp, Log, Neg, Abs, Reciprocal, Floor, Ceil, Elu, Selu, Celu, Softplus, Softsign,
// Mish, ThresholdedRelu, and Pow whose exponent is a constant finite f32 scalar (rank < 4).
std::optional<PostOp> elementwise_post_op(const Graph& g, const Node& n);
// The glue-only one-input ops of elementwise_post_op (Tanh ... ThresholdedRelu, not Pow), from
// the node's attributes; nothing for other ops or parameters the kernels refuse (non-finite,
// Celu's alpha 0). The reference kernels compute these with apply_post_op too.
std::optional<PostOp> glue_unary_post_op(const Node& n);
// Whether `op` is a one-input float op the elementwise kernels may compute (the ops of
// unary_post_op and elementwise_post_op but Pow; whether a node's attributes and inputs allow
// it is elementwise_post_op's answer).
bool is_unary_elementwise_op(std::string_view op);
// Appends `op` to the node's attributes (and its extra inputs to node.inputs).
void append_post_op(Node& n, const PostOp& op, const std::vector<ValueId>& extra_inputs);
// Applies one post-op to a scalar (the reference semantics every JIT emitter must match).
// `extra` is the residual value (add) or ignored; scale/shift are the per-channel values.
float apply_post_op(const PostOp& op, float x, float residual, float scale, float shift);
// "relu", "clip0_6", "add_relu": a short form for problem strings and kernel names.
std::string post_ops_str(const std::vector<PostOp>& ops);

// The Reduce* ops (graph/ops.h): what the reference and the JIT reduction kernels compute per
// output element over its reduced elements x_i.
enum class ReduceOp {
  sum,
  mean,
  max,  // NaN propagates
  min,
  prod,
  l1,           // sum |x_i|
  l2,           // sqrt(sum x_i^2)
  log_sum,      // log(sum x_i)
  log_sum_exp,  // m + log(sum exp(x_i - m)), m = max x_i
  sum_square,
};
std::optional<ReduceOp> reduce_op(std::string_view onnx_op);  // nullopt: not a Reduce* op

}  // namespace kiln
