// Grouped convolution (1 < groups, not depthwise: ResNeXt, RegNet) as block-sparse direct
// convolution on the ISA's blocked layout. The conf is plain C++; the code is the direct
// family's (conv_direct_gen.h), generated from `d`, a direct conf over the whole channel range.
//
// An output-channel vector depends only on the input channels of the groups its lanes belong
// to. Each register block of `d.oc_blocks` output vectors therefore sweeps only the input
// blocks covering the union of its groups (`ranges`), with the weights packed densely over
// that range as the direct family packs them and zeros where an (output, input) pair lies in
// different groups. The direct code already takes the number of full input blocks, the ic-tail
// flag and the weight pointer per call, so the sparsity is all in the kernel's calls and
// packing. With channels per group a multiple of the vector width this is exactly `groups`
// dense convolutions; with fewer per group (8 on 16 lanes) every lane still does a plain FMA
// but only a fraction of them is useful (grouped_lane_use), so narrow groups take the shuffle
// mode (GroupedMode, grouped_gen.h) instead. bf16 (src nChw16c_bf16, AVX512-BF16): the sparse
// mode with the direct family's bf16 code (vdpbf16ps over channel pairs, weights packed as
// pairs), dst nChw16c or nChw16c_bf16.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/conv/conv_direct_conf.h"
#include "jit/conv/conv_kernel.h"

namespace kiln::convjit {

// The input blocks one register block of output vectors reads.
struct GroupedRange {
  int64_t ib_lo = 0;     // first input-channel block
  int64_t k_blocks = 0;  // full blocks from ib_lo on
  bool ic_tail = false;  // then the last, partial block of the input (d.ic_tail channels)
  int64_t blocks() const { return k_blocks + (ic_tail ? 1 : 0); }
  bool operator==(const GroupedRange&) const = default;
};

// How a register block meets its groups.
enum class GroupedMode {
  automatic,  // init_grouped_conf's choice: shuffle where it applies, else sparse
  sparse,     // block-sparse direct conv (any groups)
  // Equal groups (icg == ocg == c) that are not whole vectors (8, 4, 24 per group on 16
  // lanes): lane l of output vector j needs input channels G(l) * c + r, r < c, of its group
  // G(l). Per input pixel and r, one permute makes the vector whose lane l holds that channel:
  // vpermps from one input block when c divides simd, vpermt2ps from two (AVX-512) when the
  // vector spans two groups (24 on 16). One FMA with the packed weights W[l][r] per kernel
  // column that reads the pixel: every lane useful, at the cost of c permutes per input pixel,
  // shared by the kw / sw taps that read it (grouped_gen.h).
  shuffle,
};

// Shuffle mode: where lane l of the vector permuted for in-group channel r comes from: input
// blocks a and b (relative to the call's first block), lane lanes[l] < simd of block a or
// lanes[l] - simd of block b (a == b: one block).
struct ShuffleSource {
  int64_t a = 0, b = 0;
  std::vector<int> lanes;
};

struct GroupedConf {
  ConvProblem p;  // groups > 1
  DirectConf d;   // sparse: the direct conf the code is generated from (d.p == p, no K split);
                  // shuffle: its isa, simd, layouts, ocb and icb fields
  int64_t icg = 0, ocg = 0;          // channels per group, in and out
  std::vector<GroupedRange> ranges;  // sparse: per register block of output vectors

  bool shuffle = false;
  // shuffle: output vectors j with the same j % phases read the same pattern of input blocks,
  // relative to block j - j % phases; sources[phase][r], then sources[phases][r] for the last
  // vector when it has a lane tail (d.last_group_own: only its real lanes read).
  int64_t phases = 1;
  std::vector<std::vector<ShuffleSource>> sources;
  // shuffle: output pixels per register block (one output vector), the row's blocks, and the
  // vector registers reserved for the epilogue.
  int ur_w = 0;
  std::vector<OwBlock> ow_blocks;
  int epi_temps = 0;
  // shuffle: the registers one block needs besides its accumulators (the permute index, the
  // permuted vector, kw weights; the mask and the masked input for an AVX2 lane tail).
  int shuffle_regs() const {
    return 2 + int(p.kw) + (d.isa != Isa::avx512 && p.oc % d.simd ? 2 : 0);
  }

  std::string name() const;  // "conv_grouped_f32_nChw16c_to_nChw16c_ow14oc1__avx512",
                             // shuffle: "..._shuf8ow14__avx512" (8 channels per group)
};

// The conf, or why the grouped family does not apply. impl.ur_w / impl.oc_blocks > 0 force
// the register block (a forced oc_blocks may span several groups: its range is the union, and
// it means the sparse mode).
ConfOr<GroupedConf> init_grouped_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa);
ConfOr<GroupedConf> init_grouped_conf_mode(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                           GroupedMode mode);

// The input blocks register block `g` of `ob` output vectors (the last one may be shorter)
// reads, for `simd`-wide blocks.
GroupedRange grouped_range(const ConvProblem& p, int simd, int ob, int64_t g);

// The useful fraction of the FMA lanes the family executes on p with `simd`-wide blocks and one
// output vector per register block (1 when channels per group are a multiple of simd): the
// cost model's lane use and the benches' check.
double grouped_lane_use(const ConvProblem& p, int simd);

// The shuffle sources of output vector j (all its lanes, or only the real ones: `bounded`),
// relative to block j - j % phases; nullopt when a permute would need more than two blocks, or
// more than one on 8 lanes (AVX2 has no two-source permute) or with a column stride: the two
// loads per permuted vector then outweigh its 1.5 FMAs (measured: bench/NOTES.md, grouped
// convolution kernels).
std::optional<std::vector<ShuffleSource>> grouped_shuffle_sources(const ConvProblem& p, int simd,
                                                                  int64_t j, bool bounded);
// Whether the shuffle mode applies on `simd`-wide vectors; the cost model's efficiency (bf16:
// src nChw16c_bf16, the sparse mode).
bool grouped_shuffle_fits(const ConvProblem& p, int simd);
double grouped_efficiency(const ConvProblem& p, int simd, bool bf16 = false);

// The Kernel for a conf: packs the weights once, shares the code (code_key: jit/shared_code.h).
// weights: [OC, IC / groups, KH, KW] f32 (validated); bias: [OC] or nullptr.
std::unique_ptr<Kernel> make_grouped_kernel(const GroupedConf& c, const Tensor& weights,
                                            const Tensor* bias, const std::string& code_key = "");

}  // namespace kiln::convjit
