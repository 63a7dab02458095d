// Pad of a 4-D f32 tensor: constant mode with non-negative pads on any dim (blocked layouts:
// channel pads of whole blocks); reflect / edge / wrap with pads on H and W only, where every
// output row is a copy of an input row (graph/pad.h maps the index) whose pad pixels are
// compile-time copies of input pixels. The output is a stack of planes of rows: nchw planes are (n,
// c) pairs of H x W, nhwc planes images of H rows of W*C floats (with channel pads: (n, h) pairs
// of W rows of C floats), blocked planes (n, channel block) pairs of H rows of W*B floats. A row
// inside the input's extent is [fill | copy | fill] with compile-time lengths; everything else
// (top/bottom rows, planes of padded images or channels) is a contiguous run of the constant. Tiles
// are ~16 KiB runs of output rows.
#include "graph/pad.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

using RowsFn = glue::CopyFn;

struct PadGeom {
  int64_t planes_in_image = 1;  // Q: output planes per image (nchw: C_out)
  int64_t q_begin = 0;          // plane pads before the input's (nchw: channel pad)
  int64_t q_in = 1;             // input planes per image
  int64_t n_begin = 0, n_in = 1, n_out = 1;
  int64_t h_begin = 0, h_in = 1, h_out = 1;
  int64_t left = 0, copy = 0, right = 0;  // a row: fill, copy, fill (floats)
  int64_t row_out = 0, row_in = 0;        // floats per output / input row
  // Reflect / edge / wrap: the input pixel each output pixel of a row's pads reads (left pads
  // then right pads) and the pixel size in floats; empty for constant mode.
  bool mirror = false, reflect = false, wrap = false;
  std::vector<int64_t> left_src, right_src;
  int64_t unit = 1;
};

class PadKernel : public glue::GlueKernel {
 public:
  PadKernel(const PadGeom& g, float value, Isa isa, const std::string& name) : g_(g) {
    name_ = name;
    AsmBuilder b(name_, isa);
    build_fill(b, value);
    build_rows(b, value);
    code_ = b.finish();
    fill_ = b.entry<RowsFn>(code_, 0);
    rows_ = b.entry<RowsFn>(code_, 1);
    total_rows_ = g.n_out * g.planes_in_image * g.h_out;
    chunk_ = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.row_out));
    tiles_ = (total_rows_ + chunk_ - 1) / chunk_;
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const int64_t plane_out = g_.h_out * g_.row_out, plane_in = g_.h_in * g_.row_in;
    for (int64_t t = begin; t < end; ++t) {
      int64_t r = t * chunk_;
      const int64_t r1 = std::min(total_rows_, r + chunk_);
      while (r < r1) {
        const int64_t p = r / g_.h_out, h = r % g_.h_out, h_end = std::min(g_.h_out, h + r1 - r);
        float* dst = a.dst[0] + p * plane_out;
        const int64_t n = p / g_.planes_in_image - g_.n_begin;
        const int64_t q = p % g_.planes_in_image - g_.q_begin;
        r += h_end - h;
        if (n < 0 || n >= g_.n_in || q < 0 || q >= g_.q_in) {
          fill_(nullptr, dst + h * g_.row_out, (h_end - h) * g_.row_out);
          continue;
        }
        const float* src = a.src[0] + (n * g_.q_in + q) * plane_in;
        if (g_.mirror) {  // every row copies an input row; runs of interior rows in one call
          for (int64_t o = h; o < h_end;) {
            const int64_t ih = pad_source_index(g_.reflect, g_.wrap, o - g_.h_begin, g_.h_in);
            int64_t run = 1;
            if (o >= g_.h_begin && o < g_.h_begin + g_.h_in)
              run = std::min(h_end, g_.h_begin + g_.h_in) - o;
            rows_(src + ih * g_.row_in, dst + o * g_.row_out, run);
            o += run;
          }
          continue;
        }
        // Rows [h, h_end): top fill, input rows, bottom fill.
        const int64_t m0 = std::clamp(g_.h_begin, h, h_end),
                      m1 = std::clamp(g_.h_begin + g_.h_in, h, h_end);
        if (m0 > h) fill_(nullptr, dst + h * g_.row_out, (m0 - h) * g_.row_out);
        if (m1 > m0) rows_(src + (m0 - g_.h_begin) * g_.row_in, dst + m0 * g_.row_out, m1 - m0);
        if (h_end > m1) fill_(nullptr, dst + m1 * g_.row_out, (h_end - m1) * g_.row_out);
      }
    }
  }

 private:
  // Stores the constant at [p, p + count) (count compile-time), p unchanged.
  void fill_static(AsmBuilder& b, const x86::Vec& v, const x86::Gp& p, int64_t count) {
    auto& cc = b.cc();
    const int V = b.width();
    x86::Gp d = b.gp();
    cc.mov(d, p);
    int64_t k = 0;
    if (count >= 8 * V) {
      x86::Gp n = b.gp();
      cc.mov(n, count / (4 * V));
      asmjit::Label top = cc.newLabel();
      cc.bind(top);
      for (int u = 0; u < 4; ++u) cc.vmovups(x86::ptr(d, u * V * 4), v);
      cc.add(d, 4 * V * 4);
      cc.dec(n);
      cc.jnz(top);
      k = count / (4 * V) * 4 * V;
    }
    int32_t off = 0;  // bytes past d
    for (; k + V <= count; k += V, off += V * 4) cc.vmovups(x86::ptr(d, off), v);
    if (k < count) {
      const Mask m = b.mask(int(count - k));
      b.store(x86::ptr(d, off), v, &m);
    }
  }

  // fn(-, dst, n): n floats of the constant (runtime count).
  void build_fill(AsmBuilder& b, float value) {
    auto& cc = b.cc();
    const int V = b.width();
    const glue::CopyArgs a = glue::begin_copy_function(b);  // src unused
    const x86::Gp &d = a.dst, &n = a.n;
    x86::Vec v = b.bcast(value);
    asmjit::Label l4 = cc.newLabel(), l1 = cc.newLabel(), lt = cc.newLabel(), done = cc.newLabel();
    cc.bind(l4);
    cc.cmp(n, 4 * V);
    cc.jb(l1);
    for (int u = 0; u < 4; ++u) cc.vmovups(x86::ptr(d, u * V * 4), v);
    cc.add(d, 4 * V * 4);
    cc.sub(n, 4 * V);
    cc.jmp(l4);
    cc.bind(l1);
    cc.cmp(n, V);
    cc.jb(lt);
    cc.vmovups(x86::ptr(d), v);
    cc.add(d, V * 4);
    cc.sub(n, V);
    cc.jmp(l1);
    cc.bind(lt);
    cc.test(n, n);
    cc.jz(done);
    {
      const Mask m = b.mask_dyn(n);
      b.store(x86::ptr(d), v, &m);
    }
    cc.bind(done);
    b.end_function();
  }

  // fn(src, dst, n): n rows [fill left | copy | fill right]; input rows row_in floats apart.
  void build_rows(AsmBuilder& b, float value) {
    auto& cc = b.cc();
    const glue::CopyArgs a = glue::begin_copy_function(b);
    const x86::Gp &s = a.src, &d = a.dst, &n = a.n;
    x86::Vec v = b.bcast(value);
    asmjit::Label top = cc.newLabel();
    cc.bind(top);
    if (g_.mirror) {
      // Pad pixels: copies of the input pixels graph/pad.h names, at compile-time offsets.
      auto pixels = [&](const std::vector<int64_t>& srcs, int64_t first) {
        for (size_t j = 0; j < srcs.size(); ++j) {
          x86::Gp ps = b.gp(), pd = b.gp();
          cc.lea(ps, x86::ptr(s, int32_t(srcs[j] * g_.unit * 4)));
          cc.lea(pd, x86::ptr(d, int32_t((first + int64_t(j)) * g_.unit * 4)));
          b.copy_static(pd, ps, g_.unit);
        }
      };
      pixels(g_.left_src, 0);
      pixels(g_.right_src, (g_.left + g_.copy) / g_.unit);
    } else if (g_.left) {
      fill_static(b, v, d, g_.left);
    }
    if (g_.copy) {
      x86::Gp c = b.gp();
      cc.lea(c, x86::ptr(d, int32_t(g_.left * 4)));
      b.copy_static(c, s, g_.copy);
    }
    if (g_.right && !g_.mirror) {
      x86::Gp r = b.gp();
      cc.lea(r, x86::ptr(d, int32_t((g_.left + g_.copy) * 4)));
      fill_static(b, v, r, g_.right);
    }
    cc.add(s, g_.row_in * 4);
    cc.add(d, g_.row_out * 4);
    cc.dec(n);
    cc.jnz(top);
    b.end_function();
  }

  PadGeom g_;
  RowsFn fill_ = nullptr, rows_ = nullptr;
  int64_t total_rows_ = 0, chunk_ = 1;
};

}  // namespace

bool blocked_channel_pads_ok(int64_t c, int64_t c_begin, int64_t c_end, float value,
                             int64_t block) {
  // Pad blocks are planes: whole ones before whole input blocks. A non-zero constant would also
  // fill the pad lanes of a partial block.
  if ((c_begin || c_end) && (c % block || c_begin % block)) return false;
  return value == 0.f || (c % block == 0 && (c + c_begin + c_end) % block == 0);
}

std::unique_ptr<Kernel> create_pad_kernel(const Shape& x_in, const std::vector<int64_t>& begin_in,
                                          const std::vector<int64_t>& end_in, float value, Layout l,
                                          Isa isa, std::string* why_not, const std::string& mode) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (x_in.size() != 4 || begin_in.size() != 4 || end_in.size() != 4)
    return decline(why_not, "not a 4-D pad");
  for (size_t d = 0; d < 4; ++d) {
    if (x_in[d] <= 0) return decline(why_not, "empty tensor");
    if (begin_in[d] < 0 || end_in[d] < 0) return decline(why_not, "negative pads");
  }
  const int V = simd_width(isa);
  if (layout_block(l) > 1 && layout_block(l) != V)
    return decline(why_not, "blocked layout of another ISA");
  const bool channel_pads = begin_in[1] || end_in[1];
  const bool mirror = mode != "constant";
  if (mirror && mode != "reflect" && mode != "edge" && mode != "wrap")
    return decline(why_not, "unknown mode");
  if (mirror && (begin_in[0] || end_in[0] || channel_pads))
    return decline(why_not, "mode '" + mode + "' pads H and W only here");
  if (mirror && begin_in[3] + end_in[3] > 256)
    return decline(why_not, "more than 256 pad pixels per row");
  // The geometry below pads planes of rows. NHWC memory with channel pads is padded as the
  // row-major [N, H, W, C] it is (a row: one pixel's channels, [fill | copy | fill]); blocked
  // channel pads must be whole blocks before whole input blocks (pad blocks are planes).
  Shape x = x_in;
  std::vector<int64_t> begin = begin_in, end = end_in;
  Layout geo = l;
  if (channel_pads && l == Layout::nhwc) {
    x = {x_in[0], x_in[2], x_in[3], x_in[1]};
    begin = {begin_in[0], begin_in[2], begin_in[3], begin_in[1]};
    end = {end_in[0], end_in[2], end_in[3], end_in[1]};
    geo = Layout::nchw;
  }
  const int B = layout_block(geo);
  const int64_t c_out = x[1] + begin[1] + end[1];
  if (B > 1 && !blocked_channel_pads_ok(x[1], begin[1], end[1], value, B))
    return decline(why_not, channel_pads && (x[1] % B || begin[1] % B)
                                ? "blocked channel pads need whole input blocks and whole pad "
                                  "blocks before them"
                                : "a non-zero constant would fill the blocked pad lanes");
  const int64_t ho = x[2] + begin[2] + end[2], wo = x[3] + begin[3] + end[3];
  PadGeom g;
  g.n_begin = begin[0];
  g.n_in = x[0];
  g.n_out = x[0] + begin[0] + end[0];
  g.h_begin = begin[2];
  g.h_in = x[2];
  g.h_out = ho;
  const int64_t unit = geo == Layout::nchw ? 1 : geo == Layout::nhwc ? x[1] : B;  // floats a pixel
  if (geo == Layout::nchw) {
    g.planes_in_image = c_out;
    g.q_begin = begin[1];
    g.q_in = x[1];
  } else if (B > 1) {  // planes are channel blocks
    g.planes_in_image = (c_out + B - 1) / B;
    g.q_begin = begin[1] / B;
    g.q_in = (x[1] + B - 1) / B;
  }  // nhwc without channel pads: one plane per image, a row is W pixels of C floats
  g.mirror = mirror;
  g.reflect = mode == "reflect";
  g.wrap = mode == "wrap";
  g.unit = unit;
  if (mirror) {
    for (int64_t j = 0; j < begin[3]; ++j)
      g.left_src.push_back(pad_source_index(g.reflect, g.wrap, j - begin[3], x[3]));
    for (int64_t j = 0; j < end[3]; ++j)
      g.right_src.push_back(pad_source_index(g.reflect, g.wrap, x[3] + j, x[3]));
  }
  g.left = begin[3] * unit;
  g.copy = x[3] * unit;
  g.right = end[3] * unit;
  g.row_out = wo * unit;
  g.row_in = x[3] * unit;
  if (g.n_out * g.planes_in_image * ho * g.row_out > (int64_t(1) << 34) ||
      g.row_out > (int64_t(1) << 24))
    return decline(why_not, "tensor too large");
  const std::string name = std::string("pad_") + (mirror ? mode + "_" : "") + "f32_" +
                           layout_name(l) + "__" + isa_name(isa);
  return std::make_unique<PadKernel>(g, value, isa, name);
}

}  // namespace kiln
