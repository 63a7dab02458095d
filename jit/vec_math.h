// Vector math building blocks for Xbyak kernels: a rip-relative constant table and a
// vectorised exp() (used by the fused epilogue's sigmoid/swish, reusable by a standalone
// Sigmoid / Exp kernel). Both work for AVX-512 (zmm, EVEX) and AVX2 (ymm, VEX + FMA3).
#pragma once

#include <xbyak/xbyak.h>

#include <cstdint>
#include <vector>

#include "jit/cpu.h"

namespace kiln {

// exp(r) ~ sum kExpPoly[k] r^k on |r| <= ln2/2: a degree-6 minimax fit for relative error.
// Shared by the Xbyak (vec_math.cpp) and asmjit (glue/asm_math.cpp) exp emitters.
inline constexpr float kExpPoly[7] = {1.0f,
                                      1.0f,
                                      0.49999991059303284f,
                                      0.16666419804096222f,
                                      0.04166822507977486f,
                                      0.008374820463359356f,
                                      0.0013836838770657778f};

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
