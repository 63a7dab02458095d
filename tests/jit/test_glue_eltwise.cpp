// Tests of the standalone elementwise kernels (create_eltwise_kernel) against
// kiln::apply_post_op applied here element by element, on edge values (zeros of both signs,
// subnormals, exp limits, huge values, infinities, NaN) and random ones; and of the asmjit
// vector exp (jit/glue/asm_math.h) against std::exp in double over a dense sweep.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/post_ops.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"
#include "test_expect.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using K = PostOp::Kind;
using test::edge_values;
using test::Expect;
using test::GuardedBuf;
using test::kInf;
using test::kNaN;
using test::matches;
using test::mk;
using test::ulp_error;
using test::ulp_of;

// The chain through apply_post_op plus an error budget. Ops the kernel implements with the
// reference's own operations (relu, leaky_relu, clip, add, hardswish, hardsigmoid) must be
// bit-exact while their input is; sigmoid/swish get 4 ulp of their own rounding plus the
// float reference's distance to the double-precision truth (the float exp over/underflows a
// little earlier than ours near +-88.7), and earlier errors scale by each op's slope bound.
Expect reference(float x, const std::vector<float>& res, const std::vector<PostOp>& ops) {
  float v = x;
  double e = 0;
  size_t add = 0;
  for (const PostOp& op : ops) {
    const float in = v;
    const float r = op.kind == K::add ? res[add++] : 0.f;
    v = apply_post_op(op, in, r, 0.f, 0.f);
    if (const std::optional<double> common = test::common_op_err(op, in, v, e))
      e = *common;
    else if (op.kind == K::hardsigmoid)
      e = e > 0 ? e * std::fabs(double(op.alpha)) + 2 * ulp_of(v) : 0;
    else if (op.kind == K::hardswish)
      e = e > 0 ? e * 1.5 + 2 * ulp_of(v) : 0;
    if (!std::isfinite(v)) e = 0;
  }
  return {v, e};
}

std::vector<float> inputs(size_t n, uint32_t seed) {
  std::vector<float> v = edge_values();
  std::mt19937 rng(seed);
  while (v.size() < n) v.push_back(test::random_input(v.size(), rng));
  v.resize(n);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

void check_chain(const std::vector<PostOp>& ops, int64_t n, Isa isa, uint32_t seed) {
  CAPTURE(post_ops_str(ops));
  CAPTURE(n);
  CAPTURE(std::string(isa_name(isa)));
  std::string why;
  auto k = create_eltwise_kernel(n, ops, isa, &why);
  REQUIRE_MESSAGE(k, why);
  int adds = 0;
  for (const auto& op : ops) adds += op.kind == K::add;
  GuardedBuf x{size_t(n)}, y{size_t(n)};
  std::vector<std::unique_ptr<GuardedBuf>> res;
  auto xv = inputs(size_t(n), seed);
  std::memcpy(x.data(), xv.data(), size_t(n) * 4);
  std::vector<const float*> src{x.data()};
  for (int i = 0; i < adds; ++i) {
    res.push_back(std::make_unique<GuardedBuf>(size_t(n)));
    auto rv = inputs(size_t(n), seed + 17 * uint32_t(i + 1));
    std::memcpy(res.back()->data(), rv.data(), size_t(n) * 4);
    src.push_back(res.back()->data());
  }
  y.fill(-12345.f);
  test::run_split(*k, src, {y.data()});
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> r;
    for (auto& b : res) r.push_back((*b)[size_t(i)]);
    const Expect ex = reference(x[size_t(i)], r, ops);
    if (!matches(y[size_t(i)], ex) && ++bad <= 3)
      CHECK_MESSAGE(false, "x = " << x[size_t(i)] << ": got " << y[size_t(i)] << " want " << ex.v
                                  << " +- " << ex.err);
  }
  CHECK(bad == 0);
}

TEST_CASE("glue eltwise: chains against apply_post_op") {
  const std::vector<std::vector<PostOp>> chains = {
      {mk(K::relu)},
      {mk(K::leaky_relu, 0.1f)},
      {mk(K::leaky_relu, -2.5f)},
      {mk(K::clip, 0.f, 6.f)},
      {mk(K::clip, -kInf, 1.5f)},
      {mk(K::clip, -1.f, kInf)},
      {mk(K::sigmoid)},
      {mk(K::swish)},
      {mk(K::hardswish)},
      {mk(K::hardsigmoid, 0.2f, 0.5f)},
      {mk(K::hardsigmoid, 1.f / 6.f, 0.5f)},
      {mk(K::add)},
      {mk(K::add), mk(K::relu)},
      {mk(K::add), mk(K::swish)},
      {mk(K::gelu)},
      {mk(K::add), mk(K::gelu), mk(K::add)},
      {mk(K::relu), mk(K::add), mk(K::clip, 0.f, 6.f)},
      {mk(K::sigmoid), mk(K::add), mk(K::hardswish), mk(K::add), mk(K::leaky_relu, 0.2f)},
      {},
  };
  const int64_t sizes[] = {1, 7, 8, 15, 16, 17, 40, 63, 64, 65, 1000, 2 * 16384 + 5};
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (const auto& ops : chains)
      for (int64_t s : sizes) {
        if (s < 40 && s != 17 && ops.size() > 1) continue;  // keep the run short
        check_chain(ops, std::max<int64_t>(s, 1), isa, uint32_t(s * 3 + n++));
      }
  MESSAGE("eltwise cases: " << n);
}

TEST_CASE("glue eltwise: in place and names") {
  for (Isa isa : test::glue_isas()) {
    auto k = create_eltwise_kernel(100, {mk(K::relu)}, isa, nullptr);
    REQUIRE(k);
    CHECK(k->name() == std::string("eltwise_relu_f32__") + isa_name(isa));
    std::vector<float> v(100);
    for (int i = 0; i < 100; ++i) v[size_t(i)] = float(i - 50);
    test::run_split(*k, {v.data()}, {v.data()});
    for (int i = 0; i < 100; ++i) CHECK(v[size_t(i)] == float(std::max(i - 50, 0)));
  }
  std::string why;
  CHECK_FALSE(create_eltwise_kernel(10, {mk(K::scale_shift)}, Isa::avx2, &why));
  CHECK(!why.empty());
  CHECK_FALSE(create_eltwise_kernel(0, {mk(K::relu)}, Isa::avx2, &why));
  CHECK_FALSE(create_eltwise_kernel(10, {mk(K::relu)}, Isa::scalar, &why));
}

// ---------------------------------------------------------------------------------------------
// The asmjit exp on its own: y = exp(±x) for a buffer whose length is a multiple of 16.

using ExpFn = void (*)(const float*, float*, int64_t);

std::vector<float> run_exp(Isa isa, bool negate, const std::vector<float>& x) {
  glue::AsmBuilder b("test_exp", isa);
  auto& cc = b.cc();
  b.begin_function(asmjit::FuncSignatureT<void, const float*, float*, int64_t>());
  asmjit::x86::Gp s = b.gp(), d = b.gp(), n = b.gp();
  b.func()->setArg(0, s);
  b.func()->setArg(1, d);
  b.func()->setArg(2, n);
  asmjit::Label top = cc.newLabel();
  cc.bind(top);
  asmjit::x86::Vec v = b.vec(), r = b.vec();
  cc.vmovups(v, asmjit::x86::ptr(s));
  glue::emit_exp(b, r, v, negate);
  cc.vmovups(asmjit::x86::ptr(d), r);
  cc.add(s, b.width() * 4);
  cc.add(d, b.width() * 4);
  cc.sub(n, b.width());
  cc.jnz(top);
  b.end_function();
  glue::ExecCode code = b.finish();
  std::vector<float> in = x;
  in.resize((x.size() + 15) / 16 * 16, 0.f);
  std::vector<float> y(in.size());
  b.entry<ExpFn>(code, 0)(in.data(), y.data(), int64_t(in.size()));
  y.resize(x.size());
  return y;
}

TEST_CASE("glue asm_math: exp accuracy over the float range") {
  // Dense sweep of [-104, 89], every float around the overflow / subnormal / underflow
  // thresholds, and [-1, 1] in steps of 2^-18.
  const std::vector<float> x = test::exp_test_inputs(22, 5000, 18);
  for (Isa isa : test::glue_isas())
    for (bool negate : {false, true}) {
      CAPTURE(std::string(isa_name(isa)));
      CAPTURE(negate);
      auto y = run_exp(isa, negate, x);
      double max_ulp = 0;
      float worst = 0;
      int nan = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double ref = std::exp(negate ? -double(x[i]) : double(x[i]));
        nan += std::isnan(y[i]);
        const double e = ulp_error(y[i], ref);
        if (e > max_ulp) max_ulp = e, worst = x[i];
      }
      MESSAGE(std::string(isa_name(isa))
              << (negate ? " exp(-x)" : " exp(x)") << ": max error " << max_ulp
              << " ulp at x = " << worst << " over " << x.size() << " inputs");
      CHECK(nan == 0);
      CHECK(max_ulp <= 2.0);
    }
}

TEST_CASE("glue asm_math: exp special values") {
  const std::vector<float> x = {0.f,    -0.f,  88.73f, 1e30f, kInf, -104.f,
                                -200.f, -kInf, kNaN,   1.f,   -1.f, -87.5f};
  for (Isa isa : test::glue_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    auto y = run_exp(isa, false, x);
    CHECK(y[0] == 1.f);
    CHECK(y[1] == 1.f);
    CHECK(y[2] == kInf);
    CHECK(y[3] == kInf);
    CHECK(y[4] == kInf);
    CHECK(y[5] == 0.f);
    CHECK(y[6] == 0.f);
    CHECK(y[7] == 0.f);
    CHECK_FALSE(std::signbit(y[7]));
    CHECK(std::isnan(y[8]));
    CHECK(y[9] == doctest::Approx(2.7182818f).epsilon(1e-7));
    CHECK(y[10] == doctest::Approx(0.36787944f).epsilon(1e-7));
    CHECK(std::fabs(y[11] / 9.98235e-39f - 1.f) < 1e-4f);  // subnormal result
    auto yn = run_exp(isa, true, x);
    CHECK(yn[4] == 0.f);
    CHECK(yn[7] == kInf);
    CHECK(std::isnan(yn[8]));
    CHECK(yn[9] == doctest::Approx(0.36787944f).epsilon(1e-7));
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// gelu (emit_gelu through the eltwise kernel) against double precision over a dense sweep of
// [-12, 12] and wide magnitudes: within the documented budget (test_expect.h gelu_err).
TEST_CASE("glue asm_math: gelu accuracy against double precision") {
  const std::vector<float> x = test::gelu_test_inputs();
  for (Isa isa : test::glue_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    auto k = create_eltwise_kernel(int64_t(x.size()), {mk(K::gelu)}, isa, nullptr);
    REQUIRE(k);
    std::vector<float> y(x.size());
    test::run_split(*k, {x.data()}, {y.data()});
    const test::GeluStats st = test::gelu_stats(x, y.data());
    MESSAGE(std::string(isa_name(isa)) << " gelu: erf term error " << st.erf_term
                                       << ", max |error| / max(1, |x|) = " << st.scaled);
    CHECK_MESSAGE(st.bad == 0, "first input out of budget: " << st.first_bad);
    CHECK(st.erf_term < 6e-7);
    CHECK(st.scaled < 3e-7);
  }
}

}  // namespace
}  // namespace kiln
