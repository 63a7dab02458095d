// The one epilogue emitter every conv / GEMM family calls at its store point: bias, then the
// node's post-op chain (graph/post_ops.h) — relu, leaky_relu, clip, sigmoid, swish,
// hardswish, hardsigmoid, gelu, residual add, per-channel scale/shift — applied in registers before
// the single store. Works for AVX-512 (zmm) and AVX2 (ymm).
#pragma once

#include <xbyak/xbyak.h>

#include <functional>
#include <utility>
#include <vector>

#include "graph/post_ops.h"
#include "jit/cpu.h"
#include "jit/layout.h"
#include "jit/vec_math.h"

namespace kiln {

// GELU's erf term as erfc(|z|) ~ t P(t) exp(-z^2), t = 1 / (1 + p |z|) (Abramowitz & Stegun
// 7.1.26, |error| <= 1.5e-7; 5.6e-7 measured in float arithmetic): 1 + erf(z) is
// then 2 - erfc(|z|) for z >= 0 and erfc(|z|) for z < 0, so gelu keeps its relative accuracy in the
// negative tail (no 1 + erf cancellation). kErfcPoly[k] multiplies t^(k+1). Shared by the Xbyak and
// asmjit (glue/asm_math) emitters.
inline constexpr float kErfcP = 0.3275911f;
inline constexpr float kErfcPoly[5] = {0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f,
                                       1.061405429f};

// An int8 conv's uint8 operands (jit/conv/conv_kernel.h ConvInt8, layout nChw16c_u8).
struct EpilogueU8 {
  // The chain's last op is a quantize-dequantize: stop at its integer (as f32, int8 grids
  // shifted by 128 into [0, 255]); the caller stores it as bytes.
  bool store_q = false;
  // `add` residuals are 16 uint8 q at the address, dequantized as (q - zero) * scale.
  bool residual = false;
  U8Quant res;
};

class EpilogueEmitter {
 public:
  // Where the per-channel and residual operands of one accumulator live. Each returns the
  // address of a full vector (simd_width floats) for the accumulator being processed; a
  // family passes lambdas that compute them from its own registers.
  struct Operands {
    std::function<Xbyak::Address()> bias;                 // used when has_bias
    std::function<Xbyak::Address(int post_op)> residual;  // for `add` post-ops
    std::function<Xbyak::Address(int post_op)> scale;     // for `scale_shift`
    std::function<Xbyak::Address(int post_op)> shift;
  };

  // isa: avx2 or avx512 (anything else throws internal).
  // u8: AVX-512 only.
  EpilogueEmitter(Xbyak::CodeGenerator& gen, Isa isa, bool has_bias, std::vector<PostOp> ops,
                  EpilogueU8 u8 = {});

  // Vector registers the chain needs as scratch (0..3). Families reserve this many.
  // temps_needed() covers every call; temps_needed(false) is enough when apply() is only ever
  // called with tail == 0 (AVX2 needs a register for the lane mask of masked loads).
  int temps_needed() const { return temps_needed(true); }
  int temps_needed(bool tail) const;
  bool empty() const { return !has_bias_ && ops_.empty(); }
  const std::vector<PostOp>& ops() const { return ops_; }

  // Applies bias + chain to vector register index `acc` (zmm<acc> / ymm<acc>), clobbering only
  // the registers listed in `temps` (at least temps_needed()). `tail` > 0 means only the first
  // `tail` lanes are real (residual/bias/scale loads are then masked so nothing past the end
  // is read); 0 means a full vector. On AVX-512 opmask k7 is clobbered (tail masks and the
  // compare-and-select of leaky_relu / clip / hardsigmoid). Lanes past `tail` hold garbage.
  void apply(int acc, const std::vector<int>& temps, const Operands& where, int tail = 0);

  // apply() for several accumulators at once, op by op across them (their chains are
  // independent: interleaved, the core overlaps their latencies instead of running one long
  // dependency chain after another). Full vectors only (no tail). Each accumulator gets its
  // own temps_needed(false) registers of `temps` (at least accs.size() times that);
  // where[k] addresses accs[k]'s operands.
  void apply_group(const std::vector<int>& accs, const std::vector<int>& temps,
                   const std::vector<Operands>& where);

  // Emits the constant table (exp coefficients, 6.0, 0.5, ...) the chain refers to. Call once
  // after the kernel's ret and after the last apply(), before create() finishes.
  void emit_constants();

 private:
  Xbyak::CodeGenerator& g_;
  Isa isa_;
  bool has_bias_;
  std::vector<PostOp> ops_;
  // A relu or clip right before a quantize-dequantize folds into its clamp: with
  // f(x) = rint(x / s) non-decreasing (s > 0), f(clip(x, a, b)) = clip(f(x), f(a), f(b)), so
  // clamping n = f(x) to [max(lo - z, f(a)), min(hi - z, f(b))] gives the same integers
  // whenever that interval is not empty (else the op stays). NaN passes both ways; a -0 n
  // becomes +0 at the dequantization or the integer store either way. folded_[i]: op i is
  // skipped; qbounds_[i]: the clamp of the quantize-dequantize op i, on n.
  std::vector<bool> folded_;
  std::vector<std::pair<float, float>> qbounds_;

  EpilogueU8 u8_;
  VecConsts consts_;
};

}  // namespace kiln
