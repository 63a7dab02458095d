// The direct family's Kernel: packs the weights once, owns the generated code, and runs tiles
// of (image, oc group, output row).
#include <algorithm>
#include <cstring>

#include "jit/conv/conv_direct_gen.h"
#include "jit/conv/conv_families.h"
#include "jit/pack.h"

namespace kiln::convjit {
namespace {

using Fn = void (*)(const ConvCallArgs*);

// Where each oc group's packed weights start (floats), and the end.
std::vector<int64_t> group_offsets(const DirectConf& c) {
  std::vector<int64_t> off;
  int64_t total = 0;
  for (int64_t g = 0; g < c.oc_groups; ++g) {
    off.push_back(total);
    total += c.wei_group_floats(g == c.oc_groups - 1 ? c.oc_blocks_last : c.oc_blocks);
  }
  off.push_back(total);
  return off;
}

// f32 weights of oc group g at o (zeroed first): [icb][kh][kw][ic < nic][ob][lane], nic = simd
// or ic_tail for the last block. Per (icb, tap, j): a simd x nic block of W transposed (lanes
// past oc stay zero).
void pack_group(const DirectConf& c, ModelFloats w, int64_t g, float* o, float* end) {
  const ConvProblem& p = c.p;
  const int64_t S = c.simd, taps = p.kh * p.kw;
  const int64_t ob = g == c.oc_groups - 1 ? c.oc_blocks_last : c.oc_blocks;
  std::fill(o, end, 0.f);
  for (int64_t icb = 0; icb < c.icb_total(); ++icb) {
    const int64_t nic = icb < c.icb_full ? S : c.ic_tail;
    for (int64_t j = 0; j < ob; ++j) {
      const int64_t oc0 = (g * c.oc_blocks + j) * S;
      const int64_t lanes = std::min(S, p.oc - oc0);
      if (lanes > 0)
        for (int64_t k = 0; k < taps; ++k)
          pack_transposed(w + (oc0 * p.ic + icb * S) * taps + k, p.ic * taps, taps, lanes, nic,
                          o + k * nic * ob * S + j * S, ob * S);
    }
    o += taps * nic * ob * S;
  }
}

// Computed weights (f32): src[0] weights, src[1] bias or null -> dst[0], the packed weights
// then the bias (ocb * simd floats). A tile is an oc group; tile 0 also packs the bias.
// Computed weights packed every run, one oc group per tile; the bias [ocb x simd] after them.
std::unique_ptr<Kernel> direct_weight_packer(const DirectConf& c) {
  std::vector<int64_t> off = group_offsets(c);
  return std::make_unique<WeightPacker>(
      "direct_pack_weights", c.oc_groups,
      [c, off](int64_t g, const float* w, float* out) {
        pack_group(c, ModelFloats(w), g, out + off[size_t(g)], out + off[size_t(g) + 1]);
      },
      [c, end = off.back()](const float* b, float* out) {
        float* bo = out + end;
        std::fill(bo, bo + c.ocb * c.simd, 0.f);
        if (b) std::copy(b, b + c.p.oc, bo);
      });
}

class DirectKernel : public Kernel {
 public:
  // w == nullptr: weights and bias packed every run (direct_weight_packer) into src[1].
  DirectKernel(const DirectConf& c, const Tensor* w, const Tensor* bias,
               const std::string& code_key)
      : c_(c),
        name_(conv_kernel_name("direct", c.src, c.dst, c.blocking_str(), c.isa) + (w ? "" : "_rw")),
        runtime_(w == nullptr),
        bias_(pack_bias(bias ? bias->data<float>() : nullptr, c.p.oc, c.ocb * c.simd)),
        group_off_(group_offsets(c)),
        gen_(direct_generators(c, code_key, name_)) {
    if (!runtime_) pack_weights(ModelFloats(*w));
    for (const OwBlock& b : c.ow_blocks) blocks_per_row_ += b.count;
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return c_.p.n * c_.oc_groups * c_.p.oh; }
  double macs() const override { return c_.p.macs(); }
  std::vector<Span> weights() const override {
    if (runtime_) return {};
    return {{wei_.raw(), wei_.nbytes()}};
  }
  RuntimePacking runtime_packing() const override {
    if (!runtime_) return {};
    return {direct_weight_packer(c_), (group_off_.back() + c_.ocb * c_.simd) * 4};
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    const float* wei = runtime_ ? args.src[1] : wei_.data<float>();
    const float* bias = runtime_ ? args.src[1] + group_off_.back() : bias_.data();
    ConvCallArgs base;
    base.post.set(c_.p.post, args);
    // A K split keeps partial sums in dst; a residual stored in dst itself would be lost.
    bool split = c_.ic_chunk < c_.icb_total();
    for (const PostOp& op : c_.p.post)
      if (op.kind == PostOp::Kind::add && args.src[op.input] == args.dst[0]) split = false;
    const int64_t G = c_.oc_groups, OH = c_.p.oh;
    int64_t t = begin;
    while (t < end) {
      int64_t n, g, oh0, rows;
      if (c_.rows_outer) {
        n = t / (OH * G);
        oh0 = t / G % OH;
        g = t % G;
        rows = 1;
      } else {
        n = t / (G * OH);
        g = t / OH % G;
        oh0 = t % OH;
        rows = std::min(end - t, OH - oh0);  // the rows of this (n, g) in the range
      }
      const int64_t chunk = split ? c_.ic_chunk : c_.icb_total();
      // pf_next: the calls of this group walk the next group's weights (a line per pf_every
      // steps).
      // (Rows outer: the group the row's sweep reads next.)
      const int64_t gn = c_.rows_outer ? (g + 1) % G : std::min(g + 1, G - 1);
      const float* next = wei + group_off_[size_t(gn)];  // (4-byte words)
      int64_t pf_lines = 0;
      for (int64_t k0 = 0; k0 < c_.icb_total(); k0 += chunk) {
        const int64_t kcnt = std::min(chunk, c_.icb_total() - k0);
        const int64_t full_k = kcnt - (c_.ic_tail && k0 + kcnt == c_.icb_total() ? 1 : 0);
        for (int64_t oh = oh0; oh < oh0 + rows;) {
          // Pairs of rows whose windows have no top/bottom padding run as one block.
          const int step = c_.row_step(oh, oh0 + rows);
          const int64_t kh_cnt =
              call(args, base, wei, bias, n, g, oh, k0, kcnt, step, next + pf_lines * 16);
          pf_lines +=
              blocks_per_row_ * full_k * kh_cnt * c_.p.kw * c_.k_steps(c_.simd) / c_.pf_every;
          oh += step;
        }
      }
      t += rows;
    }
  }

 private:
  // Runs one call; returns its number of valid kernel rows.
  int64_t call(const KernelArgs& args, const ConvCallArgs& base, const float* wei,
               const float* bias, int64_t n, int64_t g, int64_t oh, int64_t k0, int64_t kcnt,
               int rows, const float* pf_wei) const {
    const ConvProblem& p = c_.p;
    const bool last = g == c_.oc_groups - 1;
    const int ob = last ? c_.oc_blocks_last : c_.oc_blocks;
    const int64_t ih0 = oh * p.sh - p.pt;
    const auto [lo, hi] = c_.kernel_rows(oh);
    ConvCallArgs a = base;
    // (Activations in bytes: f32, or bf16 in a bf16 layout.)
    const int64_t src_img =
        c_.src_plain ? p.ic * p.ih * p.iw * 4 : c_.icb_total() * c_.src_icb_bytes();
    a.src = reinterpret_cast<const float*>(reinterpret_cast<const char*>(args.src[0]) +
                                           n * src_img + k0 * c_.src_icb_bytes() +
                                           (hi > lo ? (ih0 + lo * p.dh) * c_.src_row_bytes() : 0));
    a.wei = wei + group_off_[size_t(g)] + k0 * c_.wei_icb_floats(ob, c_.simd) +
            lo * c_.wei_kh_floats(ob, c_.simd);
    if (c_.ic_tail)
      a.wei_tail_adj = lo * (c_.wei_kh_floats(ob, c_.ic_tail) - c_.wei_kh_floats(ob, c_.simd)) * 4;
    const int64_t oc0 = g * c_.oc_blocks * c_.simd;
    a.dst = reinterpret_cast<float*>(reinterpret_cast<char*>(args.dst[0]) + n * c_.dst_img_bytes() +
                                     g * c_.oc_blocks * c_.dst_ocb_bytes() +
                                     oh * p.ow * c_.dst_pix_bytes());
    a.bias = bias + oc0;
    a.post.advance_channels(oc0);
    a.kh_cnt = hi - lo;
    const bool has_tail = c_.ic_tail && k0 + kcnt == c_.icb_total();
    a.k_blocks = kcnt - (has_tail ? 1 : 0);
    a.flags = (k0 > 0 ? kFlagAccumulate : 0) | (k0 + kcnt == c_.icb_total() ? kFlagFinal : 0) |
              (has_tail ? kFlagIcTail : 0);
    a.pf_wei = pf_wei;
    const auto& gen = gen_[rows - 1][last && c_.last_group_own ? 1 : 0];
    gen->fn<Fn>()(&a);
    return a.kh_cnt;
  }

  void pack_weights(ModelFloats w) {
    wei_ = Tensor(DType::f32, {group_off_.back()});  // zero-filled, 64-byte aligned
    if (c_.bf16) return pack_weights_bf16(w);
    for (int64_t g = 0; g < c_.oc_groups; ++g)
      pack_group(c_, w, g, wei_.data<float>() + group_off_[size_t(g)],
                 wei_.data<float>() + group_off_[size_t(g) + 1]);
  }

  // bf16: [icb][kh][kw][pair < steps(nic)][ob][lane][2]: W[oc0 + lane][ic0 + 2 pair + e] at
  // lane * 2 + e, rounded to nearest even; zero past ic and oc.
  void pack_weights_bf16(ModelFloats w) {
    const ConvProblem& p = c_.p;
    const int64_t S = c_.simd, taps = p.kh * p.kw;
    for (int64_t g = 0; g < c_.oc_groups; ++g) {
      const int64_t ob = g == c_.oc_groups - 1 ? c_.oc_blocks_last : c_.oc_blocks;
      auto* o = reinterpret_cast<uint16_t*>(wei_.data<float>() + group_off_[size_t(g)]);
      for (int64_t icb = 0; icb < c_.icb_total(); ++icb)
        o = pack_bf16_pairs(o, taps, c_.k_steps(int(icb < c_.icb_full ? S : c_.ic_tail)), ob, S,
                            [&](int64_t k, int64_t j, int64_t lane, int64_t i) {
                              const int64_t oc = (g * c_.oc_blocks + j) * S + lane,
                                            ic = icb * S + i;
                              return oc < p.oc && ic < p.ic ? w[(oc * p.ic + ic) * taps + k] : 0.f;
                            });
    }
  }

  DirectConf c_;
  std::string name_;
  bool runtime_;
  std::vector<float> bias_;
  Tensor wei_;                      // packed at creation (not runtime_)
  std::vector<int64_t> group_off_;  // per oc group, then the end
  DirectGenerators gen_;
  int64_t blocks_per_row_ = 0;  // register blocks one call runs (each walks pf_next lines)
};

}  // namespace

std::unique_ptr<Kernel> make_direct_kernel(const DirectConf& c, const Tensor& weights,
                                           const Tensor* bias, const std::string& code_key) {
  return std::make_unique<DirectKernel>(c, &weights, bias, code_key);
}

std::unique_ptr<Kernel> make_direct_kernel_runtime_weights(const DirectConf& c,
                                                           const std::string& code_key) {
  return std::make_unique<DirectKernel>(c, nullptr, nullptr, code_key);
}

}  // namespace kiln::convjit
