// The typed elementwise kernel (jit/glue/typed_eltwise.cpp: comparisons, Where, Cast, ...) and
// the arg-reduce kernel (jit/glue/argreduce.cpp: ArgMax / ArgMin / Hardmax) against plain loops
// written here, over broadcasts, row / tile / strip boundaries and NaN, on every ISA path, the
// tiles split over two threads, operands between guard pages. (tests/python/test_typed_ops.py
// checks the same ops end to end against numpy.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "jit/glue/glue.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;
using test::run_two;

// y's 8-D shape with leading 1s; x's too.
Shape pad8(Shape s) {
  s.insert(s.begin(), kTypedRank - s.size(), 1);
  return s;
}

// The row-major offset into x (broadcast to y) of y's flat index i.
int64_t offset_of(const Shape& x, const Shape& y, int64_t i) {
  int64_t off = 0, stride = 1;
  for (size_t d = y.size(); d-- > 0;) {
    const int64_t idx = i % y[d];
    i /= y[d];
    if (x[d] != 1) off += idx * stride;
    stride *= x[d];
  }
  return off;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

TEST_CASE("typed eltwise: Less and Where with broadcasts, Cast with out-of-range values") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);
  for (Isa isa : test::glue_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    // Less: [3, 1, 7, 1000] < [1, 5, 1, 1000] -> bool [3, 5, 7, 1000] (several 16K tiles).
    {
      TypedEltwiseProblem p;
      p.op = TypedOp::less;
      p.y = pad8({3, 5, 7, 1000});
      p.x = {pad8({3, 1, 7, 1000}), pad8({1, 5, 1, 1000})};
      p.x_type = {DType::f32, DType::f32};
      p.y_type = DType::boolean;
      std::string why;
      auto k = create_typed_eltwise_kernel(p, isa, &why);
      REQUIRE_MESSAGE(k, why);
      GuardedBuf a{size_t(numel(p.x[0]))}, b{size_t(numel(p.x[1]))};
      for (size_t i = 0; i < a.size(); ++i) a[i] = float(small(rng)) / 2;
      for (size_t i = 0; i < b.size(); ++i) b[i] = float(small(rng)) / 2;
      a[7] = std::numeric_limits<float>::quiet_NaN();
      const int64_t n = numel(p.y);
      GuardedBuf y{size_t((n + 3) / 4)};
      run_two(*k, {a.data(), b.data()}, y.data());
      const auto* yb = reinterpret_cast<const uint8_t*>(y.data());
      int bad = 0;
      for (int64_t i = 0; i < n; ++i)
        bad += yb[i] !=
               uint8_t(a[size_t(offset_of(p.x[0], p.y, i))] < b[size_t(offset_of(p.x[1], p.y, i))]);
      CHECK(bad == 0);
    }
    // Where: bool [4, 1, 3] ? f32 [4, 6, 3] : f32 scalar.
    {
      TypedEltwiseProblem p;
      p.op = TypedOp::where;
      p.y = pad8({4, 6, 3});
      p.x = {pad8({4, 1, 3}), pad8({4, 6, 3}), pad8({})};
      p.x_type = {DType::boolean, DType::f32, DType::f32};
      p.y_type = DType::f32;
      std::string why;
      auto k = create_typed_eltwise_kernel(p, isa, &why);
      REQUIRE_MESSAGE(k, why);
      GuardedBuf c(3), a(72), s(1), y(72);
      auto* cb = reinterpret_cast<uint8_t*>(c.data());
      for (int i = 0; i < 12; ++i) cb[i] = uint8_t(i % 3 == 1);
      a.random(6);
      s[0] = -7.f;
      run_two(*k, {c.data(), a.data(), s.data()}, y.data());
      int bad = 0;
      for (int64_t i = 0; i < 72; ++i)
        bad += y[size_t(i)] != (cb[offset_of(p.x[0], p.y, i)] ? a[size_t(i)] : -7.f);
      CHECK(bad == 0);
    }
    // Cast f32 -> int64 (and to int32 kept as int64): truncation, INT_MIN out of range / NaN.
    for (auto narrow : {TypedEltwiseProblem::Narrow::none, TypedEltwiseProblem::Narrow::int32}) {
      TypedEltwiseProblem p;
      p.op = TypedOp::cast;
      p.y = pad8({1001});
      p.x = {p.y};
      p.x_type = {DType::f32};
      p.y_type = DType::i64;
      p.narrow = narrow;
      std::string why;
      auto k = create_typed_eltwise_kernel(p, isa, &why);
      REQUIRE_MESSAGE(k, why);
      GuardedBuf x(1001), y(2002);
      x.random(7, -1e10f, 1e10f);
      const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                               -0.f,
                               2.5f,
                               -2.5f,
                               2147483520.f,
                               2147483648.f,
                               -2147483648.f,
                               9.3e18f,
                               -9.3e18f};
      for (size_t i = 0; i < std::size(special); ++i) x[i] = special[i];
      run_two(*k, {x.data()}, y.data());
      const auto* yi = reinterpret_cast<const int64_t*>(y.data());
      const bool i32 = narrow == TypedEltwiseProblem::Narrow::int32;
      const double lim = i32 ? 2147483648.0 : 9223372036854775808.0;
      const int64_t indefinite = i32 ? int64_t(INT32_MIN) : INT64_MIN;
      int bad = 0;
      for (size_t i = 0; i < 1001; ++i) {
        const double v = x[i];
        const int64_t want = v > -lim && v < lim ? int64_t(std::trunc(v)) : indefinite;
        bad += yi[i] != want;
      }
      CHECK(bad == 0);
    }
  }
}

// numpy's argmax / argmin (last: the last extreme), a NaN counting as the extreme.
int64_t arg_ref(const float* p, int64_t n, int64_t stride, bool max, bool last) {
  int64_t best = -1;
  for (int64_t k = 0; k < n; ++k) {
    const float v = p[k * stride];
    if (best < 0) {
      best = k;
      continue;
    }
    const float b = p[best * stride];
    bool better;
    if (std::isnan(b))
      better = last && std::isnan(v);
    else if (std::isnan(v))
      better = true;
    else
      better = last ? (max ? v >= b : v <= b) : (max ? v > b : v < b);
    if (better) best = k;
  }
  return best;
}

TEST_CASE("arg reduce: ArgMax / ArgMin / Hardmax over rows, strips and partial strips") {
  struct Case {
    int64_t outer, n, inner;
  };
  const Case cases[] = {{3, 37, 1},   {2, 5, 300}, {1, 600, 3}, {4, 7, 513},
                        {3000, 9, 1}, {1, 1, 20},  {2, 21, 256}};
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases)
      for (int mode = 0; mode < 5; ++mode) {  // argmax, argmax last, argmin, argmin last, hardmax
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(c.outer);
        CAPTURE(c.n);
        CAPTURE(c.inner);
        CAPTURE(mode);
        ArgReduceProblem p{c.outer, c.n, c.inner};
        p.max = mode < 2 || mode == 4;
        p.last = mode == 1 || mode == 3;
        p.hardmax = mode == 4;
        std::string why;
        auto k = create_arg_reduce_kernel(p, isa, &why);
        REQUIRE_MESSAGE(k, why);
        const int64_t xn = c.outer * c.n * c.inner, yn = p.hardmax ? xn : c.outer * c.inner;
        GuardedBuf x{size_t(xn)}, y{size_t(p.hardmax ? yn : 2 * yn)};
        std::mt19937 rng(uint32_t(xn + mode));
        std::uniform_int_distribution<int> small(-4, 4);  // ties
        for (int64_t i = 0; i < xn; ++i) x[size_t(i)] = float(small(rng));
        for (int64_t i = 0; i < xn; i += 97) x[size_t(i)] = std::nanf("");
        y.fill(-3.f);
        run_two(*k, {x.data()}, y.data());
        int bad = 0;
        for (int64_t o = 0; o < c.outer; ++o)
          for (int64_t i = 0; i < c.inner; ++i) {
            const int64_t want =
                arg_ref(x.data() + o * c.n * c.inner + i, c.n, c.inner, p.max, p.last);
            if (!p.hardmax) {
              bad += reinterpret_cast<const int64_t*>(y.data())[o * c.inner + i] != want;
              continue;
            }
            for (int64_t kk = 0; kk < c.n; ++kk)
              bad += y[size_t((o * c.n + kk) * c.inner + i)] != (kk == want ? 1.f : 0.f);
          }
        CHECK(bad == 0);
      }
}

}  // namespace
}  // namespace kiln
