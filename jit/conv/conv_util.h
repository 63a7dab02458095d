// Pieces shared by the conv families that need no Xbyak: the argument struct every conv JIT
// function takes, the register-blocking cost model, common applicability checks and the
// packing helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/call_flags.h"
#include "jit/conv/conv_problem.h"
#include "jit/cpu.h"
#include "jit/layout.h"
#include "jit/post_op_args.h"

namespace kiln {
struct ConvInt8;  // jit/conv/conv_kernel.h
}

namespace kiln::convjit {

// What a conv JIT function receives (one pointer in rdi). Offsets are read with offsetof.
struct ConvCallArgs {
  const float* src = nullptr;   // direct: first valid input row; gemm1x1: first pixel
  const float* wei = nullptr;   // packed weights of the oc group (+ first valid kh row)
  float* dst = nullptr;         // output row / first pixel, first oc of the group
  const float* bias = nullptr;  // packed, zero-padded bias of the group
  int64_t kh_cnt = 0;           // direct: valid kernel rows
  int64_t k_blocks = 0;         // full input-channel blocks in this call
  int64_t m_blocks = 0;         // gemm1x1: full pixel blocks in this call
  int64_t flags = 0;
  int64_t wei_tail_adj = 0;  // direct: bytes added to the weight pointer at the ic-tail block
  PostOpArgs post;           // fused post-ops' operands, at the group's first oc
  // gemm1x1 with groups outer: where this call's share of the next group's weights starts
  // (prefetched into L2 while this group computes).
  const float* pf_wei = nullptr;
  const float* qscale = nullptr;  // int8: per-oc scale of the int32 sums, at the group's first oc
  const int64_t* koff = nullptr;  // int8 windows: each K block's byte offset from the tile's src
};

// One conf or the reason a family does not apply.
template <class Conf>
struct ConfOr {
  ConfOr(Conf c) : conf(std::move(c)) {}  // NOLINT: implicit, `return conf;`
  static ConfOr no(std::string why) {
    ConfOr r;
    r.reason = std::move(why);
    return r;
  }
  explicit operator bool() const { return conf.has_value(); }

  std::optional<Conf> conf;
  std::string reason;

 private:
  ConfOr() = default;
};

inline int vector_regs(Isa isa) {
  return isa == Isa::avx512 ? 32 : 16;
}

// Register budget of a ur x ob block: accumulators + max(weight vectors (+ the broadcast
// register), epilogue temps). The weight / broadcast registers are dead at the store point, so
// the epilogue reuses them as scratch.
inline bool block_fits(Isa isa, int ur, int ob, bool bcast_reg, int temps) {
  const int live = ob + ((bcast_reg || isa != Isa::avx512) ? 1 : 0);
  return ur * ob + (live > temps ? live : temps) <= vector_regs(isa);
}

// Groups-outer / rows-outer weights from this size on are prefetched group by group during the
// first chunk's (row's) sweep: in a network even small layers' weights are flushed between runs.
constexpr int64_t kPfFirstAbove = 64 * 1024;

// Vector scratch registers reserved for the fused epilogue. init_conf runs without an emitter,
// so it uses per-op upper bounds of the emitter's needs; the generator checks the real
// EpilogueEmitter::temps_needed() against the registers it has.
int epilogue_temps(const ConvProblem& p, Isa isa);

// Estimated cycles of one reduction step (one input channel x one kernel tap) of a register
// block of `ur` pixels x `ob` oc vectors: FMA pipes, FMA latency per accumulator chain, load
// ports and the front end. bcast_reg: the src value is
// broadcast once into a register instead of embedded in every FMA (always so on AVX2).
double block_step_cycles(Isa isa, int ur, int ob, bool bcast_reg);

// Common reasons a problem cannot be run by any JIT conv family on `isa` ("" when fine).
std::string check_common(const ConvProblem& p, Isa isa);

// "" when `l` is the blocked layout whose block equals the vector width of `isa`.
std::string check_blocked(Layout l, Isa isa, const char* what);
// The bf16 variants of the blocked families (src or dst nChw16c_bf16): AVX-512 with
// AVX512-BF16, each side nChw16c or nChw16c_bf16, no residual add into a bf16 dst (it would be
// read in bf16), and, when `bf16_src` (the family's arithmetic is bf16), a bf16 src. "" when
// they hold, else the reason.
std::string check_bf16(const ConvProblem& p, Layout src, Layout dst, Isa isa, bool bf16_src);

// The rules every int8 conv (ConvImpl::int8) shares: a weight scale per output channel; a
// nChw16c_u8 dst stores the q of the chain's last op, which must be a quantize-dequantize, and
// reads its one residual `add` as bytes, which must be on a uint8 grid (ConvInt8::residual).
// "" when they hold, else the reason.
std::string check_int8(const ConvProblem& p, Layout dst, const ConvInt8& q);

// The bias padded with zeros to `padded` channels (all zeros without bias).
std::vector<float> pack_bias(const float* bias, int64_t oc, int64_t padded);

}  // namespace kiln::convjit
