#include "jit/glue/asm_math.h"

#include <cmath>
#include <cstdint>

#include "graph/error.h"
#include "jit/epilogue.h"  // kErfcP, kErfcPoly
#include "jit/vec_math.h"  // kExpMin, kExpMax, kLog2e, exp_ln2_hi/lo

namespace kiln::glue {

void emit_exp(AsmBuilder& b, const x86::Vec& d, const x86::Vec& s, bool negate) {
  auto& cc = b.cc();
  const int lanes = int(d.size() / 4);
  x86::Vec r = b.vec(lanes), n = b.vec(lanes);
  const float lo = negate ? -kExpMax : kExpMin, hi = negate ? -kExpMin : kExpMax;
  // r = clamp(src, lo, hi) keeping NaN: MINPS/MAXPS return the second operand when one is
  // NaN, so src goes second.
  cc.vmovups(r, b.cf32(hi, lanes));
  cc.vminps(r, r, s);
  cc.vmovups(n, b.cf32(lo, lanes));
  cc.vmaxps(r, n, r);
  // n = round(x * log2e), x = ±src (nearest-even is symmetric: n(-src) = -n(src)).
  cc.vmulps(n, r, b.cf32(negate ? -kLog2e : kLog2e, lanes));
  if (b.avx512())
    cc.vrndscaleps(n, n, 0);
  else
    cc.vroundps(n, n, 0);
  // r = x - n*ln2 in two steps; negating, r holds src and we form -(x - n*ln2) instead and
  // flip the odd coefficients.
  if (negate) {
    cc.vfmadd231ps(r, n, b.cf32(exp_ln2_hi(), lanes));
    cc.vfmadd231ps(r, n, b.cf32(exp_ln2_lo(), lanes));
  } else {
    cc.vfnmadd231ps(r, n, b.cf32(exp_ln2_hi(), lanes));
    cc.vfnmadd231ps(r, n, b.cf32(exp_ln2_lo(), lanes));
  }
  auto coef = [&](int k) { return negate && (k & 1) ? -kExpPoly[k] : kExpPoly[k]; };
  cc.vmovups(d, b.cf32(coef(6), lanes));
  for (int k = 5; k >= 0; --k) cc.vfmadd213ps(d, r, b.cf32(coef(k), lanes));
  // d *= 2^n: vscalefps rounds once (subnormals, 0, inf right). AVX2: n = n1 + n2 with both
  // halves normal exponents; d * 2^n1 is exact, the second multiply does the single rounding.
  if (b.avx512()) {
    cc.vscalefps(d, d, n);
  } else {
    cc.vcvtps2dq(n, n);
    cc.vpsrad(r, n, 1);
    cc.vpsubd(n, n, r);
    cc.vpaddd(r, r, b.cu32(127, lanes));
    cc.vpslld(r, r, 23);
    cc.vmulps(d, d, r);
    cc.vpaddd(n, n, b.cu32(127, lanes));
    cc.vpslld(n, n, 23);
    cc.vmulps(d, d, n);
  }
}

void emit_gelu(AsmBuilder& b, const x86::Vec& a) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  x86::Vec e = b.vec(lanes), t = b.vec(lanes), q = b.vec(lanes), r = b.vec(lanes);
  cc.vmulps(e, a, a);  // e = exp(-z^2), z^2 = x*x*0.5
  cc.vmulps(e, e, b.cf32(0.5f, lanes));
  emit_exp(b, e, e, /*negate=*/true);
  cc.vandps(t, a, b.cu32(0x7fffffffu, lanes));  // t = 1 / (1 + p |z|)
  cc.vmulps(t, t, b.cf32(float(kErfcP * M_SQRT1_2), lanes));
  cc.vaddps(t, t, b.cf32(1.f, lanes));
  cc.vmovups(r, b.cf32(1.f, lanes));
  cc.vdivps(t, r, t);
  cc.vmovups(q, b.cf32(kErfcPoly[4], lanes));  // q = erfc(|z|) = t P(t) e
  for (int k = 3; k >= 0; --k) cc.vfmadd213ps(q, t, b.cf32(kErfcPoly[k], lanes));
  cc.vmulps(q, q, t);
  cc.vmulps(q, q, e);
  cc.vmovups(r, b.cf32(2.f, lanes));  // r = x < 0 ? erfc : 2 - erfc
  cc.vsubps(r, r, q);
  if (b.avx512()) {
    x86::KReg k = cc.newKw();
    cc.vcmpps(k, a, b.cf32(0.f, lanes), 0x11);  // _CMP_LT_OQ
    cc.k(k).vmovaps(r, q);
  } else {
    cc.vblendvps(r, r, q, a);  // by x's sign bit
  }
  cc.vmulps(a, a, b.cf32(0.5f, lanes));
  cc.vmulps(a, a, r);
}

void emit_post_op(AsmBuilder& b, const x86::Vec& a, const PostOp& op) {
  using K = PostOp::Kind;
  constexpr uint8_t kLtOq = 0x11;
  auto& cc = b.cc();
  auto zero = [&] {
    x86::Vec z = b.vec();
    cc.vxorps(z, z, z);
    return z;
  };
  switch (op.kind) {
    case K::relu:  // x > 0 ? x : 0  ==  MAXPS(x, 0) (NaN and -0 give +0, as the reference)
      cc.vmaxps(a, a, b.cf32(0.f));
      break;
    case K::leaky_relu:  // x >= 0 ? x : x*alpha  ==  x < 0 ? x*alpha : x
      if (b.avx512()) {
        x86::KReg k = cc.newKw();
        cc.vcmpps(k, a, b.cf32(0.f), kLtOq);
        cc.k(k).vmulps(a, a, b.cf32(op.alpha));
      } else {
        x86::Vec t = b.vec(), msk = b.vec();
        cc.vmulps(t, a, b.cf32(op.alpha));
        cc.vcmpps(msk, a, b.cf32(0.f), kLtOq);
        cc.vblendvps(a, a, t, msk);
      }
      break;
    case K::clip:  // std::min(std::max(x, lo), hi) == MINPS(hi, MAXPS(lo, x))
      if (!(op.alpha == -INFINITY)) cc.vmaxps(a, b.bcast(op.alpha), a);
      if (!(op.beta == INFINITY)) cc.vminps(a, b.bcast(op.beta), a);
      break;
    case K::sigmoid: {  // 1 / (1 + exp(-x))
      x86::Vec e = b.vec();
      emit_exp(b, e, a, /*negate=*/true);
      cc.vaddps(e, e, b.cf32(1.f));
      cc.vdivps(a, b.bcast(1.f), e);
      break;
    }
    case K::swish: {  // x / (1 + exp(-x))
      x86::Vec e = b.vec();
      emit_exp(b, e, a, /*negate=*/true);
      cc.vaddps(e, e, b.cf32(1.f));
      cc.vdivps(a, a, e);
      break;
    }
    case K::hardswish: {  // x * min(max(x/6 + 0.5, 0), 1), the reference's roundings
      x86::Vec t = b.vec();
      cc.vdivps(t, a, b.cf32(6.f));
      cc.vaddps(t, t, b.cf32(0.5f));
      cc.vmaxps(t, zero(), t);
      cc.vminps(t, b.bcast(1.f), t);
      cc.vmulps(a, a, t);
      break;
    }
    case K::hardsigmoid:  // min(max(alpha*x + beta, 0), 1), two roundings
      cc.vmulps(a, a, b.cf32(op.alpha));
      cc.vaddps(a, a, b.cf32(op.beta));
      cc.vmaxps(a, zero(), a);
      cc.vminps(a, b.bcast(1.f), a);
      break;
    case K::gelu:
      emit_gelu(b, a);
      break;
    case K::add:
    case K::scale_shift:
      fail(Code::internal, std::string("kernel ") + b.name() + ": post-op " +
                               post_op_name(op.kind) + " needs an operand");
  }
}

}  // namespace kiln::glue
