// CumSum of a row-major f32 / int64 tensor viewed as [outer, n, inner], over n (glue.h):
// inclusive or exclusive, forward or reversed. Where inner > 1 each step adds a row of inner
// positions to the previous output row (loops the compiler vectorises, compiled per ISA with a
// target attribute); where inner is 1 an f32 row is scanned 16 lanes at a time on AVX-512 (a
// log-step in-register prefix sum plus the running carry), other rows element by element.
// Sums in the tensor's type, as ONNX Runtime does (the reference kernel sums f32 in double).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "jit/glue/axis_tiles.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

#define KILN_INLINE [[gnu::always_inline]] inline

constexpr int64_t kScanStrip = 1024;  // inner positions per tile

// Rows [0, n) of a strip of w positions, in scan order: row r(t) = reverse ? n - 1 - t : t;
// inclusive y[r(t)] = y[r(t - 1)] + x[r(t)], exclusive y[r(t)] = y[r(t - 1)] + x[r(t - 1)].
template <class T>
KILN_INLINE void scan_strip(const T* x, T* y, int64_t n, int64_t inner, int64_t w, bool exclusive,
                            bool reverse) {
  const int64_t d = reverse ? -inner : inner;
  const T* xr = x + (reverse ? (n - 1) * inner : 0);
  T* yr = y + (reverse ? (n - 1) * inner : 0);
  for (int64_t i = 0; i < w; ++i) yr[i] = exclusive ? T(0) : xr[i];
  for (int64_t t = 1; t < n; ++t) {
    const T* __restrict xs = xr + (exclusive ? (t - 1) * d : t * d);
    const T* __restrict prev = yr + (t - 1) * d;
    T* __restrict cur = yr + t * d;
    for (int64_t i = 0; i < w; ++i) cur[i] = prev[i] + xs[i];
  }
}

template <class T>
__attribute__((target("avx2,fma"))) void scan_strip_avx2(const T* x, T* y, int64_t n, int64_t inner,
                                                         int64_t w, bool exclusive, bool reverse) {
  scan_strip(x, y, n, inner, w, exclusive, reverse);
}
template <class T>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void scan_strip_avx512(
    const T* x, T* y, int64_t n, int64_t inner, int64_t w, bool exclusive, bool reverse) {
  scan_strip(x, y, n, inner, w, exclusive, reverse);
}

// One contiguous row, element by element (int64 rows, and f32 rows without AVX-512).
template <class T>
void scan_row(const T* x, T* y, int64_t n, bool exclusive, bool reverse) {
  T acc = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t j = reverse ? n - 1 - t : t;
    const T v = x[j];
    y[j] = exclusive ? acc : acc + v;
    acc += v;
  }
}

// v's lanes moved K places towards the scan's end (up; down when reversed), zeros shifted in.
template <int K>
KILN_INLINE __attribute__((target("avx512f"))) __m512 shift_lanes(__m512 v, bool reverse) {
  const __m512i x = _mm512_castps_si512(v), z = _mm512_setzero_si512();
  return _mm512_castsi512_ps(reverse ? _mm512_alignr_epi32(z, x, K)
                                     : _mm512_alignr_epi32(x, z, 16 - K));
}

// One contiguous f32 row on AVX-512: chunks of 16 in scan order, each scanned in-register. An
// exclusive scan is the inclusive scan of x shifted by one element towards the scan's end (the
// element shifted in at the start is 0): the chunk loads from x + j - 1 (+ 1 reversed) with the
// lane that would read outside the row masked off.
__attribute__((target("avx512f"))) void scan_row_avx512(const float* x, float* y, int64_t n,
                                                        bool exclusive, bool reverse) {
  const __m512 zero = _mm512_setzero_ps();
  const int64_t s = exclusive ? (reverse ? 1 : -1) : 0;  // load offset
  __m512 carry = zero;
  const int64_t chunks = (n + 15) / 16;
  for (int64_t c = 0; c < chunks; ++c) {
    // Forward chunks start at 16c; reversed ones end at n - 16c (the first may start below 0).
    const int64_t j = reverse ? n - 16 * (c + 1) : 16 * c;
    uint32_t m = 0xffff;
    if (j < 0) m &= 0xffffu << unsigned(-j);               // lanes before the row
    if (j + 16 > n) m &= 0xffffu >> unsigned(j + 16 - n);  // lanes after it
    uint32_t lm = m;                                       // lanes whose x[j + lane + s] exists
    if (j + s < 0) lm &= 0xffffu << unsigned(-(j + s));
    if (j + s + 16 > n) lm &= 0xffffu >> unsigned(std::min<int64_t>(16, j + s + 16 - n));
    // (Masked-off lanes are not read: the address may lie outside the row.)
    __m512 v = _mm512_maskz_loadu_ps(
        __mmask16(lm), reinterpret_cast<const float*>(reinterpret_cast<intptr_t>(x) +
                                                      (j + s) * int64_t(sizeof(float))));
    // Lane l += the lanes before it in scan order (below it; above it reversed).
    v = _mm512_add_ps(v, shift_lanes<1>(v, reverse));
    v = _mm512_add_ps(v, shift_lanes<2>(v, reverse));
    v = _mm512_add_ps(v, shift_lanes<4>(v, reverse));
    v = _mm512_add_ps(v, shift_lanes<8>(v, reverse));
    v = _mm512_add_ps(v, carry);
    _mm512_mask_storeu_ps(
        reinterpret_cast<float*>(reinterpret_cast<intptr_t>(y) + j * int64_t(sizeof(float))),
        __mmask16(m), v);
    carry = _mm512_permutexvar_ps(_mm512_set1_epi32(reverse ? 0 : 15), v);
  }
}

class CumSumKernel final : public Kernel {
 public:
  CumSumKernel(const CumSumProblem& p, Isa isa, std::string name)
      : p_(p), isa_(isa), name_(std::move(name)), tiles_(p.outer, p.n, p.inner, kScanStrip) {}

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_.count(); }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    if (p_.int64)
      run_typed(reinterpret_cast<const int64_t*>(a.src[0]), reinterpret_cast<int64_t*>(a.dst[0]),
                begin, end);
    else
      run_typed(a.src[0], a.dst[0], begin, end);
  }

 private:
  template <class T>
  void run_typed(const T* x, T* y, int64_t begin, int64_t end) const {
    const int64_t n = p_.n, inner = p_.inner;
    for (int64_t t = begin; t < end; ++t) {
      const AxisTiles::Tile tl = tiles_[t];
      if (inner == 1) {
        for (int64_t o = tl.o0; o < tl.o1; ++o) {
          if constexpr (std::is_same_v<T, float>) {
            if (isa_ == Isa::avx512) {
              scan_row_avx512(x + o * n, y + o * n, n, p_.exclusive, p_.reverse);
              continue;
            }
          }
          scan_row(x + o * n, y + o * n, n, p_.exclusive, p_.reverse);
        }
        continue;
      }
      const int64_t w = tl.i1 - tl.i0, off = tl.o0 * n * inner + tl.i0;
      (isa_ == Isa::avx512 ? scan_strip_avx512<T> : scan_strip_avx2<T>)(x + off, y + off, n, inner,
                                                                        w, p_.exclusive,
                                                                        p_.reverse);
    }
  }

  CumSumProblem p_;
  Isa isa_;
  std::string name_;
  AxisTiles tiles_;
};

}  // namespace

std::unique_ptr<Kernel> create_cumsum_kernel(const CumSumProblem& p, Isa isa,
                                             std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs AVX2 or AVX-512");
  if (p.outer < 1 || p.n < 1 || p.inner < 1) return decline(why_not, "an empty tensor");
  return std::make_unique<CumSumKernel>(p, isa,
                                        std::string("cumsum") + (p.exclusive ? "_excl" : "") +
                                            (p.reverse ? "_rev" : "") +
                                            (p.int64 ? "_s64__" : "_f32__") + isa_name(isa));
}

}  // namespace kiln
