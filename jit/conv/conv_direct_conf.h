// Direct convolution on blocked layouts: the conf (blocking, tails, loop plan) and its
// init_conf. Plain C++ — the generator (conv_direct_gen) only emits what this decides.
//
// One JIT call computes one output row of one image for one group of `oc_blocks` output
// channel vectors: the row is cut into register blocks of `ur_w` pixels; per block the
// accumulators (ur_w x oc_blocks vectors) sweep the input-channel blocks (runtime loop), the
// valid kernel rows (runtime loop, bounds from the caller) and, unrolled, the kernel columns
// and the channels of a block. Blocks touching the left/right padding are emitted separately
// with the FMAs that would read padding left out; the interior blocks form one loop.
//
// bf16 (src nChw16c_bf16, AVX512-BF16): each reduction step is one vdpbf16ps over a pair of
// input channels against weights packed as bf16 pairs (f32 accumulators); dst is nChw16c or
// nChw16c_bf16 (rounded to nearest even at the store).
#pragma once

#include <string>
#include <vector>

#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_util.h"

namespace kiln::convjit {

// A run of output-width blocks with one code body: `count` > 1 only for interior blocks.
struct OwBlock {
  int64_t start = 0;  // first output column
  int ur = 0;         // pixels per block
  int64_t count = 1;  // consecutive blocks sharing this body (a runtime loop)
  bool interior = true;
  bool operator==(const OwBlock&) const = default;
};

struct DirectConf {
  ConvProblem p;
  Isa isa = Isa::avx512;
  int simd = 16;
  Layout src = Layout::nChw16c, dst = Layout::nChw16c;
  bool src_plain = false;  // src is NCHW (first layers): channel stride is a whole plane
  bool bf16 = false;       // src nChw16c_bf16, weights bf16 pairs, vdpbf16ps
  bool bf16_dst = false;   // dst nChw16c_bf16
  bool dst_nhwc = false;   // dst nhwc (f32, whole channel vectors): a first layer feeding NHWC

  int64_t icb_full = 0;  // full input-channel blocks of `simd` channels
  int ic_tail = 0;       // channels in the last, partial block (0: none)
  int64_t ocb = 0;       // output-channel vectors (oc rounded up / simd)

  int ur_w = 0;       // register block: pixels ...
  int oc_blocks = 0;  // ... x output-channel vectors
  // Output rows per register block: 2 for narrow outputs (ur_w == ow) so that enough
  // accumulators share each weight vector; rows whose window touches top/bottom padding still
  // run one at a time.
  int ur_h = 1;
  int64_t oc_groups = 0;        // groups of oc_blocks vectors
  int oc_blocks_last = 0;       // vectors in the last group (<= oc_blocks)
  bool last_group_own = false;  // the last group needs its own code (fewer blocks or lane tail)
  bool bcast_reg = false;       // AVX-512: broadcast src into a register (else embedded {1to16})
  int epi_temps = 0;            // vector scratch registers reserved for the epilogue

  std::vector<OwBlock> ow_blocks;  // covers [0, ow)

  // K split: input-channel blocks per call (the call sequence keeps partial sums in dst).
  // >= icb_full (+ tail) means one call per output row.
  int64_t ic_chunk = 0;
  bool rows_outer = false;  // tile order: (n, oh, group) instead of (n, group, oh)
  // Groups outer with more than one group: a prefetcht1 every pf_every reduction steps walks the
  // next group's weights, so their stream from L3 / memory overlaps this group's rows instead of
  // stalling the next group's first row.
  bool pf_next = false;
  int pf_every = 1;  // reduction steps per prefetch (a power of two <= 16): ~one pass per group

  // "ow14oc2", "oh2ow7oc2" (part of the kernel name).
  std::string blocking_str() const;
  // Reduction steps per kernel tap of a block of nic channels: one per channel, bf16 one per
  // pair of channels.
  int k_steps(int nic) const { return bf16 ? (nic + 1) / 2 : nic; }
  int dst_esize() const { return bf16_dst ? 2 : 4; }
  // Bytes between consecutive elements, for the generator and the kernel.
  int64_t src_pix_bytes() const { return src_plain ? 4 : int64_t(simd) * (bf16 ? 2 : 4); }
  int64_t src_row_bytes() const { return src_pix_bytes() * p.iw; }
  // Between reduction steps within a block (a channel, or a bf16 pair: 4 bytes either way).
  int64_t src_ic_bytes() const { return src_plain ? 4 * p.ih * p.iw : 4; }
  int64_t src_icb_bytes() const { return int64_t(simd) * (bf16 ? 2 : 4) * p.ih * p.iw; }
  int64_t dst_pix_bytes() const { return dst_nhwc ? p.oc * 4 : int64_t(simd) * dst_esize(); }
  int64_t dst_ocb_bytes() const { return dst_nhwc ? simd * 4 : dst_pix_bytes() * p.oh * p.ow; }
  int64_t dst_img_bytes() const {
    return dst_nhwc ? p.oh * p.ow * p.oc * 4 : ocb * dst_ocb_bytes();
  }
  // Packed weights in 4-byte words (a float, or a bf16 pair of channels) for one kernel row
  // (kw x steps x ob x simd) / one ic block of nic channels (simd, or ic_tail for the last
  // block: packed densely, so a first layer's 3 channels do not spread its weights over 16x
  // the cache lines and sets).
  int64_t wei_kh_floats(int ob, int nic) const { return p.kw * k_steps(nic) * int64_t(ob) * simd; }
  int64_t wei_icb_floats(int ob, int nic) const { return p.kh * wei_kh_floats(ob, nic); }
  // All packed weights of a group of ob vectors.
  int64_t wei_group_floats(int ob) const {
    return icb_full * wei_icb_floats(ob, simd) + (ic_tail ? wei_icb_floats(ob, ic_tail) : 0);
  }
  int64_t icb_total() const { return icb_full + (ic_tail ? 1 : 0); }

  // The kernel rows [lo, hi) of output row oh that read inside the input.
  struct KernelRows {
    int64_t lo = 0, hi = 0;
  };
  KernelRows kernel_rows(int64_t oh) const;
  // Output rows one call computes from row oh when the caller's rows end at `end`: 2 when
  // ur_h == 2 and both rows' windows have no top/bottom padding, else 1.
  int row_step(int64_t oh, int64_t end) const;
};

ConfOr<DirectConf> init_direct_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa);

// The output-width plan for a register block of `ur` pixels (exposed for tests).
std::vector<OwBlock> plan_ow_blocks(const ConvProblem& p, int ur);

}  // namespace kiln::convjit
