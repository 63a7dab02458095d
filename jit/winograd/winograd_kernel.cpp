// The Winograd family's Kernel (transforms and packs the weights once, owns the generated
// code, runs tiles of (tile group, slice of oc chunks) in the scratch the caller
// gives each call (V, M, a padded patch, transform buffers)) and
// make_wino_kernel.
#include "jit/winograd/winograd_kernel.h"

#include <xmmintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "jit/conv/conv_util.h"  // ConvCallArgs
#include "jit/pack.h"
#include "jit/shared_code.h"
#include "jit/winograd/winograd_gen.h"

namespace kiln {
namespace convjit {
namespace {

int64_t round16(int64_t floats) {
  return (floats + 15) / 16 * 16;
}

class WinoKernel : public Kernel {
 public:
  WinoKernel(const WinoConf& c, const Tensor& w, const Tensor* bias, const std::string& code_key)
      : c_(c),
        name_(c.name()),
        bias_(pack_bias(bias ? bias->data<float>() : nullptr, c.p.oc, c.ocb * c.simd)) {
    pack_weights(ModelFloats(w));
    // Each generator's role is its name's suffix.
    in_ = shared_generator<WinoInputGen>(code_key, "_in", c, c.p.dw, name_ + "_in");
    // Patches copied with their padding have adjacent pixels (the same code without dilation).
    in_patch_ = c.p.dw == 1 ? in_
                            : shared_generator<WinoInputGen>(code_key, "_in_patch", c, int64_t(1),
                                                             name_ + "_in_patch");
    // GEMM code per (chunk vectors, tail tiles, K) that occurs; each chunk's for full groups,
    // for the last group, and for each plane's members as one GEMM over a full group.
    auto chunk_fns = [&](int64_t rows) {
      std::vector<GemmFn> fns;
      for (int64_t ch = 0; ch < c.chunks; ++ch) {
        const int nv = c.chunk_vectors(ch), t = int(rows % c.mr);
        const int64_t k = c.chunk_k[size_t(ch)];
        auto& gen = gemm_[std::make_tuple(nv, t, k)];
        const std::string role =
            "_gemm_nv" + std::to_string(nv) + "_t" + std::to_string(t) + "_k" + std::to_string(k);
        if (!gen) gen = shared_generator<WinoGemmGen>(code_key, role, c, nv, t, k, name_ + role);
        fns.push_back(gen->fn<GemmFn>());
      }
      return fns;
    };
    gemm_fn_[0] = chunk_fns(c.tpg);
    gemm_fn_[1] = chunk_fns(c.last_group_tiles());
    for (const WinoConf::Plane& pl : c.planes)
      plane_fn_.push_back(pl.count > 1 ? chunk_fns(pl.count * c.tpg) : std::vector<GemmFn>());
    for (int64_t sl = 0; sl < c.slices; ++sl)
      slice_blocks_.push_back(c.chunk_blocks(sl * c.slice, std::min(c.chunks, (sl + 1) * c.slice)));
    // Output code per (valid rows, valid columns, chunk kind) that occurs: full tiles, and
    // each phase's last tile row / column.
    std::vector<char> vhs(size_t(c.mh) + 1), vws(size_t(c.mw) + 1);
    for (int64_t a = 0; a < c.p.dh; ++a)
      for (int64_t t : {int64_t(0), c.tiles_h - 1}) vhs[size_t(c.valid_rows(a, t))] = 1;
    for (int64_t b = 0; b < c.p.dw; ++b)
      for (int64_t t : {int64_t(0), c.tiles_w - 1}) vws[size_t(c.valid_cols(b, t))] = 1;
    for (int vh = 1; vh <= c.mh; ++vh)
      for (int vw = 1; vw <= c.mw; ++vw)
        for (int last = 0; last < 2; ++last) {
          if (!vhs[size_t(vh)] || !vws[size_t(vw)] || (!last && c.chunks == 1)) continue;
          const int nv = last ? c.nr_last : c.nr;
          const std::string role =
              "_out_h" + std::to_string(vh) + "w" + std::to_string(vw) + (last ? "_last" : "");
          out_[vh][vw][last] = shared_generator<WinoOutputGen>(code_key, role, c, nv, bool(last),
                                                               vh, vw, name_ + role);
        }
    // Scratch: V, M, one zero-padded patch, the two transforms' pass-1 buffers, the flags of
    // the input blocks transformed.
    v_off_ = 0;
    m_off_ = v_off_ + round16(c.v_floats());
    patch_off_ = m_off_ + round16(c.m_floats());
    tin_off_ = patch_off_ + round16(c.patch_floats());
    tout_off_ = tin_off_ + round16(c.tmp_floats());
    have_off_ = tout_off_ + round16(c.tmp_floats());
    scratch_floats_ = have_off_ + round16((c.icb + 3) / 4);  // a byte per input block
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return c_.kernel_tiles(); }
  double macs() const override { return c_.p.macs(); }
  int64_t scratch_bytes() const override { return scratch_floats_ * 4; }
  std::vector<Span> weights() const override { return {{u_.get(), size_t(c_.u_floats()) * 4}}; }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    if (begin >= end) return;
    float* s = scratch_floats(args);
    ConvCallArgs base;
    base.post.set(c_.p.post, args);
    // The tile group whose V is in scratch, and which of its input blocks (a flag each).
    int64_t cached = -1;
    char* have = reinterpret_cast<char*>(s + have_off_);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t g = t / c_.slices, sl = t % c_.slices;
      const int64_t q0 = g * c_.tpg, cnt = std::min(c_.tpg, c_.tiles_total() - q0);
      const int64_t ch0 = sl * c_.slice, ch1 = std::min(c_.chunks, ch0 + c_.slice);
      // Input blocks the slice's GEMMs read: all (dense), or its conv groups' (grouped: a
      // thread running other slices of the group transforms only what they read).
      const auto [ib0, ib1] = slice_blocks_[size_t(sl)];
      if (g != cached) std::memset(have, 0, size_t(c_.icb)), cached = g;
      for (int64_t b = ib0; b < ib1;) {  // each run of missing blocks
        if (have[size_t(b)]) {
          ++b;
          continue;
        }
        int64_t e = b;
        while (e < ib1 && !have[size_t(e)]) have[size_t(e++)] = 1;
        input_transform(args.src[0], q0, cnt, b, e, s);
        b = e;
      }
      // The slice's chunks back to back per xi: V[xi] is read from memory once per slice. A
      // plane's members in a full group: one GEMM over their consecutive V / M rows.
      const std::vector<GemmFn>& one = gemm_fn_[g == c_.groups - 1 ? 1 : 0];
      const int64_t planes = c_.u_planes();
      WinoGemmArgs ga;
      for (int64_t pi = 0; pi < planes; ++pi) {
        const WinoConf::Plane& pl = c_.planes[size_t(pi)];
        const bool fused = pl.count > 1 && cnt == c_.tpg;
        const std::vector<GemmFn>& fns = fused ? plane_fn_[size_t(pi)] : one;
        const int calls = fused ? 1 : pl.count;
        ga.blocks = (fused ? pl.count * cnt : cnt) / c_.mr;
        for (int r = 0; r < calls; ++r) {
          const int xi = pl.xi0 + r;
          for (int64_t ch = ch0; ch < ch1; ++ch) {
            ga.v = s + v_off_ + xi * c_.v_xi() + c_.chunk_k0[size_t(ch)];
            ga.u = u() + c_.u_offset(pi, ch);
            // The next call's U (this slice's next chunk, else the plane's first again, else
            // the next plane's first, else the first plane's, which the next group starts with).
            ga.pf = u() + (ch + 1 < ch1      ? c_.u_offset(pi, ch + 1)
                           : r + 1 < calls   ? c_.u_offset(pi, ch0)
                           : pi + 1 < planes ? c_.u_offset(pi + 1, ch0)
                                             : c_.u_offset(0, ch0));
            ga.m = s + m_off_ + xi * c_.m_xi() + (ch - ch0) * c_.nr * c_.simd;
            fns[size_t(ch)](&ga);
          }
        }
      }
      for (int64_t ch = ch0; ch < ch1; ++ch)
        output_transform(args.dst[0], base, q0, cnt, ch, (ch - ch0) * c_.nr * c_.simd, s);
    }
  }

 private:
  // Where tile q of the batch lies: its image, phase (a, b) and tile row / column there.
  struct TilePos {
    int64_t img, a, b, ty, tx;
  };
  TilePos tile_pos(int64_t q) const {
    const int64_t r = q % c_.image_tiles(), ph = r / c_.phase_tiles(), t = r % c_.phase_tiles();
    return {q / c_.image_tiles(), ph / c_.p.dw, ph % c_.p.dw, t / c_.tiles_w, t % c_.tiles_w};
  }

  // Tiles [q0, q0 + cnt), input blocks [ib0, ib1).
  void input_transform(const float* src, int64_t q0, int64_t cnt, int64_t ib0, int64_t ib1,
                       float* s) const {
    const ConvProblem& p = c_.p;
    const int64_t S = c_.simd, AH = c_.ah, AW = c_.aw, dh = p.dh, dw = p.dw;
    const int64_t img_floats = c_.icb * S * p.ih * p.iw;
    float* patch = s + patch_off_;
    using Fn = void (*)(const WinoInArgs*);
    const Fn fn = in_->fn<Fn>(), fn_patch = in_patch_->fn<Fn>();
    for (int64_t i = 0; i < cnt; ++i) {
      const TilePos t = tile_pos(q0 + i);
      // The patch: rows iy0 + dh * y (y < ah), columns ix0 + dw * x (x < aw); tiles mh x mw
      // outputs apart, the stride's pixels each (dilated: stride 1).
      const int64_t st = c_.stride();
      const int64_t iy0 = t.a + t.ty * c_.mh * dh * st - p.pt,
                    ix0 = t.b + t.tx * c_.mw * dw * st - p.pl;
      const float* im = src + t.img * img_floats + ib0 * S * p.ih * p.iw;
      WinoInArgs a;
      a.v = s + v_off_ + i * c_.v_row() + ib0 * S;
      a.tmp = s + tin_off_;
      a.blocks = ib1 - ib0;
      if (iy0 >= 0 && ix0 >= 0 && iy0 + (AH - 1) * dh < p.ih && ix0 + (AW - 1) * dw < p.iw) {
        a.src = im + (iy0 * p.iw + ix0) * S;
        a.row_bytes = dh * p.iw * S * 4;
        a.icb_bytes = p.ih * p.iw * S * 4;
        fn(&a);
        continue;
      }
      // The patch touches padding or lies past the image: copy it with zeros around.
      // Valid columns [x0, x1) of the patch (0 <= ix0 + dw * x < iw).
      const int64_t x0 = std::clamp<int64_t>((-ix0 + dw - 1) / dw, 0, AW),
                    x1 = std::clamp<int64_t>((p.iw - ix0 + dw - 1) / dw, x0, AW);
      for (int64_t cb = 0; cb < a.blocks; ++cb)
        for (int64_t y = 0; y < AH; ++y) {
          float* d = patch + (cb * AH + y) * AW * S;
          const int64_t iy = iy0 + y * dh;
          if (iy < 0 || iy >= p.ih || x0 == x1) {
            std::memset(d, 0, size_t(AW * S) * 4);
            continue;
          }
          std::memset(d, 0, size_t(x0 * S) * 4);
          const float* first = im + ((cb * p.ih + iy) * p.iw + ix0 + x0 * dw) * S;  // x0's
          if (dw == 1)
            std::memcpy(d + x0 * S, first, size_t((x1 - x0) * S) * 4);
          else
            for (int64_t x = x0; x < x1; ++x)
              std::memcpy(d + x * S, first + (x - x0) * dw * S, size_t(S) * 4);
          std::memset(d + x1 * S, 0, size_t((AW - x1) * S) * 4);
        }
      a.src = patch;
      a.row_bytes = AW * S * 4;
      a.icb_bytes = AH * AW * S * 4;
      fn_patch(&a);
    }
  }

  // Tiles [q0, q0 + cnt) of chunk `ch`, whose M columns start at `m_col` of the M rows.
  void output_transform(float* dst, const ConvCallArgs& base, int64_t q0, int64_t cnt, int64_t ch,
                        int64_t m_col, float* s) const {
    const ConvProblem& p = c_.p;
    const int64_t S = c_.simd;
    const int64_t oc0 = ch * c_.nr * S;
    const int last = ch == c_.chunks - 1 ? 1 : 0;
    WinoOutArgs a;
    a.c = base;
    a.c.bias = bias_.data() + oc0;
    a.c.post.advance_channels(oc0);
    a.tmp = s + tout_off_;
    using Fn = void (*)(const WinoOutArgs*);
    for (int64_t i = 0; i < cnt; ++i) {
      const TilePos t = tile_pos(q0 + i);
      const int vh = c_.valid_rows(t.a, t.ty), vw = c_.valid_cols(t.b, t.tx);
      if (!vh || !vw) continue;  // past a smaller phase's last row / column
      a.c.src = s + m_off_ + i * c_.m_row() + m_col;
      a.c.dst = dst + t.img * c_.ocb * S * p.oh * p.ow + oc0 * p.oh * p.ow +
                ((t.a + t.ty * c_.mh * p.dh) * p.ow + t.b + t.tx * c_.mw * p.dw) * S;
      out_[vh][vw][last]->fn<Fn>()(&a);
    }
  }

  // U = G g G^T per (oc, ic), packed as [plane][chunk][k][chunk vectors * simd], k over the
  // chunk's K (input channels chunk_k0 + k; weights are [oc][ic / groups][kh][kw], zero where
  // ic is not in oc's group). An axis the 1-D family does not transform has a kernel and a
  // patch of 1 and the 1 x 1 identity for G. Loops follow U's layout (chunk, k, then the
  // chunk's output channels) so each of the a2 planes is written in contiguous runs of nv *
  // simd floats (writing per (oc, ic) scattered 36 stores over a buffer of up to 38 MB and took
  // a quarter of ResNet-50's warm load), and the chunk's channels are the innermost loop of
  // both matrix products so the compiler vectorises them.
  void pack_weights(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const WinoMatrices mat = c_.matrices();
    const int KH = int(p.kh), KW = int(p.kw), AH = c_.ah, AW = c_.aw;
    const int64_t S = c_.simd;
    auto transform = [&](int a, int k) {  // [a][k]: G, or the identity of a 1-tap axis
      std::vector<float> gm(size_t(a * k), 1.f);
      for (int i = 0; a > 1 && i < a * k; ++i) gm[size_t(i)] = float(mat.g[i]);
      return gm;
    };
    const std::vector<float> gh = transform(AH, KH), gw = transform(AW, KW);
    u_ = alloc_zeroed(size_t(c_.u_floats()) * 4);
    const size_t W = size_t(c_.nr * S);  // widest chunk
    // One input channel of one chunk: g[KH * KW][W], G g: t[AH][KW][W]; (G g) G^T goes
    // straight into U's planes (a staging copy was a quarter of a small model's warm load).
    std::vector<float> g(size_t(KH * KW) * W), t(size_t(AH * KW) * W), row(W);
    const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;
    for (int64_t ch = 0; ch < c_.chunks; ++ch) {
      const int64_t oc0 = ch * c_.nr * S, width = c_.chunk_vectors(ch) * S;
      const int64_t valid = std::max<int64_t>(0, std::min(width, p.oc - oc0));
      std::fill(g.begin(), g.end(), 0.f);  // output channels past oc stay zero
      for (int64_t kk = 0; kk < c_.chunk_k[size_t(ch)]; ++kk) {
        const int64_t ic = c_.chunk_k0[size_t(ch)] + kk;
        for (int64_t k = 0; k < valid; ++k) {
          const int64_t j = ic - (oc0 + k) / ocg * icg;  // ic's index in oc's group
          for (int a = 0; a < KH * KW; ++a)
            g[size_t(a) * W + size_t(k)] =
                j >= 0 && j < icg ? w[((oc0 + k) * icg + j) * KH * KW + a] : 0.f;
        }
        for (int y = 0; y < AH; ++y)
          for (int b = 0; b < KW; ++b) {
            float* o = &t[size_t(y * KW + b) * W];
            std::fill(o, o + width, 0.f);
            for (int a = 0; a < KH; ++a) {
              const float f = gh[size_t(y * KH + a)], *ga = &g[size_t(a * KW + b) * W];
              for (int64_t k = 0; k < width; ++k) o[k] += f * ga[k];
            }
          }
        for (int y = 0; y < AH; ++y)
          for (int x = 0; x < AW; ++x) {
            const int xi = c_.xi_of[size_t(y * AW + x)], plane = c_.plane_of[size_t(xi)];
            if (c_.planes[size_t(plane)].xi0 != xi) continue;  // its plane's first member packs it
            const float* t0 = &t[size_t(y) * KW * W];
            std::fill(row.begin(), row.begin() + width, 0.f);
            for (int b = 0; b < KW; ++b) {
              const float f = gw[size_t(x * KW + b)];
              for (int64_t k = 0; k < width; ++k)
                row[size_t(k)] += t0[size_t(b) * W + size_t(k)] * f;
            }
            // U (4x the weights for F4) is far beyond the caches and written once: streaming
            // stores skip reading its lines first (most of the packing time otherwise).
            float* o = u() + c_.u_offset(plane, ch) + kk * width;  // 32-byte aligned
            for (int64_t k = 0; k < width; k += 4)
              _mm_stream_ps(o + k, _mm_loadu_ps(&row[size_t(k)]));
          }
      }
    }
    _mm_sfence();  // the streaming stores are visible before any thread runs the kernel
  }

  WinoConf c_;
  std::string name_;
  std::vector<float> bias_;
  std::shared_ptr<void> u_;  // float
  float* u() const { return static_cast<float*>(u_.get()); }
  std::shared_ptr<const WinoInputGen> in_, in_patch_;  // image / padded patch copy
  // GEMM code by (chunk vectors, tail tiles, K); each chunk's function for full groups [0]
  // and the last group [1].
  using GemmFn = void (*)(const WinoGemmArgs*);
  std::map<std::tuple<int, int, int64_t>, std::shared_ptr<const WinoGemmGen>> gemm_;
  std::vector<GemmFn> gemm_fn_[2];
  std::vector<std::vector<GemmFn>> plane_fn_;  // per plane of several members: count x tpg rows
  std::vector<std::pair<int64_t, int64_t>> slice_blocks_;  // input blocks each slice reads
  std::shared_ptr<const WinoOutputGen> out_[7][7][2];      // [valid rows][valid columns][last]
  int64_t v_off_ = 0, m_off_ = 0, patch_off_ = 0, tin_off_ = 0, tout_off_ = 0, have_off_ = 0;
  int64_t scratch_floats_ = 0;
};

}  // namespace
}  // namespace convjit

std::unique_ptr<Kernel> make_wino_kernel(const convjit::WinoConf& c, const Tensor& weights,
                                         const Tensor* bias, const std::string& code_key) {
  return std::make_unique<convjit::WinoKernel>(c, weights, bias, code_key);
}

}  // namespace kiln
