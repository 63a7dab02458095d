// Reductions over groups of c floats, one group per row (a pixel's channels in nhwc or
// nChw8c/16c, a row of a row-major tensor), then a map of the row:
// - LayerNormalization: mean, then the mean of squared deviations (two passes, as ONNX's
//   function body; the row stays in L1 between passes), then y = (x - mean) * rstd * gamma +
//   beta;
// - Softmax: max, then e = exp(x - max) stored to y while summing, then y = e / sum (the
//   reference's single division); LogSoftmax: the same sum, then y = x - (max + log(sum)).
// The last vector of a row is masked: its lanes past c are not read (nhwc) or are zeroed
// (blocked: pad lanes, written as 0 through zero-padded gamma/beta or zeroed exps).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

struct LnArgs {
  const float* x;
  float* y;
  int64_t rows;
  const float* gamma;  // c floats padded to whole vectors with zeros
  const float* beta;
};
using LnFn = void (*)(const LnArgs*);

struct LnConf {
  int64_t c = 0;
  int64_t vecs = 0;        // vectors per row, the last one masked when c % V
  int64_t vec_stride = 0;  // bytes between a row's vectors
  int64_t row_stride = 0;  // bytes between consecutive rows
  bool store_pad = false;  // write the last vector whole (blocked: zero pad lanes)
  float eps = 0;
  bool softmax = false;  // else LayerNorm
  bool log = false;      // LogSoftmax
  // GroupNorm (nchw): the row is `segs` channels of `seg` pixels, gamma / beta one per channel
  // (advancing by segs per row); 0 = LayerNorm's per-element gamma / beta.
  int64_t segs = 0, seg = 0;
  std::vector<PostOp> post;  // one-input post-ops applied to y (LayerNorm / GroupNorm)
};

class LnGen {
 public:
  LnGen(AsmBuilder& b, const LnConf& c) : b_(b), cc_(b.cc()), c_(c), V_(b.width()) {}

  void build() {
    b_.begin_function(asmjit::FuncSignatureT<void, const LnArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    x86::Gp x = b_.gp(), y = b_.gp(), rows = b_.gp(), gamma = b_.gp(), beta = b_.gp();
    cc_.mov(x, x86::ptr(args, offsetof(LnArgs, x)));
    cc_.mov(y, x86::ptr(args, offsetof(LnArgs, y)));
    cc_.mov(rows, x86::ptr(args, offsetof(LnArgs, rows)));
    cc_.mov(gamma, x86::ptr(args, offsetof(LnArgs, gamma)));
    cc_.mov(beta, x86::ptr(args, offsetof(LnArgs, beta)));
    const int tail = int(c_.c - (c_.vecs - 1) * V_);  // valid lanes of the last vector
    tail_ = b_.mask(tail);
    asmjit::Label row = cc_.newLabel(), done = cc_.newLabel();
    cc_.test(rows, rows);
    cc_.jz(done);
    cc_.bind(row);
    if (c_.softmax) {
      softmax_row(x, y);
    } else {
      // Pass 1: mean.
      x86::Vec acc = b_.vec(), t = b_.vec();
      cc_.vxorps(acc, acc, acc);
      over_row(x, [&](const x86::Mem& m, bool last) {
        load(t, m, last);
        cc_.vaddps(acc, acc, t);
      });
      x86::Vec mean = reduce_bcast(acc, false);
      cc_.vmulps(mean, mean, b_.cf32(float(1.0 / double(c_.c))));
      // Pass 2: variance; lanes past c count as 0.
      x86::Vec acc2 = b_.vec();
      cc_.vxorps(acc2, acc2, acc2);
      over_row(x, [&](const x86::Mem& m, bool last) {
        deviation(t, m, mean, last);
        cc_.vfmadd231ps(acc2, t, t);
      });
      x86::Vec rstd = reduce_bcast(acc2, false);
      cc_.vmulps(rstd, rstd, b_.cf32(float(1.0 / double(c_.c))));
      cc_.vaddps(rstd, rstd, b_.cf32(c_.eps));
      cc_.vsqrtps(rstd, rstd);
      x86::Vec one = b_.bcast(1.f);
      cc_.vdivps(rstd, one, rstd);
      if (c_.segs) {
        group_affine(x, y, gamma, beta, mean, rstd);
        cc_.add(gamma, c_.segs * 4);
        cc_.add(beta, c_.segs * 4);
      } else {
        layer_affine(x, y, gamma, beta, mean, rstd);
      }
    }
    cc_.add(x, c_.row_stride);
    cc_.add(y, c_.row_stride);
    cc_.dec(rows);
    cc_.jnz(row);
    cc_.bind(done);
    b_.end_function();
  }

 private:
  // LayerNorm's pass 3: y = (x - mean) * rstd * gamma + beta, gamma / beta per element.
  void layer_affine(const x86::Gp& x, const x86::Gp& y, const x86::Gp& gamma, const x86::Gp& beta,
                    const x86::Vec& mean, const x86::Vec& rstd) {
    x86::Vec t = b_.vec();
    x86::Gp g = b_.gp(), bt = b_.gp(), yo = b_.gp();
    cc_.mov(g, gamma);
    cc_.mov(bt, beta);
    cc_.mov(yo, y);
    over_row(
        x,
        [&](const x86::Mem& m, bool last) {
          deviation(t, m, mean, last);
          cc_.vmulps(t, t, rstd);
          cc_.vmulps(t, t, x86::ptr(g));
          cc_.vaddps(t, t, x86::ptr(bt));
          if (!c_.post.empty()) {
            for (const PostOp& op : c_.post) glue::emit_post_op(b_, t, op);
            zero_tail(t, last);  // blocked pad lanes stay 0 whatever f(0) is
          }
          store(x86::ptr(yo), t, last);
          cc_.add(g, V_ * 4);
          cc_.add(bt, V_ * 4);
        },
        &yo);
  }

  // GroupNorm's pass 3: y = (x - mean) * rstd * gamma[s] + beta[s] over each channel s of the
  // row (`seg` contiguous floats, its last vector masked: channels need not start on a vector).
  void group_affine(const x86::Gp& x, const x86::Gp& y, const x86::Gp& gamma, const x86::Gp& beta,
                    const x86::Vec& mean, const x86::Vec& rstd) {
    const int64_t full = c_.seg / V_;
    const Mask seg_tail = c_.seg % V_ ? b_.mask(int(c_.seg % V_)) : Mask{};
    x86::Vec t = b_.vec(), gv = b_.vec(), bv = b_.vec();
    x86::Gp xs = b_.gp(), yo = b_.gp(), g = b_.gp(), bt = b_.gp(), s = b_.gp(), k = b_.gp();
    cc_.mov(xs, x);
    cc_.mov(yo, y);
    cc_.mov(g, gamma);
    cc_.mov(bt, beta);
    cc_.mov(s, c_.segs);
    asmjit::Label seg = cc_.newLabel();
    cc_.bind(seg);
    cc_.vbroadcastss(gv, x86::dword_ptr(g));
    cc_.vbroadcastss(bv, x86::dword_ptr(bt));
    auto one = [&](const Mask* m) {
      b_.load(t, x86::ptr(xs), m);
      cc_.vsubps(t, t, mean);
      cc_.vmulps(t, t, rstd);
      cc_.vfmadd213ps(t, gv, bv);
      for (const PostOp& op : c_.post) glue::emit_post_op(b_, t, op);
      b_.store(x86::ptr(yo), t, m);
    };
    if (full > 0) {
      asmjit::Label top = cc_.newLabel();
      cc_.mov(k, full);
      cc_.bind(top);
      one(nullptr);
      cc_.add(xs, V_ * 4);
      cc_.add(yo, V_ * 4);
      cc_.dec(k);
      cc_.jnz(top);
    }
    if (c_.seg % V_) {
      one(&seg_tail);
      cc_.add(xs, (c_.seg % V_) * 4);
      cc_.add(yo, (c_.seg % V_) * 4);
    }
    cc_.add(g, 4);
    cc_.add(bt, 4);
    cc_.dec(s);
    cc_.jnz(seg);
  }

  void softmax_row(const x86::Gp& x, const x86::Gp& y) {
    // Pass 1: max; lanes past c count as -inf.
    x86::Vec mx = b_.bcast(-INFINITY), t = b_.vec();
    over_row(x, [&](const x86::Mem& m, bool last) {
      if (last)
        b_.load_fill(t, m, tail_, -INFINITY);
      else
        cc_.vmovups(t, m);
      cc_.vmaxps(mx, mx, t);  // a NaN may be lost here but poisons the sum below, as in ONNX
    });
    mx = reduce_bcast(mx, true);
    // Pass 2: y = exp(x - max) (LogSoftmax: not stored), summed; lanes past c are 0.
    x86::Vec sum = b_.vec();
    cc_.vxorps(sum, sum, sum);
    x86::Gp yo = b_.gp();
    cc_.mov(yo, y);
    over_row(
        x,
        [&](const x86::Mem& m, bool last) {
          load(t, m, last);
          cc_.vsubps(t, t, mx);
          glue::emit_exp(b_, t, t);
          zero_tail(t, last);
          cc_.vaddps(sum, sum, t);
          if (!c_.log) store(x86::ptr(yo), t, last);
        },
        &yo);
    sum = reduce_bcast(sum, false);
    if (c_.log) {
      // Pass 3: y = x - (max + log(sum)).
      glue::emit_log(b_, sum);
      cc_.vaddps(sum, sum, mx);
      x86::Gp yl = b_.gp();
      cc_.mov(yl, y);
      over_row(
          x,
          [&](const x86::Mem& m, bool last) {
            load(t, m, last);
            cc_.vsubps(t, t, sum);
            zero_tail(t, last);
            store(x86::ptr(yl), t, last);
          },
          &yl);
      return;
    }
    // Pass 3: y /= sum.
    over_row(y, [&](const x86::Mem& m, bool last) {
      load(t, m, last);
      cc_.vdivps(t, t, sum);
      zero_tail(t, last);  // 0 / NaN in the pad lanes of a row holding NaN
      store(m, t, last);
    });
  }

  void store(const x86::Mem& dst, const x86::Vec& v, bool last) {
    if (last && !c_.store_pad)
      b_.store(dst, v, &tail_);
    else
      cc_.vmovups(dst, v);
  }

  // d's lanes past c = 0 (the row's last vector).
  void zero_tail(const x86::Vec& d, bool last) {
    if (last) b_.zero_past(d, tail_);
  }

  // body(mem, last) for each vector of the row at `base` (a loop over the full vectors, then
  // the masked last one). `also` (optional) advances with the row pointer.
  template <class F>
  void over_row(const x86::Gp& base, F body, const x86::Gp* also = nullptr) {
    x86::Gp p = b_.gp();
    cc_.mov(p, base);
    const int64_t full = c_.vecs - 1;
    if (full > 0) {
      x86::Gp k = b_.gp();
      cc_.mov(k, full);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      body(x86::ptr(p, 0), false);
      cc_.add(p, c_.vec_stride);
      if (also) cc_.add(*also, c_.vec_stride);
      cc_.dec(k);
      cc_.jnz(top);
    }
    body(x86::ptr(p, 0), true);
  }

  void load(const x86::Vec& d, const x86::Mem& m, bool last) {
    if (last && !tail_.full())
      b_.load(d, m, &tail_);
    else
      cc_.vmovups(d, m);
  }

  // d = x - mean, 0 in the lanes past c.
  void deviation(const x86::Vec& d, const x86::Mem& m, const x86::Vec& mean, bool last) {
    load(d, m, last);
    cc_.vsubps(d, d, mean);
    zero_tail(d, last);
  }

  // A register holding the sum (max: the maximum) of v's lanes in every lane (v is clobbered).
  x86::Vec reduce_bcast(const x86::Vec& v, bool max) {
    auto op = [&](const x86::Vec& d, const x86::Vec& a) {
      if (max)
        cc_.vmaxps(d, d, a);
      else
        cc_.vaddps(d, d, a);
    };
    b_.fold_lanes(v, op);
    x86::Vec r = b_.vec();
    cc_.vbroadcastss(r, v.xmm());
    return r;
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  const LnConf& c_;
  const int V_;
  Mask tail_;
};

class LayerNormKernel : public glue::GlueKernel {
 public:
  LayerNormKernel(const LnConf& conf, int64_t images, int64_t rows_per_image, int64_t image_stride,
                  const float* gamma, const float* beta, Isa isa, std::string name)
      : images_(images),
        rows_(rows_per_image),
        image_stride_(image_stride),
        row_stride_(conf.row_stride / 4) {
    name_ = std::move(name);
    const int V = simd_width(isa);
    // GroupNorm: one gamma / beta per channel of the image; LayerNorm: per element, padded.
    const int64_t count = conf.segs ? rows_per_image * conf.segs : conf.c;
    const size_t padded = conf.segs ? size_t(count) : size_t(conf.vecs * V);
    if (gamma) {
      params_.assign(2 * padded, 0.f);
      std::copy(gamma, gamma + count, params_.begin());
      if (beta) std::copy(beta, beta + count, params_.begin() + std::ptrdiff_t(padded));
    }
    padded_ = padded;
    segs_ = conf.segs;
    AsmBuilder b(name_, isa);
    LnGen(b, conf).build();
    code_ = b.finish();
    fn_ = b.entry<LnFn>(code_, 0);
    // About 8 KiB of rows per tile.
    chunk_ = std::max<int64_t>(1, 2048 / std::max<int64_t>(conf.c, 1));
    per_image_ = (rows_ + chunk_ - 1) / chunk_;
    tiles_ = images_ * per_image_;
  }
  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / per_image_, r0 = (t % per_image_) * chunk_;
      const int64_t off = n * image_stride_ + r0 * row_stride_;
      // Softmax has no gamma / beta: no pointer arithmetic on an empty vector's null data().
      const float* gamma = params_.empty() ? nullptr : params_.data() + r0 * segs_;
      LnArgs args{a.src[0] + off, a.dst[0] + off, std::min(chunk_, rows_ - r0), gamma,
                  gamma ? gamma + padded_ : nullptr};  // (GroupNorm: this row's channels)
      fn_(&args);
    }
  }

 private:
  int64_t images_, rows_, image_stride_, row_stride_, chunk_ = 1, per_image_ = 1, segs_ = 0;
  std::vector<float> params_;
  size_t padded_ = 0;
  LnFn fn_ = nullptr;
};

}  // namespace

namespace {

// The row kernel of `conf` (softmax or LayerNorm: gamma set) over [outer, c, inner] in l.
std::unique_ptr<Kernel> create_row_kernel(LnConf conf, int64_t outer, int64_t inner, Layout l,
                                          const float* gamma, const float* beta, Isa isa,
                                          const std::string& op, std::string* why_not) {
  const int64_t c = conf.c;
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (outer <= 0 || c <= 0 || inner <= 0) return decline(why_not, "empty tensor");
  const int V = simd_width(isa), B = layout_block(l);
  if (B > 1 && B != V) return decline(why_not, "blocked layout of another ISA");
  if (l == Layout::nchw && inner != 1)
    return decline(why_not, "nchw with pixels: the reduced channels are strided");
  if (c > (int64_t(1) << 24) || outer * c * inner > (int64_t(1) << 40))
    return decline(why_not, "rows too large");
  conf.vecs = (c + V - 1) / V;
  int64_t images = 1, rows = outer * inner, image_stride = 0;
  if (B > 1) {
    conf.vec_stride = inner * B * 4;
    conf.row_stride = B * 4;
    conf.store_pad = true;
    images = outer;
    rows = inner;
    image_stride = conf.vecs * inner * B;
  } else {
    conf.vec_stride = V * 4;
    conf.row_stride = c * 4;
  }
  if (conf.vec_stride * conf.vecs > (int64_t(1) << 31))
    return decline(why_not, "row spans over 2 GiB");
  std::string unused;  // (the factories checked the post-ops)
  const std::string name = op + "_f32_" + (l == Layout::nchw ? "rows" : layout_name(l)) +
                           glue::post_part(conf.post, &unused) + "__" + isa_name(isa);
  return std::make_unique<LayerNormKernel>(conf, images, rows, image_stride, gamma, beta, isa,
                                           name);
}

}  // namespace

std::unique_ptr<Kernel> create_layernorm_kernel(int64_t outer, int64_t c, int64_t inner, Layout l,
                                                float eps, const float* gamma, const float* beta,
                                                Isa isa, std::string* why_not,
                                                const std::vector<PostOp>& post) {
  if (!gamma) {
    if (why_not) *why_not = "no scale";
    return nullptr;
  }
  std::string bad;
  glue::post_part(post, &bad);
  if (!bad.empty()) return decline(why_not, bad);
  LnConf conf;
  conf.c = c;
  conf.eps = eps;
  conf.post = post;
  return create_row_kernel(conf, outer, inner, l, gamma, beta, isa, "layernorm", why_not);
}

std::unique_ptr<Kernel> create_groupnorm_kernel(int64_t n, int64_t c, int64_t groups,
                                                int64_t pixels, float eps, const float* gamma,
                                                const float* beta, Isa isa, std::string* why_not,
                                                const std::vector<PostOp>& post) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (n <= 0 || c <= 0 || pixels <= 0 || groups <= 0 || c % groups)
    return decline(why_not, "empty tensor or bad groups");
  std::string bad;
  const std::string pp = glue::post_part(post, &bad);
  if (!bad.empty()) return decline(why_not, bad);
  LnConf conf;
  conf.post = post;
  conf.c = c / groups * pixels;
  conf.eps = eps;
  conf.segs = c / groups;
  conf.seg = pixels;
  const int V = simd_width(isa);
  if (conf.c > (int64_t(1) << 28) || n * c * pixels > (int64_t(1) << 40))
    return decline(why_not, "rows too large");
  conf.vecs = (conf.c + V - 1) / V;
  conf.vec_stride = V * 4;
  conf.row_stride = conf.c * 4;
  // Images of `groups` rows: each call's gamma / beta start at its first row's channels.
  return std::make_unique<LayerNormKernel>(conf, n, groups, groups * conf.c, gamma, beta, isa,
                                           "groupnorm_f32_rows" + pp + "__" + isa_name(isa));
}

std::unique_ptr<Kernel> create_softmax_kernel(int64_t outer, int64_t c, int64_t inner, Layout l,
                                              Isa isa, std::string* why_not, bool log) {
  LnConf conf;
  conf.c = c;
  conf.softmax = true;
  conf.log = log;
  return create_row_kernel(conf, outer, inner, l, nullptr, nullptr, isa,
                           log ? "logsoftmax" : "softmax", why_not);
}

}  // namespace kiln
