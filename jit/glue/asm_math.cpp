#include "jit/glue/asm_math.h"

#include <cmath>
#include <cstdint>

#include "graph/error.h"
#include "graph/quant.h"
#include "jit/epilogue.h"  // kErfcP, kErfcPoly
#include "jit/vec_math.h"  // kExpMin, kExpMax, kLog2e, exp_ln2_hi/lo, kTanh*, kExpm1*, kMishMax

namespace kiln::glue {
namespace {

constexpr uint8_t kEqOq = 0x00, kUnordQ = 0x03, kLtOq = 0x11, kLeOq = 0x12, kGtOq = 0x1e;

// d *= 2^n for integral floats n in [-252, 252] (n is clobbered): vscalefps rounds once
// (subnormals, 0, inf right). AVX2: n = n1 + n2 with both halves normal exponents; d * 2^n1 is
// exact, the second multiply does the single rounding.
void mul_pow2(AsmBuilder& b, const x86::Vec& d, const x86::Vec& n) {
  auto& cc = b.cc();
  const int lanes = int(d.size() / 4);
  if (b.avx512()) {
    cc.vscalefps(d, d, n);
    return;
  }
  x86::Vec r = b.vec(lanes);
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

// dst = (x PRED y) ? src : dst lane-wise (a k register on AVX-512, a blend on AVX2).
template <class Y>
void select_if(AsmBuilder& b, const x86::Vec& dst, const x86::Vec& src, const x86::Vec& x,
               const Y& y, uint8_t pred) {
  auto& cc = b.cc();
  if (b.avx512()) {
    x86::KReg k = cc.newKw();
    cc.vcmpps(k, x, y, pred);
    cc.k(k).vmovaps(dst, src);
  } else {
    x86::Vec m = b.vec(int(dst.size() / 4));
    cc.vcmpps(m, x, y, pred);
    cc.vblendvps(dst, dst, src, m);
  }
}

// d = c[0] + x (c[1] + x (c[2] + ...)) by Horner with FMAs.
template <size_t N>
void horner(AsmBuilder& b, const x86::Vec& d, const x86::Vec& x, const float (&c)[N]) {
  const int lanes = int(d.size() / 4);
  b.cc().vmovups(d, b.cf32(c[N - 1], lanes));
  for (size_t k = N - 1; k-- > 0;) b.cc().vfmadd213ps(d, x, b.cf32(c[k], lanes));
}

// Minimax fits (relative error, double precision, coefficients rounded to float; tanh's in
// vec_math.h): erf(x) = x Q(x^2) on |x| <= kErfSmall (2.5e-11); erfc(x) = t R(t) exp(-x^2),
// t = 1 / (1 + kErfcP x), on [kErfSmall, 4] (2.5e-10; erf rounds to 1 from 3.92).
constexpr float kErfSmall = 0.75f;
constexpr float kErfPoly[] = {1.1283792f,    -0.37612638f,   0.11283779f,  -0.02686479f,
                              0.0052168467f, -0.0008357825f, 9.475755e-05f};
constexpr float kErfcTail[] = {0.18544832f, 0.1757358f,   0.23245063f, -0.05160911f,
                               0.58480257f, -0.53817594f, 0.56920385f, -0.15786107f};

// a |= sign bit of s (a >= 0).
void or_sign(AsmBuilder& b, const x86::Vec& a, const x86::Vec& s) {
  const int lanes = int(a.size() / 4);
  x86::Vec t = b.vec(lanes);
  b.cc().vandps(t, s, b.cu32(0x80000000u, lanes));
  b.cc().vorps(a, a, t);
}

// |x| = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt 2] (f exact, subnormals scaled by 2^23
// first) and q = ln(1 + f) - f = f^3 P(f) - f^2 / 2 (Cephes logf's polynomial), for ax = |x|
// finite and nonzero (callers fix 0, inf and NaN).
void log_parts(AsmBuilder& b, const x86::Vec& ax, const x86::Vec& k, const x86::Vec& f,
               const x86::Vec& q) {
  auto& cc = b.cc();
  const int lanes = int(ax.size() / 4);
  x86::Vec m = b.vec(lanes), t = b.vec(lanes), u = b.vec(lanes);
  cc.vxorps(k, k, k);
  cc.vmulps(t, ax, b.cf32(8388608.f, lanes));
  cc.vmovaps(m, ax);
  select_if(b, m, t, ax, b.cf32(1.17549435e-38f, lanes), kLtOq);
  select_if(b, k, b.bcast(-23.f, lanes), ax, b.cf32(1.17549435e-38f, lanes), kLtOq);
  cc.vpsrld(t, m, 23);
  cc.vpsubd(t, t, b.cu32(127, lanes));
  cc.vcvtdq2ps(t, t);
  cc.vaddps(k, k, t);
  cc.vandps(m, m, b.cu32(0x007fffffu, lanes));
  cc.vorps(m, m, b.cu32(0x3f800000u, lanes));  // [1, 2)
  cc.vmulps(t, m, b.cf32(0.5f, lanes));
  cc.vaddps(u, k, b.cf32(1.f, lanes));
  select_if(b, k, u, m, b.cf32(1.41421356f, lanes), kGtOq);
  select_if(b, m, t, m, b.cf32(1.41421356f, lanes), kGtOq);
  cc.vsubps(f, m, b.cf32(1.f, lanes));  // exact
  static constexpr float kLogPoly[] = {3.3333331174e-1f,  -2.4999993993e-1f, 2.0000714765e-1f,
                                       -1.6668057665e-1f, 1.4249322787e-1f,  -1.2420140846e-1f,
                                       1.1676998740e-1f,  -1.1514610310e-1f, 7.0376836292e-2f};
  horner(b, q, f, kLogPoly);
  cc.vmulps(u, f, f);  // u = f^2
  cc.vmulps(q, q, f);
  cc.vmulps(q, q, u);
  cc.vfnmadd231ps(q, u, b.cf32(0.5f, lanes));
}

}  // namespace

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
  mul_pow2(b, d, n);
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

void emit_tanh(AsmBuilder& b, const x86::Vec& a) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  x86::Vec ax = b.vec(lanes), r = b.vec(lanes), u = b.vec(lanes), p = b.vec(lanes);
  cc.vandps(ax, a, b.cu32(0x7fffffffu, lanes));
  // |x| >= kTanhSmall (and NaN): 1 - 2 / (exp(2|x|) + 1) with x's sign (exp(inf) = inf gives 1).
  cc.vaddps(r, ax, ax);
  emit_exp(b, r, r);
  cc.vaddps(r, r, b.cf32(1.f, lanes));
  cc.vdivps(r, b.bcast(2.f, lanes), r);
  cc.vsubps(r, b.bcast(1.f, lanes), r);
  or_sign(b, r, a);
  // Small |x|: x + x^3 P(x^2) (no cancellation; keeps -0).
  cc.vmulps(u, a, a);
  horner(b, p, u, kTanhPoly);
  cc.vmulps(u, u, a);
  cc.vfmadd213ps(p, u, a);
  select_if(b, r, p, ax, b.cf32(kTanhSmall, lanes), kLtOq);
  cc.vmovaps(a, r);
}

void emit_erf(AsmBuilder& b, const x86::Vec& a) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  x86::Vec ax = b.vec(lanes), t = b.vec(lanes), e = b.vec(lanes), r = b.vec(lanes);
  cc.vandps(ax, a, b.cu32(0x7fffffffu, lanes));
  // |x| >= kErfSmall (and NaN): 1 - t R(t) exp(-x^2) on min(|x|, 4) (MINPS keeps a NaN second).
  cc.vminps(ax, b.bcast(4.f, lanes), ax);
  cc.vmulps(e, ax, ax);
  emit_exp(b, e, e, /*negate=*/true);
  cc.vmulps(t, ax, b.cf32(kErfcP, lanes));
  cc.vaddps(t, t, b.cf32(1.f, lanes));
  cc.vdivps(t, b.bcast(1.f, lanes), t);
  horner(b, r, t, kErfcTail);
  cc.vmulps(r, r, t);
  cc.vmulps(r, r, e);
  cc.vsubps(r, b.bcast(1.f, lanes), r);
  or_sign(b, r, a);
  // Small |x|: x Q(x^2).
  cc.vmulps(t, a, a);
  horner(b, e, t, kErfPoly);
  cc.vmulps(e, e, a);
  select_if(b, r, e, ax, b.cf32(kErfSmall, lanes), kLtOq);
  cc.vmovaps(a, r);
}

void emit_pow(AsmBuilder& b, const x86::Vec& a, float y) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  if (y == 0.f) {  // pow(x, 0) = 1, even for NaN
    cc.vmovups(a, b.cf32(1.f, lanes));
    return;
  }
  if (y == 1.f) return;
  if (y == 2.f || y == 3.f) {  // x * x as the reference; x^3 within an ulp
    x86::Vec t = b.vec(lanes);
    cc.vmulps(t, a, a);
    if (y == 3.f) cc.vmulps(t, t, a);
    cc.vmovaps(a, t);
    return;
  }
  if (y == -1.f) {  // correctly rounded either way
    cc.vdivps(a, b.bcast(1.f, lanes), a);
    return;
  }
  if (y == 0.5f || y == 0.75f) {  // sqrt, but pow(-0, y) = +0 and pow(-inf, y) = +inf
    x86::Vec t = b.vec(lanes);
    cc.vsqrtps(t, a);
    cc.vaddps(t, t, b.cf32(0.f, lanes));
    if (y == 0.75f) {  // sqrt(a) sqrt(sqrt(a)), ~2 ulp (LRN's usual beta)
      x86::Vec u = b.vec(lanes);
      cc.vsqrtps(u, t);
      cc.vmulps(t, t, u);
    }
    select_if(b, t, b.bcast(INFINITY, lanes), a, b.cf32(-INFINITY, lanes), kEqOq);
    cc.vmovaps(a, t);
    return;
  }
  // |x|^y = 2^(y log2|x|) with t = y log2|x| as an unevaluated sum hi + lo, so that the
  // exponent's rounding does not grow with |t|. |x| = (1 + f) 2^k, 1 + f in [sqrt(1/2), sqrt 2]
  // (f exact); ln(1 + f) = f + tail, tail = f^3 P(f) - f^2 / 2 (Cephes logf's polynomial);
  // t = y k + c f + c tail with c = y log2 e: the first two as exact products (FMA error
  // terms), the small tail rounded.
  x86::Vec ax = b.vec(lanes), k = b.vec(lanes), f = b.vec(lanes), u = b.vec(lanes),
           q = b.vec(lanes), t = b.vec(lanes);
  cc.vandps(ax, a, b.cu32(0x7fffffffu, lanes));
  log_parts(b, ax, k, f, q);
  const double c = double(y) * 1.4426950408889634;
  const float c_hi = float(c), c_lo = float(c - double(c_hi));
  // p1 + e1 = y k, p2 + e2 = c f + c tail, then hi + lo = p1 + p2 + e1 + e2.
  x86::Vec p1 = b.vec(lanes), e1 = b.vec(lanes), p2 = b.vec(lanes), e2 = b.vec(lanes);
  cc.vmulps(p1, k, b.cf32(y, lanes));
  cc.vmovaps(e1, p1);
  cc.vfmsub231ps(e1, k, b.cf32(y, lanes));  // k y - p1
  cc.vmulps(p2, f, b.cf32(c_hi, lanes));
  cc.vmovaps(e2, p2);
  cc.vfmsub231ps(e2, f, b.cf32(c_hi, lanes));  // f c_hi - p2
  cc.vfmadd231ps(e2, f, b.cf32(c_lo, lanes));
  cc.vfmadd231ps(e2, q, b.cf32(c_hi, lanes));
  x86::Vec hi = b.vec(lanes), bb = b.vec(lanes);
  cc.vaddps(hi, p1, p2);  // two-sum: e1 += (p1 - (hi - bb)) + (p2 - bb)
  cc.vsubps(bb, hi, p1);
  cc.vsubps(t, hi, bb);
  cc.vsubps(t, p1, t);
  cc.vsubps(p2, p2, bb);
  cc.vaddps(t, t, p2);
  cc.vaddps(e1, e1, e2);
  cc.vaddps(e1, e1, t);
  cc.vaddps(t, hi, e1);  // renormalised (c tail may be large): hi = hi + lo, lo = its error
  cc.vsubps(bb, t, hi);
  cc.vsubps(e1, e1, bb);  // lo
  cc.vmovaps(hi, t);
  // Clamp (2^+-192 over/underflows whatever lo adds), n = round(hi), 2^(hi - n + lo) 2^n.
  cc.vminps(hi, hi, b.cf32(192.f, lanes));
  cc.vmaxps(hi, hi, b.cf32(-192.f, lanes));
  if (b.avx512())
    cc.vrndscaleps(t, hi, 0);
  else
    cc.vroundps(t, hi, 0);
  cc.vsubps(hi, hi, t);
  cc.vaddps(hi, hi, e1);
  cc.vmulps(hi, hi, b.cf32(0.69314718f, lanes));
  emit_exp(b, u, hi);
  mul_pow2(b, u, t);
  // Special operands (y is known here): negative x and a non-integer y give NaN, +-0 and +-inf
  // give 0 or inf by y's sign, NaN stays NaN, odd integers keep x's sign.
  const bool integer = std::nearbyint(y) == y, odd = integer && std::fmod(y, 2.f) != 0.f;
  if (!integer) select_if(b, u, b.bcast(NAN, lanes), a, b.cf32(0.f, lanes), kLtOq);
  select_if(b, u, b.bcast(y > 0 ? 0.f : INFINITY, lanes), ax, b.cf32(0.f, lanes), kEqOq);
  select_if(b, u, b.bcast(y > 0 ? INFINITY : 0.f, lanes), ax, b.cf32(INFINITY, lanes), kEqOq);
  select_if(b, u, a, a, a, kUnordQ);
  if (odd) or_sign(b, u, a);
  cc.vmovaps(a, u);
}

namespace {

// pi / 2 in three floats (their sum within 1.1e-23 of it): j * kPio2[0] is exact in an FMA, so
// x - j pi/2 keeps its precision for every j below kSinMaxArg's.
constexpr float kPio2[] = {0x1.921fb6p+0f, -0x1.777a5cp-25f, -0x1.ee59dap-50f};
constexpr float kTwoOverPi = 0x1.45f306p-1f;
// Cephes sinf / cosf on |r| <= pi / 4: sin r = r + r^3 P(r^2), cos r = 1 - r^2 / 2 + r^4 Q(r^2).
constexpr float kSinPoly[] = {-1.6666654611e-1f, 8.3321608736e-3f, -1.9515295891e-4f};
constexpr float kCosPoly[] = {4.166664568298827e-2f, -1.388731625493765e-3f, 2.443315711809948e-5f};

// The fallback for vectors with a huge lane: libm on every lane (the reference's functions).
void sin_cos_lanes(float* v, int64_t lanes, int64_t cos) {
  for (int64_t i = 0; i < lanes; ++i) v[i] = cos ? std::cos(v[i]) : std::sin(v[i]);
}

}  // namespace

void emit_sin_cos(AsmBuilder& b, const x86::Vec& a, bool cos) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  const aj::Label scalar = cc.newLabel(), done = cc.newLabel();
  x86::Vec ax = b.vec(lanes);
  cc.vandps(ax, a, b.cu32(0x7fffffffu, lanes));
  if (b.avx512()) {  // (NaN compares false: it stays on the vector path and stays NaN)
    x86::KReg k = cc.newKw();
    cc.vcmpps(k, ax, b.cf32(kSinMaxArg, lanes), kGtOq);
    cc.kortestw(k, k);
  } else {
    x86::Vec m = b.vec(lanes);
    cc.vcmpps(m, ax, b.cf32(kSinMaxArg, lanes), kGtOq);
    cc.vtestps(m, m);
  }
  cc.jnz(scalar);
  // j = round(x 2 / pi) (+0 for -0, so that r = x - j pi/2 keeps x's sign), r = x - j pi/2.
  x86::Vec j = b.vec(lanes), r = b.vec(lanes), z = b.vec(lanes), s = b.vec(lanes), c = b.vec(lanes),
           q = b.vec(lanes);
  cc.vmulps(j, a, b.cf32(kTwoOverPi, lanes));
  if (b.avx512())
    cc.vrndscaleps(j, j, 0);
  else
    cc.vroundps(j, j, 0);
  cc.vaddps(j, j, b.cf32(0.f, lanes));
  cc.vmovaps(r, a);
  for (float p : kPio2) cc.vfnmadd231ps(r, j, b.cf32(p, lanes));
  // The quadrant: sin x = sin r, cos r, -sin r, -cos r for j mod 4 = 0 .. 3; cos x = sin(x +
  // pi / 2) is quadrant j + 1.
  cc.vcvtps2dq(q, j);
  if (cos) cc.vpaddd(q, q, b.cu32(1, lanes));
  cc.vmulps(z, r, r);
  horner(b, s, z, kSinPoly);
  cc.vmulps(s, s, z);
  cc.vfmadd213ps(s, r, r);  // r + r z P
  horner(b, c, z, kCosPoly);
  cc.vmulps(c, c, z);
  cc.vsubps(c, c, b.cf32(0.5f, lanes));
  cc.vfmadd213ps(c, z, b.cf32(1.f, lanes));  // 1 + z (z Q - 1/2)
  if (b.avx512()) {
    x86::KReg k = cc.newKw();
    cc.vptestmd(k, q, b.cu32(1, lanes));
    cc.k(k).vmovaps(s, c);
  } else {
    x86::Vec m = b.vec(lanes);
    cc.vpslld(m, q, 31);
    cc.vblendvps(s, s, c, m);
  }
  cc.vpslld(q, q, 30);  // bit 1 of the quadrant to the sign
  cc.vandps(q, q, b.cu32(0x80000000u, lanes));
  cc.vxorps(a, s, q);
  cc.jmp(done);
  cc.bind(scalar);
  x86::Mem stack = cc.newStack(uint32_t(lanes * 4), 64);
  cc.vmovups(stack, a);
  x86::Gp p = cc.newIntPtr();
  cc.lea(p, stack);
  aj::InvokeNode* call = nullptr;
  cc.invoke(&call, uint64_t(reinterpret_cast<uintptr_t>(&sin_cos_lanes)),
            aj::FuncSignatureT<void, float*, int64_t, int64_t>(aj::CallConvId::kHost));
  call->setArg(0, p);
  call->setArg(1, aj::Imm(lanes));
  call->setArg(2, aj::Imm(cos ? 1 : 0));
  cc.vmovups(a, stack);
  cc.bind(done);
}

void emit_log(AsmBuilder& b, const x86::Vec& a) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  x86::Vec ax = b.vec(lanes), k = b.vec(lanes), f = b.vec(lanes), q = b.vec(lanes);
  cc.vandps(ax, a, b.cu32(0x7fffffffu, lanes));
  log_parts(b, ax, k, f, q);
  // ln x = k ln2 + f + q with ln2 = hi + lo (hi exact in 9 bits: k hi is exact), small terms
  // first, as Cephes logf.
  cc.vfmadd231ps(q, k, b.cf32(-2.12194440e-4f, lanes));
  cc.vaddps(q, q, f);
  cc.vfmadd231ps(q, k, b.cf32(0.693359375f, lanes));
  // C's special cases: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays NaN.
  select_if(b, q, b.bcast(-INFINITY, lanes), ax, b.cf32(0.f, lanes), kEqOq);
  select_if(b, q, b.bcast(NAN, lanes), a, b.cf32(0.f, lanes), kLtOq);
  select_if(b, q, a, a, b.cf32(INFINITY, lanes), kEqOq);
  select_if(b, q, a, a, a, kUnordQ);
  cc.vmovaps(a, q);
}

void emit_expm1(AsmBuilder& b, const x86::Vec& a) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  x86::Vec e = b.vec(lanes), p = b.vec(lanes), ax = b.vec(lanes);
  emit_exp(b, e, a);
  cc.vsubps(e, e, b.cf32(1.f, lanes));
  horner(b, p, a, kExpm1Taylor);  // small |x| (vec_math.h)
  cc.vmulps(p, p, a);
  cc.vandps(ax, a, b.cu32(0x7fffffffu, lanes));
  select_if(b, e, p, ax, b.cf32(kExpm1Small, lanes), kLtOq);
  cc.vmovaps(a, e);
}

void emit_softplus(AsmBuilder& b, const x86::Vec& a) {
  auto& cc = b.cc();
  const int lanes = int(a.size() / 4);
  x86::Vec e = b.vec(lanes), w = b.vec(lanes), l = b.vec(lanes), r = b.vec(lanes);
  // max(x, 0) + log1p(exp(-|x|)), log1p(e) = log(w) e / (w - 1) with w = 1 + e rounded (exact
  // to a few ulp for any e >= 0; e itself when w rounds to 1).
  cc.vandps(e, a, b.cu32(0x7fffffffu, lanes));
  emit_exp(b, e, e, /*negate=*/true);
  cc.vaddps(w, e, b.cf32(1.f, lanes));
  cc.vmovaps(l, w);
  emit_log(b, l);
  cc.vsubps(r, w, b.cf32(1.f, lanes));
  cc.vdivps(r, e, r);
  cc.vmulps(l, l, r);
  select_if(b, l, e, w, b.cf32(1.f, lanes), kEqOq);
  cc.vxorps(r, r, r);
  cc.vmaxps(r, a, r);  // MAXPS gives 0 for a NaN x; l is NaN then
  cc.vaddps(a, r, l);
}

std::string post_part(const std::vector<PostOp>& post, std::string* why) {
  for (const PostOp& op : post)
    if (extra_inputs(op.kind) > 0)
      return *why = std::string("post-op ") + post_op_name(op.kind) + " needs an operand", "";
  return post.empty() ? "" : "_" + post_ops_str(post);
}

void emit_post_op(AsmBuilder& b, const x86::Vec& a, const PostOp& op) {
  using K = PostOp::Kind;
  auto& cc = b.cc();
  auto zero = [&] {
    x86::Vec z = b.vec();
    cc.vxorps(z, z, z);
    return z;
  };
  switch (op.kind) {
    case K::relu:  // x < 0 ? 0 : x  ==  MAXPS(0, x) (NaN and -0 pass through, as the reference)
      cc.vmaxps(a, zero(), a);
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
    case K::tanh:
      emit_tanh(b, a);
      break;
    case K::sqrt:  // correctly rounded, as std::sqrt (NaN below 0)
      cc.vsqrtps(a, a);
      break;
    case K::erf:
      emit_erf(b, a);
      break;
    case K::pow:
      emit_pow(b, a, op.alpha);
      break;
    case K::exp:
      emit_exp(b, a, a);
      break;
    case K::log:
      emit_log(b, a);
      break;
    case K::neg:
      cc.vxorps(a, a, b.cu32(0x80000000u));
      break;
    case K::abs:
      cc.vandps(a, a, b.cu32(0x7fffffffu));
      break;
    case K::reciprocal:  // correctly rounded, as 1.f / x
      cc.vdivps(a, b.bcast(1.f), a);
      break;
    case K::floor:
    case K::ceil:
    case K::round: {  // imm: down (1) / up (2) / nearest even (0), no precision exception (8)
      const int imm = op.kind == K::floor ? 0x09 : op.kind == K::ceil ? 0x0a : 0x08;
      if (b.avx512())
        cc.vrndscaleps(a, a, imm);
      else
        cc.vroundps(a, a, imm);
      break;
    }
    case K::elu:
    case K::selu:
    case K::celu: {
      x86::Vec x = b.vec(), t = b.vec();
      cc.vmovaps(x, a);
      cc.vmovaps(t, a);
      if (op.kind == K::celu) cc.vdivps(t, t, b.cf32(op.alpha));
      emit_expm1(b, t);
      cc.vmulps(t, t, b.cf32(op.alpha));
      if (op.kind == K::elu) {  // x < 0 ? alpha expm1(x) : x
        select_if(b, a, t, x, b.cf32(0.f), kLtOq);
      } else if (op.kind == K::selu) {  // x <= 0 ? gamma (alpha expm1(x)) : gamma x
        cc.vmulps(t, t, b.cf32(op.beta));
        cc.vmulps(a, a, b.cf32(op.beta));
        select_if(b, a, t, x, b.cf32(0.f), kLeOq);
      } else {  // x > 0 ? x : alpha expm1(x / alpha)
        cc.vmovaps(a, t);
        select_if(b, a, x, x, b.cf32(0.f), kGtOq);
      }
      break;
    }
    case K::softplus:
      emit_softplus(b, a);
      break;
    case K::softsign: {  // x / (1 + |x|), +-1 at +-inf
      x86::Vec ax = b.vec(), one = b.vec();
      cc.vandps(ax, a, b.cu32(0x7fffffffu));
      cc.vaddps(ax, ax, b.cf32(1.f));
      cc.vmovaps(one, b.bcast(1.f));
      or_sign(b, one, a);
      cc.vdivps(ax, a, ax);
      select_if(b, ax, one, a, b.cf32(INFINITY), kEqOq);
      select_if(b, ax, one, a, b.cf32(-INFINITY), kEqOq);
      cc.vmovaps(a, ax);
      break;
    }
    case K::mish: {  // x n / (n + 2), n = e^x (e^x + 2) (vec_math.h), as the conv epilogue
      x86::Vec e = b.vec(), n = b.vec();
      cc.vmovups(e, b.cf32(kMishMax));
      cc.vminps(e, e, a);  // a NaN x goes through (MINPS returns its second operand)
      emit_exp(b, e, e);
      cc.vaddps(n, e, b.cf32(2.f));
      cc.vmulps(n, n, e);
      cc.vaddps(e, n, b.cf32(2.f));
      cc.vdivps(n, n, e);
      cc.vmulps(a, a, n);
      break;
    }
    case K::gelu_tanh: {
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2 / pi) x (1 + 0.044715 x^2): no
      // cancellation in 1 + tanh(u) where u is very negative.
      x86::Vec x = b.vec(), e = b.vec();
      cc.vmovaps(x, a);
      cc.vmulps(a, a, a);
      cc.vmulps(a, a, b.cf32(0.044715f));
      cc.vaddps(a, a, b.cf32(1.f));
      cc.vmulps(a, a, x);
      cc.vmulps(a, a, b.cf32(2 * 0.79788456080286536f));
      emit_exp(b, e, a, /*negate=*/true);
      cc.vaddps(e, e, b.cf32(1.f));
      cc.vdivps(a, x, e);
      break;
    }
    case K::quantize_u8:  // q = min(max(rint(x / s) + z, lo), hi), graph/quant.h
    case K::quantize_s8:
    case K::quant_dequant_u8:  // then (q - z) * s
    case K::quant_dequant_s8: {
      const QuantRange r = quant_dequant_range(op.kind);
      cc.vdivps(a, a, b.cf32(op.alpha));
      if (b.avx512())  // imm 8: round to nearest even, no precision exception
        cc.vrndscaleps(a, a, 0x08);
      else
        cc.vroundps(a, a, 0x08);
      cc.vaddps(a, a, b.cf32(op.beta));
      cc.vmaxps(a, b.bcast(r.lo), a);  // NaN stays NaN, as std::max / std::min
      cc.vminps(a, b.bcast(r.hi), a);
      if (!is_quant_dequant(op.kind)) break;
      cc.vsubps(a, a, b.cf32(op.beta));
      cc.vmulps(a, a, b.cf32(op.alpha));
      break;
    }
    case K::sin:
    case K::cos:
      emit_sin_cos(b, a, op.kind == K::cos);
      break;
    case K::linear:  // x * alpha + beta, two roundings, no + 0 (apply_post_op)
      if (op.alpha != 1.f) cc.vmulps(a, a, b.cf32(op.alpha));
      if (op.beta != 0.f) cc.vaddps(a, a, b.cf32(op.beta));
      break;
    case K::thresholded_relu: {  // x > alpha ? x : 0 (NaN: 0)
      x86::Vec r = zero();
      select_if(b, r, a, a, b.cf32(op.alpha), kGtOq);
      cc.vmovaps(a, r);
      break;
    }
    case K::add:
    case K::scale_shift:
    case K::prelu:
      fail(Code::internal, std::string("kernel ") + b.name() + ": post-op " +
                               post_op_name(op.kind) + " needs an operand");
  }
}

}  // namespace kiln::glue
