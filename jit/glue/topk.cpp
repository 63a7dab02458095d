// TopK of a row-major f32 tensor viewed as [outer, n, inner], over n (glue.h). Each row (a
// contiguous one, or a column of inner positions gathered into scratch) keeps its best k, in a
// sorted buffer (k <= 64) or a heap whose top is the worst held; a vector scan compares the row
// against that worst value and stops only at elements that beat it, so a long row (the top-5 of
// 1000 classes, the top-1000 of a detector's 3M scores) costs about one compare per element.
// Semantics as the reference kernel (runtime/ref/ref_reduce.cpp): sorted best first, ties to the
// lower index, a NaN is the extreme.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "jit/glue/axis_tiles.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

constexpr int64_t kMaxSortedK = 64;  // larger k: a heap of the best k instead of a sorted buffer
constexpr int64_t kTopKStrip = 16;   // inner positions per tile (columns gathered one by one)

// The first index j >= from whose x[j] may beat thr (v > thr, or v < thr for the smallest; a NaN
// always stops the scan), else n. Never skips a candidate: the caller decides exactly.
__attribute__((target("avx512f"))) int64_t topk_next_avx512(const float* x, int64_t from, int64_t n,
                                                            float thr, bool largest) {
  const __m512 t = _mm512_set1_ps(thr);
  int64_t j = from;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    const __mmask16 m =
        largest ? _mm512_cmp_ps_mask(v, t, _CMP_NLE_UQ) : _mm512_cmp_ps_mask(v, t, _CMP_NGE_UQ);
    if (m) return j + __builtin_ctz(m);
  }
  for (; j < n; ++j)
    if (largest ? !(x[j] <= thr) : !(x[j] >= thr)) return j;
  return n;
}

__attribute__((target("avx2"))) int64_t topk_next_avx2(const float* x, int64_t from, int64_t n,
                                                       float thr, bool largest) {
  const __m256 t = _mm256_set1_ps(thr);
  int64_t j = from;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    const int m = _mm256_movemask_ps(largest ? _mm256_cmp_ps(v, t, _CMP_NLE_UQ)
                                             : _mm256_cmp_ps(v, t, _CMP_NGE_UQ));
    if (m) return j + __builtin_ctz(unsigned(m));
  }
  for (; j < n; ++j)
    if (largest ? !(x[j] <= thr) : !(x[j] >= thr)) return j;
  return n;
}

using NextFn = int64_t (*)(const float*, int64_t, int64_t, float, bool);

// Whether value a (at a lower index than b's, or equal) ranks before b: a NaN first, then the
// larger (smaller) value; equal values keep their index order.
inline bool ranks_before(float a, float b, bool largest) {
  if (a != a || b != b) return a != a && b == b;
  return largest ? a > b : a < b;
}

struct TopKEntry {
  float v;
  int64_t i;
};

class TopKKernel final : public Kernel {
 public:
  TopKKernel(const TopKProblem& p, Isa isa, std::string name)
      : p_(p),
        name_(std::move(name)),
        next_(isa == Isa::avx512 ? &topk_next_avx512 : &topk_next_avx2),
        heap_(p.k > kMaxSortedK),
        tiles_(p.outer, p.n, p.inner, kTopKStrip) {}

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_.count(); }
  int64_t scratch_bytes() const override {
    const int64_t column = p_.inner == 1 ? 0 : p_.n * 4;     // a gathered column
    const int64_t work = p_.k * int64_t(sizeof(TopKEntry));  // the best k
    return (column + 63) / 64 * 64 + work;
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const float* x = a.src[0];
    auto* col = static_cast<float*>(a.scratch);
    void* work = static_cast<char*>(a.scratch) + (p_.inner == 1 ? 0 : (p_.n * 4 + 63) / 64 * 64);
    for (int64_t t = begin; t < end; ++t) {
      const AxisTiles::Tile tl = tiles_[t];
      if (p_.inner == 1) {
        for (int64_t o = tl.o0; o < tl.o1; ++o) row(a, x + o * p_.n, o * p_.k, 1, work);
        continue;
      }
      const float* xo = x + tl.o0 * p_.n * p_.inner;
      for (int64_t i = tl.i0; i < tl.i1; ++i) {
        for (int64_t j = 0; j < p_.n; ++j) col[j] = xo[j * p_.inner + i];
        row(a, col, tl.o0 * p_.k * p_.inner + i, p_.inner, work);
      }
    }
  }

 private:
  // The best k of row x (n contiguous floats), written from element `at` of the outputs with
  // stride `step`.
  void row(const KernelArgs& a, const float* x, int64_t at, int64_t step, void* work) const {
    const int64_t n = p_.n, k = p_.k;
    const bool largest = p_.largest;
    float* yv = a.dst[0];
    auto* yi = p_.indices ? reinterpret_cast<int64_t*>(a.dst[1]) : nullptr;
    auto* best = static_cast<TopKEntry*>(work);
    // TopKEntry a ranks before b: a NaN first, then the larger (smaller) value, then the lower
    // index.
    auto better = [largest](const TopKEntry& a, const TopKEntry& b) {
      return ranks_before(a.v, b.v, largest) || (!ranks_before(b.v, a.v, largest) && a.i < b.i);
    };
    int64_t have = 0;
    if (!heap_) {
      // A buffer sorted best first; element j (a higher index than every one held) enters if it
      // ranks before the worst held.
      auto insert = [&](int64_t j) {
        const TopKEntry e{x[j], j};
        if (have == k && !better(e, best[k - 1])) return;
        int64_t p = have < k ? have++ : k - 1;
        for (; p > 0 && better(e, best[p - 1]); --p) best[p] = best[p - 1];
        best[p] = e;
      };
      for (int64_t j = 0; j < k; ++j) insert(j);
      for (int64_t j = k; (j = next_(x, j, n, best[k - 1].v, largest)) < n; ++j) insert(j);
    } else {
      // A heap whose top is the worst held: a candidate that ranks before it replaces it.
      for (int64_t j = 0; j < k; ++j) best[j] = {x[j], j};
      std::make_heap(best, best + k, better);
      for (int64_t j = k; (j = next_(x, j, n, best[0].v, largest)) < n; ++j) {
        const TopKEntry e{x[j], j};
        if (!better(e, best[0])) continue;
        std::pop_heap(best, best + k, better);
        best[k - 1] = e;
        std::push_heap(best, best + k, better);
      }
      std::sort_heap(best, best + k, better);
    }
    for (int64_t j = 0; j < k; ++j) {
      if (yv) yv[at + j * step] = best[j].v;
      if (yi) yi[at + j * step] = best[j].i;
    }
  }

  TopKProblem p_;
  std::string name_;
  NextFn next_;
  bool heap_;
  AxisTiles tiles_;
};

}  // namespace

std::unique_ptr<Kernel> create_topk_kernel(const TopKProblem& p, Isa isa, std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs AVX2 or AVX-512");
  if (p.outer < 1 || p.n < 1 || p.inner < 1 || p.k < 1 || p.k > p.n)
    return decline(why_not, "an empty tensor or k outside [1, n]");
  return std::make_unique<TopKKernel>(
      p, isa, std::string(p.largest ? "topk_max" : "topk_min") + "_f32__" + isa_name(isa));
}

}  // namespace kiln
