// The fused softmax attention glue kernel (jit/glue/attention.cpp) against the definition in
// double precision - scores, scale, a max-subtracted softmax over the last axis, the product
// with V - over row / column tails, long rows (scores past one tile's rows), every blocking of
// the second product, broadcast batch dims and scales, biases (full, broadcast, per-key masks
// with -inf), on every JIT ISA; operands in guarded buffers, every tile split over two threads
// with their own scratch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "jit/glue/glue.h"
#include "test_glue_util.h"

namespace {

using kiln::Isa;
using kiln::Shape;
using kiln::shape_numel;
using kiln::test::GuardedBuf;

// Batch dim i (of r) of shape s, right-aligned; 1 where s has none.
int64_t dim(const Shape& s, size_t i, size_t r) {
  return i + s.size() >= r ? s[i + s.size() - r] : int64_t(1);
}

// Offset of batch entry e (row-major over `batch`) in an operand of shape s (matrices of
// `mat` floats), 0 along its broadcast dims.
int64_t offset(const Shape& batch, const Shape& s, int64_t e, int64_t mat) {
  const size_t r = batch.size() + 2;
  int64_t off = 0, stride = mat;
  for (size_t i = batch.size(); i-- > 0;) {
    const int64_t idx = e % batch[i];
    e /= batch[i];
    if (dim(s, i, r) > 1) off += idx * stride;
    stride *= dim(s, i, r);
  }
  return off;
}

// bias (null: none) of shape cs, [.., M or 1, N] (rank 1: one row).
std::vector<double> reference(const Shape& as, const float* a, const Shape& bs, const float* b,
                              const Shape& vs, const float* v, double scale, Shape* out,
                              const Shape& cs = {}, const float* bias = nullptr) {
  const size_t r = std::max({as.size(), bs.size(), vs.size()});
  Shape batch;
  for (size_t i = 0; i + 2 < r; ++i)
    batch.push_back(std::max({dim(as, i, r), dim(bs, i, r), dim(vs, i, r)}));
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back(), D = vs.back();
  *out = batch;
  out->push_back(M);
  out->push_back(D);
  std::vector<double> y(static_cast<size_t>(shape_numel(*out))), p(static_cast<size_t>(N));
  for (int64_t e = 0; e < shape_numel(batch); ++e) {
    const float* ae = a + offset(batch, as, e, M * K);
    const float* be = b + offset(batch, bs, e, K * N);
    const float* ve = v + offset(batch, vs, e, N * D);
    const int64_t bias_rows = cs.size() >= 2 ? cs[cs.size() - 2] : 1;
    const float* ce = bias ? bias + offset(batch, cs, e, bias_rows * N) : nullptr;
    for (int64_t m = 0; m < M; ++m) {
      double mx = -INFINITY, sum = 0;
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(ae[m * K + k]) * double(be[k * N + n]);
        p[size_t(n)] = s * scale + (ce ? double(ce[(bias_rows == 1 ? 0 : m) * N + n]) : 0.0);
        mx = std::max(mx, p[size_t(n)]);
      }
      for (double& x : p) sum += x = std::exp(x - mx);
      for (int64_t d = 0; d < D; ++d) {
        double s = 0;
        for (int64_t n = 0; n < N; ++n) s += p[size_t(n)] / sum * double(ve[n * D + d]);
        y[size_t((e * M + m) * D + d)] = s;
      }
    }
  }
  return y;
}

// With a bias of shape cs (empty: none); mask: every third key of the bias's rows -inf.
void check(Isa isa, const Shape& as, const Shape& bs, const Shape& vs, float scale = 1.f,
           const Shape& cs = {}, bool mask = false) {
  CAPTURE(kiln::isa_name(isa));
  CAPTURE(kiln::shape_str(as));
  CAPTURE(kiln::shape_str(bs));
  CAPTURE(kiln::shape_str(vs));
  CAPTURE(kiln::shape_str(cs));
  CAPTURE(scale);
  std::string why;
  auto k = kiln::create_attention_kernel(as, bs, vs, scale, isa, &why, cs.empty() ? nullptr : &cs);
  REQUIRE_MESSAGE(k, why);
  GuardedBuf a(size_t(shape_numel(as))), b(size_t(shape_numel(bs))), v(size_t(shape_numel(vs)));
  GuardedBuf c(cs.empty() ? 1 : size_t(shape_numel(cs)));
  a.random(1);
  b.random(2);
  v.random(3);
  c.random(4);
  if (mask)
    for (size_t i = 0; i < c.size(); i += 3) c[i] = -INFINITY;
  Shape os;
  const std::vector<double> want =
      reference(as, a.data(), bs, b.data(), vs, v.data(), double(scale), &os, cs,
                cs.empty() ? nullptr : c.data());
  GuardedBuf y(size_t(shape_numel(os)));
  y.fill(NAN);
  kiln::test::run_two(*k, {a.data(), b.data(), v.data(), c.data()}, y.data());
  // Outputs are convex combinations of V's values (|v| <= 4); the scores' float rounding
  // (K products of |a|, |b| <= 4, times the scale) moves each probability by a few ulps of
  // its exponent, so the tolerance scales with K * |scale|.
  const double tol = 4.0 * (1e-6 + 64.0 * double(as.back()) * std::fabs(scale) * 0x1p-23);
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(y[i]) - want[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    bad += !(err <= tol);
  }
  CAPTURE(worst);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue attention: tails, long rows and broadcast batch dims against the definition") {
  for (Isa isa : kiln::test::glue_isas()) {
    for (int64_t m : {1, 5, 6, 7, 25, 50})
      for (int64_t n : {1, 7, 16, 33, 197})
        for (int64_t d : {1, 8, 16, 17, 64, 80}) check(isa, {m, 8}, {8, n}, {n, d}, 0.35f);
    for (int64_t k : {1, 3, 16, 64}) check(isa, {2, 13, k}, {2, k, 40}, {2, 40, 24});
    check(isa, {2, 4, 20, 16}, {2, 4, 16, 4100}, {2, 4, 4100, 16}, 0.25f);  // > one tile's row
    check(isa, {3, 30, 16}, {16, 30}, {30, 16});          // B and V shared by every entry
    check(isa, {2, 1, 9, 8}, {1, 3, 8, 11}, {3, 11, 5});  // broadcast on both sides
    check(isa, {1, 4, 49, 32}, {1, 4, 32, 49}, {1, 4, 49, 32}, -0.5f);  // a negative scale
  }
}

TEST_CASE("glue attention: a bias added to the scores, against the definition") {
  for (Isa isa : kiln::test::glue_isas()) {
    // Per head, shared by the batch (Swin's / LeViT's relative positions); one per entry.
    check(isa, {2, 4, 49, 32}, {2, 4, 32, 49}, {2, 4, 49, 32}, 0.18f, {4, 49, 49});
    check(isa, {2, 4, 49, 32}, {2, 4, 32, 49}, {2, 4, 49, 32}, 1.f, {2, 4, 49, 49});
    for (int64_t m : {1, 5, 7, 25})
      for (int64_t n : {1, 7, 16, 33}) {
        check(isa, {m, 8}, {8, n}, {n, 17}, 0.35f, {m, n});
        check(isa, {m, 8}, {8, n}, {n, 17}, 0.35f, {n});  // one row for every query
      }
    // Key masks with -inf (no row fully masked), one row for all queries, and per query.
    check(isa, {3, 2, 25, 16}, {3, 2, 16, 37}, {3, 2, 37, 24}, 0.25f, {3, 1, 1, 37}, true);
    check(isa, {3, 2, 25, 16}, {3, 2, 16, 37}, {3, 2, 37, 24}, 0.25f, {3, 1, 25, 37}, true);
    check(isa, {2, 4, 20, 16}, {2, 4, 16, 4100}, {2, 4, 4100, 16}, 0.25f, {2, 1, 20, 4100});
    check(isa, {2, 1, 9, 8}, {1, 3, 8, 11}, {3, 11, 5}, 1.f, {3, 1, 11});  // broadcast batch
  }
}

TEST_CASE("glue attention: refusals") {
  std::string why;
  CHECK_FALSE(kiln::create_attention_kernel({4}, {4, 3}, {3, 2}, 1.f, Isa::avx2, &why));
  CHECK(why.find("1-D") != std::string::npos);
  CHECK_FALSE(kiln::create_attention_kernel({2, 4}, {3, 5}, {5, 2}, 1.f, Isa::avx2, &why));
  CHECK(why.find("inner") != std::string::npos);
  CHECK_FALSE(kiln::create_attention_kernel({2, 4}, {4, 5}, {6, 2}, 1.f, Isa::avx2, &why));
  CHECK(why.find("inner") != std::string::npos);
  CHECK_FALSE(kiln::create_attention_kernel({2, 3, 4}, {3, 4, 5}, {5, 2}, 1.f, Isa::avx2, &why));
  CHECK(why.find("broadcast") != std::string::npos);
  CHECK_FALSE(kiln::create_attention_kernel({3, 4}, {4, 5}, {2, 5, 2}, 1.f, Isa::avx2, &why));
  CHECK(why.find("widens") != std::string::npos);
  for (float s : {0.f, INFINITY, NAN}) {
    CHECK_FALSE(kiln::create_attention_kernel({3, 4}, {4, 5}, {5, 2}, s, Isa::avx2, &why));
    CHECK(why.find("scale") != std::string::npos);
  }
  CHECK_FALSE(kiln::create_attention_kernel({3, 4}, {4, 5}, {5, 2}, 1.f, Isa::scalar, &why));
  // Biases: not over the keys, rows neither the queries' nor one, widening the batch dims.
  for (const Shape& c : {Shape{3, 1}, Shape{2, 5}, Shape{4}, Shape{}}) {
    CHECK_FALSE(kiln::create_attention_kernel({3, 4}, {4, 5}, {5, 2}, 1.f, Isa::avx2, &why, &c));
    CHECK(why.find("bias") != std::string::npos);
  }
  const Shape wide{2, 3, 5};
  CHECK_FALSE(kiln::create_attention_kernel({3, 4}, {4, 5}, {5, 2}, 1.f, Isa::avx2, &why, &wide));
  CHECK(why.find("widens") != std::string::npos);
}
