// Instance / GroupNormalization in the ISA's blocked layout (nChw16c / nChw8c), so that the
// convs around it keep their layout instead of converting to nchw and back for the rows kernel
// (jit/glue/layernorm.cpp). A call covers `kb` consecutive channel blocks of one image (one
// block when a group's channels fit in one, else the group's blocks), all pixels: each lane
// sums its channel over the pixels (four accumulators), lanes of one group are combined by a
// butterfly (permutes within the vector), then mean, variance (two passes, as ONNX's function
// body) and y = (x - mean) * rstd * gamma + beta and the fused post-ops; pad lanes stay 0.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
namespace x86 = asmjit::x86;

struct GnbArgs {
  const float* x;
  float* y;
  const float* gamma;  // kb vectors each: this call's channels (pad lanes 0)
  const float* beta;
  const float* keep;  // all-ones bits for real channels, 0 for pad lanes
};
using GnbFn = void (*)(const GnbArgs*);

struct GnbConf {
  int64_t pixels = 0, kb = 1;
  int lane_group = 1;  // lanes one group spans inside a vector (1 .. V)
  float inv_count = 0, eps = 0;
  bool keep = false;  // pad lanes to re-zero after the post-ops
  std::vector<PostOp> post;
};

class GnbGen {
 public:
  GnbGen(AsmBuilder& b, const GnbConf& c) : b_(b), cc_(b.cc()), c_(c), V_(b.width()) {}

  void build() {
    b_.begin_function(asmjit::FuncSignatureT<void, const GnbArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    x86::Gp x = b_.gp(), y = b_.gp(), gamma = b_.gp(), beta = b_.gp(), keep = b_.gp();
    cc_.mov(x, x86::ptr(args, offsetof(GnbArgs, x)));
    cc_.mov(y, x86::ptr(args, offsetof(GnbArgs, y)));
    cc_.mov(gamma, x86::ptr(args, offsetof(GnbArgs, gamma)));
    cc_.mov(beta, x86::ptr(args, offsetof(GnbArgs, beta)));
    cc_.mov(keep, x86::ptr(args, offsetof(GnbArgs, keep)));
    // Pass 1: mean.
    x86::Vec mean = sum_over(x, nullptr);
    cc_.vmulps(mean, mean, b_.cf32(c_.inv_count));
    // Pass 2: variance, then rstd = 1 / sqrt(var + eps).
    x86::Vec rstd = sum_over(x, &mean);
    cc_.vmulps(rstd, rstd, b_.cf32(c_.inv_count));
    cc_.vaddps(rstd, rstd, b_.cf32(c_.eps));
    cc_.vsqrtps(rstd, rstd);
    cc_.vdivps(rstd, b_.bcast(1.f), rstd);
    // Pass 3, block by block: y = (x - mean) * rstd * gamma + beta, post-ops.
    x86::Vec t = b_.vec(), gv = b_.vec(), bv = b_.vec();
    x86::Gp xs = b_.gp(), yo = b_.gp(), blocks = b_.gp(), k = b_.gp();
    cc_.mov(xs, x);
    cc_.mov(yo, y);
    cc_.mov(blocks, c_.kb);
    asmjit::Label block = cc_.newLabel(), pixel = cc_.newLabel();
    cc_.bind(block);
    cc_.vmovups(gv, x86::ptr(gamma));
    cc_.vmovups(bv, x86::ptr(beta));
    cc_.mov(k, c_.pixels);
    cc_.bind(pixel);
    cc_.vmovups(t, x86::ptr(xs));
    cc_.vsubps(t, t, mean);
    cc_.vmulps(t, t, rstd);
    cc_.vfmadd213ps(t, gv, bv);
    for (const PostOp& op : c_.post) glue::emit_post_op(b_, t, op);
    if (c_.keep) cc_.vandps(t, t, x86::ptr(keep));
    cc_.vmovups(x86::ptr(yo), t);
    cc_.add(xs, V_ * 4);
    cc_.add(yo, V_ * 4);
    cc_.dec(k);
    cc_.jnz(pixel);
    cc_.add(gamma, V_ * 4);
    cc_.add(beta, V_ * 4);
    cc_.add(keep, V_ * 4);
    cc_.dec(blocks);
    cc_.jnz(block);
    b_.end_function();
  }

 private:
  // Per lane, the sum over the call's kb * pixels vectors of x (mean == nullptr) or of
  // (x - mean)^2, in four accumulators; then summed over each group's lanes.
  x86::Vec sum_over(const x86::Gp& x, const x86::Vec* mean) {
    const int64_t n = c_.kb * c_.pixels;
    x86::Vec acc[4], t = b_.vec();
    for (x86::Vec& a : acc) {
      a = b_.vec();
      cc_.vxorps(a, a, a);
    }
    auto one = [&](const x86::Vec& a, const x86::Mem& m) {
      if (!mean) {
        cc_.vaddps(a, a, m);
        return;
      }
      cc_.vmovups(t, m);
      cc_.vsubps(t, t, *mean);
      cc_.vfmadd231ps(a, t, t);
    };
    x86::Gp p = b_.gp();
    cc_.mov(p, x);
    if (n / 4 > 0) {
      x86::Gp k = b_.gp();
      cc_.mov(k, n / 4);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      for (int j = 0; j < 4; ++j) one(acc[j], x86::ptr(p, j * V_ * 4));
      cc_.add(p, 4 * V_ * 4);
      cc_.dec(k);
      cc_.jnz(top);
    }
    for (int j = 0; j < int(n % 4); ++j) one(acc[j], x86::ptr(p, j * V_ * 4));
    cc_.vaddps(acc[0], acc[0], acc[1]);
    cc_.vaddps(acc[2], acc[2], acc[3]);
    cc_.vaddps(acc[0], acc[0], acc[2]);
    // Butterfly over the lanes of a group (aligned runs of lane_group lanes).
    for (int s = 1; s < c_.lane_group; s *= 2) {
      if (s == 1) {
        cc_.vpermilps(t, acc[0], 0xB1);  // swap neighbours
      } else if (s == 2) {
        cc_.vpermilps(t, acc[0], 0x4E);  // swap pairs
      } else if (s == 4) {
        if (b_.avx512())
          cc_.vshuff32x4(t, acc[0], acc[0], 0xB1);  // swap 128-bit lanes in 256-bit halves
        else
          cc_.vperm2f128(t, acc[0], acc[0], 0x01);
      } else {
        cc_.vshuff32x4(t, acc[0], acc[0], 0x4E);  // swap 256-bit halves
      }
      cc_.vaddps(acc[0], acc[0], t);
    }
    return acc[0];
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  const GnbConf& c_;
  const int V_;
};

class GnBlockedKernel : public glue::GlueKernel {
 public:
  GnBlockedKernel(const GnbConf& conf, int64_t n, int64_t blocks, const float* gamma,
                  const float* beta, int64_t c, Isa isa, std::string name)
      : n_(n), blocks_(blocks), kb_(conf.kb), pixels_(conf.pixels), V_(simd_width(isa)) {
    name_ = std::move(name);
    const size_t padded = size_t(blocks * V_);
    params_.assign(3 * padded, 0.f);
    std::copy(gamma, gamma + c, params_.begin());
    std::copy(beta, beta + c, params_.begin() + std::ptrdiff_t(padded));
    const float ones = std::bit_cast<float>(0xffffffffu);
    std::fill(params_.begin() + std::ptrdiff_t(2 * padded),
              params_.begin() + std::ptrdiff_t(2 * padded) + c, ones);
    padded_ = padded;
    AsmBuilder b(name_, isa);
    GnbGen(b, conf).build();
    code_ = b.finish();
    fn_ = b.entry<GnbFn>(code_, 0);
    tiles_ = n_ * (blocks_ / kb_);
  }
  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const int64_t calls = blocks_ / kb_;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t img = t / calls, b0 = (t % calls) * kb_;
      const int64_t off = (img * blocks_ + b0) * pixels_ * V_;
      const float* g = params_.data() + b0 * V_;
      GnbArgs args{a.src[0] + off, a.dst[0] + off, g, g + padded_, g + 2 * padded_};
      fn_(&args);
    }
  }

 private:
  int64_t n_, blocks_, kb_, pixels_, V_;
  std::vector<float> params_;  // gamma, beta, keep bits: blocks x V floats each
  size_t padded_ = 0;
  GnbFn fn_ = nullptr;
};

}  // namespace

std::unique_ptr<Kernel> create_groupnorm_blocked_kernel(int64_t n, int64_t c, int64_t groups,
                                                        int64_t pixels, float eps,
                                                        const float* gamma, const float* beta,
                                                        Isa isa, std::string* why_not,
                                                        const std::vector<PostOp>& post) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (n <= 0 || c <= 0 || pixels <= 0 || groups <= 0 || c % groups)
    return decline(why_not, "empty tensor or bad groups");
  const int64_t V = simd_width(isa), gs = c / groups;
  // A group's channels: whole aligned runs inside a vector (1, 2, 4, .. V), or whole vectors.
  if (!(gs <= V && V % gs == 0) && gs % V != 0)
    return decline(why_not, "a group's " + std::to_string(gs) + " channels straddle blocks of " +
                                std::to_string(V));
  if (pixels > (int64_t(1) << 30) || n * c * pixels > (int64_t(1) << 40))
    return decline(why_not, "tensor too large");
  std::string bad;
  const std::string pp = glue::post_part(post, &bad);
  if (!bad.empty()) return decline(why_not, bad);
  GnbConf conf;
  conf.pixels = pixels;
  conf.kb = gs > V ? gs / V : 1;
  conf.lane_group = int(std::min(gs, V));
  conf.inv_count = float(1.0 / double(gs * pixels));
  conf.eps = eps;
  conf.keep = !post.empty() && c % V != 0;
  conf.post = post;
  const int64_t blocks = (c + V - 1) / V;
  return std::make_unique<GnBlockedKernel>(
      conf, n, blocks, gamma, beta, c, isa,
      std::string("groupnorm_f32_") + layout_name(blocked_layout(isa)) + pp + "__" + isa_name(isa));
}

}  // namespace kiln
