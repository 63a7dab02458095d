// Vector math building blocks for Xbyak kernels: a rip-relative constant table and a
// vectorised exp() (used by the fused epilogue's sigmoid/swish, reusable by a standalone
// Sigmoid / Exp kernel). Both work for AVX-512 (zmm, EVEX) and AVX2 (ymm, VEX + FMA3).
#pragma once

#include <xbyak/xbyak.h>

#include <cstdint>
#include <vector>

#include "jit/cpu.h"

namespace kiln {

// A vector register of the isa by index (zmm<i> on AVX-512, ymm<i> on AVX2). Code brings it in
// with `using xreg::vreg;`; the namespace keeps it from meeting, through argument-dependent
// lookup on Isa, a vreg(Isa, int) of code that defines its own.
namespace xreg {
inline Xbyak::Xmm vreg(Isa isa, int i) {
  if (isa == Isa::avx512) return Xbyak::Zmm(i);
  return Xbyak::Ymm(i);
}
}  // namespace xreg

// Register indices first .. first + count - 1 (e.g. the epilogue's scratch registers).
inline std::vector<int> vreg_range(int first, int count) {
  std::vector<int> r;
  for (int i = 0; i < count; ++i) r.push_back(first + i);
  return r;
}

// exp(r) ~ sum kExpPoly[k] r^k on |r| <= ln2/2: a degree-6 minimax fit for relative error.
// Shared by the Xbyak (vec_math.cpp) and asmjit (glue/asm_math.cpp) exp emitters.
inline constexpr float kExpPoly[7] = {1.0f,
                                      1.0f,
                                      0.49999991059303284f,
                                      0.16666419804096222f,
                                      0.04166822507977486f,
                                      0.008374820463359356f,
                                      0.0013836838770657778f};

// tanh(x) = x + x^3 P(x^2) on |x| < kTanhSmall (minimax fit for relative error, 1.5e-10 in
// double precision), 1 - 2 / (exp(2|x|) + 1) with x's sign beyond (no cancellation either
// way). expm1(x) = x (1 + x/2 + ... + x^9/10!) on |x| < kExpm1Small (truncation below 1e-10
// relative), exp(x) - 1 beyond (losing at most a factor 2.6 of exp's error). Shared by the
// Xbyak epilogue (jit/epilogue.cpp) and the asmjit glue (glue/asm_math.cpp).
inline constexpr float kTanhSmall = 0.625f;
inline constexpr float kTanhPoly[6] = {-0.3333333f, 0.1333321f,    -0.053947207f,
                                       0.02170297f, -0.008182679f, 0.002147541f};
inline constexpr float kExpm1Small = 0.5f;
inline constexpr float kExpm1Taylor[10] = {1.f,          1.f / 2,      1.f / 6,    1.f / 24,
                                           1.f / 120,    1.f / 720,    1.f / 5040, 1.f / 40320,
                                           1.f / 362880, 1.f / 3628800};
// mish(x) = x tanh(softplus(x)) = x n / (n + 2) with n = e^x (e^x + 2): exp only, no log and no
// cancellation. e^x's argument is clamped to kMishMax, past which n / (n + 2) rounds to 1
// (from x ~ 9) and n does not overflow.
inline constexpr float kMishMax = 20.f;

// The range reduction of exp: x = n ln2 + r with n = round(x log2e), n ln2 subtracted as
// n ln2_hi + n ln2_lo (Cody-Waite: ln2_hi keeps 12 significant bits, so n * ln2_hi is exact for
// |n| < 2^12; we need |n| <= 152). Shared by both exp emitters.
inline constexpr float kLog2e = 1.44269504088896340736f;
float exp_ln2_hi();
float exp_ln2_lo();

// Constants a kernel reads rip-relatively. Every entry is one full vector (64 bytes on
// AVX-512, 32 on AVX2) so it can be the memory operand of any instruction without a
// broadcast; identical entries are shared. Entries are appended while code is emitted (their
// offsets are fixed at once) and written by emit(), which the kernel calls once after its ret.
class VecConsts {
 public:
  VecConsts(Xbyak::CodeGenerator& gen, Isa isa);

  Xbyak::Address f32(float v);    // v in every lane
  Xbyak::Address i32(int32_t v);  // v in every lane
  Xbyak::Address u32(uint32_t bits);
  // Per-lane bit patterns (missing lanes are 0), e.g. a vmaskmovps lane mask or, in lane 0,
  // a 16-bit opmask for kmovw.
  Xbyak::Address lanes(const std::vector<uint32_t>& bits);

  // Writes the table (64-byte aligned). Throws internal when called twice.
  void emit();
  bool emitted() const { return emitted_; }
  bool empty() const { return entries_.empty(); }

 private:
  Xbyak::CodeGenerator& g_;
  int bytes_;
  Xbyak::Label label_;
  std::vector<std::vector<uint32_t>> entries_;
  bool emitted_ = false;
};

// Clamp bounds of exp's argument: below kExpMin the result rounds to +0 (e^-104 < 2^-150),
// above kExpMax it is +inf (e^88.73 > FLT_MAX); clamping keeps ±inf and huge inputs from
// turning the range reduction into inf - inf.
constexpr float kExpMin = -105.f;
constexpr float kExpMax = 90.f;

// dst = exp(src) lane-wise (exp(-src) when `negate`), accurate to ~1 ULP over the whole float
// range including subnormal results; exp(+inf) = +inf, exp(-inf) = +0, NaN stays NaN.
// Vector registers by index (zmm on avx512, ymm on avx2). dst may equal src (src is read
// first); t_r and t_n are scratch and must differ from dst, src and each other.
void emit_exp(Xbyak::CodeGenerator& g, Isa isa, VecConsts& c, int dst, int src, int t_r, int t_n,
              bool negate = false);

}  // namespace kiln
