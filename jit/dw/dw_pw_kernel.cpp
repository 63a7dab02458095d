// The separable kernel (dw_pw_kernel.h): the depthwise family's kernel runs a band's rows into
// the scratch (run_dw_rows), then a gemm1x1 kernel made for a band-high image runs the 1x1
// over them into the band's rows of the output. Tiles: (image, band).
#include "jit/dw/dw_pw_kernel.h"

#include <algorithm>
#include <array>

#include "graph/error.h"
#include "graph/post_ops.h"
#include "jit/dw/dw_conf.h"
#include "jit/layout.h"

namespace kiln {
namespace {

constexpr size_t kMaxInputs = 16;  // of the 1x1 node (its post-ops' operands from input 3 on)

class DwPwKernel : public Kernel {
 public:
  DwPwKernel(const ConvProblem& dw, const ConvProblem& pw, int dw_inputs, int pw_inputs,
             int64_t band, std::unique_ptr<Kernel> dwk, std::unique_ptr<Kernel> full,
             std::unique_ptr<Kernel> tail)
      : dw_(dw),
        pw_(pw),
        dw_inputs_(dw_inputs),
        pw_inputs_(size_t(pw_inputs)),
        band_(band),
        bands_((dw.oh + band - 1) / band),
        dwk_(std::move(dwk)),
        full_(std::move(full)),
        tail_(std::move(tail)) {
    name_ = "conv_dwpw_f32_nhwc_" + dwk_->name().substr(dwk_->name().find("nhwc_") + 5);
    name_ = name_.substr(0, name_.find("__")) + "_b" + std::to_string(band_) + "_" +
            full_->name().substr(full_->name().find("nhwc_to_nhwc_") + 13);
    rows_bytes_ = round_up(band_ * dw.ow * dw.oc * 4, 64);
    sub_scratch_ = std::max({dwk_->scratch_bytes(), full_->scratch_bytes(),
                             tail_ ? tail_->scratch_bytes() : int64_t(0)});
    for (const PostOp& op : pw.post)
      if (op.kind == PostOp::Kind::add) spatial_.push_back(op.input);
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return dw_.n * bands_; }
  int64_t scratch_bytes() const override { return rows_bytes_ + round_up(sub_scratch_, 64); }
  double macs() const override { return dw_.macs() + pw_.macs(); }
  std::vector<Span> weights() const override {
    std::vector<Span> w = dwk_->weights();
    for (const Kernel* k : {full_.get(), tail_.get()})
      if (k)
        for (const Span& s : k->weights()) w.push_back(s);
    return w;
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    float* rows = scratch_floats(args);
    void* sub_scratch = sub_scratch_ ? reinterpret_cast<char*>(rows) + rows_bytes_ : nullptr;
    KernelArgs dwa;
    dwa.src = args.src;
    dwa.dst = args.dst;  // unused: run_dw_rows writes `rows`
    dwa.scratch = sub_scratch;
    const int64_t pix_out = pw_.oc;  // floats per output pixel (NHWC)
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / bands_, r0 = t % bands_ * band_, r1 = std::min(dw_.oh, r0 + band_);
      if (!convjit::run_dw_rows(*dwk_, dwa, n, r0, r1, rows))
        fail(Code::internal, name_ + ": the depthwise kernel cannot run rows");
      const int64_t first = (n * pw_.oh + r0) * pw_.ow;  // the band's first output pixel
      std::array<const float*, kMaxInputs> src{};
      for (size_t k = 1; k < pw_inputs_; ++k) src[k] = args.src[size_t(dw_inputs_) + k];
      src[0] = rows;
      for (int in : spatial_) src[size_t(in)] += first * pix_out;
      float* dst[] = {args.dst[0] + first * pix_out};
      KernelArgs pa;
      pa.src = src.data();
      pa.dst = dst;
      pa.scratch = sub_scratch;
      const Kernel& k = r1 - r0 == band_ ? *full_ : *tail_;
      k.run(pa, 0, k.tiles());
    }
  }

 private:
  ConvProblem dw_, pw_;
  int dw_inputs_;
  size_t pw_inputs_;  // the 1x1 node's inputs (the kernel passes them on)
  int64_t band_, bands_;
  std::unique_ptr<Kernel> dwk_, full_, tail_;
  std::string name_;
  int64_t rows_bytes_ = 0, sub_scratch_ = 0;
  std::vector<int> spatial_;  // the 1x1's inputs holding residuals (offset per band)
};

// The 1x1 over `rows` rows of every image: one image of that height.
ConvProblem band_problem(const ConvProblem& pw, int64_t rows) {
  ConvProblem b = pw;
  b.n = 1;
  b.ih = b.oh = rows;
  return b;
}

}  // namespace

std::unique_ptr<Kernel> create_dw_pw_kernel(const ConvProblem& dw, const Tensor& dw_weights,
                                            const Tensor* dw_bias, int dw_inputs,
                                            const ConvProblem& pw, const Tensor& pw_weights,
                                            const Tensor* pw_bias, int pw_inputs, Isa isa,
                                            std::string* why_not, int64_t band) {
  if (isa != Isa::avx512 && isa != Isa::avx2) return decline(why_not, "needs AVX2 or AVX-512");
  if (dw.groups != dw.ic || dw.ic != dw.oc) return decline(why_not, "first conv not depthwise");
  if (pw.kh != 1 || pw.kw != 1 || pw.sh != 1 || pw.sw != 1 || pw.pt || pw.pl || pw.pb || pw.pr ||
      pw.groups != 1)
    return decline(why_not, "second conv not a dense 1x1 of stride 1 without padding");
  if (pw.n != dw.n || pw.ic != dw.oc || pw.ih != dw.oh || pw.iw != dw.ow)
    return decline(why_not, "second conv does not read the first's output");
  for (const PostOp& op : dw.post)
    if (extra_inputs(op.kind) > 0 && !per_channel(op.kind))
      return decline(why_not, "the depthwise conv's post-ops read a tensor");
  auto operands_past = [](const ConvProblem& p, int inputs) {
    return std::any_of(p.post.begin(), p.post.end(), [&](const PostOp& op) {
      return extra_inputs(op.kind) > 0 && op.input + extra_inputs(op.kind) > inputs;
    });
  };
  if (operands_past(dw, dw_inputs) || operands_past(pw, pw_inputs))
    return decline(why_not, "post-op operands lie past the node's inputs");
  if (size_t(pw_inputs) > kMaxInputs) return decline(why_not, "too many post-op operands");
  // Rows per band: the depthwise rows (every channel) in 128 KiB, but at least 96 pixels (the
  // 1x1 reads its weights once per band), and at least 2 bands an image (2 threads at batch 1).
  const int64_t row_bytes = dw.ow * dw.oc * 4;
  if (band <= 0)
    band = std::clamp<int64_t>(std::max((int64_t(128) << 10) / row_bytes, (96 + dw.ow - 1) / dw.ow),
                               1, (dw.oh + 1) / 2);
  if (band > dw.oh) return decline(why_not, "band taller than the image");
  ConvImpl dw_impl;
  dw_impl.family = ConvFamily::depthwise;
  dw_impl.src = dw_impl.dst = Layout::nhwc;
  std::string why;
  auto dwk = create_conv_kernel(dw, dw_impl, isa, dw_weights, dw_bias, &why);
  if (!dwk) return decline(why_not, "depthwise: " + why);
  ConvImpl pw_impl;
  pw_impl.family = ConvFamily::gemm1x1;
  pw_impl.src = pw_impl.dst = Layout::nhwc;
  auto full = create_conv_kernel(band_problem(pw, band), pw_impl, isa, pw_weights, pw_bias, &why);
  if (!full) return decline(why_not, "1x1: " + why);
  std::unique_ptr<Kernel> tail;
  if (const int64_t rest = dw.oh % band) {
    tail = create_conv_kernel(band_problem(pw, rest), pw_impl, isa, pw_weights, pw_bias, &why);
    if (!tail) return decline(why_not, "1x1 (last band): " + why);
  }
  return std::make_unique<DwPwKernel>(dw, pw, dw_inputs, pw_inputs, band, std::move(dwk),
                                      std::move(full), std::move(tail));
}

}  // namespace kiln
