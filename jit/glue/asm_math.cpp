#include "jit/glue/asm_math.h"

#include <cstdint>

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

}  // namespace kiln::glue
