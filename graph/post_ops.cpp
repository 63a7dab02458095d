#include "graph/post_ops.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "graph/enum_name.h"
#include "graph/quant.h"

namespace kiln {
namespace {

// Every kind's name, in enum order: post_op_name's table and parse_post_ops's vocabulary.
const char* const kKindNames[] = {"relu",
                                  "leaky_relu",
                                  "clip",
                                  "sigmoid",
                                  "swish",
                                  "hardswish",
                                  "hardsigmoid",
                                  "add",
                                  "scale_shift",
                                  "gelu",
                                  "tanh",
                                  "sqrt",
                                  "erf",
                                  "pow",
                                  "exp",
                                  "log",
                                  "neg",
                                  "abs",
                                  "reciprocal",
                                  "floor",
                                  "ceil",
                                  "round",
                                  "elu",
                                  "selu",
                                  "celu",
                                  "softplus",
                                  "softsign",
                                  "mish",
                                  "thresholded_relu",
                                  "gelutanh",  // not gelu_tanh: post_ops_str of gelu, tanh
                                  "quantize_u8",
                                  "quantize_s8",
                                  "quant_dequant_u8",
                                  "quant_dequant_s8",
                                  "sin",
                                  "cos",
                                  "linear",
                                  "prelu"};
static_assert(std::size(kKindNames) == size_t(PostOp::Kind::prelu) + 1);

// The ONNX ops that map to one glue-only kind, with their attributes' names and defaults.
struct GlueUnary {
  const char* op;
  PostOp::Kind kind;
  const char* alpha = nullptr;
  float alpha_default = 0;
  const char* beta = nullptr;
  float beta_default = 0;
};
const GlueUnary kGlueUnary[] = {
    {"Tanh", PostOp::Kind::tanh},
    {"Sqrt", PostOp::Kind::sqrt},
    {"Erf", PostOp::Kind::erf},
    {"Exp", PostOp::Kind::exp},
    {"Log", PostOp::Kind::log},
    {"Neg", PostOp::Kind::neg},
    {"Abs", PostOp::Kind::abs},
    {"Reciprocal", PostOp::Kind::reciprocal},
    {"Floor", PostOp::Kind::floor},
    {"Ceil", PostOp::Kind::ceil},
    {"Round", PostOp::Kind::round},
    {"Elu", PostOp::Kind::elu, "alpha", 1.f},
    {"Selu", PostOp::Kind::selu, "alpha", 1.67326319217681884765625f, "gamma",
     1.05070102214813232421875f},
    {"Celu", PostOp::Kind::celu, "alpha", 1.f},
    {"Softplus", PostOp::Kind::softplus},
    {"Softsign", PostOp::Kind::softsign},
    {"Mish", PostOp::Kind::mish},
    {"ThresholdedRelu", PostOp::Kind::thresholded_relu, "alpha", 1.f},
    {"Sin", PostOp::Kind::sin},
    {"Cos", PostOp::Kind::cos},
};
// unary_post_op's ops (those a conv epilogue may fuse).
const char* const kFusableUnary[] = {"Relu",        "LeakyRelu", "Sigmoid", "Clip",
                                     "HardSigmoid", "HardSwish", "Gelu",    "QuantizeDequantize"};

}  // namespace

const char* post_op_name(PostOp::Kind k) {
  return enum_name(k, kKindNames);
}

std::vector<PostOp> parse_post_ops(const Node& n, int first_extra_input) {
  std::vector<PostOp> ops;
  auto it = n.attrs.find("post_ops");
  if (it == n.attrs.end()) return ops;
  const auto& names = it->second.strings;
  auto alpha = n.attr_floats("post_alpha"), beta = n.attr_floats("post_beta");
  if (alpha.size() != names.size() || beta.size() != names.size())
    n.fail(Code::invalid_model, "post_ops, post_alpha and post_beta differ in length");
  int next = first_extra_input;
  for (size_t i = 0; i < names.size(); ++i) {
    PostOp op;
    auto k = std::find(std::begin(kKindNames), std::end(kKindNames), names[i]);
    if (k == std::end(kKindNames))
      n.fail(Code::invalid_model, "unknown post-op '" + names[i] + "'");
    op.kind = PostOp::Kind(k - std::begin(kKindNames));
    op.alpha = alpha[i];
    op.beta = beta[i];
    if (extra_inputs(op.kind)) {
      op.input = next;
      next += extra_inputs(op.kind);
      if (int(n.inputs.size()) < next)
        n.fail(Code::invalid_model, "post-op '" + names[i] + "' lacks its input");
    }
    ops.push_back(op);
  }
  return ops;
}

std::optional<PostOp> unary_post_op(const Graph& g, const Node& n) {
  PostOp op;
  if (n.op == "Relu") {
    op.kind = PostOp::Kind::relu;
  } else if (n.op == "LeakyRelu") {
    op.kind = PostOp::Kind::leaky_relu;
    op.alpha = n.attr_f("alpha", 0.01f);
  } else if (n.op == "Clip") {
    op.kind = PostOp::Kind::clip;
    const float inf = std::numeric_limits<float>::infinity();
    // The scalar value of an optional constant input, or `def` when absent.
    auto bound = [&](size_t k, float def, float* out) {
      const ValueId v = n.in(k);
      if (v == kNoValue) return *out = def, true;
      const Value& val = g.value(v);
      if (!val.is_const() || val.dtype != DType::f32 || val.constant->numel() != 1) return false;
      *out = val.constant->data<float>()[0];
      return true;
    };
    if (!bound(1, -inf, &op.alpha) || !bound(2, inf, &op.beta)) return std::nullopt;
  } else if (n.op == "Sigmoid") {
    op.kind = PostOp::Kind::sigmoid;
  } else if (n.op == "HardSigmoid") {
    op.kind = PostOp::Kind::hardsigmoid;
    op.alpha = n.attr_f("alpha", 0.2f);
    op.beta = n.attr_f("beta", 0.5f);
  } else if (n.op == "HardSwish") {
    op.kind = PostOp::Kind::hardswish;
  } else if (n.op == "Gelu" && n.attr_s("approximate", "none") == "none") {
    op.kind = PostOp::Kind::gelu;
  } else if (n.op == "QuantizeDequantize") {
    return glue_unary_post_op(n);
  } else {
    return std::nullopt;
  }
  return op;
}

std::optional<PostOp> glue_unary_post_op(const Node& n) {
  PostOp op;
  if (n.op == "QuantizeDequantize") {  // attributes checked by its inference
    op.kind = n.attr_i("to", kOnnxUint8) == kOnnxInt8 ? PostOp::Kind::quant_dequant_s8
                                                      : PostOp::Kind::quant_dequant_u8;
    op.alpha = n.attr_f("scale", 1.f);
    op.beta = n.attr_f("zero_point", 0.f);
    return op;
  }
  if (n.op == "Quantize") {  // (fuse_qdq: a QuantizeLinear left unpaired)
    op.kind = n.attr_i("to", kOnnxUint8) == kOnnxInt8 ? PostOp::Kind::quantize_s8
                                                      : PostOp::Kind::quantize_u8;
    op.alpha = n.attr_f("scale", 1.f);
    op.beta = n.attr_f("zero_point", 0.f);
    return op;
  }
  if (n.op == "Gelu" && n.attr_s("approximate", "none") == "tanh") {
    op.kind = PostOp::Kind::gelu_tanh;
    return op;
  }
  for (const GlueUnary& u : kGlueUnary)
    if (n.op == u.op) {
      op.kind = u.kind;
      if (u.alpha) op.alpha = n.attr_f(u.alpha, u.alpha_default);
      if (u.beta) op.beta = n.attr_f(u.beta, u.beta_default);
      // Celu divides by alpha; the others take any finite parameters.
      if (!std::isfinite(op.alpha) || !std::isfinite(op.beta) ||
          (u.kind == PostOp::Kind::celu && op.alpha == 0.f))
        return std::nullopt;
      return op;
    }
  return std::nullopt;
}

std::optional<PostOp> elementwise_post_op(const Graph& g, const Node& n) {
  if (std::optional<PostOp> op = unary_post_op(g, n)) return op;
  if (std::optional<PostOp> op = glue_unary_post_op(n)) return op;
  PostOp op;
  if (n.op == "Pow" && n.inputs.size() == 2) {
    const Value& e = g.value(n.inputs[1]);
    if (!e.is_const() || e.dtype != DType::f32 || e.constant->numel() != 1 || e.shape.size() >= 4)
      return std::nullopt;
    op.kind = PostOp::Kind::pow;
    op.alpha = e.constant->data<float>()[0];
    if (!std::isfinite(op.alpha)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return op;
}

bool is_unary_elementwise_op(std::string_view op) {
  if (op == "Quantize") return true;  // (glue_unary_post_op)
  for (const char* o : kFusableUnary)
    if (op == o) return true;
  for (const GlueUnary& u : kGlueUnary)
    if (op == u.op) return true;
  return false;
}

void append_post_op(Node& n, const PostOp& op, const std::vector<ValueId>& extra_inputs) {
  auto& names = n.attrs["post_ops"];
  names.kind = Attribute::Kind::strings;
  names.strings.push_back(post_op_name(op.kind));
  auto& a = n.attrs["post_alpha"];
  a.kind = Attribute::Kind::floats;
  a.floats.push_back(op.alpha);
  auto& b = n.attrs["post_beta"];
  b.kind = Attribute::Kind::floats;
  b.floats.push_back(op.beta);
  for (ValueId v : extra_inputs) n.inputs.push_back(v);
}

float apply_post_op(const PostOp& op, float x, float residual, float scale, float shift) {
  switch (op.kind) {
    case PostOp::Kind::relu:  // NaN propagates (as in PyTorch and ONNX's max(0, x)); -0 stays
      return x < 0 ? 0.f : x;
    case PostOp::Kind::leaky_relu:
      return x >= 0 ? x : x * op.alpha;
    case PostOp::Kind::clip:
      return std::min(std::max(x, op.alpha), op.beta);
    case PostOp::Kind::sigmoid:
      return 1.f / (1.f + std::exp(-x));
    case PostOp::Kind::swish:
      return x / (1.f + std::exp(-x));
    case PostOp::Kind::hardswish:
      return x * std::min(std::max(x / 6.f + 0.5f, 0.f), 1.f);
    case PostOp::Kind::hardsigmoid:
      return std::min(std::max(op.alpha * x + op.beta, 0.f), 1.f);
    case PostOp::Kind::add:
      return x + residual;
    case PostOp::Kind::scale_shift:
      return x * scale + shift;
    case PostOp::Kind::gelu:
      return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case PostOp::Kind::tanh:
      return std::tanh(x);
    case PostOp::Kind::sqrt:
      return std::sqrt(x);
    case PostOp::Kind::erf:
      return std::erf(x);
    case PostOp::Kind::pow:
      return op.alpha == 2.f ? x * x : std::pow(x, op.alpha);
    case PostOp::Kind::exp:
      return std::exp(x);
    case PostOp::Kind::log:
      return std::log(x);
    case PostOp::Kind::neg:
      return -x;
    case PostOp::Kind::abs:
      return std::fabs(x);
    case PostOp::Kind::reciprocal:
      return 1.f / x;
    case PostOp::Kind::floor:
      return std::floor(x);
    case PostOp::Kind::ceil:
      return std::ceil(x);
    case PostOp::Kind::round:
      return std::nearbyint(x);  // (the default rounding mode: halves to even)
    case PostOp::Kind::elu:
      return x < 0 ? op.alpha * std::expm1(x) : x;
    case PostOp::Kind::selu:
      return x <= 0 ? op.beta * (op.alpha * std::expm1(x)) : op.beta * x;
    case PostOp::Kind::celu:
      return x > 0 ? x : op.alpha * std::expm1(x / op.alpha);
    case PostOp::Kind::softplus:
      return std::max(x, 0.f) + std::log1p(std::exp(-std::fabs(x)));
    case PostOp::Kind::softsign:
      return std::isinf(x) ? std::copysign(1.f, x) : x / (1.f + std::fabs(x));
    case PostOp::Kind::mish:
      return x * std::tanh(std::max(x, 0.f) + std::log1p(std::exp(-std::fabs(x))));
    case PostOp::Kind::thresholded_relu:
      return x > op.alpha ? x : 0.f;
    case PostOp::Kind::sin:
      return std::sin(x);
    case PostOp::Kind::cos:
      return std::cos(x);
    case PostOp::Kind::linear: {
      // Two roundings, as the kernels (no FMA); no + 0, which would turn -0 into +0.
      const volatile float product = x * op.alpha;
      return op.beta == 0.f ? product : product + op.beta;
    }
    case PostOp::Kind::prelu:  // ONNX PRelu: slope * x below 0 (NaN stays NaN)
      return x < 0 ? x * scale : x;
    case PostOp::Kind::gelu_tanh: {  // in double
      const double d = x;
      return float(0.5 * d * (1 + std::tanh(0.79788456080286536 * (d + 0.044715 * d * d * d))));
    }
    case PostOp::Kind::quantize_u8:
    case PostOp::Kind::quantize_s8:
      return quantize_value(x, op.alpha, op.beta, quant_dequant_range(op.kind));
    case PostOp::Kind::quant_dequant_u8:
    case PostOp::Kind::quant_dequant_s8: {
      const QuantRange r = quant_dequant_range(op.kind);
      return dequantize_value(quantize_value(x, op.alpha, op.beta, r), op.alpha, op.beta);
    }
  }
  return x;
}

std::string post_ops_str(const std::vector<PostOp>& ops) {
  std::string s;
  for (const auto& op : ops) {
    if (!s.empty()) s += '_';
    s += post_op_name(op.kind);
    // The parameters that change the result, each the shortest text that reads back as the
    // same float: tuning-cache keys and shared kernel code must tell two slopes apart.
    auto num = [&](float v) {
      char buf[32];
      s.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    };
    const int params = post_op_params(op.kind);
    if (params >= 1) num(op.alpha);
    if (params == 2) {
      s += '_';
      num(op.beta);
    }
  }
  return s;
}

std::optional<ReduceOp> reduce_op(std::string_view onnx_op) {
  static const char* const kOps[] = {
      "ReduceSum", "ReduceMean",   "ReduceMax",       "ReduceMin",      "ReduceProd", "ReduceL1",
      "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};  // ReduceOp's order
  for (size_t k = 0; k < std::size(kOps); ++k)
    if (onnx_op == kOps[k]) return ReduceOp(k);
  return std::nullopt;
}

}  // namespace kiln
