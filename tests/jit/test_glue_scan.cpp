// TopK and CumSum glue kernels (jit/glue/topk.cpp, cumsum.cpp) against plain loops over many
// [outer, n, inner] shapes: contiguous rows and gathered columns, rows around the vector width,
// k on both sides of the sorted-buffer / heap switch, ties and NaNs; every JIT ISA, two threads,
// guarded buffers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "jit/glue/glue.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;
using test::run_two;

// The indices of the best k of p[j * stride], j < n: a stable sort with NaN first.
std::vector<int64_t> topk_ref(const float* p, int64_t n, int64_t stride, int64_t k, bool largest) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int64_t j) {
    const float v = p[j * stride];
    return std::isnan(v) ? -INFINITY : largest ? -v : v;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return key(a) < key(b); });
  order.resize(size_t(k));
  return order;
}

TEST_CASE("topk: rows, gathered columns, small and large k, ties and NaNs") {
  struct Case {
    int64_t outer, n, inner, k;
  };
  const Case cases[] = {{3, 1000, 1, 5},  {2, 1000, 1, 64}, {2, 1000, 1, 65}, {4, 16, 1, 1},
                        {3, 17, 1, 16},   {2, 33, 1, 33},   {1, 15, 1, 7},    {5, 200, 3, 10},
                        {2, 40, 37, 40},  {2, 300, 18, 90}, {3000, 9, 1, 2},  {1, 1, 1, 1},
                        {2, 129, 16, 64}, {1, 70, 5, 1}};
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases)
      for (int mode = 0; mode < 6; ++mode) {  // largest / smallest x ties / some NaNs / half NaN
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(c.outer);
        CAPTURE(c.n);
        CAPTURE(c.inner);
        CAPTURE(c.k);
        CAPTURE(mode);
        TopKProblem p{c.outer, c.n, c.inner, c.k};
        p.largest = mode % 2 == 0;
        std::string why;
        auto kern = create_topk_kernel(p, isa, &why);
        REQUIRE_MESSAGE(kern, why);
        const int64_t xn = c.outer * c.n * c.inner, yn = c.outer * c.k * c.inner;
        GuardedBuf x{size_t(xn)}, v{size_t(yn)}, i{size_t(2 * yn)};
        std::mt19937 rng(uint32_t(xn * 7 + mode));
        std::uniform_int_distribution<int> small(-4, 4);
        std::normal_distribution<float> normal;
        for (int64_t j = 0; j < xn; ++j) x[size_t(j)] = mode < 2 ? float(small(rng)) : normal(rng);
        if (mode >= 2)  // (half of them: more NaNs than k, the worst held is a NaN)
          for (int64_t j = 5; j < xn; j += mode >= 4 ? 2 : 41) x[size_t(j)] = std::nanf("");
        v.fill(-3.f);
        i.fill(-3.f);
        run_two(*kern, {x.data()}, {v.data(), i.data()});
        const auto* idx = reinterpret_cast<const int64_t*>(i.data());
        int bad = 0;
        for (int64_t o = 0; o < c.outer; ++o)
          for (int64_t q = 0; q < c.inner; ++q) {
            const float* col = x.data() + o * c.n * c.inner + q;
            const auto want = topk_ref(col, c.n, c.inner, c.k, p.largest);
            for (int64_t j = 0; j < c.k; ++j) {
              const int64_t at = (o * c.k + j) * c.inner + q;
              const float wv = col[want[size_t(j)] * c.inner], gv = v[size_t(at)];
              bad += idx[at] != want[size_t(j)];
              bad += !(gv == wv || (std::isnan(gv) && std::isnan(wv)));
            }
          }
        CHECK(bad == 0);
      }
}

TEST_CASE("topk: values only (no indices output)") {
  for (Isa isa : test::glue_isas()) {
    TopKProblem p{3, 500, 1, 4};
    p.indices = false;
    auto kern = create_topk_kernel(p, isa, nullptr);
    REQUIRE(kern);
    GuardedBuf x{1500}, v{12};
    x.random(11);
    run_two(*kern, {x.data()}, {v.data()});
    for (int64_t o = 0; o < 3; ++o) {
      const auto want = topk_ref(x.data() + o * 500, 500, 1, 4, true);
      for (int64_t j = 0; j < 4; ++j)
        CHECK(v[size_t(o * 4 + j)] == x[size_t(o * 500 + want[size_t(j)])]);
    }
  }
}

TEST_CASE("topk: k outside [1, n] is refused") {
  std::string why;
  CHECK_FALSE(create_topk_kernel(TopKProblem{1, 5, 1, 6}, test::glue_isas().front(), &why));
  CHECK_FALSE(create_topk_kernel(TopKProblem{1, 5, 1, 0}, test::glue_isas().front(), &why));
  CHECK(why.find("k outside") != std::string::npos);
}

// Sequential sums in T, in scan order.
template <class T>
std::vector<T> cumsum_ref(const T* x, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                          bool reverse) {
  std::vector<T> y(size_t(outer * n * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      T acc = 0;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t at = (o * n + (reverse ? n - 1 - t : t)) * inner + i;
        y[size_t(at)] = exclusive ? acc : acc + x[at];
        acc += x[at];
      }
    }
  return y;
}

TEST_CASE("cumsum: f32 and int64, inclusive / exclusive, forward / reversed") {
  struct Case {
    int64_t outer, n, inner;
  };
  const Case cases[] = {{3, 1, 1},    {2, 15, 1},   {2, 16, 1}, {2, 17, 1},   {4, 33, 1},
                        {1, 1000, 1}, {3000, 5, 1}, {2, 7, 3},  {2, 5, 1030}, {1, 40, 2049}};
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases)
      for (int mode = 0; mode < 8; ++mode) {  // exclusive x reverse x int64
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(c.outer);
        CAPTURE(c.n);
        CAPTURE(c.inner);
        CAPTURE(mode);
        CumSumProblem p{c.outer, c.n, c.inner, (mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0};
        std::string why;
        auto kern = create_cumsum_kernel(p, isa, &why);
        REQUIRE_MESSAGE(kern, why);
        const int64_t xn = c.outer * c.n * c.inner;
        std::mt19937 rng(uint32_t(xn + mode));
        std::uniform_int_distribution<int> small(-9, 9);  // integer f32 sums are exact
        int bad = 0;
        if (p.int64) {
          GuardedBuf x{size_t(2 * xn)}, y{size_t(2 * xn)};
          auto* xi = reinterpret_cast<int64_t*>(x.data());
          for (int64_t j = 0; j < xn; ++j) xi[j] = int64_t(small(rng)) << 33;
          y.fill(-3.f);
          run_two(*kern, {x.data()}, {y.data()});
          const auto want = cumsum_ref(xi, c.outer, c.n, c.inner, p.exclusive, p.reverse);
          const auto* yi = reinterpret_cast<const int64_t*>(y.data());
          for (int64_t j = 0; j < xn; ++j) bad += yi[j] != want[size_t(j)];
        } else {
          GuardedBuf x{size_t(xn)}, y{size_t(xn)};
          for (int64_t j = 0; j < xn; ++j) x[size_t(j)] = float(small(rng));
          y.fill(-3.f);
          run_two(*kern, {x.data()}, {y.data()});
          const auto want = cumsum_ref(x.data(), c.outer, c.n, c.inner, p.exclusive, p.reverse);
          for (int64_t j = 0; j < xn; ++j) bad += y[size_t(j)] != want[size_t(j)];
        }
        CHECK(bad == 0);
      }
}

}  // namespace
}  // namespace kiln
