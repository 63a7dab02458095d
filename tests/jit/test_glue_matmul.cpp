// The batched MatMul glue kernel (two activations, numpy-broadcast batch dims) against a
// plain double-precision product, over row/column tails and broadcast patterns, on both ISAs;
// operands in guarded buffers so a read or write past either end crashes the test.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "jit/glue/glue.h"
#include "test_glue_util.h"

namespace {

using kiln::Isa;
using kiln::Shape;
using kiln::test::GuardedBuf;
using kiln::shape_numel;

// C = A x B with batch dims broadcast (right-aligned), computed directly from the definition.
std::vector<double> reference(const Shape& as, const std::vector<float>& a, const Shape& bs,
                              const std::vector<float>& b, Shape* out_shape) {
  const size_t r = std::max(as.size(), bs.size());
  auto dim = [&](const Shape& s, size_t i) {  // batch dim i of r-2, 1 when absent
    return i + s.size() >= r ? s[i + s.size() - r] : int64_t(1);
  };
  Shape out;
  for (size_t i = 0; i + 2 < r; ++i) out.push_back(std::max(dim(as, i), dim(bs, i)));
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  out.push_back(M);
  out.push_back(N);
  *out_shape = out;
  std::vector<double> c(size_t(shape_numel(out)), 0.0);
  const int64_t batches = shape_numel(out) / (M * N);
  for (int64_t e = 0; e < batches; ++e) {
    // Offsets of batch entry e in A and B: index per dim, 0 where the operand has size 1.
    int64_t rem = e, ao = 0, bo = 0, sa = M * K, sb = K * N;
    for (size_t i = r - 2; i-- > 0;) {
      const int64_t idx = rem % out[i];
      rem /= out[i];
      if (dim(as, i) > 1) ao += idx * sa;
      if (dim(bs, i) > 1) bo += idx * sb;
      sa *= dim(as, i);
      sb *= dim(bs, i);
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += double(a[size_t(ao + m * K + k)]) * double(b[size_t(bo + k * N + n)]);
        c[size_t((e * M + m) * N + n)] = s;
      }
  }
  return c;
}

void check(Isa isa, const Shape& as, const Shape& bs) {
  CAPTURE(kiln::isa_name(isa));
  CAPTURE(kiln::shape_str(as));
  CAPTURE(kiln::shape_str(bs));
  std::string why;
  auto k = kiln::create_matmul_kernel(as, bs, isa, &why);
  REQUIRE_MESSAGE(k, why);
  GuardedBuf a(size_t(shape_numel(as))), b(size_t(shape_numel(bs)));
  a.random(1);
  b.random(2);
  Shape os;
  const std::vector<double> want =
      reference(as, std::vector<float>(a.data(), a.data() + a.size()), bs,
                std::vector<float>(b.data(), b.data() + b.size()), &os);
  GuardedBuf c(size_t(shape_numel(os)));
  c.fill(NAN);
  kiln::test::run_split(*k, {a.data(), b.data()}, {c.data()});
  const int64_t K = as.back();
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    // |sum| error of K float products/adds: K ulps of the largest term (|a|, |b| <= 4).
    const double tol = 16.0 * double(K) * 0x1p-23 + 1e-6 * std::fabs(want[i]);
    bad += !(std::fabs(double(c[i]) - want[i]) <= tol);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue matmul: tails and broadcast batch dims against the definition") {
  for (Isa isa : kiln::test::glue_isas()) {
    for (int64_t m : {1, 5, 6, 7, 13})
      for (int64_t k : {1, 3, 64})
        for (int64_t n : {1, 7, 8, 16, 31, 33, 64, 65, 197}) check(isa, {m, k}, {k, n});
    check(isa, {2, 3, 7, 9}, {9, 11});               // B shared by every batch entry
    check(isa, {5, 9}, {4, 9, 70});                  // A shared
    check(isa, {2, 1, 6, 5}, {1, 3, 5, 19});         // both broadcast
    check(isa, {3, 12, 197, 64}, {3, 12, 64, 197});  // ViT-B/16-like Q x K^T, batch 3
  }
}

TEST_CASE("glue matmul: refusals") {
  std::string why;
  CHECK_FALSE(kiln::create_matmul_kernel({4}, {4, 3}, Isa::avx2, &why));
  CHECK(why.find("1-D") != std::string::npos);
  CHECK_FALSE(kiln::create_matmul_kernel({2, 4, 3}, {3, 4, 3}, Isa::avx2, &why));
  CHECK(why.find("inner") != std::string::npos);
  CHECK_FALSE(kiln::create_matmul_kernel({2, 4, 3}, {3, 3, 5}, Isa::avx2, &why));
  CHECK(why.find("broadcast") != std::string::npos);
  CHECK_FALSE(kiln::create_matmul_kernel({2, 3}, {3, 2}, Isa::scalar, &why));
}
