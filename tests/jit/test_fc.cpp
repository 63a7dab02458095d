// The JIT fully-connected family (jit/gemm): init_fc_conf on its own, create_fc_kernel's
// reasons, and the kernels on both ISAs against a naive triple loop written here (double
// accumulation, then the post-op chain with the scalar apply_post_op).
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/half.h"
#include "graph/ir.h"
#include "graph/post_ops.h"
#include "isa_coverage.h"
#include "jit/cpu.h"
#include "jit/gemm/fc_conf.h"
#include "jit/gemm/fc_kernel.h"
#include "test_expect.h"
#include "test_rng.h"

namespace kiln {
namespace {

using K = PostOp::Kind;

std::vector<float> random_vec(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  test::XorShift r(seed, 11);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = r.uniform(lo, hi);
  return v;
}

Tensor tensor_of(const std::vector<float>& v, Shape s) {
  Tensor t(DType::f32, std::move(s));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// Numbers the extra inputs as a Gemm node does (from input 3, in order).
std::vector<PostOp> chain(std::vector<PostOp> ops) {
  int next = 3;
  for (PostOp& o : ops)
    if (extra_inputs(o.kind) > 0) {
      o.input = next;
      next += extra_inputs(o.kind);
    }
  return ops;
}

std::vector<Isa> isas() {
  return testing::jit_isas();
}

// One problem's operands, all plain row-major.
struct Case {
  FcProblem p;
  bool transposed = false;
  float alpha = 1;
  std::vector<float> x, w, bias;
  std::vector<std::vector<float>> extra;  // node inputs 3.. (residual [M,N], scale/shift [N])
};

Case make_case(int64_t m, int64_t k, int64_t n, bool bias, std::vector<PostOp> post,
               bool transposed, float alpha, uint64_t seed) {
  Case c;
  c.p.m = m;
  c.p.k = k;
  c.p.n = n;
  c.p.bias = bias;
  c.p.post = chain(std::move(post));
  c.transposed = transposed;
  c.alpha = alpha;
  c.x = random_vec(m * k, seed);
  c.w = random_vec(k * n, seed + 1);
  if (bias) c.bias = random_vec(n, seed + 2);
  uint64_t s = seed + 3;
  for (const PostOp& o : c.p.post) {
    if (o.kind == K::add) c.extra.push_back(random_vec(m * n, s++));
    if (o.kind == K::scale_shift) {
      c.extra.push_back(random_vec(n, s++, 0.5f, 1.5f));
      c.extra.push_back(random_vec(n, s++));
    }
    if (o.kind == K::prelu) c.extra.push_back(random_vec(n, s++, -1.f, 2.f));
  }
  return c;
}

// W(k, n) whatever the storage order.
float w_at(const Case& c, int64_t k, int64_t n) {
  return c.transposed ? c.w[size_t(n * c.p.k + k)] : c.w[size_t(k * c.p.n + n)];
}

// Naive reference plus a per-element tolerance.
//
// Tolerance: the kernel rounds alpha * W to float once, then sums K float products in an order
// of its own (blocked, several accumulator sets). Rounding errors of a K-term float sum behave
// like a random walk: |err| ~ sqrt(K) * eps * (size of the partial sums), and every partial
// sum is bounded by S = sum_k |alpha x w| + |bias|. We allow 2 * eps * sqrt(K) * S (>= the
// worst case for K <= 3, and for large K with random signs more than 10x the observed error,
// while a dropped or doubled term — |x w| ~ 0.25 on average — is far outside it). Every tested
// post-op has slope <= 1 (relu, clip, sigmoid, add), so the error carries through; the chain
// itself adds a few ulps (sigmoid's exp ~1 ulp, the residual add's rounding): 8 eps |ref|.
struct Expected {
  std::vector<float> y, tol;
};

Expected reference(const Case& c) {
  const FcProblem& p = c.p;
  const double eps = std::numeric_limits<float>::epsilon();
  Expected e;
  e.y.resize(size_t(p.m * p.n));
  e.tol.resize(e.y.size());
  for (int64_t m = 0; m < p.m; ++m)
    for (int64_t n = 0; n < p.n; ++n) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < p.k; ++k) {
        const double t = double(c.alpha) * double(c.x[size_t(m * p.k + k)]) * double(w_at(c, k, n));
        acc += t;
        mag += std::fabs(t);
      }
      if (p.bias) {
        acc += c.bias[size_t(n)];
        mag += std::fabs(c.bias[size_t(n)]);
      }
      float v = float(acc);
      for (const PostOp& o : p.post) {
        float res = 0, sc = 0, sh = 0;
        if (o.kind == K::add) res = c.extra[size_t(o.input - 3)][size_t(m * p.n + n)];
        if (o.kind == K::scale_shift) {
          sc = c.extra[size_t(o.input - 3)][size_t(n)];
          sh = c.extra[size_t(o.input - 2)][size_t(n)];
          mag *= std::fabs(sc);  // the scale stretches the error too
        }
        if (o.kind == K::prelu) {
          sc = c.extra[size_t(o.input - 3)][size_t(n)];
          mag *= std::max(1.f, std::fabs(sc));
        }
        v = apply_post_op(o, v, res, sc, sh);
      }
      const size_t i = size_t(m * p.n + n);
      e.y[i] = v;
      e.tol[i] = float(2 * eps * std::sqrt(double(p.k)) * mag + 8 * eps * std::fabs(v) + 1e-30);
    }
  return e;
}

// KernelArgs for a case: src[0] = x, src[3..] = extra inputs.
struct Args {
  std::vector<const float*> src;
  float* dst[1] = {nullptr};
  KernelArgs get() {
    KernelArgs a;
    a.src = src.data();
    a.dst = dst;
    return a;
  }
};

Args args_of(const Case& c, const float* x, float* y) {
  Args a;
  a.src = {x, nullptr, nullptr};
  for (const auto& e : c.extra) a.src.push_back(e.data());
  a.dst[0] = y;
  return a;
}

// Runs `k` as two halves (the second half first, as two threads might) into a NaN-filled
// output followed by a guard zone that must stay untouched; returns the count of elements
// outside the tolerance (and checks the guard).
int run_and_compare(const Kernel& k, const Case& c, const Expected& e) {
  const size_t elems = size_t(c.p.m * c.p.n), guard = 48;
  std::vector<float> y(elems + guard, std::numeric_limits<float>::quiet_NaN());
  std::fill(y.begin() + int64_t(elems), y.end(), 12345.f);
  Args a = args_of(c, c.x.data(), y.data());
  const int64_t mid = k.tiles() / 2;
  ScratchBuffer scratch(k.scratch_bytes());  // (bf16: x converted)
  k.run(scratch.with(a.get()), mid, k.tiles());
  k.run(scratch.with(a.get()), 0, mid);
  int bad = 0;
  for (size_t i = 0; i < elems; ++i) {
    const bool ok = std::fabs(y[i] - e.y[i]) <= e.tol[i];  // false for NaN (unwritten)
    if (!ok && bad++ < 3)
      MESSAGE("element ", i, " (m ", i / size_t(c.p.n), ", n ", i % size_t(c.p.n), "): got ", y[i],
              " want ", e.y[i], " tol ", e.tol[i]);
  }
  for (size_t i = elems; i < y.size(); ++i) CHECK(y[i] == 12345.f);
  return bad;
}

std::unique_ptr<Kernel> make(const Case& c, Isa isa, std::string* why) {
  Tensor w = tensor_of(c.w, c.transposed ? Shape{c.p.n, c.p.k} : Shape{c.p.k, c.p.n});
  Tensor b = c.p.bias ? tensor_of(c.bias, {c.p.n}) : Tensor();
  return create_fc_kernel(c.p, isa, w, c.transposed, c.alpha, c.p.bias ? &b : nullptr, why);
}

std::unique_ptr<Kernel> make_forced(const Case& c, Isa isa, const fcjit::FcImpl& impl) {
  auto conf = fcjit::init_fc_conf(c.p, isa, impl);
  REQUIRE_MESSAGE(bool(conf), conf.reason);
  Tensor w = tensor_of(c.w, c.transposed ? Shape{c.p.n, c.p.k} : Shape{c.p.k, c.p.n});
  Tensor b = c.p.bias ? tensor_of(c.bias, {c.p.n}) : Tensor();
  return fcjit::make_fc_kernel(*conf.conf, w, c.transposed, c.alpha, c.p.bias ? &b : nullptr);
}

FcProblem prob(int64_t m, int64_t k, int64_t n, std::vector<PostOp> post = {}) {
  FcProblem p;
  p.m = m;
  p.k = k;
  p.n = n;
  p.post = chain(std::move(post));
  return p;
}

}  // namespace

TEST_CASE("fc: problem string") {
  CHECK(prob(1, 2048, 1000, {test::mk(K::relu)}).str() == "m1k2048n1000_relu");
  CHECK(prob(4, 3, 5).str() == "m4k3n5");
}

TEST_CASE("fc: init_fc_conf reasons") {
  auto why = [](const FcProblem& p, Isa isa) {
    auto c = fcjit::init_fc_conf(p, isa);
    return c ? std::string() : c.reason;
  };
  CHECK(why(prob(1, 64, 64), Isa::scalar) == "needs isa avx2 or avx512");
  CHECK(why(prob(1, 0, 64), Isa::avx2) == "empty problem (m, k or n < 1)");
  CHECK(why(prob(1, 64, 0), Isa::avx2) == "empty problem (m, k or n < 1)");
  CHECK(why(prob(0, 64, 64), Isa::avx2) == "empty problem (m, k or n < 1)");
  CHECK(why(prob(1, 64, 64, std::vector<PostOp>(9, test::mk(K::relu))), Isa::avx2) ==
        "more than 8 fused post-ops");
  FcProblem p = prob(1, 64, 64);
  p.post = {test::mk(K::add)};  // no input index
  CHECK(why(p, Isa::avx2) == "post-op 'add' has no input index");
  CHECK(why(prob(1, int64_t(1) << 30, 64), Isa::avx2) == "k or n too large for 32-bit offsets");
  fcjit::FcImpl emb;
  emb.bcast_emb = 1;
  auto e = fcjit::init_fc_conf(prob(4, 64, 64), Isa::avx2, emb);
  CHECK(e.reason == "embedded broadcast needs avx512");
  fcjit::FcImpl huge;
  huge.ku = 8;
  huge.nb = 4;
  auto c = fcjit::init_fc_conf(prob(1, 64, 512), Isa::avx2, huge);  // 32 accumulators > 16
  CHECK_FALSE(bool(c));
  CHECK(c.reason == "forced blocking exceeds the vector registers");
}

TEST_CASE("fc: init_fc_conf blocking") {
  for (Isa isa : isas()) {
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    const int w = simd_width(isa), regs = isa == Isa::avx512 ? 32 : 16;
    SUBCASE("gemv ResNet-50 2048->1000") {
      auto c = fcjit::init_fc_conf(prob(1, 2048, 1000), isa);
      REQUIRE(bool(c));
      const fcjit::FcConf& f = *c.conf;
      CHECK(f.gemv());
      CHECK(f.nb * w == 64);  // 256 bytes of the weight stream per k step
      CHECK(f.mr == 1);
      CHECK(f.nvec == (1000 + w - 1) / w);
      CHECK(f.n_blocks == 16);  // ceil(1000 / 64)
      CHECK(f.n_last == f.nvec - 15 * f.nb);
      CHECK(f.lane_tail == 1000 % w);
      CHECK(f.last_own);
      CHECK(f.ku * f.nb >= 8);  // enough independent FMA chains
      CHECK(f.k_unroll % f.ku == 0);
      CHECK(f.packed_floats() == 2048 * f.nvec * w);
      CHECK(f.name() == std::string("fc_gemv_f32_n64__") + isa_name(isa));
    }
    SUBCASE("gemv 4096->4096: no tail code") {
      auto c = fcjit::init_fc_conf(prob(1, 4096, 4096), isa);
      REQUIRE(bool(c));
      CHECK(c.conf->n_blocks == 4096 / 64);
      CHECK_FALSE(c.conf->last_own);
      CHECK(c.conf->row_tiles() == 1);
    }
    SUBCASE("gemv narrow N and tiny K") {
      auto c = fcjit::init_fc_conf(prob(1, 1, 5), isa);
      REQUIRE(bool(c));
      CHECK(c.conf->nb == 1);
      CHECK(c.conf->n_blocks == 1);
      CHECK(c.conf->lane_tail == 5);
      CHECK(c.conf->ku == 1);  // one k step: no second set
    }
    SUBCASE("gemm small batches: as many rows per tile as the row cap allows") {
      const int64_t cap = isa == Isa::avx512 ? 8 : 4;  // see init_fc_conf
      for (int64_t m : {2, 3, 7}) {
        auto c = fcjit::init_fc_conf(prob(m, 1000, 1000, {test::mk(K::relu)}), isa);
        REQUIRE(bool(c));
        const fcjit::FcConf& f = *c.conf;
        CAPTURE(m);
        CHECK_FALSE(f.gemv());
        CHECK(f.mr == std::min(m, cap));  // fewest passes over the weights
        CHECK(f.m_full == m / f.mr);
        CHECK(f.m_tail == m % f.mr);
        CHECK(f.loop_regs(f.mr, f.nb) <= regs);
        CHECK(f.mr * f.nb + f.epi_temps <= regs);
        CHECK(f.name() == "fc_gemm_f32_m" + std::to_string(f.mr) + "n" + std::to_string(f.nb * w) +
                              "__" + isa_name(isa));
      }
    }
    SUBCASE("gemm big batch: register tile with a row tail") {
      auto c = fcjit::init_fc_conf(prob(64, 512, 512), isa);
      REQUIRE(bool(c));
      const fcjit::FcConf& f = *c.conf;
      CHECK(f.mr * f.nb >= 8);
      CHECK(f.loop_regs(f.mr, f.nb) <= regs);
      CHECK(f.m_full == 64 / f.mr);
      CHECK(f.m_tail == 64 % f.mr);
      CHECK(f.row_tiles() == (64 + f.mr - 1) / f.mr);
    }
    SUBCASE("forced blocking") {
      fcjit::FcImpl impl;
      impl.mr = 3;
      impl.nb = 2;
      impl.ku = 2;
      impl.k_unroll = 3;
      impl.prefetch = 512;
      auto c = fcjit::init_fc_conf(prob(7, 100, 100), isa, impl);
      REQUIRE(bool(c));
      CHECK(c.conf->mr == 3);
      CHECK(c.conf->m_full == 2);
      CHECK(c.conf->m_tail == 1);
      CHECK(c.conf->nb == 2);
      CHECK(c.conf->ku == 2);
      CHECK(c.conf->k_unroll == 4);  // rounded up to a multiple of ku
      CHECK(c.conf->prefetch == 512);
    }
  }
}

TEST_CASE("fc: create_fc_kernel reasons") {
  Case c = make_case(1, 8, 8, true, {}, false, 1, 1);
  std::string why;
  CHECK(make(c, Isa::scalar, &why) == nullptr);
  CHECK(why == "needs isa avx2 or avx512");
  Tensor w = tensor_of(c.w, {8, 8});
  Tensor wrong(DType::f32, {4, 16});
  CHECK(create_fc_kernel(c.p, Isa::avx2, wrong, false, 1, nullptr, &why) == nullptr);
  CHECK(why == "weights are not f32 [8,8]");
  FcProblem nb = c.p;
  nb.bias = false;
  Tensor b = tensor_of(c.bias, {8});
  CHECK(create_fc_kernel(nb, Isa::avx2, w, false, 1, &b, &why) == nullptr);
  CHECK(why == "bias presence does not match the problem");
  Tensor b5(DType::f32, {5});
  CHECK(create_fc_kernel(c.p, Isa::avx2, w, false, 1, &b5, &why) == nullptr);
  CHECK(why == "bias is not f32 [8]");
  auto k = create_fc_kernel(c.p, Isa::avx2, w, false, 1, &b, &why);
  REQUIRE(k != nullptr);
  CHECK(k->name() == "fc_gemv_f32_n8__avx2");
  CHECK(k->tiles() == 1);
  CHECK(k->macs() == 64);
}

TEST_CASE("fc: tiles split the weight stream") {
  for (Isa isa : isas()) {
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    const int w = simd_width(isa);
    Case c = make_case(1, 64, 1000, false, {}, false, 1, 5);
    auto k = make(c, isa, nullptr);
    REQUIRE(k);
    CHECK(k->tiles() == 16);  // one tile per block of 64 outputs
    Case g = make_case(7, 64, 1000, false, {}, false, 1, 6);
    auto kg = make_forced(g, isa, [] {
      fcjit::FcImpl i;
      i.mr = 3;
      i.nb = 2;
      return i;
    }());
    CHECK(kg->tiles() == ((1000 + w - 1) / w + 1) / 2 * 3);  // blocks x (2 full + 1 tail rows)
  }
}

TEST_CASE("fc: kernels match the naive loop (shape x post-op sweep)") {
  const std::vector<std::vector<PostOp>> chains = {
      {},
      {test::mk(K::relu)},
      {test::mk(K::clip, 0.f, 6.f)},
      {test::mk(K::add), test::mk(K::relu)},
      {test::mk(K::sigmoid)},
      {test::mk(K::prelu), test::mk(K::add)},
  };
  int failures = 0, cases = 0;
  for (Isa isa : isas()) {
    uint64_t seed = 100;
    for (int64_t m : {1, 2, 3, 7})
      for (int64_t k : {1, 3, 17, 64, 1000})
        for (int64_t n : {1, 5, 16, 17, 63, 1000}) {
          for (size_t ci = 0; ci < chains.size(); ++ci, ++seed) {
            const bool transposed = seed % 2 == 1;
            const bool bias = seed % 4 < 2;
            const float alpha = seed % 3 == 0 ? 1.f : seed % 3 == 1 ? -0.75f : 1.5f;
            Case c = make_case(m, k, n, bias, chains[ci], transposed, alpha, seed);
            const std::string isa_s = isa_name(isa);
            CAPTURE(isa_s);
            CAPTURE(c.p.str());
            CAPTURE(transposed);
            CAPTURE(bias);
            CAPTURE(alpha);
            std::string why;
            auto kern = make(c, isa, &why);
            REQUIRE_MESSAGE(kern != nullptr, why);
            const int bad = run_and_compare(*kern, c, reference(c));
            CHECK_MESSAGE(bad == 0, kern->name());
            failures += bad != 0;
            ++cases;
          }
        }
  }
  MESSAGE(cases, " fc cases, ", failures, " failing");
}

// The reduced-precision sweeps' cases: every m x k x n x chain, one seed each (from `seed`),
// the weights transposed on odd seeds, a bias on half, alpha(seed); f(case) checks one. Returns
// the number of cases.
template <class Alpha, class F>
int sweep_cases(const std::vector<std::vector<PostOp>>& chains, std::vector<int64_t> ks,
                uint64_t seed, Alpha alpha, F f) {
  int cases = 0;
  for (int64_t m : {1, 2, 5, 9})
    for (int64_t k : ks)
      for (int64_t n : {1, 17, 64, 1000})
        for (size_t ci = 0; ci < chains.size(); ++ci, ++seed, ++cases)
          f(make_case(m, k, n, seed % 4 < 2, chains[ci], seed % 2 == 1, alpha(seed), seed), seed);
  return cases;
}

// bf16 kernels (AVX512-BF16): the naive loop on the same bf16-rounded x and weights (alpha a
// power of two or 1, so bf16(alpha w) = alpha bf16(w)); the products are exact in f32, so the
// f32 tolerance holds.
TEST_CASE("fc: bf16 kernels match the naive loop on bf16-rounded operands") {
  if (!testing::has_bf16()) return;
  const std::vector<std::vector<PostOp>> chains = {
      {}, {test::mk(K::relu)}, {test::mk(K::add), test::mk(K::relu)}, {test::mk(K::sigmoid)}};
  auto rounded = [](std::vector<float> v) {
    for (float& f : v) f = bf16_to_float(float_to_bf16(f));
    return v;
  };
  const int cases = sweep_cases(
      chains, {1, 2, 3, 17, 64, 1001}, 900,
      [](uint64_t seed) { return seed % 3 == 0   ? 1.f
                                 : seed % 3 == 1 ? -0.5f
                                                 : 2.f; },
      [&](const Case& c, uint64_t) {
        CAPTURE(c.p.str());
        CAPTURE(c.transposed);
        CAPTURE(c.alpha);
        Tensor w = tensor_of(c.w, c.transposed ? Shape{c.p.n, c.p.k} : Shape{c.p.k, c.p.n});
        Tensor b = c.p.bias ? tensor_of(c.bias, {c.p.n}) : Tensor();
        std::string why;
        auto kern = create_fc_kernel(c.p, Isa::avx512, w, c.transposed, c.alpha,
                                     c.p.bias ? &b : nullptr, &why, true);
        REQUIRE_MESSAGE(kern != nullptr, why);
        CHECK(kern->name().find("_bf16_") != std::string::npos);
        Case r = c;
        r.x = rounded(c.x);
        r.w = rounded(c.w);
        CHECK_MESSAGE(run_and_compare(*kern, c, reference(r)) == 0, kern->name());
      });
  MESSAGE(cases, " bf16 fc cases");
  std::string why;
  Case c = make_case(1, 8, 8, false, {}, false, 1.f, 1);
  CHECK(create_fc_kernel(c.p, Isa::avx2, tensor_of(c.w, {8, 8}), false, 1.f, nullptr, &why, true) ==
        nullptr);
  CHECK(why == "bf16 needs avx512_bf16");
}

// The int8 kernel sums the uint8 q = x / xs + xz, not x, and takes the zero point's share
// back through the bias: two terms of up to sum_k (|x| + xs xz) |alpha w| whose difference is
// the result, each rounded once to f32 (and the bias' share computed in double).
void widen_for_zero_point(const Case& c, const ConvInt8& q, Expected& e) {
  const double eps = std::numeric_limits<float>::epsilon();
  for (int64_t m = 0; m < c.p.m; ++m)
    for (int64_t n = 0; n < c.p.n; ++n) {
      double big = 0;
      for (int64_t k = 0; k < c.p.k; ++k)
        big += (std::fabs(double(c.x[size_t(m * c.p.k + k)])) + double(q.x_scale) * q.x_zero) *
               std::fabs(double(c.alpha) * w_at(c, k, n));
      e.tol[size_t(m * c.p.n + n)] += float(4 * eps * big);
    }
}

// int8 kernels (AVX512-VNNI): x on a uint8 grid xs * (u - xz) and alpha * W[:, n] on
// w_scale[n]'s int8 grid; the kernel's int32 sums are exact, the reference's double ones too,
// so the f32 tolerance holds. Blockings forced as well (GEMM tiles, accumulator sets).
TEST_CASE("fc: int8 kernels match the naive loop on int8-grid operands") {
  if (!testing::has_vnni()) return;
  const std::vector<std::vector<PostOp>> chains = {{},
                                                   {test::mk(K::relu)},
                                                   {test::mk(K::add), test::mk(K::relu)},
                                                   {test::mk(K::quant_dequant_u8, 0.05f, 7.f)}};
  const int cases = sweep_cases(
      chains, {1, 3, 4, 17, 64, 1001}, 1300,
      [](uint64_t seed) { return seed % 3 == 0 ? 1.f : 0.5f; },
      [&](Case c, uint64_t seed) {
        const int64_t k = c.p.k, n = c.p.n;
        auto q = std::make_shared<ConvInt8>();
        q->x_scale = 0.031f;
        q->x_zero = float(seed % 256);
        std::mt19937 rng{uint32_t(seed)};
        std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
        for (float& v : c.x) v = q->x_scale * (float(u8(rng)) - q->x_zero);
        q->w_scale.resize(size_t(n));
        for (int64_t j = 0; j < n; ++j) q->w_scale[size_t(j)] = 0.004f * float(1 + j % 5);
        // W such that alpha * W[k][n] = w_scale[n] * an int8 (alpha 1 or 1/2: exact).
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j) {
            float& w = c.transposed ? c.w[size_t(j * k + kk)] : c.w[size_t(kk * n + j)];
            w = q->w_scale[size_t(j)] * float(s8(rng)) / c.alpha;
          }
        CAPTURE(c.p.str());
        CAPTURE(c.transposed);
        CAPTURE(c.alpha);
        Tensor w = tensor_of(c.w, c.transposed ? Shape{n, k} : Shape{k, n});
        Tensor b = c.p.bias ? tensor_of(c.bias, {n}) : Tensor();
        std::string why;
        auto kern = create_fc_kernel(c.p, Isa::avx512, w, c.transposed, c.alpha,
                                     c.p.bias ? &b : nullptr, &why, false, q);
        REQUIRE_MESSAGE(kern != nullptr, why);
        CHECK(kern->name().find("_int8_") != std::string::npos);
        Expected e = reference(c);
        widen_for_zero_point(c, *q, e);
        if (c.p.post.size() == 1 && is_quant_dequant(c.p.post[0].kind))
          for (float& t : e.tol) t = 0.05f * 1.001f;  // (a step of the grid either way)
        CHECK_MESSAGE(run_and_compare(*kern, c, e) == 0, kern->name());
      });
  MESSAGE(cases, " int8 fc cases");
  // Forced blockings on one GEMM and one GEMV.
  // (No structured bindings: clang 14 cannot CAPTURE them.)
  for (const std::array<int, 4>& b : std::vector<std::array<int, 4>>{
           {7, 2, 3, 1}, {7, 1, 1, 2}, {1, 1, 1, 3}, {1, 4, 1, 1}, {12, 3, 4, 2}}) {
    const int m = b[0], nb = b[1], mr = b[2], ku = b[3];
    Case c = make_case(m, 203, 77, true, {}, false, 1.f, uint64_t(1700 + m * 10 + nb));
    auto q = std::make_shared<ConvInt8>();
    q->x_scale = 0.02f;
    q->x_zero = 100;
    q->w_scale.assign(77, 0.01f);
    for (float& v : c.x) v = q->x_scale * (std::nearbyint(v * 100.f + 100.f) - q->x_zero);
    for (float& v : c.w) v = q->w_scale[0] * std::nearbyint(v * 100.f);
    fcjit::FcImpl impl;
    impl.int8 = q;
    impl.nb = nb;
    impl.mr = mr;
    impl.ku = ku;
    CAPTURE(m);
    CAPTURE(nb);
    CAPTURE(mr);
    CAPTURE(ku);
    auto kern = make_forced(c, Isa::avx512, impl);
    Expected e = reference(c);
    widen_for_zero_point(c, *q, e);
    CHECK(run_and_compare(*kern, c, e) == 0);
  }
  // Refusals: AVX2, a scale per n, with bf16.
  auto q = std::make_shared<ConvInt8>();
  q->w_scale.assign(8, 1.f);
  fcjit::FcImpl impl;
  impl.int8 = q;
  CHECK(fcjit::init_fc_conf(prob(1, 8, 8), Isa::avx2, impl).reason == "int8 needs avx512_vnni");
  CHECK(fcjit::init_fc_conf(prob(1, 8, 9), Isa::avx512, impl).reason == "int8 needs a scale per n");
  impl.bf16 = true;
  CHECK(!fcjit::init_fc_conf(prob(1, 8, 8), Isa::avx512, impl));
}

TEST_CASE("fc: forced blockings, every tile on its own, scale_shift and swish") {
  struct Force {
    int64_t m, k, n;
    fcjit::FcImpl impl;
  };
  auto impl = [](int mr, int nb, int ku, int ku_unroll, int pf, int emb) {
    fcjit::FcImpl i;
    i.mr = mr;
    i.nb = nb;
    i.ku = ku;
    i.k_unroll = ku_unroll;
    i.prefetch = pf;
    i.bcast_emb = emb;
    return i;
  };
  const std::vector<Force> forces = {
      {1, 100, 77, impl(0, 1, 1, 1, 0, -1)},      // one set, no unroll
      {1, 100, 77, impl(0, 2, 4, 8, 0, -1)},      // 4 sets
      {1, 1001, 300, impl(0, 4, 2, 6, 256, -1)},  // prefetch, odd K remainder
      {1, 37, 200, impl(0, 8, 1, 5, 1024, -1)},   // wide block
      {7, 50, 100, impl(3, 2, 1, 4, 0, -1)},      // row tail (2 full tiles + 1 row)
      {7, 50, 100, impl(2, 3, 2, 2, 0, -1)},      // row tail with 2 sets
      {7, 50, 100, impl(7, 3, 1, 4, 0, 1)},       // embedded broadcast (AVX-512 only)
      {5, 33, 40, impl(4, 1, 2, 4, 128, 0)},      // prefetch in a gemm, single-vector blocks
  };
  const std::vector<PostOp> post = {test::mk(K::scale_shift), test::mk(K::swish), test::mk(K::add),
                                    test::mk(K::leaky_relu, 0.1f)};
  for (Isa isa : isas()) {
    uint64_t seed = 9000;
    for (const Force& f : forces) {
      if (f.impl.bcast_emb == 1 && isa != Isa::avx512) continue;
      ++seed;
      Case c = make_case(f.m, f.k, f.n, true, post, seed % 2 == 0, 0.5f, seed);
      const std::string isa_s = isa_name(isa);
      CAPTURE(isa_s);
      CAPTURE(c.p.str());
      auto kern = make_forced(c, isa, f.impl);
      const Expected e = reference(c);
      CHECK(run_and_compare(*kern, c, e) == 0);
      // Every tile alone, last first.
      std::vector<float> y(size_t(f.m * f.n), std::numeric_limits<float>::quiet_NaN());
      Args a = args_of(c, c.x.data(), y.data());
      for (int64_t t = kern->tiles() - 1; t >= 0; --t) kern->run(a.get(), t, t + 1);
      int bad = 0;
      for (size_t i = 0; i < y.size(); ++i) bad += !(std::fabs(y[i] - e.y[i]) <= e.tol[i]);
      CHECK_MESSAGE(bad == 0, kern->name());
    }
  }
}

TEST_CASE("fc: residual may be the output itself") {
  for (Isa isa : isas()) {
    Case c = make_case(3, 40, 21, true, {test::mk(K::add), test::mk(K::relu)}, false, 1, 77);
    const Expected e = reference(c);
    auto kern = make(c, isa, nullptr);
    std::vector<float> y = c.extra[0];  // y starts as the residual
    Args a = args_of(c, c.x.data(), y.data());
    a.src[3] = y.data();
    kern->run_all(a.get());
    int bad = 0;
    for (size_t i = 0; i < y.size(); ++i) bad += !(std::fabs(y[i] - e.y[i]) <= e.tol[i]);
    CHECK(bad == 0);
  }
}

// Operands that end exactly at an inaccessible page: any read or write past the last element
// (an unmasked tail) faults instead of passing silently.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t floats) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    data_bytes_ = (floats * 4 + page - 1) / page * page;
    size_ = data_bytes_ + page;
    void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    base_ = static_cast<char*>(m);
    REQUIRE(mprotect(base_ + data_bytes_, page, PROT_NONE) == 0);
    ptr_ = reinterpret_cast<float*>(base_ + data_bytes_ - floats * 4);
  }
  ~GuardedBuffer() { munmap(base_, size_); }
  float* get() { return ptr_; }

 private:
  char* base_ = nullptr;
  size_t size_ = 0, data_bytes_ = 0;
  float* ptr_ = nullptr;
};

TEST_CASE("fc: no access past the end of x, y, residual, scale and shift") {
  for (Isa isa : isas())
    for (int64_t m : {1, 3})
      for (int64_t n : {5, 17, 1000}) {
        const std::string isa_s = isa_name(isa);
        CAPTURE(isa_s);
        Case c = make_case(m, 19, n, true,
                           {test::mk(K::add), test::mk(K::scale_shift), test::mk(K::sigmoid)}, true,
                           1.25f, uint64_t(500 + m * 7 + n));
        CAPTURE(c.p.str());
        const Expected e = reference(c);
        auto kern = make(c, isa, nullptr);
        GuardedBuffer x(c.x.size()), y(size_t(m * n));
        std::copy(c.x.begin(), c.x.end(), x.get());
        std::vector<GuardedBuffer> extra;
        extra.reserve(c.extra.size());
        Args a = args_of(c, x.get(), y.get());
        for (size_t i = 0; i < c.extra.size(); ++i) {
          extra.emplace_back(c.extra[i].size());
          std::copy(c.extra[i].begin(), c.extra[i].end(), extra.back().get());
          a.src[3 + i] = extra.back().get();
        }
        kern->run_all(a.get());
        int bad = 0;
        for (size_t i = 0; i < size_t(m * n); ++i)
          bad += !(std::fabs(y.get()[i] - e.y[i]) <= e.tol[i]);
        CHECK(bad == 0);
      }
}

}  // namespace kiln
