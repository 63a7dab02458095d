#include "jit/vec_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "graph/error.h"

namespace kiln {
namespace {

using Xbyak::Xmm;
using xreg::vreg;

// kExpPoly (vec_math.h): exp(r) ~ sum c_k r^k on |r| <= ln2/2 (+2e-5 slack for the rounding of
// x*log2e): degree-6 minimax for relative error (max 1.9e-9 before rounding the coefficients to
// float), derived with our own Remez exchange (mpmath); c0 and c1 round to exactly 1.

constexpr double kLn2 = 0.693147180559945309417232121458176568;

}  // namespace

float exp_ln2_hi() {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(float(kLn2)) & 0xfffff000u);
}
float exp_ln2_lo() {
  return float(kLn2 - double(exp_ln2_hi()));
}

VecConsts::VecConsts(Xbyak::CodeGenerator& gen, Isa isa) : g_(gen), bytes_(simd_width(isa) * 4) {
  if (isa != Isa::avx2 && isa != Isa::avx512)
    fail(Code::internal, std::string("VecConsts: no vector constants for isa ") + isa_name(isa));
}

Xbyak::Address VecConsts::f32(float v) {
  return u32(std::bit_cast<uint32_t>(v));
}
Xbyak::Address VecConsts::i32(int32_t v) {
  return u32(uint32_t(v));
}
Xbyak::Address VecConsts::u32(uint32_t bits) {
  return lanes(std::vector<uint32_t>(size_t(bytes_ / 4), bits));
}

Xbyak::Address VecConsts::lanes(const std::vector<uint32_t>& bits) {
  if (emitted_) fail(Code::internal, "vector constant requested after the table was emitted");
  const size_t n = size_t(bytes_ / 4);
  if (bits.size() > n) fail(Code::internal, "vector constant wider than the vector");
  std::vector<uint32_t> e(bits);
  e.resize(n, 0u);
  auto it = std::find(entries_.begin(), entries_.end(), e);
  size_t idx = size_t(it - entries_.begin());
  if (it == entries_.end()) entries_.push_back(std::move(e));
  return g_.ptr[g_.rip + label_ + int(idx * size_t(bytes_))];
}

void VecConsts::emit() {
  if (emitted_) fail(Code::internal, "vector constant table emitted twice");
  emitted_ = true;
  g_.align(64);
  g_.L(label_);
  for (const auto& e : entries_)
    for (uint32_t v : e) g_.dd(v);
}

void emit_exp(Xbyak::CodeGenerator& g, Isa isa, VecConsts& c, int dst, int src, int t_r, int t_n,
              bool negate) {
  if (t_r == t_n || t_r == dst || t_r == src || t_n == dst || t_n == src)
    fail(Code::internal, "emit_exp: scratch registers overlap dst/src");
  const bool z = isa == Isa::avx512;
  const Xmm d = vreg(isa, dst), s = vreg(isa, src), r = vreg(isa, t_r), n = vreg(isa, t_n);
  // Bounds expressed on src (exp(-src) when negating).
  const float lo = negate ? -kExpMax : kExpMin, hi = negate ? -kExpMin : kExpMax;

  // r = clamp(src, lo, hi) keeping NaN: MINPS/MAXPS return their second operand when one is
  // NaN, so src goes second. (vrangeps would save the loads but turns max(NaN, lo) into lo.)
  g.vmovaps(r, c.f32(hi));
  g.vminps(r, r, s);
  g.vmovaps(n, c.f32(lo));
  g.vmaxps(r, n, r);
  // n = round(x * log2e) with x = ±src; nearest-even is symmetric, so n(-src) = -n(src).
  g.vmulps(n, r, c.f32(negate ? -kLog2e : kLog2e));
  if (z)
    g.vrndscaleps(n, n, 0);
  else
    g.vroundps(n, n, 0);
  // r = x - n*ln2 in two steps (exact first step). When negating, r holds src and we form
  // src + n*ln2 = -(x - n*ln2) instead; the odd coefficients flip sign to compensate.
  if (negate) {
    g.vfmadd231ps(r, n, c.f32(exp_ln2_hi()));
    g.vfmadd231ps(r, n, c.f32(exp_ln2_lo()));
  } else {
    g.vfnmadd231ps(r, n, c.f32(exp_ln2_hi()));
    g.vfnmadd231ps(r, n, c.f32(exp_ln2_lo()));
  }
  auto coef = [&](int k) { return negate && (k & 1) ? -kExpPoly[k] : kExpPoly[k]; };
  g.vmovaps(d, c.f32(coef(6)));
  for (int k = 5; k >= 0; --k) g.vfmadd213ps(d, r, c.f32(coef(k)));

  // d *= 2^n. vscalefps rounds once, giving subnormals, 0 and inf correctly. AVX2 has no such
  // instruction: split n = n1 + n2 (both in [-76, 65], so 2^n1, 2^n2 are normal floats built
  // by shifting n + 127 into the exponent); d * 2^n1 is exact and the second multiply does
  // the single rounding (subnormal or overflow) of the true result.
  if (z) {
    g.vscalefps(d, d, n);
  } else {
    g.vcvtps2dq(n, n);
    g.vpsrad(r, n, 1);
    g.vpsubd(n, n, r);
    g.vpaddd(r, r, c.i32(127));
    g.vpslld(r, r, 23);
    g.vmulps(d, d, r);
    g.vpaddd(n, n, c.i32(127));
    g.vpslld(n, n, 23);
    g.vmulps(d, d, n);
  }
}

}  // namespace kiln
