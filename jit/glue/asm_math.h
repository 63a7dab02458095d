// Vector math for the asmjit glue kernels: exp() with the algorithm of jit/vec_math.cpp's
// Xbyak emit_exp (clamp, n = round(x*log2e), r = x - n*ln2 with a two-constant ln2 split, a
// degree-6 polynomial, then 2^n by vscalefps on AVX-512 or two exponent-field multiplies on
// AVX2), rewritten for the Compiler's virtual registers.
#pragma once

#include "graph/post_ops.h"
#include "jit/glue/asmjit_util.h"

namespace kiln::glue {

// dst = exp(src) lane-wise (exp(-src) when `negate`), ~1 ULP over the float range including
// subnormal results; exp(+inf) = +inf, exp(-inf) = +0, NaN stays NaN. dst may be src.
void emit_exp(AsmBuilder& b, const x86::Vec& dst, const x86::Vec& src, bool negate = false);

// a = gelu(a) = a * 0.5 * (1 + erf(a / sqrt 2)) lane-wise, in place: the algorithm of the
// Xbyak epilogue's gelu (jit/epilogue.h, kErfcPoly), <= 6e-7 absolute in the erf term.
void emit_gelu(AsmBuilder& b, const x86::Vec& a);

// a = tanh(a), a = erf(a) lane-wise, in place: a small-|a| odd polynomial and an exp-based form
// beyond it (asm_math.cpp has the fits); a few ulp of std::tanh / std::erf (tests measure it).
void emit_tanh(AsmBuilder& b, const x86::Vec& a);
void emit_erf(AsmBuilder& b, const x86::Vec& a);
// a = std::pow(a, y) for a finite constant y (x * x for y = 2, as the reference Pow): exact
// forms for y in {0, 1, 2, -1, 0.5} (3: two multiplies; 0.75: two square roots), else 2^(y log2|a|)
// with the exponent carried in two floats, and C's special cases (negative a and non-integer y:
// NaN).
void emit_pow(AsmBuilder& b, const x86::Vec& a, float y);

// a = ln(a) (Cephes logf's polynomial on the mantissa, C's special cases), a = expm1(a) (a
// Taylor polynomial below |a| = 1/2, exp(a) - 1 above), a = softplus(a) = max(a, 0) +
// log1p(exp(-|a|)), lane-wise in place; a few ulp (tests/jit/test_glue_unary.cpp measures it).
void emit_log(AsmBuilder& b, const x86::Vec& a);
void emit_expm1(AsmBuilder& b, const x86::Vec& a);
void emit_softplus(AsmBuilder& b, const x86::Vec& a);

// a = sin(a) or cos(a) lane-wise, in place: x = j pi/2 + r (Cody-Waite, three parts of pi/2
// with FMAs) and Cephes' sinf / cosf polynomials on r by j's quadrant, for |a| <= kSinMaxArg;
// a vector with a lane beyond it (or infinite) calls std::sin / std::cos on all its lanes
// (float's own reduction of huge arguments); a few ulp of std::sin (tests measure it).
constexpr float kSinMaxArg = 131072.f;
void emit_sin_cos(AsmBuilder& b, const x86::Vec& a, bool cos);

// a = op(a) for a unary post-op (every kind but add and scale_shift, which need operands: an
// internal error) on a full-width vector, with the scalar reference's own operations in the
// same order (graph/post_ops.cpp): bit-exact but for sigmoid and swish (the vector exp).
void emit_post_op(AsmBuilder& b, const x86::Vec& a, const PostOp& op);

// The chain's part of a kernel name ("" or "_relu", ...); "" with *why set when an op needs an
// operand (emit_post_op's refusal, for the kernels' factories to decline with).
std::string post_part(const std::vector<PostOp>& post, std::string* why);

}  // namespace kiln::glue
