// LRN (local response normalization across channels, AlexNet / GoogLeNet / Caffe models):
// y = x / (bias + alpha / size * sum of x^2 over channels [c - lo, c + hi])^beta.
// - nchw (any ISA): the window runs across channel planes, so each vector of pixels sums its
//   own lanes over the planes c - lo .. c + hi (loads at constant plane offsets). The channel
//   loop is split into runs with the same clipped window (the first lo and last hi channels
//   have their own), so no bounds test is left in the loop. A tile is a chunk of one image's
//   pixels small enough that the window's planes stay in L1 from one channel to the next.
// - nhwc and nChw16c (AVX-512): a vector holds 16 neighbouring channels, so the window is the
//   vector's squares shifted by up to lo / hi lanes, the lanes shifted in coming from the
//   previous / next vector of channels (valignd). Channels past C read as 0.
// The power is emit_pow (jit/glue/asm_math.h: two square roots for the usual beta 0.75), then
// one division, as the reference.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

using LrnFn = void (*)(const float* x, float* y);

// Bound on the loads / shifts one function unrolls (hostile shapes must not make huge code).
constexpr int64_t kMaxUnrolled = 16384;

struct LrnConf {
  LrnProblem p;
  Layout l = Layout::nchw;
  int64_t chunk = 0;  // pixels this function processes
  int64_t lo() const { return p.lo; }
  int64_t hi() const { return p.size - 1 - p.lo; }  // channels after c in its window
};

class LrnGen {
 public:
  LrnGen(AsmBuilder& b, const LrnConf& c) : b_(b), cc_(b.cc()), c_(c), V_(b.width()) {}

  void build() {
    b_.begin_function(asmjit::FuncSignatureT<void, const float*, float*>());
    x_ = b_.gp();
    y_ = b_.gp();
    b_.func()->setArg(0, x_);
    b_.func()->setArg(1, y_);
    coef_ = b_.bcast(float(double(c_.p.alpha) / double(c_.p.size)));
    bias_ = b_.bcast(c_.p.bias);
    if (c_.l == Layout::nchw)
      planes();
    else
      lanes();
    b_.end_function();
  }

 private:
  // y = x / (bias + coef * acc)^beta into out (acc is clobbered).
  void finish(const x86::Vec& acc, const x86::Vec& x, const x86::Vec& out) {
    cc_.vfmadd132ps(acc, bias_, coef_);
    glue::emit_pow(b_, acc, c_.p.beta);
    cc_.vdivps(out, x, acc);
  }

  void planes() {
    const int64_t C = c_.p.c, plane = c_.p.pixels * 4;
    const int64_t full = c_.chunk / V_, tail = c_.chunk % V_;
    const Mask tm = tail ? b_.mask(int(tail)) : Mask{};
    x86::Gp xc = b_.gp(), yc = b_.gp(), off = b_.gp(), k = b_.gp(), cnt = b_.gp();
    cc_.mov(xc, x_);
    cc_.mov(yc, y_);
    // The pixels of channel c (at xc / yc) with the window c + [dlo, dhi].
    auto channel = [&](int64_t dlo, int64_t dhi) {
      auto vector = [&](const Mask* m) {
        x86::Vec acc = b_.vec(), t = b_.vec(), xv = b_.vec();
        cc_.vxorps(acc, acc, acc);
        for (int64_t d = dlo; d <= dhi; ++d) {
          b_.load(t, x86::ptr(xc, off, 0, int32_t(d * plane)), m);
          cc_.vfmadd231ps(acc, t, t);
          if (d == 0) cc_.vmovaps(xv, t);
        }
        finish(acc, xv, acc);
        b_.store(x86::ptr(yc, off), acc, m);
      };
      cc_.xor_(off, off);
      if (full > 0) {
        asmjit::Label top = cc_.newLabel();
        cc_.mov(k, full);
        cc_.bind(top);
        vector(nullptr);
        cc_.add(off, V_ * 4);
        cc_.dec(k);
        cc_.jnz(top);
      }
      if (tail) vector(&tm);
    };
    // Runs of channels with the same clipped window.
    for (int64_t c = 0; c < C;) {
      const int64_t dlo = std::max(-c_.lo(), -c), dhi = std::min(c_.hi(), C - 1 - c);
      int64_t run = 1;
      while (c + run < C && std::max(-c_.lo(), -(c + run)) == dlo &&
             std::min(c_.hi(), C - 1 - (c + run)) == dhi)
        ++run;
      asmjit::Label top = cc_.newLabel();
      cc_.mov(cnt, run);
      cc_.bind(top);
      channel(dlo, dhi);
      cc_.add(xc, plane);
      cc_.add(yc, plane);
      cc_.dec(cnt);
      cc_.jnz(top);
      c += run;
    }
  }

  void lanes() {
    const bool nhwc = c_.l == Layout::nhwc;
    const int64_t C = c_.p.c, nv = (C + 15) / 16;
    const int64_t vstride = nhwc ? 64 : c_.p.pixels * 64, pstride = nhwc ? C * 4 : 64;
    const Mask tm = b_.mask(int(C - (nv - 1) * 16));
    x86::Vec zero = b_.vec();
    cc_.vxorps(zero, zero, zero);
    x86::Gp xp = b_.gp(), yp = b_.gp(), k = b_.gp();
    // Channel vector v of the pixel at xp / yp.
    auto vector = [&](int64_t v) {
      // Squares of vectors v - 1, v, v + 1 (0 where there is none or no lane reaches it).
      auto squares = [&](int64_t u, x86::Vec* raw) {
        if (u < 0 || u >= nv) return zero;
        x86::Vec t = b_.vec(), s = b_.vec();
        b_.load(t, x86::ptr(xp, int32_t(u * vstride)), u == nv - 1 ? &tm : nullptr);
        cc_.vmulps(s, t, t);
        if (raw) *raw = t;
        return s;
      };
      x86::Vec xv;
      const x86::Vec cur = squares(v, &xv);
      const x86::Vec prev = c_.lo() > 0 ? squares(v - 1, nullptr) : zero;
      const x86::Vec next = c_.hi() > 0 ? squares(v + 1, nullptr) : zero;
      x86::Vec acc = b_.vec(), t = b_.vec();
      cc_.vmovaps(acc, cur);
      for (int64_t d = 1; d <= c_.hi(); ++d) {  // lane i gets channel i + d
        if (d < 16) cc_.valignd(t, next, cur, int(d));
        cc_.vaddps(acc, acc, d < 16 ? t : next);
      }
      for (int64_t d = 1; d <= c_.lo(); ++d) {  // lane i gets channel i - d
        if (d < 16) cc_.valignd(t, cur, prev, int(16 - d));
        cc_.vaddps(acc, acc, d < 16 ? t : prev);
      }
      finish(acc, xv, acc);
      // Blocked: pad lanes are x = 0 over a positive power, so 0 (or NaN with bias 0, as
      // the reference would give for a channel of zeros): zero them explicitly.
      if (!nhwc && v == nv - 1) b_.zero_past(acc, tm);
      b_.store(x86::ptr(yp, int32_t(v * vstride)), acc, nhwc && v == nv - 1 ? &tm : nullptr);
    };
    auto pixel_loop = [&](const std::function<void()>& body) {
      asmjit::Label top = cc_.newLabel();
      cc_.mov(k, c_.chunk);
      cc_.bind(top);
      body();
      cc_.add(xp, pstride);
      cc_.add(yp, pstride);
      cc_.dec(k);
      cc_.jnz(top);
    };
    if (nhwc) {  // pixel-major: a pixel's channels are contiguous
      cc_.mov(xp, x_);
      cc_.mov(yp, y_);
      pixel_loop([&] {
        for (int64_t v = 0; v < nv; ++v) vector(v);
      });
    } else {  // channel-block-major: each block's pixels are contiguous
      for (int64_t v = 0; v < nv; ++v) {
        cc_.mov(xp, x_);
        cc_.mov(yp, y_);
        pixel_loop([&] { vector(v); });
      }
    }
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  const LrnConf& c_;
  const int V_;
  x86::Gp x_, y_;
  x86::Vec coef_, bias_;
};

class LrnKernel : public glue::GlueKernel {
 public:
  LrnKernel(const LrnProblem& p, Layout l, Isa isa, int64_t chunk)
      : image_(layout_elems(l, {1, p.c, p.pixels, 1})),
        tile_(chunk * (l == Layout::nchw   ? 1
                       : l == Layout::nhwc ? p.c
                                           : 16)) {
    name_ = std::string("lrn_f32_") + layout_name(l) + "__" + isa_name(isa);
    per_image_ = (p.pixels + chunk - 1) / chunk;
    tiles_ = p.n * per_image_;
    const int64_t last = p.pixels - (per_image_ - 1) * chunk;
    AsmBuilder b(name_, isa);
    for (int64_t len : {chunk, last}) {
      LrnConf conf{p, l, len};
      LrnGen(b, conf).build();
      if (last == chunk) break;
    }
    code_ = b.finish();
    full_ = b.entry<LrnFn>(code_, 0);
    last_ = b.entry<LrnFn>(code_, b.function_count() - 1);
  }
  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / per_image_, j = t % per_image_;
      const int64_t off = n * image_ + j * tile_;
      (j == per_image_ - 1 ? last_ : full_)(a.src[0] + off, a.dst[0] + off);
    }
  }

 private:
  int64_t image_, tile_;  // floats per image and per tile (a chunk of pixels) in the layout
  int64_t per_image_ = 1;
  LrnFn full_ = nullptr, last_ = nullptr;
};

}  // namespace

std::unique_ptr<Kernel> create_lrn_kernel(const LrnProblem& p, Layout l, Isa isa,
                                          std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (p.n <= 0 || p.c <= 0 || p.pixels <= 0) return decline(why_not, "empty tensor");
  if (p.size < 1 || p.lo < 0 || p.lo >= p.size)
    return decline(why_not, "size < 1 or lo outside [0, size)");
  const int64_t lo = p.lo, hi = p.size - 1 - lo;
  int64_t chunk = 0;
  if (l == Layout::nchw) {
    // The window's planes must be reachable by 32-bit displacements.
    if ((std::min(hi, p.c) + 1) * p.pixels * 4 > (int64_t(1) << 31) ||
        std::min(lo, p.c) * p.pixels * 4 > (int64_t(1) << 31))
      return decline(why_not, "channel planes too large");
    // The code unrolls each run's window: about min(size, C)^2 loads (a window wider than a few
    // hundred channels would make megabytes of code; no real model comes near).
    const int64_t w = std::min(p.size, p.c);
    if (w * w > kMaxUnrolled)
      return decline(why_not,
                     "window too wide to unroll (> " + std::to_string(kMaxUnrolled) + " loads)");
    chunk = std::min<int64_t>(p.pixels, 1024);  // size planes x 4 KiB stay in L1
  } else if (l == Layout::nhwc || l == Layout::nChw16c) {
    if (isa != Isa::avx512)
      return decline(why_not, "nhwc / blocked need AVX-512 (lane shifts across a vector)");
    if (!lrn_lanes_reach(p))
      return decline(why_not, "window reaches past the next vector of channels (> 16)");
    const int64_t nv = (p.c + 15) / 16;
    if (nv * (lo + hi + 1) > kMaxUnrolled) return decline(why_not, "too many channels to unroll");
    if ((l == Layout::nhwc ? p.c * 4 : nv * p.pixels * 64) > (int64_t(1) << 30))
      return decline(why_not, "image too large");
    chunk = std::min<int64_t>(p.pixels, l == Layout::nhwc ? 256 : 128);
  } else {
    return decline(why_not,
                   std::string("layout ") + layout_name(l) + " (nchw, nhwc, nChw16c only)");
  }
  return std::make_unique<LrnKernel>(p, l, isa, chunk);
}

}  // namespace kiln
