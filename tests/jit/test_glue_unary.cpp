// Tests of the glue-only unary post-ops (tanh, sqrt, erf, pow by a constant, exp, log, sin, cos,
// ..., thresholded_relu, quantize-dequantize) in the standalone elementwise kernel, against the
// double-precision truth (std:: functions in double, whose C special cases the float reference
// shares) over edge values, dense sweeps and random magnitudes on every ISA path; and of Sum's
// chain of up to 7 residual adds (bit-exact against left-to-right float sums).
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "graph/post_ops.h"
#include "jit/glue/glue.h"
#include "test_expect.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using K = PostOp::Kind;
using test::GuardedBuf;
using test::mk;
using test::truth;

// Allowed error in ulps of the truth, by what the kernel computes (asm_math.h).
double budget(const PostOp& op) {
  switch (op.kind) {
    case K::sqrt:  // vsqrtps / vdivps: correctly rounded; the others exact
    case K::neg:
    case K::abs:
    case K::reciprocal:
    case K::floor:
    case K::ceil:
    case K::round:
    case K::thresholded_relu:
    case K::linear:
    case K::quant_dequant_u8:  // one rounding (the last multiply)
    case K::quant_dequant_s8:
      return 0.5;
    case K::quantize_u8:  // integers: exact
    case K::quantize_s8:
      return 0;
    default:
      break;
  }
  if (op.kind == K::pow && (op.alpha == 2.f || op.alpha == -1.f || op.alpha == 0.5f)) return 0.5;
  return 4;
}

std::vector<float> inputs(const PostOp& op, uint32_t seed) {
  std::vector<float> v = test::edge_values();
  for (int i = 0; i <= (1 << 15); ++i) v.push_back(float(-12.0 + 24.0 * i / (1 << 15)));
  for (int i = 0; i <= (1 << 12); ++i) v.push_back(float(-1e-3 + 2e-3 * i / (1 << 12)));
  for (float f : {-2.f, -3.f, -0.5f, 2.f, 1.f, 0.75f, -0.75f, 0.625f, -0.625f, 3.92f, 4.f, 0.5f,
                  1.5f, 2.5f, -1.5f, -2.5f, 8388607.5f})
    v.push_back(f);
  std::mt19937 rng(seed);
  for (int i = 0; i < (1 << 14); ++i) v.push_back(test::random_input(size_t(i), rng));
  // sin / cos: near multiples of pi / 2 (results near 0 keep their relative accuracy only
  // if the reduction does), up to and past the vector path's limit (asm_math.h kSinMaxArg).
  if (op.kind == K::sin || op.kind == K::cos) {
    for (int k = -2000; k <= 2000; ++k)
      for (float f : {-1.f, 0.f, 1.f})
        v.push_back(std::nextafter(float(k * M_PI_2), float(k * M_PI_2) + f));
    for (int i = 0; i <= 4000; ++i) v.push_back(float(i * 40.0 + 0.3));
    for (float f : {131071.9f, 131072.f, 131072.02f, 2e5f, 1e6f, 3.4e38f, -1e20f}) v.push_back(f);
  }
  // Around pow's overflow and underflow thresholds.
  if (op.kind == K::pow && op.alpha != 0.f) {
    const double lim = std::exp(std::log(double(FLT_MAX)) / std::fabs(double(op.alpha)));
    const double tiny = std::exp(std::log(0x1p-149) / std::fabs(double(op.alpha)));
    for (int i = -200; i <= 200; ++i)
      for (double c : {lim, tiny}) v.push_back(float(c * (1 + i * 1e-7)));
  }
  return v;
}

// |got - t| in ulps of t (NaN must give NaN), an infinity counting as 2^128 (one ulp past
// FLT_MAX) where the truth rounds to a finite float, so that a result rounding over the
// overflow threshold counts what it is off by.
double ulps(float got, double t) {
  if (std::isnan(t)) return std::isnan(got) ? 0 : 1e30;
  if (std::isinf(float(t))) return double(got) == double(float(t)) ? 0 : 1e30;
  const double g = std::isinf(got) ? std::copysign(0x1p128, double(got)) : double(got);
  return std::fabs(g - t) / test::ulp_of(t);
}

// Runs `op` over x on `isa`; returns the worst error in ulps (over budget fails the test).
double check_op(const PostOp& op, const std::vector<float>& xv, Isa isa) {
  CAPTURE(post_ops_str({op}));
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(xv.size());
  std::string why;
  auto k = create_eltwise_kernel(int64_t(xv.size()), {op}, isa, &why);
  REQUIRE_MESSAGE(k, why);
  GuardedBuf x{xv.size()}, y{xv.size()};
  std::memcpy(x.data(), xv.data(), xv.size() * 4);
  y.fill(-12345.f);
  test::run_split(*k, {x.data()}, {y.data()});
  double worst = 0;
  int bad = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double t = truth(op, xv[i]);
    const float got = y[i];
    double e = ulps(got, t);
    // Mish below x = -87: its float intermediate softplus(x) is subnormal, rounded to half a
    // step of 2^-149 (as in the float reference), and multiplied by x.
    if (op.kind == K::mish && std::fabs(double(got) - t) <= std::fabs(double(xv[i])) * 0x1p-149)
      e = 0;  // within that rounding: not counted
    // GELU (tanh form) in its negative tail is x times a tiny exp(-2u): float's rounding of
    // u (|u| up to ~88) moves it by a relative ~|u| 2^-22, far below x's own ulp.
    if (op.kind == K::gelu_tanh && std::fabs(double(got) - t) <= std::fabs(double(xv[i])) * 0x1p-24)
      e = 0;
    worst = std::max(worst, e);
    if (!(e <= budget(op)) && ++bad <= 3)
      CHECK_MESSAGE(false,
                    "x = " << xv[i] << ": got " << got << " want " << t << " (" << e << " ulp)");
  }
  CHECK(bad == 0);
  return worst;
}

const std::vector<PostOp>& unary_ops() {
  static const std::vector<PostOp> ops = [] {
    std::vector<PostOp> v = {mk(K::tanh),
                             mk(K::sqrt),
                             mk(K::erf),
                             mk(K::exp),
                             mk(K::log),
                             mk(K::neg),
                             mk(K::abs),
                             mk(K::reciprocal),
                             mk(K::floor),
                             mk(K::ceil),
                             mk(K::round),
                             mk(K::elu, 1.f),
                             mk(K::elu, 0.3f),
                             mk(K::celu, 1.f),
                             mk(K::celu, 2.5f),
                             mk(K::softplus),
                             mk(K::softsign),
                             mk(K::mish),
                             mk(K::gelu_tanh),
                             mk(K::thresholded_relu, 1.f),
                             mk(K::thresholded_relu, -0.5f),
                             mk(K::sin),
                             mk(K::cos)};
    for (auto [a, b] : {std::pair{1.5f, 0.f}, std::pair{1.f, 0.5f}, std::pair{-1.f, 2.25f},
                        std::pair{1.f, -0.1f}, std::pair{0.7f, 0.f}}) {
      PostOp lin = mk(K::linear, a);  // (graph/fuse.cpp: alpha 1 or beta 0)
      lin.beta = b;
      v.push_back(lin);
    }
    PostOp selu = mk(K::selu, 1.67326319217681884765625f);
    selu.beta = 1.05070102214813232421875f;
    v.push_back(selu);
    for (auto [kind, scale, zp] :
         {std::tuple{K::quant_dequant_u8, 0.05f, 128.f},
          std::tuple{K::quant_dequant_u8, 0.0123f, 0.f},
          std::tuple{K::quant_dequant_s8, 0.013f, -3.f}, std::tuple{K::quant_dequant_s8, 1.f, 0.f},
          std::tuple{K::quantize_u8, 0.05f, 128.f}, std::tuple{K::quantize_u8, 0.0123f, 0.f},
          std::tuple{K::quantize_s8, 0.013f, -3.f}, std::tuple{K::quantize_s8, 1.f, 0.f}}) {
      PostOp q = mk(kind, scale);
      q.beta = zp;
      v.push_back(q);
    }
    for (float e : {2.f, 0.5f, 0.75f, 3.f, -1.f, 0.f, 1.f, -0.5f, 2.5f, 1.7f, -2.f, -3.f, 4.f, 7.f,
                    1.f / 3.f, 10.5f, -7.25f, 1e-3f, 1e6f})
      v.push_back(mk(K::pow, e));
    return v;
  }();
  return ops;
}

TEST_CASE("glue unary: every glue-only kind against double precision") {
  for (Isa isa : test::glue_isas())
    for (const PostOp& op : unary_ops()) {
      const double worst = check_op(op, inputs(op, 7), isa);
      MESSAGE(std::string(isa_name(isa))
              << " " << post_ops_str({op}) << ": max error " << worst << " ulp");
    }
}

TEST_CASE("glue unary: tails and sizes") {
  const int64_t sizes[] = {1, 7, 8, 15, 16, 17, 63, 65, 1000, 2 * 16384 + 5};
  uint32_t seed = 1;
  for (Isa isa : test::glue_isas())
    for (const PostOp& op : {mk(K::tanh), mk(K::erf), mk(K::pow, 1.7f), mk(K::sqrt), mk(K::log),
                             mk(K::sin), mk(K::cos), mk(K::softplus), mk(K::elu, 1.f), mk(K::floor),
                             mk(K::quant_dequant_u8, 0.05f, 128.f), mk(K::quantize_s8, 0.05f, 7.f)})
      for (int64_t n : sizes) {
        std::vector<float> x = inputs(op, seed++);
        std::shuffle(x.begin(), x.end(), std::mt19937(seed));
        x.resize(size_t(n));
        check_op(op, x, isa);
      }
}

TEST_CASE("glue unary: Sum's chain of residual adds is the left-to-right float sum") {
  for (Isa isa : test::glue_isas())
    for (int adds : {1, 2, 7})
      for (int64_t n : {int64_t(5), int64_t(33), int64_t(4099)}) {
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(adds);
        CAPTURE(n);
        std::vector<PostOp> ops;
        for (int k = 0; k < adds; ++k) ops.push_back(mk(K::add));
        for (int k = 0; k < adds; ++k) ops[size_t(k)].input = k + 1;
        std::string why;
        auto kern = create_eltwise_kernel(n, ops, isa, &why);
        REQUIRE_MESSAGE(kern, why);
        std::vector<std::unique_ptr<GuardedBuf>> in;
        std::vector<const float*> src;
        for (int k = 0; k <= adds; ++k) {
          in.push_back(std::make_unique<GuardedBuf>(size_t(n)));
          in.back()->random(uint32_t(100 * k + n), -1e3f, 1e3f);
          src.push_back(in.back()->data());
        }
        GuardedBuf y{size_t(n)};
        test::run_split(*kern, src, {y.data()});
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          float s = src[0][i];
          for (int k = 1; k <= adds; ++k) s += src[size_t(k)][i];
          bad += y[size_t(i)] != s;
        }
        CHECK(bad == 0);
      }
}

TEST_CASE("glue unary: refusals and names") {
  for (Isa isa : test::glue_isas()) {
    std::string why;
    std::vector<PostOp> ops(8, mk(K::add));
    CHECK(!create_eltwise_kernel(10, ops, isa, &why));
    CHECK(why.find("more than 7") != std::string::npos);
    auto k = create_eltwise_kernel(10, {mk(K::pow, 2.5f)}, isa, nullptr);
    REQUIRE(k);
    CHECK(k->name() == std::string("eltwise_pow2.5_f32__") + isa_name(isa));
    // Different exponents must not share code (post_ops_str keeps the exponent).
    CHECK(post_ops_str({mk(K::pow, 0.5f)}) != post_ops_str({mk(K::pow, 0.25f)}));
  }
}

}  // namespace
}  // namespace kiln
