// GridSample in nhwc and the ISA's blocked layout, where each input pixel's channels are whole
// vectors: an output pixel is the weighted sum of its taps' channel vectors (1, 4 or 16 taps,
// graph/grid_sample.h). Per tile, C++ turns the grid into a table of (byte offset, weight) per
// tap (the coordinate arithmetic, a few dozen scalar operations a pixel); the generated code
// then sums the channels, up to 8 vectors of them per pass over the taps (the weight
// broadcast once per tap and pass). A tap outside the image has weight 0 and offset 0.
#include "graph/grid_sample.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

struct GsTap {
  int64_t off;  // bytes from the image's first pixel
  float w;
  float unused;
};
static_assert(sizeof(GsTap) == 16);
using GsFn = void (*)(const float* x, float* y, const GsTap* taps, int64_t count);

constexpr int64_t kChunk = 256;  // output pixels per tile
constexpr int kGroup = 8;        // channel vectors summed per pass over the taps

struct GsConf {
  int taps = 4;
  int64_t vecs = 1;                      // channel vectors per pixel
  int tail = 0;                          // valid lanes of the last vector (0: full)
  bool blocked = false;                  // else nhwc
  int64_t x_vstride = 0, y_vstride = 0;  // bytes between a pixel's channel vectors
  int64_t y_pstride = 0;                 // bytes between consecutive output pixels
};

void build(AsmBuilder& b, const GsConf& c) {
  auto& cc = b.cc();
  b.begin_function(asmjit::FuncSignatureT<void, const float*, float*, const GsTap*, int64_t>());
  x86::Gp x = b.gp(), y = b.gp(), taps = b.gp(), count = b.gp(), off = b.gp();
  b.func()->setArg(0, x);
  b.func()->setArg(1, y);
  b.func()->setArg(2, taps);
  b.func()->setArg(3, count);
  const Mask tm = c.tail ? b.mask(c.tail) : Mask{};
  asmjit::Label top = cc.newLabel(), done = cc.newLabel();
  cc.test(count, count);
  cc.jz(done);
  cc.bind(top);
  for (int64_t v0 = 0; v0 < c.vecs; v0 += kGroup) {
    const int64_t n = std::min<int64_t>(kGroup, c.vecs - v0);
    std::vector<x86::Vec> acc;
    for (int64_t g = 0; g < n; ++g) {
      acc.push_back(b.vec());
      cc.vxorps(acc.back(), acc.back(), acc.back());
    }
    x86::Vec w = b.vec(), t = b.vec();
    for (int k = 0; k < c.taps; ++k) {
      cc.mov(off, x86::qword_ptr(taps, k * 16));
      cc.vbroadcastss(w, x86::dword_ptr(taps, k * 16 + 8));
      for (int64_t g = 0; g < n; ++g) {
        const int64_t v = v0 + g;
        const x86::Mem m = x86::ptr(x, off, 0, int32_t(v * c.x_vstride));
        if (v == c.vecs - 1 && c.tail) {  // lanes past C read as 0 (blocked: pad lanes stay 0)
          b.load(t, m, &tm);
          cc.vfmadd231ps(acc[size_t(g)], w, t);
        } else {
          cc.vfmadd231ps(acc[size_t(g)], w, m);
        }
      }
    }
    for (int64_t g = 0; g < n; ++g) {
      const int64_t v = v0 + g;
      const bool masked = v == c.vecs - 1 && c.tail && !c.blocked;
      b.store(x86::ptr(y, int32_t(v * c.y_vstride)), acc[size_t(g)], masked ? &tm : nullptr);
    }
  }
  cc.add(taps, c.taps * int64_t(sizeof(GsTap)));
  cc.add(y, c.y_pstride);
  cc.dec(count);
  cc.jnz(top);
  cc.bind(done);
  b.end_function();
}

class GridSampleKernel : public glue::GlueKernel {
 public:
  GridSampleKernel(const Shape& x, const Shape& grid, const GridSampleSpec& s, Layout l, Isa isa)
      : s_(s), n_(x[0]), c_(x[1]), h_(x[2]), w_(x[3]), pixels_(grid[1] * grid[2]) {
    const int V = simd_width(isa);
    const bool blocked = l != Layout::nhwc;
    GsConf c;
    c.taps = s.taps();
    c.vecs = (c_ + V - 1) / V;
    c.tail = int(c_ % V);
    c.blocked = blocked;
    c.x_vstride = blocked ? h_ * w_ * V * 4 : V * 4;
    c.y_vstride = blocked ? pixels_ * V * 4 : V * 4;
    y_pixel_ = blocked ? V : c_;  // floats between pixels, in and out alike
    c.y_pstride = pix_bytes_ = y_pixel_ * 4;
    x_image_ = layout_elems(l, {1, c_, h_, w_});
    y_image_ = layout_elems(l, {1, c_, grid[1], grid[2]});
    name_ = std::string("grid_sample_") + grid_mode_name(s) + "_f32_" + layout_name(l) + "__" +
            isa_name(isa);
    AsmBuilder b(name_, isa);
    build(b, c);
    code_ = b.finish();
    fn_ = b.entry<GsFn>(code_, 0);
    per_image_ = (pixels_ + kChunk - 1) / kChunk;
    tiles_ = n_ * per_image_;
  }

  int64_t scratch_bytes() const override { return kChunk * s_.taps() * int64_t(sizeof(GsTap)); }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    auto* table = reinterpret_cast<GsTap*>(scratch_floats(a));
    GridTap taps[16];
    const int T = s_.taps();
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / per_image_, p0 = (t % per_image_) * kChunk;
      const int64_t count = std::min(kChunk, pixels_ - p0);
      const float* g = a.src[1] + (n * pixels_ + p0) * 2;
      for (int64_t p = 0; p < count; ++p) {
        grid_taps(s_, g[2 * p], g[2 * p + 1], h_, w_, taps);
        for (int k = 0; k < T; ++k) {
          const bool in = taps[k].pixel >= 0;
          table[p * T + k] = {in ? taps[k].pixel * pix_bytes_ : 0, in ? taps[k].w : 0.f, 0.f};
        }
      }
      fn_(a.src[0] + n * x_image_, a.dst[0] + n * y_image_ + p0 * y_pixel_, table, count);
    }
  }

 private:
  static const char* grid_mode_name(const GridSampleSpec& s) {
    return s.mode == GridSampleSpec::Mode::nearest   ? "nearest"
           : s.mode == GridSampleSpec::Mode::bicubic ? "bicubic"
                                                     : "bilinear";
  }

  GridSampleSpec s_;
  int64_t n_, c_, h_, w_, pixels_, pix_bytes_ = 0, x_image_ = 0, y_image_ = 0, y_pixel_ = 0;
  int64_t per_image_ = 1;
  GsFn fn_ = nullptr;
};

}  // namespace

std::unique_ptr<Kernel> create_grid_sample_kernel(const Shape& x, const Shape& grid,
                                                  const GridSampleSpec& s, Layout l, Isa isa,
                                                  std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (x.size() != 4 || grid.size() != 4 || grid[0] != x[0] || grid[3] != 2)
    return decline(why_not, "not [N, C, H, W] sampled at [N, Ho, Wo, 2]");
  if (shape_numel(x) == 0 || shape_numel(grid) == 0) return decline(why_not, "empty tensor");
  if (l != Layout::nhwc && l != blocked_layout(isa))
    return decline(why_not,
                   std::string("layout ") + layout_name(l) + " (nhwc or the ISA's blocked layout)");
  const int64_t V = simd_width(isa), vecs = (x[1] + V - 1) / V;
  // Vector displacements are 32-bit: the image's channel vectors must be within 2 GiB.
  if (vecs * V * x[2] * x[3] * 4 > (int64_t(1) << 31) ||
      vecs * V * grid[1] * grid[2] * 4 > (int64_t(1) << 31))
    return decline(why_not, "image too large");
  // The code unrolls every channel vector's taps (hostile channel counts must not make huge code).
  if (vecs * s.taps() > 16384) return decline(why_not, "too many channels to unroll");
  return std::make_unique<GridSampleKernel>(x, grid, s, l, isa);
}

}  // namespace kiln
