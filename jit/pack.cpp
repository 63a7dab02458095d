#include "jit/pack.h"

#include <immintrin.h>

#include "jit/cpu.h"

namespace kiln {
namespace {

// 8 x 8 tile through registers: 8 row loads, the classic unpack/shuffle/permute transpose, 8
// row stores. Only called where the CPU has AVX2 (every JIT ISA).
__attribute__((target("avx2,fma"))) void transpose8x8(ModelFloats s, int64_t ls, float* d,
                                                      int64_t ld, float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i)  // unaligned integer loads: s may sit at any byte address
    r[i] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_loadu_si256(
                             static_cast<const __m256i_u*>((s + i * ls).bytes()))),
                         a);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(d + i * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(d + (i + 4) * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

void transpose_scalar(ModelFloats src, int64_t src_ld, int64_t src_step, int64_t rows, int64_t cols,
                      float* dst, int64_t dst_ld, float alpha) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * dst_ld + r] = alpha * src[r * src_ld + c * src_step];
}

}  // namespace

void pack_transposed(ModelFloats src, int64_t src_ld, int64_t src_step, int64_t rows, int64_t cols,
                     float* dst, int64_t dst_ld, float alpha) {
  constexpr int64_t T = 16;
  const bool avx2 = src_step == 1 && detect_isa() >= Isa::avx2;
  for (int64_t r0 = 0; r0 < rows; r0 += T) {
    const int64_t nr = rows - r0 < T ? rows - r0 : T;
    for (int64_t c0 = 0; c0 < cols; c0 += T) {
      const int64_t nc = cols - c0 < T ? cols - c0 : T;
      const ModelFloats s = src + r0 * src_ld + c0 * src_step;
      float* d = dst + c0 * dst_ld + r0;
      if (avx2 && nr == T && nc == T) {
        for (int64_t i = 0; i < T; i += 8)
          for (int64_t j = 0; j < T; j += 8)
            transpose8x8(s + i * src_ld + j, src_ld, d + j * dst_ld + i, dst_ld, alpha);
      } else {
        transpose_scalar(s, src_ld, src_step, nr, nc, d, dst_ld, alpha);
      }
    }
  }
}

}  // namespace kiln
