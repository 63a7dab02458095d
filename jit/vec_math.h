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
