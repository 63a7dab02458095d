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

class DwKernel : public Kernel {
 public:
  DwKernel(const DwConf& c, const Tensor& w, const Tensor* bias, const std::string& code_key)
      : c_(c),
        name_(c.name()),
        bias_(pack_bias(bias ? bias->data<float>() : nullptr, c.p.oc, c.c_pad())),
        gen_(shared_generator<DwGenerator>(code_key, "", c, name_)) {
    pack_weights(ModelFloats(w));
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
  std::vector<Span> weights() const override { return {{wei_.raw(), wei_.nbytes()}}; }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    DwCallArgs base;
    base.c.post.set(c_.p.post, args);
    const DwKernelFn fn = gen_->fn<DwKernelFn>();
    for (int64_t t = begin; t < end; ++t) {
      const DwTile tl = c_.tile(t);
      if (tl.cv0 >= tl.cv1 || tl.r0 >= tl.r1) continue;
      DwCallArgs a = base;
      // The row pointer may lie past the image when the rows read only bottom padding; it is
      // only ever used with offsets that land inside, so compute it as an integer.
      const uintptr_t src = reinterpret_cast<uintptr_t>(args.src[0]) +
                            uintptr_t(tl.n * c_.src_img_bytes() + tl.cv0 * c_.src_cv_bytes() +
                                      tl.r0 * c_.p.sh * c_.src_row_bytes());
      a.c.src = reinterpret_cast<const float*>(src);
      a.c.dst = reinterpret_cast<float*>(reinterpret_cast<char*>(args.dst[0]) +
                                         tl.n * c_.dst_img_bytes() + tl.cv0 * c_.dst_cv_bytes() +
                                         tl.r0 * c_.dst_row_bytes());
      a.c.wei = wei_.data<float>() + tl.cv0 * c_.wei_cv_bytes() / 4;
      a.c.bias = bias_.data() + tl.cv0 * c_.simd;
      a.c.post.advance_channels(tl.cv0 * c_.simd);
      a.r0 = tl.r0;
      a.r1 = tl.r1;
      if (c_.int8) a.x_zero = c_.int8_params->x_zero;
      const bool tail = c_.tail_code && tl.cv1 == c_.cv;
      a.cv_full = tl.cv1 - tl.cv0 - (tail ? 1 : 0);
      a.c.flags = tail ? int64_t(kFlagIcTail) : 0;
      fn(&a);
    }
  }

 private:
  // Blocked: [cv][kh][kw][simd]; NHWC: [kh][kw][c_pad]. Channels past C are zero. int8: the
  // integers w / w_scale[c] (on the grid by ConvInt8's contract; rounded, clamped).
  void pack_weights(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const int64_t taps = p.kh * p.kw;
    wei_ = Tensor(DType::f32, {c_.c_pad() * taps});  // zero-filled, 64-byte aligned
    float* out = wei_.data<float>();
    for (int64_t ch = 0; ch < p.ic; ++ch)
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t at =
            c_.nhwc ? k * c_.c_pad() + ch : ((ch / c_.simd) * taps + k) * c_.simd + ch % c_.simd;
        out[at] =
            c_.int8
                ? std::clamp(std::nearbyint(w[ch * taps + k] / c_.int8_params->w_scale[size_t(ch)]),
                             -128.f, 127.f)
                : w[ch * taps + k];
      }
  }

  DwConf c_;
  std::string name_;
  std::vector<float> bias_;
  Tensor wei_;
  std::shared_ptr<const DwGenerator> gen_;
};

}  // namespace

std::unique_ptr<Kernel> make_dw_kernel(const DwConf& c, const Tensor& weights, const Tensor* bias,
                                       const std::string& code_key) {
  return std::make_unique<DwKernel>(c, weights, bias, code_key);
}

}  // namespace convjit
}  // namespace kiln
