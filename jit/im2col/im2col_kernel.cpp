// The im2col family's Kernel: packs the weights at creation, owns the generated code, and per
// tile packs the patch operand into the call's scratch and calls the microkernel per K chunk
// and column group.
#include "jit/im2col/im2col_kernel.h"

#include <xmmintrin.h>

#include <algorithm>
#include <cstdlib>

#include "graph/error.h"
#include "jit/conv/conv_families.h"
#include "jit/im2col/im2col_gen.h"
#include "jit/im2col/im2col_pack.h"
#include "jit/shared_code.h"

namespace kiln {
namespace im2col {
namespace {

using Im2colKernelFn = void (*)(const CallArgs*);

// Prefetches (into L2) `rows` rows of `width` floats, `ld` floats apart. Prefetches never
// fault, so a strip reaching past the end of the input is fine.
void prefetch_rows(const float* p, int64_t rows, int64_t ld, int64_t width) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < width * 4; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + r * ld) + b, _MM_HINT_T1);
}

// Floats of the packed weights and bias of a conf (the layouts of im2col_pack.h; NHWC's bias
// padded: a conv group's last vector may reach past oc).
int64_t packed_weight_floats(const Im2colConf& c) {
  return c.nhwc ? pack_weights_nhwc(c, ModelFloats(nullptr), nullptr)
                : pack_weights_nchw(c, ModelFloats(nullptr), nullptr);
}
int64_t packed_bias_floats(const Im2colConf& c) {
  return c.nhwc ? round_up(c.p.oc, c.simd) + c.simd : c.p.oc * c.simd;
}

// Run-time weights: packs src[0] (weights) and src[1] (bias or null) into dst[0], the packed
// weights then the bias. A tile is a (conv group, column group) of NHWC's B or 16 rows of
// NCHW's A; tile 0 also packs the bias.
// Bias [OC] (or none: zeros) in the microkernel's layout.
void pack_im2col_bias(const Im2colConf& c, const float* b, float* out) {
  std::fill(out, out + packed_bias_floats(c), 0.f);
  if (b && c.nhwc) std::copy(b, b + c.p.oc, out);
  if (b && !c.nhwc) expand_rows(b, c.p.oc, c.simd, out);
}

// Computed weights packed every run: NHWC one (conv group, N group) part per tile, NCHW
// kRows output channels per tile; the bias after the weights.
std::unique_ptr<Kernel> im2col_weight_packer(const Im2colConf& c) {
  constexpr int64_t kRows = 16;
  const int64_t wei = packed_weight_floats(c);
  return std::make_unique<WeightPacker>(
      "im2col_pack_weights_" + std::string(c.nhwc ? "nhwc" : "nchw"),
      c.nhwc ? c.p.groups * c.n_groups : (c.p.oc + kRows - 1) / kRows,
      [c](int64_t t, const float* w, float* out) {
        if (c.nhwc) {
          const int64_t cg = t / c.n_groups, g = t % c.n_groups;
          pack_weights_nhwc_part(c, ModelFloats(w), cg, g, out + nhwc_part_offset(c, cg, g));
        } else {
          pack_weights_nchw_rows(c, ModelFloats(w), t * kRows, std::min(c.p.oc, (t + 1) * kRows),
                                 out);
        }
      },
      [c, wei](const float* b, float* out) { pack_im2col_bias(c, b, out + wei); });
}

class Im2colKernel : public Kernel {
 public:
  // w == nullptr: the weights and bias are packed every run (im2col_weight_packer) into src[1].
  Im2colKernel(const Im2colConf& c, const Tensor* w, const Tensor* bias,
               const std::string& code_key)
      : c_(c),
        name_(convjit::conv_kernel_name("im2col", c.nhwc ? Layout::nhwc : Layout::nchw,
                                        c.nhwc ? Layout::nhwc : Layout::nchw, c.blocking_str(),
                                        c.isa) +
              (w ? "" : "_rw")),
        runtime_(w == nullptr),
        wei_floats_(packed_weight_floats(c)) {
    for (int64_t g = 0; c.nhwc && g < c.n_groups; ++g)
      group_off_.push_back(nhwc_part_offset(c, 0, g));
    if (!runtime_) {
      wei_ = Tensor(DType::f32, {wei_floats_});
      bias_ = Tensor(DType::f32, {packed_bias_floats(c)});
      if (c.nhwc)
        pack_weights_nhwc(c, ModelFloats(*w), wei_.data<float>());
      else
        pack_weights_nchw(c, ModelFloats(*w), wei_.data<float>());
      pack_im2col_bias(c, bias ? bias->data<float>() : nullptr, bias_.data<float>());
    }
    for (const PostOp& op : c.p.post)
      n_per_channel_ += extra_inputs(op.kind) * per_channel(op.kind);
    main_ = shared_generator<GemmGenerator>(code_key, "", c, c.nr, false, ldb(c.nr), name_);
    if (c.last_own)
      last_ = shared_generator<GemmGenerator>(code_key, "_last", c, c.n_last, true, ldb(c.n_last),
                                              name_ + "_last");
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return c_.tiles(); }
  double macs() const override { return c_.p.macs(); }
  std::vector<Span> weights() const override {
    if (runtime_) return {};
    return {{wei_.raw(), wei_.nbytes()}};
  }
  // The tile's packed operand, then (NCHW) the per-channel operands expanded to vectors.
  int64_t scratch_bytes() const override {
    const int64_t expand = c_.nhwc ? 0 : n_per_channel_ * c_.p.oc * c_.simd;
    return std::max<int64_t>(c_.pack_floats + expand, 16) * 4;
  }
  RuntimePacking runtime_packing() const override {
    if (!runtime_) return {};
    return {im2col_weight_packer(c_), (wei_floats_ + packed_bias_floats(c_)) * 4};
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    const ConvProblem& p = c_.p;
    float* scratch = scratch_floats(args);
    const float* wei = runtime_ ? nullptr : wei_.data<float>();
    const float* bias = runtime_ ? nullptr : bias_.data<float>();
    if (runtime_) {  // (packed by this run's Im2colWeightPacker step)
      wei = args.src[1];
      bias = args.src[1] + wei_floats_;
    }
    CallArgs base;
    // A K split keeps partial sums in dst: not when the residual is dst itself (in place).
    bool split = c_.kc < c_.k;
    float* ss = scratch + c_.pack_floats;  // NCHW: expanded scale / shift
    base.post.set(p.post, args);
    for (size_t i = 0; i < p.post.size(); ++i) {
      const PostOp& op = p.post[i];
      if (op.kind == PostOp::Kind::add && args.src[op.input] == args.dst[0]) split = false;
      // NCHW: the code reads per-channel operands as vectors along the rows.
      if (per_channel(op.kind) && !c_.nhwc) {
        expand_rows(base.post.scale[i], p.oc, c_.simd, ss);
        base.post.scale[i] = ss;
        ss += p.oc * c_.simd;
        if (op.kind == PostOp::Kind::scale_shift) {
          expand_rows(base.post.shift[i], p.oc, c_.simd, ss);
          base.post.shift[i] = ss;
          ss += p.oc * c_.simd;
        }
      }
    }
    const int64_t kc = split ? c_.kc : c_.k;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / c_.tiles_per_image;
      const int64_t pix0 = t % c_.tiles_per_image * c_.tile_pix;
      const int64_t npix = std::min(c_.tile_pix, c_.pix - pix0);
      if (c_.nhwc)
        run_nhwc(args, base, scratch, wei, bias, n, pix0, npix, kc);
      else
        run_nchw(args, base, scratch, wei, bias, n, pix0, npix, kc);
    }
  }

 private:
  int64_t ldb(int vecs) const { return c_.nhwc ? int64_t(vecs) * c_.simd : c_.ldb; }
  static int64_t flags(int64_t k0, int64_t kend, int64_t k) {
    return (k0 > 0 ? kFlagAccumulate : 0) | (kend == k ? kFlagFinal : 0);
  }

  void run_nhwc(const KernelArgs& args, const CallArgs& base, float* scratch, const float* wei,
                const float* bias, int64_t n, int64_t pix0, int64_t npix, int64_t kc) const {
    const ConvProblem& p = c_.p;
    const float* src = args.src[0] + n * p.ih * p.iw * p.ic;
    float* dst = args.dst[0] + (n * c_.pix + pix0) * p.oc;
    const int64_t cg_floats = c_.conv_group_floats();
    for (int64_t cg = 0; cg < p.groups; ++cg) {
      // The conv group's A: its channels of the input pixels (no copy), or its patches.
      const float* a = src + pix0 * p.ic + cg * c_.icg;
      if (!c_.no_copy) {
        pack_rows_nhwc(c_, src + cg * c_.icg, pix0, npix, scratch);
        a = scratch;
      }
      const float* b = wei + cg * cg_floats;
      const bool last_cg = cg + 1 == p.groups;
      for (int64_t k0 = 0; k0 < c_.k; k0 += kc) {
        const int64_t ks = std::min(kc, c_.k - k0);
        for (int64_t g = 0; g < c_.n_groups; ++g) {
          const int64_t oc0 = cg * c_.ocg + g * c_.group_cols();
          CallArgs ca = base;
          ca.a = a + k0;
          ca.b = b + group_off_[size_t(g)] + k0 * c_.nhwc_group_ldb(g);
          // The next call's B: the next group's, else the next K chunk's first group's, else
          // the next conv group's first.
          const bool next_g = g + 1 < c_.n_groups, next_k = k0 + kc < c_.k;
          const int64_t nk = next_g ? k0 : (next_k ? k0 + kc : 0), ng = next_g ? g + 1 : 0;
          const float* nb = next_g || next_k || last_cg ? b : b + cg_floats;
          ca.pf = nb + group_off_[size_t(ng)] + nk * c_.nhwc_group_ldb(ng);
          ca.c = dst + oc0;
          ca.bias = bias + oc0;
          ca.post.advance_channels(oc0);
          ca.m_blocks = npix / c_.mr;
          ca.ksteps = ks;
          ca.flags = flags(k0, k0 + ks, c_.k) | (npix % c_.mr ? kFlagMTail : 0);
          (g == c_.n_groups - 1 && last_ ? last_ : main_)->fn<Im2colKernelFn>()(&ca);
        }
      }
    }
  }

  void run_nchw(const KernelArgs& args, const CallArgs& base, float* scratch, const float* wei,
                const float* bias, int64_t n, int64_t pix0, int64_t npix, int64_t kc) const {
    const ConvProblem& p = c_.p;
    const int64_t panel = c_.group_cols(), panels = (npix + panel - 1) / panel;
    const float* src = args.src[0] + n * p.ic * p.ih * p.iw;
    if (!c_.no_copy) pack_cols_nchw(c_, src, pix0, npix, scratch);
    float* dst = args.dst[0] + n * p.oc * c_.pix + pix0;
    for (int64_t k0 = 0; k0 < c_.k; k0 += kc) {
      const int64_t ks = std::min(kc, c_.k - k0);
      for (int64_t q = 0; q < panels; ++q) {
        if (c_.no_copy) {
          // The input planes are read a panel-wide strip of kc rows at a time, a page apart:
          // no pattern the hardware prefetchers follow, so fetch the next call's strip into L2
          // while this call runs.
          const bool next_q = q + 1 < panels;
          const int64_t nk0 = next_q ? k0 : k0 + kc;
          if (next_q || nk0 < c_.k)
            prefetch_rows(src + pix0 + (next_q ? q + 1 : 0) * panel + nk0 * c_.ldb,
                          std::min(kc, c_.k - nk0), c_.ldb, panel);
        }
        CallArgs ca = base;
        ca.a = wei + k0;
        ca.b = (c_.no_copy ? src + pix0 : scratch) + q * panel + k0 * c_.ldb;
        ca.c = dst + q * panel;
        ca.bias = bias;
        ca.m_blocks = p.oc / c_.mr;
        ca.ksteps = ks;
        ca.flags = flags(k0, k0 + ks, c_.k) | (c_.m_tail ? kFlagMTail : 0);
        const bool last = (pix0 + q * panel) / panel == c_.n_groups - 1;
        (last && last_ ? last_ : main_)->fn<Im2colKernelFn>()(&ca);
      }
    }
  }

  Im2colConf c_;
  std::string name_;
  bool runtime_;        // weights and bias packed per run, read from args.src[1]
  int64_t wei_floats_;  // packed weights (then the bias)
  Tensor wei_, bias_;   // packed at creation (not runtime_)
  std::vector<int64_t> group_off_;
  int64_t n_per_channel_ = 0;  // per-channel operand arrays (scale_shift: 2, prelu: 1)
  std::shared_ptr<const GemmGenerator> main_, last_;
};

}  // namespace

std::unique_ptr<Kernel> make_im2col_kernel_runtime_weights(const Im2colConf& c,
                                                           const std::string& code_key) {
  return std::make_unique<Im2colKernel>(c, nullptr, nullptr, code_key);
}

std::unique_ptr<Kernel> make_im2col_kernel(const Im2colConf& c, const Tensor& weights,
                                           const Tensor* bias, const std::string& code_key) {
  const ConvProblem& p = c.p;
  const Shape ws{p.oc, p.ic / p.groups, p.kh, p.kw};
  if (weights.dtype() != DType::f32 || weights.shape() != ws)
    fail(Code::internal, "im2col conv " + p.str() + ": weights are not f32 " + shape_str(ws));
  if (p.bias != (bias != nullptr) ||
      (bias && (bias->dtype() != DType::f32 || bias->shape() != Shape{p.oc})))
    fail(Code::internal, "im2col conv " + p.str() + ": bias does not match the problem");
  return std::make_unique<Im2colKernel>(c, &weights, bias, code_key);
}

}  // namespace im2col

}  // namespace kiln
