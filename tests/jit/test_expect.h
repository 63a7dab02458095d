// Shared by the post-op tests (test_epilogue: the fused conv epilogue; test_glue_eltwise: the
// standalone elementwise kernels): the expected value of a chain with an error budget, the
// comparison against it, and the edge inputs both feed every op.
#pragma once

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "graph/post_ops.h"

namespace kiln::test {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline PostOp mk(PostOp::Kind k, float a = 0, float b = 0) {
  PostOp op;
  op.kind = k;
  op.alpha = a;
  op.beta = b;
  return op;
}

// The spacing of floats at |v| (subnormal spacing below FLT_MIN, also for 0).
inline double ulp_of(double v) {
  v = std::fabs(v);
  if (!(v >= 0x1p-126)) return 0x1p-149;
  int e;
  std::frexp(v, &e);
  return std::ldexp(1.0, e - 24);
}

struct Expect {
  float v;
  double err;  // allowed |got - v|; 0 = bit-exact
};

// The budget after a sigmoid or swish whose input was `in` (error budget `e` so far) and whose
// reference result is `v`: 4 ulp of our exp / 1+e / division rounding, plus the reference's
// own error against the double-precision truth (e.g. at x ~ -88.72 the float reference's
// exp(-x) overflows and gives 0 where the truth is 2.9e-39); slopes 1/4 and 1.1.
inline double sigmoid_swish_err(PostOp::Kind k, float in, float v, double e) {
  const double din = in;
  double t = 1.0 / (1.0 + std::exp(-din));
  if (k == PostOp::Kind::swish) t *= din;
  double tol = 4 * ulp_of(std::max(std::fabs(double(v)), std::fabs(t)));
  if (std::isfinite(t)) tol += std::fabs(double(v) - t);
  return e * (k == PostOp::Kind::sigmoid ? 0.25 : 1.1) + tol;
}

// gelu in double precision.
inline double gelu_truth(double x) {
  return 0.5 * x * (1 + std::erf(x * 0.70710678118654752));
}

// The budget of one gelu with input `in` and reference result `v`: the erf term's
// approximation (jit/epilogue.h: 1.5e-7, 6e-7 with the float rounding where erfc ~ 1) times |x|/2,
// 4 ulp of rounding, plus the float reference's own distance to the truth. Slope <= 1.13.
inline double gelu_err(float in, float v) {
  const double t = gelu_truth(in);
  double tol =
      0.5 * std::fabs(double(in)) * 6e-7 + 4 * ulp_of(std::max(std::fabs(double(v)), std::fabs(t)));
  if (std::isfinite(t)) tol += std::fabs(double(v) - t);
  return tol;
}

// gelu's accuracy sweep: [-12, 12] densely and magnitudes 1e-30 .. 1e30.
inline std::vector<float> gelu_test_inputs() {
  std::vector<float> x;
  for (int i = 0; i <= (1 << 20); ++i) x.push_back(float(-12.0 + 24.0 * i / (1 << 20)));
  for (int e = -30; e <= 30; ++e)
    for (float m : {1.f, -1.f, 1.7f, -2.3f}) x.push_back(m * std::pow(10.f, float(e)));
  return x;
}

// y = gelu(x) against double precision: inputs outside gelu_err's budget, the erf term's
// worst error (|error| / (|x| / 2)) and the worst |error| / max(1, |x|).
struct GeluStats {
  int bad = 0;
  float first_bad = 0;
  double erf_term = 0, scaled = 0;
};
inline GeluStats gelu_stats(const std::vector<float>& x, const float* y) {
  GeluStats s;
  PostOp op;
  op.kind = PostOp::Kind::gelu;
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = gelu_truth(x[i]), err = std::fabs(double(y[i]) - t);
    if (!(err <= gelu_err(x[i], apply_post_op(op, x[i], 0, 0, 0))) && s.bad++ == 0)
      s.first_bad = x[i];
    s.scaled = std::max(s.scaled, err / std::max(1.0, std::fabs(double(x[i]))));
    if (std::fabs(x[i]) > 1e-3f && std::isfinite(x[i]))
      s.erf_term = std::max(s.erf_term, err / std::fabs(0.5 * x[i]));
  }
  return s;
}

// The double-precision truth of a one-input post-op (std:: functions in double, whose C
// special cases the float reference shares); the exact-in-float ops by apply_post_op.
inline double truth(const PostOp& op, float x) {
  const double d = x;
  switch (op.kind) {
    case PostOp::Kind::tanh:
      return std::tanh(d);
    case PostOp::Kind::sqrt:
      return std::sqrt(d);
    case PostOp::Kind::erf:
      return std::erf(d);
    case PostOp::Kind::pow:
      return std::pow(d, double(op.alpha));
    case PostOp::Kind::exp:
      return std::exp(d);
    case PostOp::Kind::log:
      return std::log(d);
    case PostOp::Kind::elu:
      return d < 0 ? double(op.alpha) * std::expm1(d) : d;
    case PostOp::Kind::selu:
      return d <= 0 ? double(op.beta) * double(op.alpha) * std::expm1(d) : double(op.beta) * d;
    case PostOp::Kind::celu:
      return d > 0 ? d : double(op.alpha) * std::expm1(d / double(op.alpha));
    case PostOp::Kind::softplus:
      return std::max(d, 0.0) + std::log1p(std::exp(-std::fabs(d)));
    case PostOp::Kind::softsign:
      return std::isinf(d) ? std::copysign(1.0, d) : d / (1 + std::fabs(d));
    case PostOp::Kind::mish:
      return d * std::tanh(std::max(d, 0.0) + std::log1p(std::exp(-std::fabs(d))));
    case PostOp::Kind::gelu_tanh:
      return 0.5 * d * (1 + std::tanh(0.79788456080286536 * (d + 0.044715 * d * d * d)));
    case PostOp::Kind::sin:
      return std::sin(d);
    case PostOp::Kind::cos:
      return std::cos(d);
    case PostOp::Kind::quant_dequant_u8:
    case PostOp::Kind::quant_dequant_s8: {  // ONNX: x / scale in float, then exact integer steps
      const float q = x / op.alpha;
      if (std::isnan(q)) return q;
      const double lo = op.kind == PostOp::Kind::quant_dequant_u8 ? 0 : -128;
      const double r = std::clamp(std::nearbyint(double(q)) + op.beta, lo, lo + 255);
      return (r - op.beta) * double(op.alpha);
    }
    case PostOp::Kind::quantize_u8:
    case PostOp::Kind::quantize_s8: {  // the integer itself
      const float q = x / op.alpha;
      if (std::isnan(q)) return q;
      const double lo = op.kind == PostOp::Kind::quantize_u8 ? 0 : -128;
      return std::clamp(std::nearbyint(double(q)) + op.beta, lo, lo + 255);
    }
    default:  // neg, abs, reciprocal, floor, ceil, round, thresholded_relu, linear: exact in
              // float
      return apply_post_op(op, x, 0, 0, 0);
  }
}

// The budget after one of the glue activations the conv epilogue also computes (tanh, elu,
// selu, mish, gelu_tanh: post_ops.h epilogue_glue_kind) whose input was `in` (budget `e` so
// far) and whose float reference result is `v`: 4 ulp of the truth (test_glue_unary's budget
// for the same code) plus the float reference's own distance to the truth; earlier errors scale
// by the op's slope bound. Mish where softplus(x) is subnormal (x < -87) and tanh-GELU in its
// negative tail may be off by x times a tiny rounding (test_glue_unary explains both).
inline double glue_activation_err(const PostOp& op, float in, float v, double e) {
  using K = PostOp::Kind;
  const double t = truth(op, in), ax = std::fabs(double(in));
  const double a = std::max(1.0, std::fabs(double(op.alpha)));
  const double slope = op.kind == K::elu         ? a
                       : op.kind == K::selu      ? a * std::fabs(double(op.beta))
                       : op.kind == K::mish      ? 1.1
                       : op.kind == K::gelu_tanh ? 1.13
                                                 : 1.0;
  double tol = 4 * ulp_of(std::max(std::fabs(double(v)), std::fabs(t)));
  if (std::isfinite(t)) tol += std::fabs(double(v) - t);
  if (op.kind == K::mish) tol += ax * 0x1p-149;
  if (op.kind == K::gelu_tanh) tol += ax * 0x1p-24;
  return e * slope + tol;
}

// The error budget after `op` for the ops every JIT path computes with the reference's own
// operations (relu, clip, leaky_relu, add: exact while their input is; earlier errors scale by
// the slope bound) or with our exp (sigmoid, swish, gelu and the glue activations of
// glue_activation_err); `in` is the op's input, `v` the reference
// result, `e` the budget before. Other kinds: nothing (each kernel's own error model).
inline std::optional<double> common_op_err(const PostOp& op, float in, float v, double e) {
  switch (op.kind) {
    case PostOp::Kind::relu:
    case PostOp::Kind::clip:
      return e;
    case PostOp::Kind::leaky_relu:
      return e * std::max(1.0, std::fabs(double(op.alpha)));
    case PostOp::Kind::add:
      return e > 0 ? e + ulp_of(v) : 0;
    case PostOp::Kind::sigmoid:
    case PostOp::Kind::swish:
      return sigmoid_swish_err(op.kind, in, v, e);
    case PostOp::Kind::gelu:
      return e * 1.13 + gelu_err(in, v);
    case PostOp::Kind::tanh:
    case PostOp::Kind::elu:
    case PostOp::Kind::selu:
    case PostOp::Kind::mish:
    case PostOp::Kind::gelu_tanh:
      return glue_activation_err(op, in, v, e);
    default:
      return std::nullopt;
  }
}

// A random input of kind i % 3: small, around the exp limits, any magnitude.
inline float random_input(size_t i, std::mt19937& rng) {
  std::uniform_real_distribution<float> small(-8.f, 8.f), wide(-120.f, 120.f), expo(-45.f, 38.f);
  switch (i % 3) {
    case 0:
      return small(rng);
    case 1:
      return wide(rng);
    default:
      return (rng() & 1 ? -1.f : 1.f) * std::pow(10.f, expo(rng));
  }
}

inline bool matches(float got, const Expect& ex) {
  if (std::isnan(ex.v)) return std::isnan(got);
  if (std::isinf(ex.v) || ex.err == 0)
    return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(ex.v);
  return std::fabs(double(got) - double(ex.v)) <= ex.err;
}

// Zeros of both signs, subnormals, exp limits, huge values, infinities, NaN.
inline std::vector<float> edge_values() {
  return {0.f,        -0.f,        1e-45f,  -1e-45f,  1e-40f, -1e-40f, FLT_MIN, -FLT_MIN,
          1e-30f,     -1e-30f,     0.5f,    -0.5f,    1.f,    -1.f,    3.f,     -3.f,
          2.9999998f, -3.0000002f, 6.f,     -6.f,     80.f,   -80.f,   88.7f,   -88.7f,
          88.72f,     -88.72f,     89.f,    -89.f,    103.9f, -103.9f, 104.f,   -104.f,
          1e30f,      -1e30f,      FLT_MAX, -FLT_MAX, kInf,   -kInf,   kNaN,    -kNaN};
}

// Error of `got` in ulps of the float nearest to the exact value `ref` (subnormal spacing
// below FLT_MIN); an inf where the exact value rounds to a finite float counts as huge.
inline double ulp_error(float got, double ref) {
  const float rf = float(ref);
  if (std::isinf(rf) || std::isinf(got)) return got == rf ? 0.0 : 1e30;
  return std::fabs(double(got) - ref) / ulp_of(ref);
}

// Inputs of an exp accuracy test: 2^sweep_log2 + 1 points evenly over [-104, 89], the 3 x
// `near` floats around each of the overflow, subnormal and underflow thresholds (`near`
// below, 2 x `near` from there up), and [-1, 1] in steps of 2^-step_log2.
inline std::vector<float> exp_test_inputs(int sweep_log2, int near, int step_log2) {
  std::vector<float> x;
  const int n_sweep = 1 << sweep_log2;
  for (int i = 0; i <= n_sweep; ++i) x.push_back(float(-104.0 + 193.0 * i / n_sweep));
  for (float c : {88.72283f, -87.33654f, -103.27893f, -103.97208f}) {
    float v = c;
    for (int i = 0; i < near; ++i) v = std::nextafter(v, -kInf);
    for (int i = 0; i < 2 * near; ++i) x.push_back(v = std::nextafter(v, kInf));
  }
  for (int i = -(1 << step_log2); i <= (1 << step_log2); ++i)
    x.push_back(float(std::ldexp(double(i), -step_log2)));
  return x;
}

}  // namespace kiln::test
