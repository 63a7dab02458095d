// ArgMax / ArgMin / Hardmax over the middle dim of a row-major f32 tensor [outer, n, inner]
// (glue.h). Where inner > 1 the running extremes of a strip of inner positions sit in
// arrays the compiler vectorises (one select per element and step of n); where inner is 1 a
// row is scanned for its extreme value, then for the first (or last) index holding it. Each
// loop is compiled per ISA with a target attribute. Semantics as the reference kernels
// (runtime/ref/ref_reduce.cpp): numpy's, a NaN is the extreme.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "jit/glue/axis_tiles.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

#define KILN_INLINE [[gnu::always_inline]] inline

constexpr int64_t kStrip = 256;  // inner positions per strip (the running arrays: 3 KiB)

// "v replaces the current extreme b": a NaN b stays unless v is a NaN too and the last is
// wanted; a NaN v wins; else the strict (or, for the last, non-strict) comparison.
template <bool kMax, bool kLast>
KILN_INLINE bool better(float v, float b) {
  const bool vn = v != v, bn = b != b;
  const bool cmp = kLast ? (kMax ? v >= b : v <= b) : (kMax ? v > b : v < b);
  return bn ? (kLast && vn) : (vn || cmp);
}

// Strip [i0, i0 + w) of row o (inner > 1): idx[i] = the extreme's index.
template <bool kMax, bool kLast>
KILN_INLINE void strip_body(const float* x, int64_t n, int64_t inner, int64_t w, float* best,
                            int64_t* idx) {
  for (int64_t i = 0; i < w; ++i) {
    best[i] = x[i];
    idx[i] = 0;
  }
  for (int64_t k = 1; k < n; ++k) {
    const float* __restrict p = x + k * inner;
    for (int64_t i = 0; i < w; ++i) {
      const bool b = better<kMax, kLast>(p[i], best[i]);
      best[i] = b ? p[i] : best[i];
      idx[i] = b ? k : idx[i];
    }
  }
}

// A contiguous row (inner == 1): the extreme value, then its first / last index.
template <bool kMax, bool kLast>
KILN_INLINE int64_t row_body(const float* x, int64_t n) {
  bool nan = false;
  float m = x[0];
  for (int64_t k = 0; k < n; ++k) {
    nan |= x[k] != x[k];
    m = kMax ? (x[k] > m ? x[k] : m) : (x[k] < m ? x[k] : m);
  }
  if (kLast) {
    for (int64_t k = n - 1; k > 0; --k)
      if (nan ? x[k] != x[k] : x[k] == m) return k;
    return 0;
  }
  for (int64_t k = 0; k < n; ++k)
    if (nan ? x[k] != x[k] : x[k] == m) return k;
  return 0;
}

using StripFn = void (*)(const float*, int64_t, int64_t, int64_t, float*, int64_t*);
using RowFn = int64_t (*)(const float*, int64_t);

template <bool kMax, bool kLast>
__attribute__((target("avx2,fma"))) void strip_avx2(const float* x, int64_t n, int64_t inner,
                                                    int64_t w, float* best, int64_t* idx) {
  strip_body<kMax, kLast>(x, n, inner, w, best, idx);
}
template <bool kMax, bool kLast>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void strip_avx512(
    const float* x, int64_t n, int64_t inner, int64_t w, float* best, int64_t* idx) {
  strip_body<kMax, kLast>(x, n, inner, w, best, idx);
}
template <bool kMax, bool kLast>
__attribute__((target("avx2,fma"))) int64_t row_avx2(const float* x, int64_t n) {
  return row_body<kMax, kLast>(x, n);
}
template <bool kMax, bool kLast>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) int64_t row_avx512(const float* x,
                                                                                 int64_t n) {
  return row_body<kMax, kLast>(x, n);
}

template <bool kMax, bool kLast>
void pick(Isa isa, StripFn* s, RowFn* r) {
  *s = isa == Isa::avx512 ? &strip_avx512<kMax, kLast> : &strip_avx2<kMax, kLast>;
  *r = isa == Isa::avx512 ? &row_avx512<kMax, kLast> : &row_avx2<kMax, kLast>;
}

class ArgReduceKernel final : public Kernel {
 public:
  ArgReduceKernel(const ArgReduceProblem& p, Isa isa, std::string name)
      : p_(p), name_(std::move(name)), tiles_(p.outer, p.n, p.inner, kStrip) {
    if (p.max)
      p.last ? pick<true, true>(isa, &strip_, &row_) : pick<true, false>(isa, &strip_, &row_);
    else
      p.last ? pick<false, true>(isa, &strip_, &row_) : pick<false, false>(isa, &strip_, &row_);
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_.count(); }
  int64_t scratch_bytes() const override {
    return p_.inner == 1 ? 0 : kStrip * int64_t(sizeof(float) + sizeof(int64_t));
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const float* x = a.src[0];
    for (int64_t t = begin; t < end; ++t) {
      const AxisTiles::Tile tl = tiles_[t];
      if (p_.inner == 1) {
        for (int64_t o = tl.o0; o < tl.o1; ++o) put(a, o, 0, 1, nullptr, row_(x + o * p_.n, p_.n));
        continue;
      }
      const int64_t w = tl.i1 - tl.i0;
      float* best = scratch_floats(a);
      auto* idx = reinterpret_cast<int64_t*>(best + kStrip);
      strip_(x + tl.o0 * p_.n * p_.inner + tl.i0, p_.n, p_.inner, w, best, idx);
      put(a, tl.o0, tl.i0, w, idx, 0);
    }
  }

 private:
  // Writes positions [i0, i0 + w) of row o: indices idx (or the one index `at` when idx is null).
  void put(const KernelArgs& a, int64_t o, int64_t i0, int64_t w, const int64_t* idx,
           int64_t at) const {
    if (!p_.hardmax) {
      auto* y = reinterpret_cast<int64_t*>(a.dst[0]) + o * p_.inner + i0;
      for (int64_t i = 0; i < w; ++i) y[i] = idx ? idx[i] : at;
      return;
    }
    float* y = a.dst[0] + o * p_.n * p_.inner + i0;
    if (w == p_.inner)  // the whole [n, inner] block is contiguous
      std::memset(y, 0, size_t(p_.n * w) * sizeof(float));
    else
      for (int64_t k = 0; k < p_.n; ++k)
        std::memset(y + k * p_.inner, 0, size_t(w) * sizeof(float));
    for (int64_t i = 0; i < w; ++i) y[(idx ? idx[i] : at) * p_.inner + i] = 1.f;
  }

  ArgReduceProblem p_;
  std::string name_;
  StripFn strip_ = nullptr;
  RowFn row_ = nullptr;
  AxisTiles tiles_;
};

}  // namespace

std::unique_ptr<Kernel> create_arg_reduce_kernel(const ArgReduceProblem& p, Isa isa,
                                                 std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs AVX2 or AVX-512");
  if (p.outer < 0 || p.n < 1 || p.inner < 1) return decline(why_not, "an empty reduced dim");
  const std::string op = p.hardmax ? "hardmax" : p.max ? "argmax" : "argmin";
  return std::make_unique<ArgReduceKernel>(p, isa,
                                           op + (p.last ? "_last" : "") + "_f32__" + isa_name(isa));
}

}  // namespace kiln
