// The depthwise family's Kernel (packs the weights once, owns the generated code, runs tiles
// of (image, channel vectors, output rows)) and make_dw_kernel.
#include "jit/dw/dw_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "jit/conv/conv_util.h"  // ConvCallArgs
#include "jit/dw/dw_gen.h"
#include "jit/pack.h"
#include "jit/shared_code.h"

namespace kiln {
namespace convjit {
namespace {

using DwKernelFn = void (*)(const DwCallArgs*);

// Blocked: [cv][kh][kw][simd]; NHWC: [kh][kw][c_pad]. Channels past C are zero (out is zeroed
// by the caller). int8: the integers w / w_scale[c] (on the grid by ConvInt8's contract;
// rounded, clamped). Channels [ch0, ch1).
void pack_dw_weights(const DwConf& c, ModelFloats w, int64_t ch0, int64_t ch1, float* out) {
  const int64_t taps = c.p.kh * c.p.kw;
  for (int64_t ch = ch0; ch < ch1; ++ch)
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t at =
          c.nhwc ? k * c.c_pad() + ch : ((ch / c.simd) * taps + k) * c.simd + ch % c.simd;
      out[at] =
          c.int8 ? std::clamp(std::nearbyint(w[ch * taps + k] / c.int8_params->w_scale[size_t(ch)]),
                              -128.f, 127.f)
                 : w[ch * taps + k];
    }
}

// Run-time weights (f32): src[0] weights, src[1] bias or null -> dst[0], the packed weights
// (c_pad * taps floats) then the bias (c_pad). A tile is one channel vector's channels; tile 0
// also packs the bias.
// Computed weights packed every run, one channel vector per tile (its taps zeroed first: the
// lanes past C stay 0); the bias [c_pad] after the taps.
std::unique_ptr<Kernel> dw_weight_packer(const DwConf& c) {
  const int64_t taps = c.p.kh * c.p.kw, c_pad = c.c_pad();
  return std::make_unique<WeightPacker>(
      "dw_pack_weights", c.cv,
      [c, taps, c_pad](int64_t t, const float* w, float* out) {
        const int64_t ch0 = t * c.simd, ch1 = std::min(c.p.ic, ch0 + c.simd);
        if (c.nhwc) {
          for (int64_t k = 0; k < taps; ++k)
            std::fill(out + k * c_pad + ch0, out + k * c_pad + ch0 + c.simd, 0.f);
        } else {
          std::fill(out + t * taps * c.simd, out + (t + 1) * taps * c.simd, 0.f);
        }
        pack_dw_weights(c, ModelFloats(w), ch0, ch1, out);
      },
      [c, taps, c_pad](const float* b, float* out) {
        float* bo = out + c_pad * taps;
        std::fill(bo, bo + c_pad, 0.f);
        if (b) std::copy(b, b + c.p.oc, bo);
      });
}

class DwKernel : public Kernel {
 public:
  // w == nullptr: the weights and bias are packed every run (dw_weight_packer) into src[1].
  DwKernel(const DwConf& c, const Tensor* w, const Tensor* bias, const std::string& code_key)
      : c_(c),
        name_(c.name() + (w ? "" : "_rw")),
        runtime_(w == nullptr),
        bias_(pack_bias(bias ? bias->data<float>() : nullptr, c.p.oc, c.c_pad())),
        gen_(shared_generator<DwGenerator>(code_key, "", c, name_)) {
    if (!runtime_) {
      wei_ = Tensor(DType::f32, {c_.c_pad() * c_.p.kh * c_.p.kw});  // zero-filled, aligned
      pack_dw_weights(c_, ModelFloats(*w), 0, c_.p.ic, wei_.data<float>());
    }
    if (c_.int8) {  // then the sums' scales (DwCallArgs)
      const ConvInt8& q = *c_.int8_params;
      bias_.resize(size_t(2 * c_.c_pad()), 0.f);
      for (int64_t ch = 0; ch < c_.p.oc; ++ch)
        bias_[size_t(c_.c_pad() + ch)] = float(double(q.x_scale) * q.w_scale[size_t(ch)]);
    }
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return c_.tiles(); }
  double macs() const override { return c_.p.macs(); }
  std::vector<Span> weights() const override {
    if (runtime_) return {};
    return {{wei_.raw(), wei_.nbytes()}};
  }
  RuntimePacking runtime_packing() const override {
    if (!runtime_) return {};
    return {dw_weight_packer(c_), c_.c_pad() * (c_.p.kh * c_.p.kw + 1) * 4};
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    const DwCallArgs base = call_base(args);
    for (int64_t t = begin; t < end; ++t) run_tile(base, args, c_.tile(t), nullptr);
  }

  // Image n's rows [r0, r1) of every channel, row r at rows + (r - r0) * dst_row_bytes().
  bool run_rows(const KernelArgs& args, int64_t n, int64_t r0, int64_t r1, float* rows) const {
    if (runtime_ || !c_.nhwc || c_.int8 || c_.bf16_src || c_.bf16_dst) return false;
    const DwCallArgs base = call_base(args);
    DwTile tl;  // in the conf's channel chunks (their input window fits L1)
    tl.n = n;
    tl.r0 = r0;
    tl.r1 = r1;
    for (int64_t ci = 0; ci < c_.cv_chunks; ++ci) {
      tl.cv0 = ci * c_.cv / c_.cv_chunks;
      tl.cv1 = (ci + 1) * c_.cv / c_.cv_chunks;
      run_tile(base, args, tl, rows);
    }
    return true;
  }

 private:
  // What every tile of a call shares: the post-ops' operands.
  DwCallArgs call_base(const KernelArgs& args) const {
    DwCallArgs base;
    base.c.post.set(c_.p.post, args);
    return base;
  }

  // One tile into args.dst[0], or (rows) its rows into `rows` from its first row on.
  void run_tile(const DwCallArgs& base, const KernelArgs& args, const DwTile& tl,
                float* rows) const {
    if (tl.cv0 >= tl.cv1 || tl.r0 >= tl.r1) return;
    DwCallArgs a = base;
    const int64_t taps = c_.p.kh * c_.p.kw;
    const float* wei = runtime_ ? args.src[1] : wei_.data<float>();
    const float* bias = runtime_ ? args.src[1] + c_.c_pad() * taps : bias_.data();
    // The row pointer may lie past the image when the rows read only bottom padding; it is
    // only ever used with offsets that land inside, so compute it as an integer.
    const uintptr_t src = reinterpret_cast<uintptr_t>(args.src[0]) +
                          uintptr_t(tl.n * c_.src_img_bytes() + tl.cv0 * c_.src_cv_bytes() +
                                    tl.r0 * c_.p.sh * c_.src_row_bytes());
    a.c.src = reinterpret_cast<const float*>(src);
    a.c.dst =
        rows ? reinterpret_cast<float*>(reinterpret_cast<char*>(rows) + tl.cv0 * c_.dst_cv_bytes())
             : reinterpret_cast<float*>(reinterpret_cast<char*>(args.dst[0]) +
                                        tl.n * c_.dst_img_bytes() + tl.cv0 * c_.dst_cv_bytes() +
                                        tl.r0 * c_.dst_row_bytes());
    a.c.wei = wei + tl.cv0 * c_.wei_cv_bytes() / 4;
    a.c.bias = bias + tl.cv0 * c_.simd;
    a.c.post.advance_channels(tl.cv0 * c_.simd);
    a.r0 = tl.r0;
    a.r1 = tl.r1;
    if (c_.int8) a.x_zero = c_.int8_params->x_zero;
    const bool tail = c_.tail_code && tl.cv1 == c_.cv;
    a.cv_full = tl.cv1 - tl.cv0 - (tail ? 1 : 0);
    a.c.flags = tail ? int64_t(kFlagIcTail) : 0;
    gen_->fn<DwKernelFn>()(&a);
  }

  DwConf c_;
  std::string name_;
  bool runtime_;
  std::vector<float> bias_;
  Tensor wei_;  // packed at creation (not runtime_)
  std::shared_ptr<const DwGenerator> gen_;
};

}  // namespace

std::unique_ptr<Kernel> make_dw_kernel(const DwConf& c, const Tensor& weights, const Tensor* bias,
                                       const std::string& code_key) {
  return std::make_unique<DwKernel>(c, &weights, bias, code_key);
}

std::unique_ptr<Kernel> make_dw_kernel_runtime_weights(const DwConf& c,
                                                       const std::string& code_key) {
  return std::make_unique<DwKernel>(c, nullptr, nullptr, code_key);
}

bool run_dw_rows(const Kernel& k, const KernelArgs& args, int64_t n, int64_t r0, int64_t r1,
                 float* rows) {
  const auto* dw = dynamic_cast<const DwKernel*>(&k);
  return dw && dw->run_rows(args, n, r0, r1, rows);
}

}  // namespace convjit
}  // namespace kiln
