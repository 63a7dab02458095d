// The gemm1x1 family's Kernel: packs W[IC, OC] per oc group, owns the generated code and runs
// tiles of (image, line, pixel chunk, oc group).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "graph/half.h"
#include "jit/conv/conv_families.h"
#include "jit/conv/conv_gemm1x1_gen.h"
#include "jit/pack.h"
#include "jit/shared_code.h"

namespace kiln::convjit {
namespace {

using Fn = void (*)(const ConvCallArgs*);

// (GCC 12 warns about the `__Y = __Y` of its own _mm512_undefined_* inside the intrinsics:
// its bug 105593, a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// int8: n pixels of 16 f32 channels, `step` floats apart, to uint8 x / x_scale + x_zero. The
// values sit on that grid (a QuantizeDequantize output), so multiplying by the reciprocal
// lands within far less than half a step of the integer: exact.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_pixels(
    const float* s, int64_t step, uint8_t* d, int64_t n, float inv_scale, float zero) {
  const __m512 inv = _mm512_set1_ps(inv_scale), z = _mm512_set1_ps(zero);
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.f);
  for (int64_t i = 0; i < n; ++i, s += step, d += 16) {
    __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(s), inv, z);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d),
                     _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v)));  // round to nearest even
  }
}

// int8 dense K: input row `r` (a row of padding when outside [0, ih)) of an NCHW image of
// ic <= 4 channels to `wp` cache columns of 4 bytes, column j = input column j - pl: the
// channels' uint8 values (as quantize_pixels rounds them) in bytes 0 .. ic-1, the zero point in
// the others and in every column outside the image.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_row_c4(
    const float* img, const ConvProblem& p, int64_t r, int64_t wp, uint8_t* d, float inv_scale,
    float zero) {
  const int zp = int(zero);
  std::memset(d, zp, size_t(wp * 4));
  if (r < 0 || r >= p.ih) return;
  const __m512 inv = _mm512_set1_ps(inv_scale), z = _mm512_set1_ps(zero);
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.f);
  const int64_t cols = std::min(p.iw, wp - p.pl);  // input columns in the cache
  for (int64_t x = 0; x < cols; x += 16) {
    const __mmask16 m = _cvtu32_mask16(uint32_t((1u << std::min<int64_t>(16, cols - x)) - 1));
    __m512i word = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i u = _mm512_set1_epi32(zp);
      if (c < p.ic) {
        __m512 v = _mm512_maskz_loadu_ps(m, img + (c * p.ih + r) * p.iw + x);
        v = _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v, inv, z), lo), hi);
        u = _mm512_cvtps_epi32(v);  // (as quantize_pixels rounds)
      }
      word = _mm512_or_si512(word, _mm512_slli_epi32(u, unsigned(8 * c)));
    }
    _mm512_mask_storeu_epi32(d + (p.pl + x) * 4, m, word);
  }
}

// int8 dense K: pixels [q0, q0 + cnt) of the output, each a row of kpad bytes at d: its window's
// taps (kh, kw) of 4 bytes from the row cache (cache_w columns a row, row 0 = input row r0),
// then zeros. Runs move in one 16-byte piece (runs of at most 16 bytes) or 32-byte pieces (a
// libc memcpy call per 28-byte run cost more than the copy; masked moves more than these): a
// run's last piece may read and write up to 31 bytes past it, into bytes written next or the
// slack (kDenseSlack) after the buffer and the cache.
constexpr int64_t kDenseSlack = 64;
__attribute__((target("avx512f,avx512bw"))) void gather_windows(const ConvProblem& p,
                                                                const uint8_t* cache,
                                                                int64_t cache_w, int64_t r0,
                                                                int64_t q0, int64_t cnt,
                                                                int64_t kpad, uint8_t* d) {
  const int64_t taps = p.kh * p.kw * 4;  // (kpad - taps < 16)
  const int64_t row_step = p.dh * cache_w * 4;
  // (The pixel's row and column step along: a 64-bit division per pixel took a third of the
  // packing time.)
  int64_t oh = q0 / p.ow, ow = q0 % p.ow;
  for (int64_t i = 0; i < cnt; ++i, d += kpad) {
    uint8_t* o = d;
    const uint8_t* win = cache + ((oh * p.sh - p.pt - r0) * cache_w + ow * p.sw) * 4;
    if (++ow == p.ow) {
      ow = 0;
      ++oh;
    }
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      const uint8_t* s = win + kh * row_step;
      if (p.dw == 1 && p.kw <= 4) {  // (one 16-byte piece: fewer cache-line splits)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
        o += p.kw * 4;
      } else if (p.dw == 1) {
        for (int64_t b = 0; b < p.kw * 4; b += 32)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + b),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + b)));
        o += p.kw * 4;
      } else {
        for (int64_t kw = 0; kw < p.kw; ++kw, o += 4) std::memcpy(o, s + kw * p.dw * 4, 4);
      }
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + taps), _mm_setzero_si128());
  }
}
#pragma GCC diagnostic pop

class Gemm1x1Kernel : public Kernel {
 public:
  Gemm1x1Kernel(const Gemm1x1Conf& c, const Tensor& w, const Tensor* bias,
                const std::string& code_key)
      : c_(c),
        name_(conv_kernel_name(c.grp_icb  ? "grouped"
                               : c.im2row ? "im2col"
                                          : "gemm1x1",
                               c.layout, c.dst_layout, c.blocking_str(), c.isa, c.int8)),
        bias_(pack_bias(bias ? bias->data<float>() : nullptr, c.p.oc, c.ocv * c.simd)) {
    pack_weights(ModelFloats(w));
    const ConvProblem& p = c.p;
    // windows / dense K: the row cache's columns, padding included (what the windows reach).
    if (c.windows || c.dense_k) cache_w_ = p.cols_read(p.ow);
    if (c.windows) {
      // A band's rows of the padded input and, per K block (kh, kw, icb), where its taps sit
      // from a tile's first pixel (grouped: a table per conv group, over its channel blocks).
      rows_max_ = p.rows_read(c.band);
      for (int64_t cg = 0; cg < (c.grp_icb ? (p.groups + c.grp_merge - 1) / c.grp_merge : 1); ++cg)
        for (int64_t kh = 0; kh < p.kh; ++kh)
          for (int64_t kw = 0; kw < p.kw; ++kw)
            for (int64_t i = 0; i < c.k_icb(); ++i) {
              // (A partial last merged group's blocks past the input read the input's last
              // block: inside the cache, and their weights are zero.)
              const int64_t icb = std::min(cg * c.grp_icb + i, c.in_icb() - 1);
              koff_.push_back(((icb * rows_max_ + kh * p.dh) * cache_w_ + kw * p.dw) * c.simd);
            }
    } else if (c.dense_k) {
      // The input rows a packed chunk's windows span at most (pack_pix pixels cover at most
      // pack_pix / ow + 2 output rows), padding rows included.
      rows_max_ = p.rows_read(std::min(p.oh, c.pack_pix / p.ow + 2));
    }
    main_ = shared_generator<Gemm1x1Generator>(code_key, "", c, c.ur_n, false, name_);
    if (c.last_group_own)
      last_ = shared_generator<Gemm1x1Generator>(code_key, "_lastoc", c, c.n_last, true,
                                                 name_ + "_lastoc");
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override {
    return c_.p.n * (c_.windows ? bands() : c_.m_lines * c_.chunks) * c_.n_groups;
  }
  double macs() const override { return c_.p.macs(); }
  std::vector<Span> weights() const override { return {{wei_.raw(), wei_.nbytes()}}; }
  // The packed pixel chunk (strided or NHWC input): it stays in L1 while the oc groups sweep it.
  // (int8 dense K: then the quantized input rows the windows gather from; windows: only those.)
  int64_t scratch_bytes() const override {
    return c_.pack ? cache_offset() + row_cache_bytes() : row_cache_bytes();
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    ConvCallArgs base;
    base.post.set(c_.p.post, args);
    if (c_.windows) return run_windows(args, base, begin, end);
    bool split = c_.ic_chunk < c_.icb_total();
    for (const PostOp& op : c_.p.post)
      if (op.kind == PostOp::Kind::add && args.src[op.input] == args.dst[0]) split = false;
    const int64_t G = c_.n_groups, LC = c_.m_lines * c_.chunks;
    const int64_t chunk = split ? c_.ic_chunk : c_.icb_total();
    char* buf = c_.pack ? reinterpret_cast<char*>(scratch_floats(args)) : nullptr;
    int64_t packed_n = -1;  // groups outer: the image now in `buf`
    int64_t t = begin;
    while (t < end) {
      if (c_.m_outer) {
        // Tiles of one pixel chunk (its groups) are contiguous: per K chunk, sweep the groups
        // so the chunk's src stays in L1.
        const int64_t g0 = t % G, lc = t / G % LC, n = t / (G * LC);
        const int64_t cnt = std::min(end - t, G - g0);
        if (buf) {
          const int64_t q0 = lc * c_.chunk_blocks * c_.ur_m;
          pack(args, n, q0, chunk_pixels(lc), buf);
        }
        // pf_next: each call walks the next group's weights (those the sweep reads next).
        for (int64_t k0 = 0; k0 < c_.icb_total(); k0 += chunk)
          for (int64_t g = g0; g < g0 + cnt; ++g) {
            const int64_t gn = g + 1 < G ? g + 1 : 0;
            const int64_t obn = gn == G - 1 ? c_.n_last : c_.ur_n;
            const char* next =
                wei_bytes() + group_off_[size_t(gn)] + k0 * c_.wei_kb_bytes(int(obn));
            call(args, base, n, g, lc, k0, std::min(chunk, c_.icb_total() - k0), buf, next);
          }
        t += cnt;
      } else {
        // Tiles of one (n, group) are contiguous: sweep them per K chunk so the chunk's
        // weights stay in cache.
        const int64_t lc0 = t % LC, g = t / LC % G, n = t / (LC * G);
        const int64_t cnt = std::min(end - t, LC - lc0);
        if (buf && packed_n != n) {
          pack(args, n, 0, c_.m_len, buf);
          packed_n = n;
        }
        // The calls of this group walk the next group's weights (a line per pf_every K steps).
        const char* next = wei_bytes() + group_off_[size_t(std::min(g + 1, G - 1))];
        int64_t pf_lines = 0;
        for (int64_t k0 = 0; k0 < c_.icb_total(); k0 += chunk)
          for (int64_t lc = lc0; lc < lc0 + cnt; ++lc) {
            const int64_t kc = std::min(chunk, c_.icb_total() - k0);
            call(args, base, n, g, lc, k0, kc, buf, next + pf_lines * 64);
            const int64_t full_k = kc - (c_.ic_tail && k0 + kc == c_.icb_total() ? 1 : 0);
            pf_lines += tiles_in_call(lc) * full_k * c_.k_steps(c_.simd) / c_.pf_every;
          }
        t += cnt;
      }
    }
  }

 private:
  // Register tiles one call of chunk `ch` runs (its full tiles, plus the tail tile on the last
  // chunk).
  int64_t tiles_in_call(int64_t lc) const {
    const int64_t ch = lc % c_.chunks, b0 = ch * c_.chunk_blocks;
    const int64_t b1 = std::min(c_.full_tiles(), b0 + c_.chunk_blocks);
    return b1 - b0 + (ch == c_.chunks - 1 && c_.m_tail ? 1 : 0);
  }

  // Pixels of chunk `ch` of a line: its full tiles, plus the tail on the last chunk.
  int64_t chunk_pixels(int64_t ch) const {
    const int64_t b0 = ch * c_.chunk_blocks;
    const int64_t b1 = std::min(c_.full_tiles(), b0 + c_.chunk_blocks);
    return (b1 - b0) * c_.ur_m + (ch == c_.chunks - 1 ? c_.m_tail : 0);
  }

  // Copies packed pixels [q0, q0 + cnt) of image n (output pixel q reads input pixel
  // (q / ow * stride, q % ow * stride)) to buf: blocked [icb][pack_pix][simd], NHWC
  // [pixel][pack_pix_bytes / 4].
  void pack(const KernelArgs& args, int64_t n, int64_t q0, int64_t cnt, char* buf) const {
    if (c_.dense_k) return pack_dense(args, n, q0, cnt, buf);
    const ConvProblem& p = c_.p;
    const int64_t st = c_.stride, pix = c_.in_pix_bytes();  // a pixel's bytes in a block
    const char* img = src_bytes(args) + n * src_img_bytes();
    if (c_.nhwc) {
      for (int64_t q = q0; q < q0 + cnt; ++q) {
        const char* s = img + ((q / p.ow) * st * p.iw + (q % p.ow) * st) * pix;
        std::memcpy(buf + (q - q0) * c_.pack_pix_bytes, s, size_t(pix));
      }
      return;
    }
    // (int8 from f32: each pixel quantized to simd bytes on the way.)
    const int64_t dpix = c_.src_pix_bytes();
    for (int64_t kb = 0; kb < c_.icb_total(); ++kb) {
      const char* sb = img + kb * c_.in_kb_bytes();
      char* d = buf + kb * c_.pack_pix * dpix;
      int64_t q = q0;
      while (q < q0 + cnt) {
        // One output row segment: input pixels `st` apart in one input row.
        const int64_t oh = q / p.ow, ow0 = q % p.ow;
        const int64_t len = std::min(p.ow - ow0, q0 + cnt - q);
        const char* s = sb + (oh * st * p.iw + ow0 * st) * pix;
        if (c_.int8 && !c_.u8_src) {
          const ConvInt8& qp = *c_.int8_params;
          quantize_pixels(reinterpret_cast<const float*>(s), st * c_.simd,
                          reinterpret_cast<uint8_t*>(d), len, 1.f / qp.x_scale, qp.x_zero);
          d += len * dpix;
        } else {
          for (int64_t i = 0; i < len; ++i, d += pix, s += st * pix) std::memcpy(d, s, size_t(pix));
        }
        q += len;
      }
    }
  }

  // The activations are f32 or (bf16 layouts) uint16_t: addressed in bytes.
  static const char* src_bytes(const KernelArgs& args) {
    return reinterpret_cast<const char*>(args.src[0]);
  }
  const char* wei_bytes() const { return static_cast<const char*>(wei_.raw()); }
  int64_t src_img_bytes() const {
    const ConvProblem& p = c_.p;
    return c_.nhwc || c_.dense_k ? p.ih * p.iw * p.ic * 4 : c_.in_icb() * c_.in_kb_bytes();
  }

  void call(const KernelArgs& args, const ConvCallArgs& base, int64_t n, int64_t g, int64_t lc,
            int64_t k0, int64_t kcnt, const char* packed, const char* pf_wei) const {
    const ConvProblem& p = c_.p;
    const bool last = g == c_.n_groups - 1;
    const int ob = last ? c_.n_last : c_.ur_n;
    const int64_t line = lc / c_.chunks, ch = lc % c_.chunks;
    const int64_t b0 = ch * c_.chunk_blocks;
    const int64_t b1 = std::min(c_.full_tiles(), b0 + c_.chunk_blocks);
    const int64_t pix0 = b0 * c_.ur_m;
    const int64_t dst_img = c_.nhwc ? p.oh * p.ow * p.oc * 4 : c_.ocv * c_.dst_vec_bytes();
    const int64_t oc0 = g * c_.ur_n * c_.simd;
    ConvCallArgs a = base;
    const char* src;
    if (packed) {
      // m_outer: the buffer holds this chunk only; else the whole image.
      src = packed + (c_.m_outer ? 0 : pix0 * c_.src_pix_bytes()) + k0 * c_.src_kb_bytes();
    } else {
      const int64_t in_pix = c_.stride == 1 ? pix0 : line * c_.stride * p.iw + pix0 * c_.stride;
      src = src_bytes(args) + n * src_img_bytes() + in_pix * c_.in_pix_bytes() +
            k0 * c_.in_kb_bytes();
    }
    a.src = reinterpret_cast<const float*>(src);
    const int64_t out_pix = c_.m_lines == 1 ? pix0 : line * p.ow + pix0;
    a.dst =
        reinterpret_cast<float*>(reinterpret_cast<char*>(args.dst[0]) + n * dst_img +
                                 out_pix * c_.dst_pix_bytes() + g * c_.ur_n * c_.dst_vec_bytes());
    a.wei = reinterpret_cast<const float*>(wei_bytes() + group_off_[size_t(g)] +
                                           k0 * c_.wei_kb_bytes(ob));
    a.bias = bias_.data() + oc0;
    if (c_.int8) a.qscale = qscale_.data() + oc0;
    a.pf_wei = reinterpret_cast<const float*>(pf_wei);
    a.post.advance_channels(oc0);
    const bool has_tail = c_.ic_tail && k0 + kcnt == c_.icb_total();
    a.k_blocks = kcnt - (has_tail ? 1 : 0);
    a.m_blocks = b1 - b0;
    a.flags = (k0 > 0 ? kFlagAccumulate : 0) | (k0 + kcnt == c_.icb_total() ? kFlagFinal : 0) |
              (has_tail ? kFlagIcTail : 0) | (ch == c_.chunks - 1 && c_.m_tail ? kFlagMTail : 0);
    (last && last_ ? last_ : main_)->fn<Fn>()(&a);
  }

  // group_off_: bytes.
  void pack_weights(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const int64_t S = c_.simd, KB = c_.icb_total();
    int64_t total = 0;
    for (int64_t g = 0; g < c_.n_groups; ++g) {
      group_off_.push_back(total);
      total += KB * c_.wei_kb_bytes(g == c_.n_groups - 1 ? c_.n_last : c_.ur_n);
    }
    wei_ = Tensor(DType::f32, {total / 4});  // zero-filled, 64-byte aligned
    if (c_.bf16) return pack_weights_bf16(w);
    if (c_.int8) return pack_weights_int8(w);
    for (int64_t g = 0; g < c_.n_groups; ++g) {
      const int64_t ob = g == c_.n_groups - 1 ? c_.n_last : c_.ur_n;
      float* o = reinterpret_cast<float*>(static_cast<char*>(wei_.raw()) + group_off_[size_t(g)]);
      // [kb][ic < simd][ob][lane], i.e. [ic][ob][lane]: block j is W[oc0 .. oc0 + simd)
      // transposed, at row stride ob * simd. Lanes past oc and channels past ic stay zero.
      for (int64_t j = 0; j < ob; ++j) {
        const int64_t oc0 = (g * c_.ur_n + j) * S;
        const int64_t lanes = std::min(S, p.oc - oc0);
        if (lanes > 0) pack_transposed(w + oc0 * p.ic, p.ic, 1, lanes, p.ic, o + j * S, ob * S);
      }
    }
  }

  // The bf16 / int8 weight layout [kb][step < simd / E][ob][lane][E] (E = 2 / 4 channels per
  // 4-byte word) of every oc group: f(element index, oc, k) for each element, k the GEMM's K
  // index (the input channel; im2row: over (kh, kw, padded channel)).
  template <class F>
  void for_each_packed(int64_t E, F f) const {
    const int64_t S = c_.simd, KB = c_.icb_total();
    for (int64_t g = 0; g < c_.n_groups; ++g) {
      const int64_t ob = g == c_.n_groups - 1 ? c_.n_last : c_.ur_n;
      const int64_t base = group_off_[size_t(g)] / c_.src_esize();
      for (int64_t kb = 0; kb < KB; ++kb)
        for (int64_t s = 0; s < S / E; ++s)
          for (int64_t j = 0; j < ob; ++j)
            for (int64_t lane = 0; lane < S; ++lane)
              for (int64_t e = 0; e < E; ++e)
                f(base + (((kb * S / E + s) * ob + j) * S + lane) * E + e,
                  (g * c_.ur_n + j) * S + lane, kb * S + E * s + e);
    }
  }

  // bf16: the vector of step s, oc vector j holds W[oc0 + lane][2s + e] at lane * 2 + e,
  // rounded to nearest even; zero past ic and oc.
  void pack_weights_bf16(ModelFloats w) {
    const ConvProblem& p = c_.p;
    uint16_t* o = static_cast<uint16_t*>(wei_.raw());
    for_each_packed(2, [&](int64_t i, int64_t oc, int64_t ic) {
      o[i] = float_to_bf16(oc < p.oc && ic < p.ic ? w[oc * p.ic + ic] : 0.f);
    });
  }

  // int8: the vector of step s, oc vector j holds the integer W[oc0 + lane][4s + e] /
  // w_scale[oc] at lane * 4 + e; zero past ic and oc. Also the per-oc scale of the int32 sums,
  // and the bias less the input zero point's share (x_scale w_scale[oc] x_zero sum_ic
  // q[oc][ic]: the sums multiply uint8 q_x, not q_x - x_zero).
  void pack_weights_int8(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const ConvInt8& q = *c_.int8_params;
    // (im2row: K slices of kpad channels; grouped: of the (merged) group's, ic_g a conv
    // group's; merged: oc's conv group r of the merged group reads channels [r ic_g, +ic_g))
    const int64_t S = c_.simd, kpad = c_.k_icb() * S, ic_g = p.ic / p.groups;
    const int64_t oc_g = p.oc / p.groups, m = c_.grp_merge;
    std::vector<double> qsum(size_t(p.oc), 0.0);
    int8_t* o = static_cast<int8_t*>(wei_.raw());
    for_each_packed(4, [&](int64_t i, int64_t oc, int64_t k) {
      // (dense K: K slices of 4 channels, past the last window tap zero)
      const int64_t slice = c_.dense_k ? k / 4 : k / kpad,
                    ic = (c_.dense_k ? k % 4 : k % kpad) - (m > 1 ? oc / oc_g % m * ic_g : 0);
      if (oc >= p.oc || ic < 0 || ic >= ic_g || slice >= p.kh * p.kw) return;  // (zero-filled)
      const int64_t kh = slice / p.kw, kw = slice % p.kw;
      const float v =
          std::nearbyint(w[((oc * ic_g + ic) * p.kh + kh) * p.kw + kw] / q.w_scale[size_t(oc)]);
      o[i] = int8_t(std::clamp(v, -128.f, 127.f));
      qsum[size_t(oc)] += o[i];
    });
    qscale_.assign(size_t(c_.ocv * S), 0.f);
    for (int64_t oc = 0; oc < p.oc; ++oc) {
      const double sc = double(q.x_scale) * q.w_scale[size_t(oc)];
      qscale_[size_t(oc)] = float(sc);
      bias_[size_t(oc)] = float(double(bias_[size_t(oc)]) - sc * q.x_zero * qsum[size_t(oc)]);
    }
  }

  // int8 dense K: pixels [q0, q0 + cnt) of image n, each a row of src_pix_bytes() into buf: its
  // window's taps (kh, kw) of 4 bytes (quantize_row_c4), then zeros up to the row's end.
  void pack_dense(const KernelArgs& args, int64_t n, int64_t q0, int64_t cnt, char* buf) const {
    const ConvProblem& p = c_.p;
    const ConvInt8& q = *c_.int8_params;
    const float* img = reinterpret_cast<const float*>(src_bytes(args) + n * src_img_bytes());
    const int64_t r0 = q0 / p.ow * p.sh - p.pt;  // the input row of cache row 0 (may be < 0)
    const int64_t rows = p.rows_read((q0 + cnt - 1) / p.ow - q0 / p.ow + 1);
    uint8_t* cache = reinterpret_cast<uint8_t*>(buf) + cache_offset();
    for (int64_t r = 0; r < rows; ++r)
      quantize_row_c4(img, p, r0 + r, cache_w_, cache + r * cache_w_ * 4, 1.f / q.x_scale,
                      q.x_zero);
    gather_windows(p, cache, cache_w_, r0, q0, cnt, c_.src_pix_bytes(),
                   reinterpret_cast<uint8_t*>(buf));
  }

  // The row cache's place in the scratch, after the packed buffer (dense K: and its slack).
  int64_t cache_offset() const {
    return round_up(c_.pack_bytes() + (c_.dense_k ? kDenseSlack : 0), 64);
  }
  int64_t bands() const { return (c_.p.oh + c_.band - 1) / c_.band; }

  // int8 windows: tiles (image, band, oc group), oc groups fastest. A run of one band's groups
  // quantizes its rows once; every group then runs the band's lines, one call a line.
  void run_windows(const KernelArgs& args, const ConvCallArgs& base, int64_t begin,
                   int64_t end) const {
    const ConvProblem& p = c_.p;
    const int64_t G = c_.n_groups, B = bands();
    uint8_t* cache = reinterpret_cast<uint8_t*>(scratch_floats(args));
    // Prefetch lines of the next group's weights one line's call walks (groups outer: the
    // group's calls walk it in turn; m_outer: each call from its start).
    const int64_t call_lines = (c_.full_tiles() + (c_.m_tail ? 1 : 0)) * c_.icb_total() *
                               c_.k_steps(c_.simd) / c_.pf_every;
    for (int64_t t = begin; t < end;) {
      const int64_t g0 = t % G, b = t / G % B, n = t / (G * B);
      const int64_t cnt = std::min(end - t, G - g0);
      const int64_t l0 = b * c_.band, l1 = std::min(p.oh, l0 + c_.band);
      quantize_band(args, n, l0, l1, cache);
      for (int64_t g = g0; g < g0 + cnt; ++g) {
        const int64_t gn = g + 1 < G ? g + 1 : c_.m_outer ? 0 : G - 1;
        const char* next = wei_bytes() + group_off_[size_t(gn)];
        for (int64_t l = l0; l < l1; ++l)
          call_window(args, base, n, g, l, cache + (l - l0) * p.sh * cache_w_ * c_.simd,
                      next + (c_.m_outer ? 0 : (l - l0) * call_lines * 64));
      }
      t += cnt;
    }
  }

  // The input rows of output lines [l0, l1) of image n, quantized (a uint8 src: copied) into
  // the cache with their padding: [icb][row][cache_w_][simd] bytes, column j = input column
  // j - pl.
  void quantize_band(const KernelArgs& args, int64_t n, int64_t l0, int64_t l1,
                     uint8_t* cache) const {
    const ConvProblem& p = c_.p;
    const ConvInt8& q = *c_.int8_params;
    const int64_t S = c_.simd, W = cache_w_;
    const char* img = src_bytes(args) + n * src_img_bytes();
    const int64_t r0 = l0 * p.sh - p.pt, rows = p.rows_read(l1 - l0);
    const int64_t left = std::min(p.pl, W), cols = std::clamp<int64_t>(W - p.pl, 0, p.iw);
    const int zp = int(q.x_zero);
    for (int64_t icb = 0; icb < c_.in_icb(); ++icb)
      for (int64_t r = 0; r < rows; ++r) {
        uint8_t* d = cache + (icb * rows_max_ + r) * W * S;
        const int64_t ih = r0 + r;
        if (ih < 0 || ih >= p.ih || cols == 0) {
          std::memset(d, zp, size_t(W * S));
          continue;
        }
        std::memset(d, zp, size_t(left * S));
        const char* row = img + (icb * p.ih + ih) * p.iw * S * c_.in_esize();
        if (c_.u8_src)
          std::memcpy(d + left * S, row, size_t(cols * S));
        else
          quantize_pixels(reinterpret_cast<const float*>(row), S, d + left * S, cols,
                          1.f / q.x_scale, q.x_zero);
        std::memset(d + (left + cols) * S, zp, size_t((W - left - cols) * S));
      }
  }

  void call_window(const KernelArgs& args, const ConvCallArgs& base, int64_t n, int64_t g,
                   int64_t line, const uint8_t* row, const char* pf_wei) const {
    const ConvProblem& p = c_.p;
    const int64_t oc0 = g * c_.ur_n * c_.simd;
    ConvCallArgs a = base;
    a.src = reinterpret_cast<const float*>(row);
    a.dst = reinterpret_cast<float*>(
        reinterpret_cast<char*>(args.dst[0]) + n * c_.ocv * c_.dst_vec_bytes() +
        line * p.ow * c_.dst_pix_bytes() + g * c_.ur_n * c_.dst_vec_bytes());
    a.wei = reinterpret_cast<const float*>(wei_bytes() + group_off_[size_t(g)]);
    a.bias = bias_.data() + oc0;
    a.qscale = qscale_.data() + oc0;
    a.koff = koff_.data() + (c_.grp_ocv ? g * c_.ur_n / c_.grp_ocv * c_.icb_full : 0);
    a.pf_wei = reinterpret_cast<const float*>(pf_wei);
    a.post.advance_channels(oc0);
    a.k_blocks = c_.icb_total();
    a.m_blocks = c_.full_tiles();
    a.flags = kFlagFinal | (c_.m_tail ? kFlagMTail : 0);
    (g == c_.n_groups - 1 && last_ ? last_ : main_)->fn<Fn>()(&a);
  }

  int64_t row_cache_bytes() const {
    if (c_.windows) return c_.in_icb() * rows_max_ * cache_w_ * c_.simd;
    return c_.dense_k ? rows_max_ * cache_w_ * 4 + kDenseSlack : 0;
  }

  Gemm1x1Conf c_;
  std::string name_;
  std::vector<float> bias_, qscale_;
  int64_t rows_max_ = 0;       // int8 windows / dense K: input rows in the row cache ...
  int64_t cache_w_ = 0;        // ... and columns (dense K, windows: with the padding)
  std::vector<int64_t> koff_;  // windows: K block offsets (ConvCallArgs::koff)
  Tensor wei_;
  std::vector<int64_t> group_off_;
  std::shared_ptr<const Gemm1x1Generator> main_, last_;
};

}  // namespace

std::unique_ptr<Kernel> make_gemm1x1_kernel(const Gemm1x1Conf& c, const Tensor& weights,
                                            const Tensor* bias, const std::string& code_key) {
  return std::make_unique<Gemm1x1Kernel>(c, weights, bias, code_key);
}

}  // namespace kiln::convjit
