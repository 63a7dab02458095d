// f32 <-> bf16 conversion between nChw16c and nChw16c_bf16: the two layouts order elements
// identically, so the conversion is a flat pass (pad lanes included: they convert to finite
// values, which is all a blocked layout promises). f32 -> bf16 rounds to nearest even with
// vcvtneps2bf16 (which flushes subnormals to zero, like the bf16 kernels' own stores);
// bf16 -> f32 is exact. Plain loops compiled for AVX-512 with target attributes.
#include <immintrin.h>

#include <algorithm>

#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16(const float* s,
                                                                             uint16_t* d,
                                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + i + 16), _mm512_loadu_ps(s + i));
    _mm512_storeu_si512(d + i, reinterpret_cast<__m512i>(v));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = __mmask16(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + i));
    _mm256_mask_storeu_epi16(d + i, m, reinterpret_cast<__m256i>(v));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void from_bf16(const uint16_t* s, float* d,
                                                                    int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = __mmask16(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_ps(d + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

class Bf16ConvertKernel : public Kernel {
 public:
  Bf16ConvertKernel(int64_t elems, bool to_bf16, std::string name)
      : n_(elems), to_(to_bf16), name_(std::move(name)) {
    // ~16 tiles for 2 threads, none under 16K elements, in whole cache lines of both sides.
    chunk_ = glue::chunk_size(n_, 32, 16, 16384);
  }
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return (n_ + chunk_ - 1) / chunk_; }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    const int64_t i0 = b * chunk_, i1 = std::min(n_, e * chunk_);
    if (i1 <= i0) return;
    if (to_)
      to_bf16(a.src[0] + i0, reinterpret_cast<uint16_t*>(a.dst[0]) + i0, i1 - i0);
    else
      from_bf16(reinterpret_cast<const uint16_t*>(a.src[0]) + i0, a.dst[0] + i0, i1 - i0);
  }

 private:
  int64_t n_, chunk_ = 1;
  bool to_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Kernel> create_bf16_convert_kernel(const Shape& s, Layout from, Layout to,
                                                   std::string* why_not) {
  const bool to_bf16 = from == Layout::nChw16c && to == Layout::nChw16c_bf16;
  if (!to_bf16 && !(from == Layout::nChw16c_bf16 && to == Layout::nChw16c)) {
    if (why_not) *why_not = "converts between nChw16c and nChw16c_bf16 only";
    return nullptr;
  }
  if (!host_cpu().avx512_bf16) {
    if (why_not) *why_not = "needs avx512_bf16";
    return nullptr;
  }
  return std::make_unique<Bf16ConvertKernel>(
      layout_elems(from, s), to_bf16,
      std::string("reorder_") + layout_name(from) + "_to_" + layout_name(to) + "__avx512");
}

}  // namespace kiln
