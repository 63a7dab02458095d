// Elementwise kernels: unary activations and numpy-broadcasting binary arithmetic.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "graph/post_ops.h"
#include "graph/unary_math.h"
#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_epilogue.h"

namespace kiln::ref {

namespace {

// The unary post-ops fused after a standalone elementwise node (graph/fuse.cpp), applied to its
// f32 output: the conv / Gemm epilogue's reference, its extra inputs past the node's own.
void fused_post_ops(const Node& node, const Inputs& in, Tensor& y) {
  if (y.dtype() != DType::f32) return;
  const Epilogue epilogue(node, in, int(node.inputs.size()), y);
  if (!epilogue.empty()) epilogue.apply_row(y.data<float>(), y.numel(), 0, 0, 0);
}

// y = f(x) over an f32 tensor, into a tensor of the same shape: f32, or bool (IsNaN, IsInf).
template <class F, class TY = float>
void unary(const Node& node, const Inputs& in, const Outputs& out, F f) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, std::is_same_v<TY, float> ? DType::f32 : DType::boolean, "output");
  expect_shape(node, y, x.shape(), "output");
  const float* xp = x.data<float>();
  TY* yp = y.data<TY>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = TY(f(xp[i]));
  fused_post_ops(node, in, y);
}

enum class Arith { add, sub, mul, div };

// i64 arithmetic wraps on overflow (done in unsigned to avoid UB); division truncates toward
// zero like C++ and ONNX Runtime, and division by zero is an error, not a crash.
template <Arith A>
int64_t arith_i64(const Node& node, int64_t a, int64_t b) {
  const uint64_t ua = uint64_t(a), ub = uint64_t(b);
  if constexpr (A == Arith::add) return int64_t(ua + ub);
  if constexpr (A == Arith::sub) return int64_t(ua - ub);
  if constexpr (A == Arith::mul) return int64_t(ua * ub);
  if constexpr (A == Arith::div) {
    if (b == 0) node.fail(Code::invalid_argument, "integer division by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;  // wraps
    return a / b;
  }
}

template <Arith A>
float arith_f32(float a, float b) {
  if constexpr (A == Arith::add) return a + b;
  if constexpr (A == Arith::sub) return a - b;
  if constexpr (A == Arith::mul) return a * b;
  if constexpr (A == Arith::div) return a / b;
}

template <Arith A>
void arith(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = req_input(node, in, 0);
  const Tensor& b = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, b, a.dtype(), "input 1");
  expect_dtype(node, y, a.dtype(), "output");
  if (a.dtype() == DType::f32) {
    broadcast_binary<float, float, float>(node, a, b, y, arith_f32<A>);
    fused_post_ops(node, in, y);
  } else
    broadcast_binary<int64_t, int64_t, int64_t>(
        node, a, b, y, [&](int64_t p, int64_t q) { return arith_i64<A>(node, p, q); });
}

}  // namespace

void relu(const Node& node, const Inputs& in, const Outputs& out) {
  // `x < 0 ? 0 : x` keeps NaN as NaN, like PyTorch.
  unary(node, in, out, [](float x) { return x < 0.f ? 0.f : x; });
}

void leaky_relu(const Node& node, const Inputs& in, const Outputs& out) {
  const float alpha = node.attr_f("alpha", 0.01f);
  unary(node, in, out, [alpha](float x) { return x < 0.f ? alpha * x : x; });
}

void clip(const Node& node, const Inputs& in, const Outputs& out) {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  if (const Tensor* t = opt_input(in, 1)) lo = read_f32_scalar(node, *t, "min");
  if (const Tensor* t = opt_input(in, 2)) hi = read_f32_scalar(node, *t, "max");
  // min(max(x, lo), hi): when lo > hi every value becomes hi, as in numpy.clip and ONNX.
  unary(node, in, out, [lo, hi](float x) {
    float v = x < lo ? lo : x;
    return v > hi ? hi : v;
  });
}

void sigmoid(const Node& node, const Inputs& in, const Outputs& out) {
  unary(node, in, out, [](float x) { return 1.f / (1.f + std::exp(-x)); });
}

void hard_sigmoid(const Node& node, const Inputs& in, const Outputs& out) {
  const float alpha = node.attr_f("alpha", 0.2f);
  const float beta = node.attr_f("beta", 0.5f);
  unary(node, in, out,
        [alpha, beta](float x) { return std::fmax(0.f, std::fmin(1.f, alpha * x + beta)); });
}

void hard_swish(const Node& node, const Inputs& in, const Outputs& out) {
  // x * relu6(x + 3) / 6, i.e. x * HardSigmoid(x) with alpha = 1/6, beta = 0.5.
  unary(node, in, out, [](float x) { return x * std::fmax(0.f, std::fmin(6.f, x + 3.f)) / 6.f; });
}

void tanh_op(const Node& node, const Inputs& in, const Outputs& out) {
  unary(node, in, out, [](float x) { return std::tanh(x); });
}

void sqrt_op(const Node& node, const Inputs& in, const Outputs& out) {
  unary(node, in, out, [](float x) { return std::sqrt(x); });  // NaN below 0, as in ONNX
}

void is_nan(const Node& node, const Inputs& in, const Outputs& out) {
  auto f = [](float v) { return std::isnan(v); };
  unary<decltype(f), uint8_t>(node, in, out, f);
}

void is_inf(const Node& node, const Inputs& in, const Outputs& out) {
  const bool neg = node.attr_i("detect_negative", 1) != 0;
  const bool pos = node.attr_i("detect_positive", 1) != 0;
  auto f = [&](float v) { return std::isinf(v) && (v > 0 ? pos : neg); };
  unary<decltype(f), uint8_t>(node, in, out, f);
}

void math_unary(const Node& node, const Inputs& in, const Outputs& out) {
  const std::optional<MathOp> op = math_op(node.op);
  if (!op) node.fail(Code::internal, "not a trigonometric op");
  unary(node, in, out, [&](float x) { return apply_math(*op, x); });
}

void glue_unary(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  if (x.dtype() == DType::i64 && (node.op == "Neg" || node.op == "Abs")) {
    // Shape arithmetic (ONNX's expanded LayerNorm negates an axis). Two's complement wrap, as
    // numpy: -INT64_MIN is INT64_MIN, not undefined behaviour.
    Tensor& y = req_output(node, out, 0);
    expect_dtype(node, y, DType::i64, "output");
    expect_shape(node, y, x.shape(), "output");
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t v = x.data<int64_t>()[i];
      const int64_t neg = int64_t(0 - uint64_t(v));
      y.data<int64_t>()[i] = node.op == "Neg" || v < 0 ? neg : v;
    }
    return;
  }
  const std::optional<PostOp> op = glue_unary_post_op(node);
  if (!op) node.fail(Code::unsupported, "parameters the elementwise ops do not compute");
  unary(node, in, out, [&](float x) { return apply_post_op(*op, x, 0, 0, 0); });
}

void erf_op(const Node& node, const Inputs& in, const Outputs& out) {
  unary(node, in, out, [](float x) { return std::erf(x); });
}

void gelu(const Node& node, const Inputs& in, const Outputs& out) {
  PostOp op;  // the post-ops' semantics, one definition
  op.kind =
      node.attr_s("approximate", "none") == "tanh" ? PostOp::Kind::gelu_tanh : PostOp::Kind::gelu;
  unary(node, in, out, [&](float x) { return apply_post_op(op, x, 0, 1, 0); });
}

void prelu(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& slope = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, slope, DType::f32, "slope");
  broadcast_binary<float, float, float>(node, x, slope, y,
                                        [](float a, float s) { return a < 0 ? a * s : a; });
}

void add(const Node& node, const Inputs& in, const Outputs& out) {
  arith<Arith::add>(node, in, out);
}
void sub(const Node& node, const Inputs& in, const Outputs& out) {
  arith<Arith::sub>(node, in, out);
}
void mul(const Node& node, const Inputs& in, const Outputs& out) {
  arith<Arith::mul>(node, in, out);
}
void div(const Node& node, const Inputs& in, const Outputs& out) {
  arith<Arith::div>(node, in, out);
}

void pow_op(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = req_input(node, in, 0);
  const Tensor& b = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, a, DType::f32, "input 0");
  expect_dtype(node, b, DType::f32, "input 1");
  expect_dtype(node, y, DType::f32, "output");
  // x^2 (the decomposed LayerNorm's square) exactly as x * x, as PyTorch computes it.
  broadcast_binary<float, float, float>(
      node, a, b, y, [](float x, float e) { return e == 2.f ? x * x : std::pow(x, e); });
  fused_post_ops(node, in, y);
}

// Sum / Max / Min / Mean of any number of broadcasting inputs: y = in0, then y = op(y, in_k)
// left to right (Sum: the summation order of a chain of Adds); Mean divides at the end.
void variadic(const Node& node, const Inputs& in, const Outputs& out) {
  Tensor& y = req_output(node, out, 0);
  if (in.empty()) node.fail(Code::invalid_model, "needs at least one input");
  Shape expect;
  for (size_t k = 0; k < in.size(); ++k) {
    const Tensor& x = req_input(node, in, k);
    expect_dtype(node, x, DType::f32, "input");
    expect = k == 0 ? x.shape() : broadcast_shapes(node, expect, x.shape());
  }
  expect_dtype(node, y, DType::f32, "output");
  expect_shape(node, y, expect, "output");
  const bool max = node.op == "Max", min = node.op == "Min";
  // Max / Min propagate NaN (numpy.maximum / minimum).
  auto combine = [&](float a, float b) {
    if (!max && !min) return a + b;
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
    return max ? std::max(a, b) : std::min(a, b);
  };
  float* yp = y.data<float>();
  const std::vector<int64_t> ys = strides_of(y.shape());
  for (size_t k = 0; k < in.size(); ++k) {
    const float* xp = in[k]->data<float>();
    const std::vector<std::vector<int64_t>> st = {
        broadcast_strides(node, in[k]->shape(), y.shape()), ys};
    for_each_row(y.shape(), st, [&](const int64_t* o, int64_t len, const int64_t* s) {
      for (int64_t i = 0; i < len; ++i) {
        float& dst = yp[o[1] + i * s[1]];
        dst = k == 0 ? xp[o[0] + i * s[0]] : combine(dst, xp[o[0] + i * s[0]]);
      }
    });
  }
  if (node.op == "Mean")
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] = float(double(yp[i]) / double(in.size()));
}

}  // namespace kiln::ref
