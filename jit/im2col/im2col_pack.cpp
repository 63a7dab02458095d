#include "jit/im2col/im2col_pack.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "jit/pack.h"

namespace kiln::im2col {
namespace {

// The family only runs on AVX2 (or better) CPUs (init_im2col_conf checks the isa against the
// CPU), so its run-time packing is compiled for AVX2: these loops are most of its overhead.
#define KILN_AVX2 __attribute__((target("avx2,fma")))

// n floats in 8-wide vectors; a run that is not a whole number of vectors ends with one
// vector overlapping the previous (so no scalar remainder loop), short runs go one by one.
KILN_AVX2 inline void zero(float* d, int64_t n) {
  if (n < 8) {
    for (int64_t i = 0; i < n; ++i) d[i] = 0.f;
    return;
  }
  const __m256 z = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, z);
  if (i < n) _mm256_storeu_ps(d + n - 8, z);
}

KILN_AVX2 inline void copy(float* d, const float* s, int64_t n) {
  if (n < 8) {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(s + i), b = _mm256_loadu_ps(s + i + 8);
    const __m256 c = _mm256_loadu_ps(s + i + 16), e = _mm256_loadu_ps(s + i + 24);
    _mm256_storeu_ps(d + i, a);
    _mm256_storeu_ps(d + i + 8, b);
    _mm256_storeu_ps(d + i + 16, c);
    _mm256_storeu_ps(d + i + 24, e);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
  if (i < n) _mm256_storeu_ps(d + n - 8, _mm256_loadu_ps(s + n - 8));
}

// The even elements of 16 floats at s, in order.
KILN_AVX2 inline __m256 evens(const float* s) {
  const __m256 a = _mm256_loadu_ps(s), b = _mm256_loadu_ps(s + 8);
  const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 a4 a6 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8));
}

// d[i] = s[2 i], reading nothing past s[2 n - 2]: full vectors while their 16-float load
// stays inside, then one last vector for d[n - 8 ..] from the odd lanes of s[2 n - 17 ..].
KILN_AVX2 inline void gather2(float* d, const float* s, int64_t n) {
  if (n <= 8) {
    for (int64_t i = 0; i < n; ++i) d[i] = s[2 * i];
    return;
  }
  for (int64_t i = 0; i + 8 < n; i += 8) _mm256_storeu_ps(d + i, evens(s + 2 * i));
  const __m256 a = _mm256_loadu_ps(s + 2 * n - 17), b = _mm256_loadu_ps(s + 2 * n - 9);
  const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));  // a1 a3 b1 b3 a5 a7 b5 b7
  _mm256_storeu_ps(d + n - 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xd8)));
}

// d[i] = s[i * stride].
KILN_AVX2 inline void gather(float* d, const float* s, int64_t n, int64_t stride) {
  if (stride == 1) {
    copy(d, s, n);
  } else if (stride == 2) {
    gather2(d, s, n);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * stride];
  }
}

// First output column whose input column ow * s - pl + off is >= 0, and one past the last
// whose input column is < iw.
inline int64_t first_valid(int64_t off, int64_t pl, int64_t s) {
  const int64_t need = pl - off;  // ow * s >= need
  return need <= 0 ? 0 : (need + s - 1) / s;
}
inline int64_t end_valid(int64_t off, int64_t pl, int64_t s, int64_t iw) {
  const int64_t lim = iw + pl - off;  // ow * s < lim
  return lim <= 0 ? 0 : (lim - 1) / s + 1;
}

}  // namespace

KILN_AVX2 void pack_rows_nhwc(const Im2colConf& c, const float* src, int64_t pix0, int64_t npix,
                              float* out) {
  const ConvProblem& p = c.p;
  // A row holds IC channels per tap (a conv group's); input pixels are SP floats apart.
  const int64_t IC = c.icg, SP = p.ic, KWC = p.kw * IC;
  int64_t oh = pix0 / p.ow, ow = pix0 % p.ow;
  for (int64_t r = 0; r < npix; ++r) {
    float* row = out + r * c.lda;
    const int64_t iw0 = ow * p.sw - p.pl;
    // Valid kernel columns: 0 <= iw0 + kw * dw < iw (no divisions in the dense case: they
    // would cost more than a small pixel's copies).
    int64_t kw_lo, kw_hi;
    if (p.dw == 1) {
      kw_lo = std::clamp<int64_t>(-iw0, 0, p.kw);
      kw_hi = std::clamp<int64_t>(p.iw - iw0, kw_lo, p.kw);
    } else {
      kw_lo = std::min(p.kw, iw0 >= 0 ? 0 : (-iw0 + p.dw - 1) / p.dw);
      kw_hi = std::max(kw_lo, std::min(p.kw, p.iw - iw0 <= 0 ? 0 : (p.iw - iw0 - 1) / p.dw + 1));
    }
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      float* d = row + kh * KWC;
      const int64_t ih = oh * p.sh - p.pt + kh * p.dh;
      if (ih < 0 || ih >= p.ih) {
        zero(d, KWC);
        continue;
      }
      const float* s = src + ih * p.iw * SP;  // the input row
      zero(d, kw_lo * IC);
      if (p.dw == 1 && IC == SP) {  // the taps' pixels are one run of the row
        if (kw_hi > kw_lo) copy(d + kw_lo * IC, s + (iw0 + kw_lo) * IC, (kw_hi - kw_lo) * IC);
      } else {
        for (int64_t kw = kw_lo; kw < kw_hi; ++kw)
          copy(d + kw * IC, s + (iw0 + kw * p.dw) * SP, IC);
      }
      zero(d + kw_hi * IC, (p.kw - kw_hi) * IC);
    }
    if (++ow == p.ow) {
      ow = 0;
      ++oh;
    }
  }
}

KILN_AVX2 void pack_cols_nchw(const Im2colConf& c, const float* src, int64_t pix0, int64_t npix,
                              float* out) {
  const ConvProblem& p = c.p;
  struct Seg {
    int64_t pos, oh, ow, len;
  };
  // The tile's pixels as runs within output rows.
  std::vector<Seg> segs;
  for (int64_t pos = 0; pos < npix;) {
    const int64_t px = pix0 + pos, oh = px / p.ow, ow = px % p.ow;
    const int64_t len = std::min(npix - pos, p.ow - ow);
    segs.push_back({pos, oh, ow, len});
    pos += len;
  }
  const int64_t padded = round_up(npix, c.simd);  // the last vector's dead lanes: zeros
  // Valid output columns per kernel column: [lo, hi) read inside the input row.
  std::vector<int64_t> lo(size_t(p.kw)), hi(size_t(p.kw));
  for (int64_t kw = 0; kw < p.kw; ++kw) {
    lo[size_t(kw)] = first_valid(kw * p.dw, p.pl, p.sw);
    hi[size_t(kw)] = end_valid(kw * p.dw, p.pl, p.sw, p.iw);
  }
  for (int64_t ic = 0; ic < p.ic; ++ic)
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      float* d0 = out + (ic * p.kh + kh) * p.kw * c.ldb;  // row (ic, kh, kw = 0)
      for (const Seg& sg : segs) {
        const int64_t ih = sg.oh * p.sh - p.pt + kh * p.dh;
        const bool row_ok = ih >= 0 && ih < p.ih;
        const float* srow = src + (ic * p.ih + (row_ok ? ih : 0)) * p.iw;
        for (int64_t kw = 0; kw < p.kw; ++kw) {
          float* ds = d0 + kw * c.ldb + sg.pos;
          if (!row_ok) {
            zero(ds, sg.len);
            continue;
          }
          const int64_t a = std::clamp(lo[size_t(kw)], sg.ow, sg.ow + sg.len);
          const int64_t b = std::clamp(hi[size_t(kw)], a, sg.ow + sg.len);
          zero(ds, a - sg.ow);
          if (b > a) gather(ds + (a - sg.ow), srow + a * p.sw - p.pl + kw * p.dw, b - a, p.sw);
          zero(ds + (b - sg.ow), sg.ow + sg.len - b);
        }
      }
      for (int64_t kw = 0; kw < p.kw; ++kw) zero(d0 + kw * c.ldb + npix, padded - npix);
    }
}

void pack_weights_nhwc_part(const Im2colConf& c, ModelFloats w, int64_t cg, int64_t g, float* out) {
  const ConvProblem& p = c.p;
  const int64_t IC = c.icg, OC = c.ocg, taps = p.kh * p.kw;
  const int64_t ld = c.nhwc_group_ldb(g), oc0 = cg * OC + g * c.group_cols();
  // Per tap: [icg][ld] = the column group's rows of W (its conv group's [oc][icg][kh][kw] rows)
  // transposed; columns past the conv group's oc are zero.
  const int64_t ocs = std::max<int64_t>(0, std::min(ld, (cg + 1) * OC - oc0));
  // The rows' taps apart first ([tap][oc][ic], read in order), so that each tap's transpose
  // reads unit-stride rows (pack_transposed's vector path; strided, it goes element by element:
  // 4x slower on a 256-channel 3x3, which matters when weights are packed every run).
  std::vector<float> apart;
  if (taps > 1) {
    apart.resize(size_t(taps * ocs * IC));
    for (int64_t r = 0; r < ocs; ++r) {
      const ModelFloats row = w + (oc0 + r) * IC * taps;
      for (int64_t ic = 0; ic < IC; ++ic)
        for (int64_t k = 0; k < taps; ++k)
          apart[size_t((k * ocs + r) * IC + ic)] = row[ic * taps + k];
    }
  }
  for (int64_t k = 0; k < taps; ++k, out += IC * ld) {
    const ModelFloats src = taps > 1 ? ModelFloats(apart.data() + k * ocs * IC) : w + oc0 * IC;
    pack_transposed(src, IC, 1, ocs, IC, out, ld);
    if (ocs < ld)
      for (int64_t ic = 0; ic < IC; ++ic) std::fill(out + ic * ld + ocs, out + ic * ld + ld, 0.f);
  }
}

int64_t nhwc_part_offset(const Im2colConf& c, int64_t cg, int64_t g) {
  return cg * c.conv_group_floats() + g * c.k * c.group_cols();  // (only the last is narrower)
}

int64_t pack_weights_nhwc(const Im2colConf& c, ModelFloats w, float* out) {
  if (out)
    for (int64_t cg = 0; cg < c.p.groups; ++cg)
      for (int64_t g = 0; g < c.n_groups; ++g)
        pack_weights_nhwc_part(c, w, cg, g, out + nhwc_part_offset(c, cg, g));
  return c.p.groups * c.conv_group_floats();
}

void pack_weights_nchw_rows(const Im2colConf& c, ModelFloats w, int64_t oc0, int64_t oc1,
                            float* out) {
  for (int64_t oc = oc0; oc < oc1; ++oc) {
    std::memcpy(out + oc * c.lda, (w + oc * c.k).bytes(), size_t(c.k) * 4);
    std::fill(out + oc * c.lda + c.k, out + (oc + 1) * c.lda, 0.f);
  }
}

int64_t pack_weights_nchw(const Im2colConf& c, ModelFloats w, float* out) {
  if (out) pack_weights_nchw_rows(c, w, 0, c.p.oc, out);
  return c.p.oc * c.lda;
}

void expand_rows(const float* v, int64_t oc, int simd, float* out) {
  for (int64_t i = 0; i < oc; ++i) std::fill(out + i * simd, out + (i + 1) * simd, v[i]);
}

}  // namespace kiln::im2col
