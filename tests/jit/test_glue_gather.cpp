// Index-driven glue kernels against plain loops: Gather with computed indices and
// GatherElements (jit/glue/gather.cpp) over ranks, axes, index shapes smaller than the data,
// negative indices, f32 and int64 elements, an out-of-range index (an error, not a read); and
// the typed kernels' int64 arithmetic (Add / Sub / Mul / Div / Mod, Expand) with broadcasts,
// wrapping and the INT64_MIN / -1 corner, a zero divisor being an error. Every JIT ISA, two
// threads, guarded buffers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "graph/error.h"
#include "jit/glue/glue.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;
using test::run_two;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<int64_t> strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

TEST_CASE("gather elements: every axis, smaller index shapes, negative indices, f32 and int64") {
  struct Case {
    Shape data, index;
    int64_t axis;
  };
  const Case cases[] = {{{3, 5, 7}, {3, 5, 7}, 0},  {{3, 5, 7}, {2, 9, 4}, 1},
                        {{3, 5, 7}, {3, 4, 11}, 2}, {{1, 400, 2}, {1, 50, 2}, 1},
                        {{20000}, {17000}, 0},      {{2, 3, 4, 5}, {2, 1, 4, 3}, 3}};
  std::mt19937 rng(3);
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases)
      for (int64_t esize : {4, 8}) {
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(c.axis);
        CAPTURE(esize);
        GatherProblem p;
        p.elements = true;
        p.esize = esize;
        p.data = c.data;
        p.index = c.index;
        p.axis = c.axis;
        std::string why;
        auto k = create_gather_kernel(p, &why);
        REQUIRE_MESSAGE(k, why);
        const int64_t xn = numel(c.data), n = numel(c.index), dim = c.data[size_t(c.axis)];
        GuardedBuf x{size_t(xn * esize / 4)}, idx{size_t(2 * n)}, y{size_t(n * esize / 4)};
        for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f;  // distinct elements
        auto* ip = reinterpret_cast<int64_t*>(idx.data());
        std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
        for (int64_t j = 0; j < n; ++j) ip[j] = pick(rng);
        y.fill(-1.f);
        run_two(*k, {x.data(), idx.data()}, y.data());
        const auto xs = strides(c.data);
        std::vector<int64_t> at(c.index.size(), 0);
        int bad = 0;
        for (int64_t j = 0; j < n; ++j) {
          int64_t src = 0;
          for (size_t d = 0; d < at.size(); ++d)
            src += (int64_t(d) == c.axis ? (ip[j] < 0 ? ip[j] + dim : ip[j]) : at[d]) * xs[d];
          bad += std::memcmp(reinterpret_cast<const char*>(y.data()) + j * esize,
                             reinterpret_cast<const char*>(x.data()) + src * esize,
                             size_t(esize)) != 0;
          for (size_t d = at.size(); d-- > 0 && ++at[d] == c.index[d];) at[d] = 0;
        }
        CHECK(bad == 0);
      }
}

TEST_CASE("gather rows: computed indices of any count, rows of 1 to 300 elements") {
  struct Case {
    int64_t outer, dim, inner, n;
  };
  const Case cases[] = {{1, 1000, 1, 50}, {2, 37, 300, 9}, {4, 9, 5, 20000}, {3, 6, 16, 1}};
  std::mt19937 rng(4);
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases) {
      CAPTURE(std::string(isa_name(isa)));
      CAPTURE(c.inner);
      GatherProblem p;
      p.outer = c.outer;
      p.dim = c.dim;
      p.inner = c.inner;
      p.n = c.n;
      auto k = create_gather_kernel(p, nullptr);
      REQUIRE(k);
      GuardedBuf x{size_t(c.outer * c.dim * c.inner)}, idx{size_t(2 * c.n)},
          y{size_t(c.outer * c.n * c.inner)};
      x.random(9);
      auto* ip = reinterpret_cast<int64_t*>(idx.data());
      std::uniform_int_distribution<int64_t> pick(-c.dim, c.dim - 1);
      for (int64_t j = 0; j < c.n; ++j) ip[j] = pick(rng);
      run_two(*k, {x.data(), idx.data()}, y.data());
      int bad = 0;
      for (int64_t o = 0; o < c.outer; ++o)
        for (int64_t j = 0; j < c.n; ++j)
          for (int64_t i = 0; i < c.inner; ++i) {
            const int64_t row = ip[j] < 0 ? ip[j] + c.dim : ip[j];
            bad += y[size_t((o * c.n + j) * c.inner + i)] !=
                   x[size_t((o * c.dim + row) * c.inner + i)];
          }
      CHECK(bad == 0);
    }
}

TEST_CASE("gather: an index outside the axis is an error naming it") {
  for (bool elements : {false, true}) {
    GatherProblem p;
    p.elements = elements;
    p.outer = 2, p.dim = 5, p.inner = 3, p.n = 4;
    p.data = {2, 5, 3};
    p.index = {2, 4, 3};
    p.axis = 1;
    auto k = create_gather_kernel(p, nullptr);
    REQUIRE(k);
    GuardedBuf x{30}, idx{48}, y{24};
    auto* ip = reinterpret_cast<int64_t*>(idx.data());
    for (int j = 0; j < 24; ++j) ip[j] = j % 5 - 2;
    ip[elements ? 23 : 3] = 5;
    try {
      run_two(*k, {x.data(), idx.data()}, y.data());
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("index 5 is out of range") != std::string::npos);
    }
  }
}

// The reference semantics (runtime/ref/ref_elementwise.cpp, ref_logic.cpp).
int64_t arith_ref(TypedOp op, int64_t a, int64_t b, bool fmod) {
  const uint64_t ua = uint64_t(a), ub = uint64_t(b);
  switch (op) {
    case TypedOp::add:
      return int64_t(ua + ub);
    case TypedOp::sub:
      return int64_t(ua - ub);
    case TypedOp::mul:
      return int64_t(ua * ub);
    case TypedOp::div:
      return a == std::numeric_limits<int64_t>::min() && b == -1 ? a : a / b;
    default: {
      if (b == -1) return 0;
      const int64_t r = a % b;
      return !fmod && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
    }
  }
}

TEST_CASE("typed eltwise: int64 Add / Sub / Mul / Div / Mod with broadcasts and wrapping") {
  const int64_t kMin = std::numeric_limits<int64_t>::min(),
                kMax = std::numeric_limits<int64_t>::max();
  std::mt19937 rng(8);
  std::uniform_int_distribution<int64_t> small(-40, 40);
  for (Isa isa : test::glue_isas())
    for (TypedOp op : {TypedOp::add, TypedOp::sub, TypedOp::mul, TypedOp::div, TypedOp::mod})
      for (bool fmod : {false, true}) {
        if (op != TypedOp::mod && fmod) continue;
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(int(op));
        CAPTURE(fmod);
        TypedEltwiseProblem p;
        p.op = op;
        p.fmod = fmod;
        const Shape y = {1, 1, 1, 1, 1, 3, 7, 33}, xa = {1, 1, 1, 1, 1, 3, 1, 33},
                    xb = {1, 1, 1, 1, 1, 1, 7, 33};
        p.y = y;
        p.x = {xa, xb};
        p.x_type = {DType::i64, DType::i64};
        p.y_type = DType::i64;
        std::string why;
        auto k = create_typed_eltwise_kernel(p, isa, &why);
        REQUIRE_MESSAGE(k, why);
        GuardedBuf a{size_t(2 * numel(xa))}, b{size_t(2 * numel(xb))}, out{size_t(2 * numel(y))};
        auto* ap = reinterpret_cast<int64_t*>(a.data());
        auto* bp = reinterpret_cast<int64_t*>(b.data());
        for (int64_t i = 0; i < numel(xa); ++i) ap[i] = small(rng);
        for (int64_t i = 0; i < numel(xb); ++i) {
          const int64_t v = small(rng);
          bp[i] = v == 0 ? 3 : v;
        }
        ap[0] = kMin, bp[0] = -1;  // MIN / -1 wraps, MIN % -1 is 0
        ap[1] = kMax, bp[1] = 2;
        ap[2] = -7, bp[2] = 2;  // truncating division, signed remainders
        ap[3] = 7, bp[3] = -2;
        run_two(*k, {a.data(), b.data()}, out.data());
        const auto* yp = reinterpret_cast<const int64_t*>(out.data());
        int bad = 0;
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t s = 0; s < 7; ++s)
            for (int64_t c = 0; c < 33; ++c)
              bad +=
                  yp[(r * 7 + s) * 33 + c] != arith_ref(op, ap[r * 33 + c], bp[s * 33 + c], fmod);
        CHECK(bad == 0);
        if (op == TypedOp::div || op == TypedOp::mod) {
          bp[40] = 0;
          CHECK_THROWS_WITH(run_two(*k, {a.data(), b.data()}, out.data()),
                            doctest::Contains("integer division by zero"));
        }
      }
}

TEST_CASE("typed eltwise: int64 Expand of a broadcast element and of a row") {
  for (Isa isa : test::glue_isas())
    for (const Shape& x : {Shape{1, 1, 1, 1, 1, 1, 1, 1}, Shape{1, 1, 1, 1, 1, 1, 1, 5}}) {
      TypedEltwiseProblem p;
      p.op = TypedOp::expand;
      p.y = {1, 1, 1, 1, 1, 1, 4, 5};
      p.x = {x};
      p.x_type = {DType::i64};
      p.y_type = DType::i64;
      std::string why;
      auto k = create_typed_eltwise_kernel(p, isa, &why);
      REQUIRE_MESSAGE(k, why);
      GuardedBuf a{10}, out{40};
      auto* ap = reinterpret_cast<int64_t*>(a.data());
      for (int i = 0; i < 5; ++i) ap[i] = int64_t(i) * 1000000007LL;
      run_two(*k, {a.data()}, out.data());
      const auto* yp = reinterpret_cast<const int64_t*>(out.data());
      int bad = 0;
      for (int i = 0; i < 20; ++i) bad += yp[i] != ap[x[7] == 1 ? 0 : i % 5];
      CHECK(bad == 0);
    }
}

}  // namespace
}  // namespace kiln
