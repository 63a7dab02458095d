// Conversions between nChw16c and its narrow forms, nChw16c_bf16 and nChw16c_u8: the layouts
// order elements identically, so each is a flat pass (pad lanes included: they convert to
// finite values, which is all a blocked layout promises). f32 -> bf16 rounds to nearest even
// with vcvtneps2bf16 (which flushes subnormals to zero, like the bf16 kernels' own stores);
// bf16 -> f32 is exact. f32 <-> uint8 uses the value's scale and zero point: quantizing is
// graph/quant.h's quantize_value (x / scale, round half to even, + zero, saturate to [0, 255]),
// dequantizing its dequantize_value ((q - zero) * scale). Plain loops compiled for AVX-512
// with target attributes.
#include <immintrin.h>

#include <algorithm>

#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

// Each pass converts elements [i0, i0 + n) of src into dst (q: the uint8 grid, else unused).
using FlatPass = void (*)(const void* src, void* dst, int64_t i0, int64_t n, const U8Quant& q);

inline __mmask16 tail_mask(int64_t left) {
  return __mmask16(left >= 16 ? 0xffff : (1u << left) - 1);
}

// (GCC 12 warns about the `__Y = __Y` of its own _mm512_undefined_* inside the intrinsics:
// its bug 105593, a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16(const void* src,
                                                                             void* dst, int64_t i0,
                                                                             int64_t n,
                                                                             const U8Quant&) {
  const float* s = static_cast<const float*>(src) + i0;
  uint16_t* d = static_cast<uint16_t*>(dst) + i0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + i + 16), _mm512_loadu_ps(s + i));
    _mm512_storeu_si512(d + i, reinterpret_cast<__m512i>(v));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + i));
    _mm256_mask_storeu_epi16(d + i, m, reinterpret_cast<__m256i>(v));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void from_bf16(const void* src, void* dst,
                                                                    int64_t i0, int64_t n,
                                                                    const U8Quant&) {
  const uint16_t* s = static_cast<const uint16_t*>(src) + i0;
  float* d = static_cast<float*>(dst) + i0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_ps(d + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void to_u8(const void* src, void* dst,
                                                                int64_t i0, int64_t n,
                                                                const U8Quant& q) {
  const float* s = static_cast<const float*>(src) + i0;
  uint8_t* d = static_cast<uint8_t*>(dst) + i0;
  const __m512 sc = _mm512_set1_ps(q.scale), z = _mm512_set1_ps(q.zero);
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, s + i), sc);
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm_mask_storeu_epi8(d + i, m, _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v)));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void from_u8(const void* src, void* dst,
                                                                  int64_t i0, int64_t n,
                                                                  const U8Quant& q) {
  const uint8_t* s = static_cast<const uint8_t*>(src) + i0;
  float* d = static_cast<float*>(dst) + i0;
  const __m512 sc = _mm512_set1_ps(q.scale), z = _mm512_set1_ps(q.zero);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, s + i)));
    _mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(_mm512_sub_ps(v, z), sc));
  }
}
#pragma GCC diagnostic pop

class FlatConvertKernel : public Kernel {
 public:
  FlatConvertKernel(Layout from, Layout to, const Shape& s, FlatPass pass, U8Quant q)
      : n_(layout_elems(from, s)),
        pass_(pass),
        q_(q),
        name_(std::string("reorder_") + layout_name(from) + "_to_" + layout_name(to) + "__avx512") {
    // ~16 tiles for 2 threads, none under 16K elements, in whole cache lines of both sides.
    chunk_ = glue::chunk_size(n_, 64, 16, 16384);
  }
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return (n_ + chunk_ - 1) / chunk_; }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    const int64_t i0 = b * chunk_, i1 = std::min(n_, e * chunk_);
    if (i1 > i0) pass_(a.src[0], a.dst[0], i0, i1 - i0, q_);
  }

 private:
  int64_t n_, chunk_ = 1;
  FlatPass pass_;
  U8Quant q_;
  std::string name_;
};

std::unique_ptr<Kernel> no(std::string* why_not, const char* why) {
  if (why_not) *why_not = why;
  return nullptr;
}

}  // namespace

std::unique_ptr<Kernel> create_bf16_convert_kernel(const Shape& s, Layout from, Layout to,
                                                   std::string* why_not) {
  const bool to_bf16_ = from == Layout::nChw16c && to == Layout::nChw16c_bf16;
  if (!to_bf16_ && !(from == Layout::nChw16c_bf16 && to == Layout::nChw16c))
    return no(why_not, "converts between nChw16c and nChw16c_bf16 only");
  if (!host_cpu().avx512_bf16) return no(why_not, "needs avx512_bf16");
  return std::make_unique<FlatConvertKernel>(from, to, s, to_bf16_ ? to_bf16 : from_bf16,
                                             U8Quant{});
}

std::unique_ptr<Kernel> create_u8_convert_kernel(const Shape& s, Layout from, Layout to,
                                                 const U8Quant& q, std::string* why_not) {
  const bool to_u8_ = from == Layout::nChw16c && to == Layout::nChw16c_u8;
  if (!to_u8_ && !(from == Layout::nChw16c_u8 && to == Layout::nChw16c))
    return no(why_not, "converts between nChw16c and nChw16c_u8 only");
  if (host_cpu().isa != Isa::avx512) return no(why_not, "needs avx512");  // (F + VL + BW + DQ)
  return std::make_unique<FlatConvertKernel>(from, to, s, to_u8_ ? to_u8 : from_u8, q);
}

void quantize_u8(const float* s, int64_t n, uint8_t* d, const U8Quant& q) {
  to_u8(s, d, 0, n, q);
}

}  // namespace kiln
