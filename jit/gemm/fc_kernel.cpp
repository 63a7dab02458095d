// create_fc_kernel and the FC Kernel: validates the constant operands, packs alpha * W into
// N blocks once, owns the generated code and runs tiles of (N block, row tile).
#include "jit/gemm/fc_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "graph/half.h"
#include "jit/gemm/fc_conf.h"
#include "jit/gemm/fc_gen.h"
#include "jit/glue/glue.h"  // quantize_u8
#include "jit/pack.h"

namespace kiln {
namespace fcjit {
namespace {

using FcKernelFn = void (*)(const FcCallArgs*);

class FcKernel : public Kernel {
 public:
  FcKernel(const FcConf& c, const Tensor& w, bool w_transposed, float alpha, const Tensor* bias)
      : c_(c), name_(c.name()) {
    bias_ = Tensor(DType::f32, {c.nvec * c.simd});
    if (bias) std::copy_n(bias->data<float>(), c.p.n, bias_.data<float>());
    pack_weights(ModelFloats(w), w_transposed, alpha);
    main_ = std::make_unique<FcGenerator>(c, c.nb, false, name_);
    main_->create();
    if (c.last_own) {
      last_ = std::make_unique<FcGenerator>(c, c.n_last, true,
                                            name_ + "_lastn" + std::to_string(c.n_last * c.simd));
      last_->create();
    }
  }

  const std::string& name() const override { return name_; }
  // Block-major, row tiles inner: a thread's range sweeps the rows of one block while its
  // weights are in cache, and two halves split the weight stream evenly.
  int64_t tiles() const override { return c_.n_blocks * c_.row_tiles(); }
  double macs() const override { return c_.p.macs(); }
  std::vector<Span> weights() const override { return {{wei_.raw(), wei_.nbytes()}}; }
  // bf16: x converted to bf16 pairs (each thread converts all of it: M x K is small next to
  // the weights it multiplies).
  // int8: x quantized to uint8 quads the same way.
  int64_t scratch_bytes() const override {
    return c_.bf16 || c_.int8 ? c_.p.m * c_.x_row_bytes() : 0;
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    FcCallArgs base;
    base.post.set(c_.p.post, args);
    const char* x = reinterpret_cast<const char*>(args.src[0]);
    if (c_.bf16) {
      auto* h = reinterpret_cast<uint16_t*>(scratch_floats(args));
      const int64_t K = c_.p.k, row = c_.ksteps() * 2;
      for (int64_t m = 0; m < c_.p.m; ++m) {
        for (int64_t k = 0; k < K; ++k) h[m * row + k] = float_to_bf16(args.src[0][m * K + k]);
        if (K % 2) h[m * row + K] = 0;
      }
      x = reinterpret_cast<const char*>(h);
    }
    if (c_.int8) {  // x on its grid: its uint8 q, each row zero-padded to whole quads
      auto* u = reinterpret_cast<uint8_t*>(scratch_floats(args));
      const int64_t K = c_.p.k, row = c_.x_row_bytes();
      for (int64_t m = 0; m < c_.p.m; ++m) {
        quantize_u8(args.src[0] + m * K, K, u + m * row, {c_.int8->x_scale, c_.int8->x_zero});
        std::fill(u + m * row + K, u + (m + 1) * row, uint8_t(0));  // (zero weights there)
      }
      x = reinterpret_cast<const char*>(u);
    }
    const int64_t rt = c_.row_tiles();
    end = std::min(end, tiles());
    for (int64_t t = std::max<int64_t>(begin, 0); t < end;) {
      const int64_t blk = t / rt, r0 = t % rt;
      if (rt == 1) {
        // Consecutive blocks of the main code in one call; the last block on its own.
        const int64_t main_end = std::min(end, c_.full_code_blocks());
        const int64_t cnt = blk < main_end ? main_end - blk : 1;
        call(args, x, base, blk, cnt, 0, 1);
        t += cnt;
      } else {
        const int64_t r1 = std::min(rt, r0 + (end - t));
        call(args, x, base, blk, 1, r0, r1);
        t += r1 - r0;
      }
    }
  }

 private:
  // Blocks [blk, blk + cnt) (all of one code), row tiles [r0, r1); x: f32 rows or bf16 pairs.
  void call(const KernelArgs& args, const char* x, const FcCallArgs& base, int64_t blk, int64_t cnt,
            int64_t r0, int64_t r1) const {
    const int64_t n0 = blk * c_.block_outputs(), m0 = r0 * c_.mr;
    FcCallArgs a = base;
    a.x = reinterpret_cast<const float*>(x + m0 * c_.x_row_bytes());
    a.y = args.dst[0] + m0 * c_.p.n + n0;
    a.w = wei_.data<float>() + blk * c_.ksteps() * c_.block_outputs();
    a.bias = bias_.data<float>() + n0;
    if (c_.int8) a.qscale = qscale_.data() + n0;
    a.post.advance_channels(n0);
    a.n_blocks = cnt;
    a.m_tiles = std::max<int64_t>(0, std::min(r1, c_.m_full) - r0);
    a.flags = r1 > c_.m_full ? kFlagMTail : 0;
    const bool last = c_.last_own && blk == c_.n_blocks - 1;
    (last ? last_ : main_)->fn<FcKernelFn>()(&a);
  }

  // Block b: [K][nbv * simd] at b * K * nb * simd; outputs past N are zero.
  void pack_weights(ModelFloats w, bool transposed, float alpha) {
    const int64_t K = c_.p.k, N = c_.p.n, S = c_.simd;
    wei_ = Tensor(DType::f32, {c_.packed_floats()});  // zero-filled, 64-byte aligned
    if (c_.bf16) return pack_weights_bf16(w, transposed, alpha);
    if (c_.int8) return pack_weights_int8(w, transposed, alpha);
    float* base = wei_.data<float>();
    for (int64_t b = 0; b < c_.n_blocks; ++b) {
      const int64_t nbw = (b == c_.n_blocks - 1 ? c_.n_last : c_.nb) * S;
      const int64_t n0 = b * c_.block_outputs(), nn = std::min(nbw, N - n0);
      float* o = base + b * K * c_.block_outputs();
      if (!transposed) {
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < nn; ++j) o[k * nbw + j] = alpha * w[k * N + n0 + j];
      } else {
        // W is [N, K]: the block's nn rows, transposed.
        pack_transposed(w + n0 * K, K, 1, nn, K, o, nbw, alpha);
      }
    }
  }

  // Calls f(b, nbw, k, j, alpha * W[k][n0 + j]) for every weight of every block b (n0 its
  // first output, nbw its outputs with padding).
  template <class F>
  void each_weight(ModelFloats w, bool transposed, float alpha, F&& f) const {
    const int64_t K = c_.p.k, N = c_.p.n, S = c_.simd;
    for (int64_t b = 0; b < c_.n_blocks; ++b) {
      const int64_t nbw = (b == c_.n_blocks - 1 ? c_.n_last : c_.nb) * S;
      const int64_t n0 = b * c_.block_outputs(), nn = std::min(nbw, N - n0);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < nn; ++j)
          f(b, nbw, k, j, alpha * (transposed ? w[(n0 + j) * K + k] : w[k * N + n0 + j]));
    }
  }

  // Block b: [K/2][nbw][2] bf16 (alpha * W rounded to nearest even); k and outputs past the
  // ends are zero.
  void pack_weights_bf16(ModelFloats w, bool transposed, float alpha) {
    auto* base = reinterpret_cast<uint16_t*>(wei_.data<float>());
    const int64_t blk = c_.ksteps() * c_.block_outputs() * 2;
    each_weight(w, transposed, alpha, [&](int64_t b, int64_t nbw, int64_t k, int64_t j, float v) {
      base[b * blk + ((k / 2) * nbw + j) * 2 + k % 2] = float_to_bf16(v);
    });
  }

  // Block b: [K/4][nbw][4] int8, the integers alpha * W[k][n] / w_scale[n] (on the grid by
  // ConvInt8's contract; rounded, clamped); k and outputs past the ends are zero. Also the
  // sums' scales and the bias less the zero point's share, x_scale w_scale[n] x_zero
  // sum_k q[k][n] (the sums multiply uint8 q_x, not q_x - x_zero).
  void pack_weights_int8(ModelFloats w, bool transposed, float alpha) {
    const ConvInt8& q = *c_.int8;
    const int64_t N = c_.p.n;
    auto* base = reinterpret_cast<int8_t*>(wei_.data<float>());
    const int64_t blk = c_.ksteps() * c_.block_outputs() * 4;
    qscale_.assign(size_t(c_.nvec * c_.simd), 0.f);
    std::vector<double> qsum(size_t(N), 0.0);
    each_weight(w, transposed, alpha, [&](int64_t b, int64_t nbw, int64_t k, int64_t j, float v) {
      const size_t n = size_t(b * c_.block_outputs() + j);
      const float r = std::clamp(std::nearbyint(v / q.w_scale[n]), -128.f, 127.f);
      base[b * blk + ((k / 4) * nbw + j) * 4 + k % 4] = int8_t(r);
      qsum[n] += r;
    });
    float* bias = bias_.data<float>();
    for (int64_t n = 0; n < N; ++n) {
      const double sc = double(q.x_scale) * q.w_scale[size_t(n)];
      qscale_[size_t(n)] = float(sc);
      bias[n] = float(double(bias[n]) - sc * q.x_zero * qsum[size_t(n)]);
    }
  }

  FcConf c_;
  std::string name_;
  Tensor wei_, bias_;
  std::vector<float> qscale_;  // int8: x_scale * w_scale[n], zero-padded
  std::unique_ptr<FcGenerator> main_, last_;
};

}  // namespace

std::unique_ptr<Kernel> make_fc_kernel(const FcConf& c, const Tensor& w, bool w_transposed,
                                       float alpha, const Tensor* bias) {
  return std::make_unique<FcKernel>(c, w, w_transposed, alpha, bias);
}

}  // namespace fcjit

std::unique_ptr<Kernel> create_fc_kernel(const FcProblem& p, Isa isa, const Tensor& w,
                                         bool w_transposed, float alpha, const Tensor* bias,
                                         std::string* why_not, bool bf16,
                                         std::shared_ptr<const ConvInt8> int8) {
  const Shape ws = w_transposed ? Shape{p.n, p.k} : Shape{p.k, p.n};
  if (w.dtype() != DType::f32 || w.shape() != ws)
    return decline(why_not,
                   "weights are not f32 " + shape_str(ws) + (w_transposed ? " (transposed)" : ""));
  if (p.bias != (bias != nullptr))
    return decline(why_not, "bias presence does not match the problem");
  if (bias && (bias->dtype() != DType::f32 || bias->numel() != p.n))
    return decline(why_not, "bias is not f32 [" + std::to_string(p.n) + "]");
  fcjit::FcImpl impl;
  impl.bf16 = bf16;
  impl.int8 = std::move(int8);
  auto c = fcjit::init_fc_conf(p, isa, impl);
  if (!c) return decline(why_not, c.reason);
  return fcjit::make_fc_kernel(*c.conf, w, w_transposed, alpha, bias);
}

}  // namespace kiln
