// The grouped family's Kernel: packs the weights once (block-sparse, or per output vector for
// the shuffle mode: grouped_conf.h), shares the generated code (the direct family's, or
// grouped_gen's), and runs tiles of (image, register block, output row).
#include <algorithm>

#include "jit/conv/conv_direct_gen.h"
#include "jit/grouped/grouped_conf.h"
#include "jit/grouped/grouped_gen.h"
#include "jit/pack.h"
#include "jit/shared_code.h"

namespace kiln::convjit {
namespace {

using Fn = void (*)(const ConvCallArgs*);

class GroupedKernel : public Kernel {
 public:
  GroupedKernel(const GroupedConf& c, const Tensor& w, const Tensor* bias,
                const std::string& code_key)
      : c_(c),
        d_(c_.d),
        name_(c.name()),
        bias_(pack_bias(bias ? bias->data<float>() : nullptr, c.p.oc, d_.ocb * d_.simd)) {
    if (c.shuffle) {
      pack_shuffle_weights(ModelFloats(w));
      // One code per phase of the input-block pattern, and the last vector's with a lane tail.
      for (size_t i = 0; i < c_.sources.size(); ++i) {
        const bool tail = int64_t(i) == c_.phases;
        const std::string role = tail ? "_lastoc" : i ? "_phase" + std::to_string(i) : "";
        shuf_.push_back(shared_generator<GroupedShuffleGenerator>(
            code_key, role, c_, c_.sources[i], tail ? int(c_.p.oc % d_.simd) : 0, name_ + role));
      }
      return;
    }
    pack_weights(ModelFloats(w));
    gen_ = direct_generators(d_, code_key, name_);
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return c_.p.n * d_.oc_groups * c_.p.oh; }
  double macs() const override { return c_.p.macs(); }
  std::vector<Span> weights() const override { return {{wei_.raw(), wei_.nbytes()}}; }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    ConvCallArgs base;
    base.post.set(c_.p.post, args);
    // Tiles (n, register block, row), rows inner: the blocks read different input channels, so
    // unlike the direct family's no input row is shared between them.
    const int64_t OH = c_.p.oh;
    for (int64_t t = begin; t < end;) {
      const int64_t ng = t / OH, oh0 = t % OH, rows = std::min(end - t, OH - oh0);
      for (int64_t oh = oh0; oh < oh0 + rows;) {
        // Pairs of rows whose windows have no top/bottom padding run as one block.
        const int step = d_.row_step(oh, oh0 + rows);
        call(args, base, ng / d_.oc_groups, ng % d_.oc_groups, oh, step);
        oh += step;
      }
      t += rows;
    }
  }

 private:
  // Output rows [oh, oh + rows) of register block g of image n.
  void call(const KernelArgs& args, const ConvCallArgs& base, int64_t n, int64_t g, int64_t oh,
            int rows) const {
    const ConvProblem& p = c_.p;
    const bool last = g == d_.oc_groups - 1;
    const int ob = last ? d_.oc_blocks_last : d_.oc_blocks;
    const int64_t ih0 = oh * p.sh - p.pt;
    const auto [lo, hi] = d_.kernel_rows(oh);
    ConvCallArgs a = base;
    const int64_t oc0 = g * d_.oc_blocks * d_.simd;
    // (Activations in bytes: f32, or bf16 in a bf16 layout.)
    a.dst = reinterpret_cast<float*>(reinterpret_cast<char*>(args.dst[0]) +
                                     (n * d_.ocb + g * d_.oc_blocks) * d_.dst_ocb_bytes() +
                                     oh * p.ow * d_.dst_pix_bytes());
    a.bias = bias_.data() + oc0;
    a.post.advance_channels(oc0);
    a.kh_cnt = hi - lo;
    const int64_t row = d_.src_row_bytes() / 4;
    if (c_.shuffle) {  // output vector g: input blocks from g - phase, weights [kh][kw][r][lane]
      const int64_t kh_floats = p.kw * c_.icg * d_.simd, phase = g % c_.phases;
      a.src = args.src[0] + (n * d_.icb_total() + g - phase) * d_.simd * p.ih * p.iw +
              (hi > lo ? (ih0 + lo * p.dh) * row : 0);
      a.wei = wei_.data<float>() + (g * p.kh + lo) * kh_floats;
      shuf_[size_t(last && d_.last_group_own ? c_.phases : phase)]->fn<Fn>()(&a);
      return;
    }
    const GroupedRange& r = c_.ranges[size_t(g)];
    a.src = reinterpret_cast<const float*>(reinterpret_cast<const char*>(args.src[0]) +
                                           (n * d_.icb_total() + r.ib_lo) * d_.src_icb_bytes() +
                                           (hi > lo ? (ih0 + lo * p.dh) * d_.src_row_bytes() : 0));
    a.wei = wei_.data<float>() + wei_off_[size_t(g)] + lo * d_.wei_kh_floats(ob, d_.simd);
    if (r.ic_tail)
      a.wei_tail_adj = lo * (d_.wei_kh_floats(ob, d_.ic_tail) - d_.wei_kh_floats(ob, d_.simd)) * 4;
    a.k_blocks = r.k_blocks;
    a.flags = kFlagFinal | (r.ic_tail ? kFlagIcTail : 0);
    gen_[rows - 1][last && d_.last_group_own ? 1 : 0]->fn<Fn>()(&a);
  }

  // Per register block: [input block of its range][kh][kw][ic < nic][ob][lane] (nic = simd,
  // or ic_tail for the input's last block), as the direct family packs a dense conv; weights
  // of an input channel outside an output channel's group stay zero.
  void pack_weights(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const int64_t S = d_.simd, taps = p.kh * p.kw, icb_full = p.ic / S;
    int64_t total = 0;
    for (int64_t g = 0; g < d_.oc_groups; ++g) {
      const int ob = g == d_.oc_groups - 1 ? d_.oc_blocks_last : d_.oc_blocks;
      const GroupedRange& r = c_.ranges[size_t(g)];
      wei_off_.push_back(total);
      total += r.k_blocks * d_.wei_icb_floats(ob, int(S)) +
               (r.ic_tail ? d_.wei_icb_floats(ob, d_.ic_tail) : 0);
    }
    wei_ = Tensor(DType::f32, {total});  // zero-filled, 64-byte aligned
    if (d_.bf16) return pack_weights_bf16(w);
    float* out = wei_.data<float>();
    for (int64_t oc = 0; oc < p.oc; ++oc) {
      const int64_t g = oc / (int64_t(d_.oc_blocks) * S);
      const int64_t ob = g == d_.oc_groups - 1 ? d_.oc_blocks_last : d_.oc_blocks;
      const int64_t j = oc / S - g * d_.oc_blocks, ic0 = oc / c_.ocg * c_.icg;
      for (int64_t i = 0; i < c_.icg; ++i) {
        const int64_t ic = ic0 + i, ib = ic / S;
        const int64_t nic = ib < icb_full ? S : d_.ic_tail;
        float* blk = out + wei_off_[size_t(g)] +
                     (ib - c_.ranges[size_t(g)].ib_lo) * d_.wei_icb_floats(int(ob), int(S));
        for (int64_t k = 0; k < taps; ++k)
          blk[(k * nic + ic % S) * ob * S + j * S + oc % S] = w[(oc * c_.icg + i) * taps + k];
      }
    }
  }

  // bf16: per register block, [input block of its range][kh][kw][pair < steps(nic)][ob][lane]
  // [2] = W[oc][ic = block channel 2 pair + e], as the direct family packs bf16, rounded to
  // nearest even; zero where ic lies outside oc's group or past ic / oc.
  void pack_weights_bf16(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const int64_t S = d_.simd, taps = p.kh * p.kw;
    for (int64_t g = 0; g < d_.oc_groups; ++g) {
      const int64_t ob = g == d_.oc_groups - 1 ? d_.oc_blocks_last : d_.oc_blocks;
      const GroupedRange& r = c_.ranges[size_t(g)];
      auto* o = reinterpret_cast<uint16_t*>(wei_.data<float>() + wei_off_[size_t(g)]);
      for (int64_t ib = r.ib_lo; ib < r.ib_lo + r.blocks(); ++ib)
        o = pack_bf16_pairs(o, taps, d_.k_steps(int(ib < d_.icb_full ? S : d_.ic_tail)), ob, S,
                            [&](int64_t k, int64_t j, int64_t lane, int64_t bi) {
                              const int64_t oc = (g * d_.oc_blocks + j) * S + lane;
                              const int64_t i = ib * S + bi - oc / c_.ocg * c_.icg;  // in group
                              const bool in =
                                  oc < p.oc && ib * S + bi < p.ic && i >= 0 && i < c_.icg;
                              return in ? w[(oc * c_.icg + i) * taps + k] : 0.f;
                            });
    }
  }

  // Shuffle mode: [output vector][kh][kw][r < c][lane] = W[oc = vector x simd + lane][r].
  void pack_shuffle_weights(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const int64_t S = d_.simd, taps = p.kh * p.kw, c = c_.icg;
    wei_ = Tensor(DType::f32, {d_.ocb * taps * c * S});  // zero-filled: lanes past oc stay 0
    float* out = wei_.data<float>();
    for (int64_t oc = 0; oc < p.oc; ++oc)
      for (int64_t r = 0; r < c; ++r)
        for (int64_t k = 0; k < taps; ++k)
          out[((oc / S * taps + k) * c + r) * S + oc % S] = w[(oc * c + r) * taps + k];
  }

  GroupedConf c_;
  const DirectConf& d_;
  std::string name_;
  std::vector<float> bias_;
  Tensor wei_;
  std::vector<int64_t> wei_off_;                                      // per register block
  DirectGenerators gen_;                                              // sparse
  std::vector<std::shared_ptr<const GroupedShuffleGenerator>> shuf_;  // shuffle: as sources
};

}  // namespace

std::unique_ptr<Kernel> make_grouped_kernel(const GroupedConf& c, const Tensor& weights,
                                            const Tensor* bias, const std::string& code_key) {
  return std::make_unique<GroupedKernel>(c, weights, bias, code_key);
}

}  // namespace kiln::convjit
