#include "jit/epilogue.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "graph/error.h"
#include "graph/quant.h"

namespace kiln {
namespace {

using Xbyak::Address;
using Xbyak::Operand;
using Xbyak::Xmm;
using K = PostOp::Kind;

constexpr uint8_t kLtOq = 0x11;  // _CMP_LT_OQ: false for NaN
constexpr uint8_t kLeOq = 0x12;  // _CMP_LE_OQ
constexpr uint8_t kGtOq = 0x1e;  // _CMP_GT_OQ

// Whether clip has a lower / upper bound at all (-inf, +inf and NaN bounds change nothing).
bool clip_lo(const PostOp& op) {
  return op.alpha > -INFINITY;
}
bool clip_hi(const PostOp& op) {
  return op.beta < INFINITY;
}

// Scratch registers one post-op needs. Operand loads need one on AVX2 only with a tail (the
// vmaskmovps lane mask); AVX-512 selects with k7 and masks memory operands directly.
int op_temps(const PostOp& op, Isa isa, bool tail) {
  const bool avx2 = isa == Isa::avx2;
  if (glue_only(op.kind)) return 0;  // refused by apply()
  switch (op.kind) {
    case K::relu:
      return avx2 ? 1 : 0;
    case K::add:
    case K::scale_shift:
      return avx2 && tail ? 1 : 0;
    case K::leaky_relu:
    case K::hardsigmoid:
      return avx2 ? 1 : 0;
    case K::clip:
      return avx2 && (clip_lo(op) || clip_hi(op)) ? 1 : 0;
    case K::hardswish:
      return 1;
    case K::sigmoid:
      return 2;  // exp scratch; the result is built in the accumulator
    case K::swish:
      return 3;  // x stays live next to exp's result and scratch
    case K::gelu:
      return 3;  // exp(-z^2) and its scratch, then t and the polynomial
    case K::tanh:
    case K::elu:
    case K::selu:
    case K::mish:
    case K::gelu_tanh:
      return 3;  // exp's result and scratch, then the other branch / factor
    case K::quant_dequant_u8:
    case K::quant_dequant_s8:
      return 1;  // the range's bounds
    case K::prelu:
      return avx2 ? 2 : 0;  // the product and the sign mask (AVX-512: k7 and a masked multiply)
    default:
      return 0;  // glue_only(): returned above
  }
  return 3;
}

// Emits one apply(): the state is the accumulator, the scratch list and whether k7 currently
// holds the tail mask (compare-and-select ops clobber it).
class ChainEmitter {
 public:
  ChainEmitter(Xbyak::CodeGenerator& g, Isa isa, VecConsts& c, int acc,
               const std::vector<int>& temps, int tail, const EpilogueU8& u8)
      : g_(g), isa_(isa), c_(c), a_(vreg(acc)), temps_(temps), tail_(tail), u8_(u8) {}

  void bias(const Address& b) {
    with_operand(b, [&](const Xmm& d, const Operand& o) { g_.vaddps(d, a_, o); });
  }

  // qbounds: a quantize-dequantize's clamp on n = rint(x / s) (EpilogueEmitter::qbounds_).
  void op(const PostOp& op, const EpilogueEmitter::Operands& where, int i, bool last,
          std::pair<float, float> qbounds) {
    // graph/fuse.cpp never fuses them (unary_post_op does not return them).
    if (glue_only(op.kind))
      fail(Code::unsupported, std::string("post-op ") + post_op_name(op.kind) +
                                  " is not supported in a conv epilogue");
    switch (op.kind) {
      case K::relu:  // x < 0 ? 0 : x, exactly the reference: NaN and -0 pass through
        if (z()) {
          select_if(kLtOq, 0.f);
        } else {  // MAXPS(0, x) = 0 > x ? 0 : x (the second operand on NaN)
          g_.vxorps(t(0), t(0), t(0));
          g_.vmaxps(a_, t(0), a_);
        }
        break;
      case K::leaky_relu:
        leaky_relu(op.alpha);
        break;
      case K::clip:
        clip(op);
        break;
      case K::sigmoid:
        sigmoid();
        break;
      case K::swish:
        swish();
        break;
      case K::hardswish:
        hardswish();
        break;
      case K::hardsigmoid:
        hardsigmoid(op.alpha, op.beta);
        break;
      case K::gelu:
        gelu();
        break;
      case K::tanh:
        tanh();
        break;
      case K::elu:
      case K::selu:
        elu(op);
        break;
      case K::mish:
        mish();
        break;
      case K::gelu_tanh:
        gelu_tanh();
        break;
      case K::quant_dequant_u8:
      case K::quant_dequant_s8:
        quant_dequant(op, last && u8_.store_q, qbounds);
        break;
      case K::add:
        if (!where.residual) fail(Code::internal, "epilogue: no residual operand for 'add'");
        if (u8_.residual) {  // 16 bytes (blocked: whole vectors, a tail's pad lanes included)
          g_.vpmovzxbd(t(0), where.residual(i));
          g_.vcvtdq2ps(t(0), t(0));
          g_.vsubps(t(0), t(0), c_.f32(u8_.res.zero));
          g_.vmulps(t(0), t(0), c_.f32(u8_.res.scale));
          g_.vaddps(a_, a_, t(0));
          break;
        }
        with_operand(where.residual(i),
                     [&](const Xmm& d, const Operand& o) { g_.vaddps(d, a_, o); });
        break;
      case K::prelu:
        if (!where.scale) fail(Code::internal, "epilogue: no slope operand for 'prelu'");
        prelu(where.scale(i));
        break;
      case K::scale_shift:
        if (!where.scale || !where.shift)
          fail(Code::internal, "epilogue: no scale/shift operand for 'scale_shift'");
        // Separate multiply and add (no FMA): the same two roundings as the reference.
        with_operand(where.scale(i), [&](const Xmm& d, const Operand& o) { g_.vmulps(d, a_, o); });
        with_operand(where.shift(i), [&](const Xmm& d, const Operand& o) { g_.vaddps(d, a_, o); });
        break;
      default:  // glue_only(): refused above
        break;
    }
  }

 private:
  Xmm vreg(int i) const { return xreg::vreg(isa_, i); }
  Xmm t(int k) const { return vreg(temps_[size_t(k)]); }
  bool z() const { return isa_ == Isa::avx512; }

  // acc = acc (op) [addr], reading only the first tail_ lanes when tail_ > 0. `f(dst, src2)`
  // emits the instruction with acc as first source.
  template <class F>
  void with_operand(const Address& addr, F f) {
    if (!tail_) {
      f(a_, addr);
    } else if (z()) {
      // EVEX merge-masking: masked-off lanes are neither loaded (no fault) nor changed.
      if (!k7_tail_) {
        g_.kmovw(Xbyak::util::k7, c_.lanes({(1u << tail_) - 1u}));
        k7_tail_ = true;
      }
      f(a_ | Xbyak::util::k7, addr);
    } else {
      std::vector<uint32_t> mask(size_t(tail_), 0xffffffffu);
      g_.vmovaps(t(0), c_.lanes(mask));
      g_.vmaskmovps(t(0), t(0), addr);  // lanes past the tail read as 0, never touched
      f(a_, t(0));
    }
  }

  // x < 0 ? x * slope[c] : x with the slope vector at `slope` (its first tail_ lanes only),
  // the reference's one rounding.
  void prelu(const Address& slope) {
    using Xbyak::util::k7;
    if (z()) {
      if (tail_) {  // k7 = tail lanes & (x < 0): the masked multiply reads no lane past them
        if (!k7_tail_) g_.kmovw(k7, c_.lanes({(1u << tail_) - 1u}));
        g_.vcmpps(k7 | k7, a_, c_.f32(0.f), kLtOq);
      } else {
        g_.vcmpps(k7, a_, c_.f32(0.f), kLtOq);
      }
      g_.vmulps(a_ | k7, a_, slope);
      k7_tail_ = false;
      return;
    }
    if (tail_) {
      std::vector<uint32_t> mask(size_t(tail_), 0xffffffffu);
      g_.vmovaps(t(0), c_.lanes(mask));
      g_.vmaskmovps(t(0), t(0), slope);  // lanes past the tail read as 0, never touched
      g_.vmulps(t(0), a_, t(0));
    } else {
      g_.vmulps(t(0), a_, slope);
    }
    g_.vcmpps(t(1), a_, c_.f32(0.f), kLtOq);
    g_.vblendvps(a_, a_, t(0), t(1));
  }

  // x >= 0 ? x : x*alpha  ==  x < 0 ? x*alpha : x (NaN stays NaN either way).
  void leaky_relu(float alpha) {
    if (z()) {
      g_.vcmpps(Xbyak::util::k7, a_, c_.f32(0.f), kLtOq);
      g_.vmulps(a_ | Xbyak::util::k7, a_, c_.f32(alpha));
      k7_tail_ = false;
      return;
    }
    // factor = mask ? alpha : 1 as bits: 1 ^ (mask & (alpha ^ 1)); one scratch register.
    const uint32_t one = std::bit_cast<uint32_t>(1.f), al = std::bit_cast<uint32_t>(alpha);
    g_.vcmpps(t(0), a_, c_.f32(0.f), kLtOq);
    g_.vandps(t(0), t(0), c_.u32(al ^ one));
    g_.vxorps(t(0), t(0), c_.u32(one));
    g_.vmulps(a_, a_, t(0));
  }

  // std::min(std::max(x, lo), hi) exactly: max(x, lo) = (x < lo) ? lo : x, which is MAXPS
  // with lo first (NaN and -0 pass through), and likewise MINPS(hi, y).
  void clip(const PostOp& op) {
    if (z()) {
      if (clip_lo(op)) select_if(kLtOq, op.alpha);
      if (clip_hi(op)) select_if(kGtOq, op.beta);
      return;
    }
    if (clip_lo(op)) {
      g_.vmovaps(t(0), c_.f32(op.alpha));
      g_.vmaxps(a_, t(0), a_);
    }
    if (clip_hi(op)) {
      g_.vmovaps(t(0), c_.f32(op.beta));
      g_.vminps(a_, t(0), a_);
    }
  }

  // (min(max(rint(x / s) + z, lo), hi) - z) * s, graph/quant.h's steps (max / min with the
  // bound first: NaN passes through, as std::max / std::min there).
  // store_q: stop at the integer (int8: + 128, into uint8's range).
  // The zero point z (an integer) moves to the bounds: min(max(n + z, lo), hi) - z is
  // min(max(n, lo - z), hi - z) exactly (small integers; a huge n meets the same bound), one
  // add and one subtract fewer; `bounds` are those, narrowed by a folded relu / clip.
  void quant_dequant(const PostOp& op, bool store_q, std::pair<float, float> bounds) {
    g_.vdivps(a_, a_, c_.f32(op.alpha));
    if (z())  // imm 8: nearest even, no precision exception
      g_.vrndscaleps(a_, a_, 0x08);
    else
      g_.vroundps(a_, a_, 0x08);
    g_.vmovaps(t(0), c_.f32(bounds.first));
    g_.vmaxps(a_, t(0), a_);
    g_.vmovaps(t(0), c_.f32(bounds.second));
    g_.vminps(a_, t(0), a_);
    if (store_q) {  // q = n + z (an int8 grid + 128, into uint8's range)
      g_.vaddps(a_, a_, c_.f32(quant_dequant_u8_zero(op)));
      return;
    }
    // n * s + 0: the reference's (q - z) * s is +0 where n is -0 (rint of (-0.5, 0]).
    g_.vxorps(t(0), t(0), t(0));
    g_.vfmadd132ps(a_, t(0), c_.f32(op.alpha));
  }

  // AVX-512: acc = (acc <pred> v) ? v : acc.
  void select_if(uint8_t pred, float v) {
    g_.vcmpps(Xbyak::util::k7, a_, c_.f32(v), pred);
    g_.vmovaps(a_ | Xbyak::util::k7, c_.f32(v));
    k7_tail_ = false;
  }

  // 1 / (1 + exp(-x)) as in the reference: exp(-x) = inf for x < -88.7 gives exactly 0,
  // exp(-x) = 0 for x > 104 gives exactly 1, no NaN for any non-NaN x.
  void sigmoid() {
    const int a = a_.getIdx();
    emit_exp(g_, isa_, c_, a, a, temps_[0], temps_[1], /*negate=*/true);
    g_.vaddps(a_, a_, c_.f32(1.f));
    g_.vmovaps(t(0), c_.f32(1.f));
    g_.vdivps(a_, t(0), a_);
  }

  // x / (1 + exp(-x)) as in the reference (so swish(-inf) = -inf/inf = NaN like it).
  void swish() {
    emit_exp(g_, isa_, c_, temps_[2], a_.getIdx(), temps_[0], temps_[1], /*negate=*/true);
    g_.vaddps(t(2), t(2), c_.f32(1.f));
    g_.vdivps(a_, a_, t(2));
  }

  // x * clamp(x/6 + 0.5, 0, 1), with x/6 + 0.5 as one FMA by 1/6 (differs from the
  // reference's division by at most ~1 ulp of the factor). A NaN factor only arises from a
  // NaN x, so the clamp's NaN behaviour does not matter.
  void hardswish() {
    g_.vmovaps(t(0), c_.f32(1.f / 6.f));
    g_.vfmadd213ps(t(0), a_, c_.f32(0.5f));
    g_.vmaxps(t(0), t(0), c_.f32(0.f));
    g_.vminps(t(0), t(0), c_.f32(1.f));
    g_.vmulps(a_, a_, t(0));
  }

  // x * 0.5 * (1 + erf(x / sqrt 2)) with 1 + erf from erfc(|z|) (kErfcPoly in epilogue.h):
  // <= 6e-7 absolute in the erf term. gelu(+inf) = +inf, gelu(-inf) = NaN as the reference.
  void gelu() {
    // t1 = exp(-z^2), z^2 = x*x*0.5
    g_.vmulps(t(1), a_, a_);
    g_.vmulps(t(1), t(1), c_.f32(0.5f));
    emit_exp(g_, isa_, c_, temps_[1], temps_[1], temps_[0], temps_[2], /*negate=*/true);
    // t2 = 1 / (1 + p |z|)
    g_.vandps(t(0), a_, c_.u32(0x7fffffffu));
    g_.vmulps(t(0), t(0), c_.f32(float(kErfcP * M_SQRT1_2)));
    g_.vaddps(t(0), t(0), c_.f32(1.f));
    g_.vmovaps(t(2), c_.f32(1.f));
    g_.vdivps(t(2), t(2), t(0));
    // t0 = erfc(|z|) = t P(t) exp(-z^2)
    g_.vmovaps(t(0), c_.f32(kErfcPoly[4]));
    for (int k = 3; k >= 0; --k) g_.vfmadd213ps(t(0), t(2), c_.f32(kErfcPoly[k]));
    g_.vmulps(t(0), t(0), t(2));
    g_.vmulps(t(0), t(0), t(1));
    // t1 = x < 0 ? erfc : 2 - erfc
    g_.vmovaps(t(1), c_.f32(2.f));
    g_.vsubps(t(1), t(1), t(0));
    if (z()) {
      g_.vcmpps(Xbyak::util::k7, a_, c_.f32(0.f), kLtOq);
      g_.vmovaps(t(1) | Xbyak::util::k7, t(0));
      k7_tail_ = false;
    } else {
      g_.vblendvps(t(1), t(1), t(0), a_);  // by x's sign bit (-0 gives erfc(0) = 1 too)
    }
    g_.vmulps(a_, a_, c_.f32(0.5f));
    g_.vmulps(a_, a_, t(1));
  }

  // dst = (x <pred> c) ? src : dst for the registers' lanes (k7 on AVX-512; on AVX2 `mask`,
  // which may be x itself, receives the compare).
  void select_cmp(const Xmm& dst, const Xmm& src, const Xmm& x, float c, uint8_t pred,
                  const Xmm& mask) {
    if (z()) {
      g_.vcmpps(Xbyak::util::k7, x, c_.f32(c), pred);
      g_.vmovaps(dst | Xbyak::util::k7, src);
      k7_tail_ = false;
    } else {
      g_.vcmpps(mask, x, c_.f32(c), pred);
      g_.vblendvps(dst, dst, src, mask);
    }
  }

  // tanh with the glue's operations (glue/asm_math.cpp emit_tanh, constants in vec_math.h):
  // 1 - 2 / (exp(2|x|) + 1) with x's sign, x + x^3 P(x^2) below kTanhSmall.
  void tanh() {
    g_.vandps(t(1), a_, c_.u32(0x7fffffffu));
    g_.vaddps(t(1), t(1), t(1));
    emit_exp(g_, isa_, c_, temps_[1], temps_[1], temps_[0], temps_[2]);
    g_.vaddps(t(1), t(1), c_.f32(1.f));
    g_.vmovaps(t(0), c_.f32(2.f));
    g_.vdivps(t(1), t(0), t(1));
    g_.vmovaps(t(0), c_.f32(1.f));
    g_.vsubps(t(1), t(0), t(1));
    g_.vandps(t(0), a_, c_.u32(0x80000000u));
    g_.vorps(t(1), t(1), t(0));
    g_.vmulps(t(0), a_, a_);  // u = x^2
    g_.vmovaps(t(2), c_.f32(kTanhPoly[5]));
    for (int k = 4; k >= 0; --k) g_.vfmadd213ps(t(2), t(0), c_.f32(kTanhPoly[k]));
    g_.vmulps(t(0), t(0), a_);
    g_.vfmadd213ps(t(2), t(0), a_);  // x + x^3 P
    g_.vandps(t(0), a_, c_.u32(0x7fffffffu));
    g_.vmovaps(a_, t(1));
    // (|x| is in t0; the small-|x| result in t2; AVX2's mask goes to t0.)
    select_cmp(a_, t(2), t(0), kTanhSmall, kLtOq, t(0));
  }

  // elu: x < 0 ? alpha expm1(x) : x; selu: x <= 0 ? beta (alpha expm1(x)) : beta x. expm1 and
  // the roundings as the glue's (emit_expm1 and emit_post_op).
  void elu(const PostOp& op) {
    const bool selu = op.kind == K::selu;
    emit_exp(g_, isa_, c_, temps_[0], a_.getIdx(), temps_[1], temps_[2]);
    g_.vsubps(t(0), t(0), c_.f32(1.f));
    g_.vmovaps(t(1), c_.f32(kExpm1Taylor[9]));
    for (int k = 8; k >= 0; --k) g_.vfmadd213ps(t(1), a_, c_.f32(kExpm1Taylor[k]));
    g_.vmulps(t(1), t(1), a_);
    g_.vandps(t(2), a_, c_.u32(0x7fffffffu));
    select_cmp(t(0), t(1), t(2), kExpm1Small, kLtOq, t(2));
    g_.vmulps(t(0), t(0), c_.f32(op.alpha));
    if (!selu) {
      select_cmp(a_, t(0), a_, 0.f, kLtOq, t(2));
      return;
    }
    g_.vmulps(t(0), t(0), c_.f32(op.beta));
    // The sign test on x itself, before x is scaled.
    if (z()) {
      g_.vcmpps(Xbyak::util::k7, a_, c_.f32(0.f), kLeOq);
      g_.vmulps(a_, a_, c_.f32(op.beta));
      g_.vmovaps(a_ | Xbyak::util::k7, t(0));
      k7_tail_ = false;
    } else {
      g_.vcmpps(t(2), a_, c_.f32(0.f), kLeOq);
      g_.vmulps(a_, a_, c_.f32(op.beta));
      g_.vblendvps(a_, a_, t(0), t(2));
    }
  }

  // x n / (n + 2), n = e^x (e^x + 2) (vec_math.h kMishMax), as the glue's mish.
  void mish() {
    g_.vmovaps(t(0), c_.f32(kMishMax));
    g_.vminps(t(0), t(0), a_);  // a NaN x goes through (MINPS returns its second operand)
    emit_exp(g_, isa_, c_, temps_[0], temps_[0], temps_[1], temps_[2]);
    g_.vaddps(t(1), t(0), c_.f32(2.f));
    g_.vmulps(t(1), t(1), t(0));
    g_.vaddps(t(0), t(1), c_.f32(2.f));
    g_.vdivps(t(1), t(1), t(0));
    g_.vmulps(a_, a_, t(1));
  }

  // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2 / pi) x (1 + 0.044715 x^2), as the
  // glue's gelu_tanh.
  void gelu_tanh() {
    g_.vmulps(t(0), a_, a_);
    g_.vmulps(t(0), t(0), c_.f32(0.044715f));
    g_.vaddps(t(0), t(0), c_.f32(1.f));
    g_.vmulps(t(0), t(0), a_);
    g_.vmulps(t(0), t(0), c_.f32(2 * 0.79788456080286536f));
    emit_exp(g_, isa_, c_, temps_[0], temps_[0], temps_[1], temps_[2], /*negate=*/true);
    g_.vaddps(t(0), t(0), c_.f32(1.f));
    g_.vdivps(a_, a_, t(0));
  }

  // std::min(std::max(alpha*x + beta, 0), 1) with the reference's two roundings.
  void hardsigmoid(float alpha, float beta) {
    g_.vmulps(a_, a_, c_.f32(alpha));
    g_.vaddps(a_, a_, c_.f32(beta));
    if (z()) {
      select_if(kLtOq, 0.f);
      select_if(kGtOq, 1.f);
      return;
    }
    g_.vxorps(t(0), t(0), t(0));
    g_.vmaxps(a_, t(0), a_);
    g_.vmovaps(t(0), c_.f32(1.f));
    g_.vminps(a_, t(0), a_);
  }

  Xbyak::CodeGenerator& g_;
  Isa isa_;
  VecConsts& c_;
  Xmm a_;
  const std::vector<int>& temps_;
  int tail_;
  const EpilogueU8& u8_;
  bool k7_tail_ = false;  // k7 holds the tail mask
};

}  // namespace

EpilogueEmitter::EpilogueEmitter(Xbyak::CodeGenerator& gen, Isa isa, bool has_bias,
                                 std::vector<PostOp> ops, EpilogueU8 u8)
    : g_(gen), isa_(isa), has_bias_(has_bias), ops_(std::move(ops)), u8_(u8), consts_(gen, isa) {
  const bool qdq_last = !ops_.empty() && is_quant_dequant(ops_.back().kind);
  if ((u8.store_q || u8.residual) && isa != Isa::avx512)
    fail(Code::internal, "epilogue: uint8 operands need avx512");
  if (u8.store_q && !qdq_last)
    fail(Code::internal, "epilogue: a uint8 store needs a quantize-dequantize last");
  folded_.assign(ops_.size(), false);
  qbounds_.assign(ops_.size(), {0.f, 0.f});
  for (size_t i = 0; i < ops_.size(); ++i) {
    const PostOp& q = ops_[i];
    if (!is_quant_dequant(q.kind)) continue;
    const QuantRange r = quant_dequant_range(q.kind);
    std::pair<float, float> b{r.lo - q.beta, r.hi - q.beta};
    const PostOp* p = i > 0 ? &ops_[i - 1] : nullptr;
    const bool clamp = p && (p->kind == K::relu || p->kind == K::clip);
    const float a = !clamp ? 0.f : p->kind == K::relu ? 0.f : p->alpha;
    const float hi = !clamp ? 0.f : p->kind == K::relu ? INFINITY : p->beta;
    // (Bounds as the chain computes f: f32 division, rint to nearest even; a NaN clip bound
    // compares false everywhere and is refused.)
    if (clamp && q.alpha > 0 && std::isfinite(q.alpha) && a <= hi) {
      const float fa = std::nearbyint(a / q.alpha), fb = std::nearbyint(hi / q.alpha);
      const std::pair<float, float> n{std::max(b.first, fa), std::min(b.second, fb)};
      if (n.first <= n.second) {
        folded_[i - 1] = true;
        b = n;
      }
    }
    qbounds_[i] = b;
  }
}

int EpilogueEmitter::temps_needed(bool tail) const {
  int n = has_bias_ && tail && isa_ == Isa::avx2 ? 1 : 0;
  for (const auto& op : ops_)
    n = std::max(n, op.kind == K::add && u8_.residual ? 1 : op_temps(op, isa_, tail));
  return n;
}

void EpilogueEmitter::apply_group(const std::vector<int>& accs, const std::vector<int>& temps,
                                  const std::vector<Operands>& where) {
  const int need = temps_needed(false), nregs = isa_ == Isa::avx512 ? 32 : 16;
  if (where.size() != accs.size() || temps.size() < accs.size() * size_t(need))
    fail(Code::internal, "epilogue group: " + std::to_string(accs.size()) + " accumulators need " +
                             std::to_string(accs.size() * size_t(need)) + " scratch registers");
  std::vector<int> used(accs);
  used.insert(used.end(), temps.begin(),
              temps.begin() + std::ptrdiff_t(accs.size() * size_t(need)));
  for (int r : used)
    if (r < 0 || r >= nregs || std::count(used.begin(), used.end(), r) > 1)
      fail(Code::internal, "epilogue group: registers overlap or are out of range");
  std::vector<std::vector<int>> mine(accs.size());
  std::vector<ChainEmitter> e;
  e.reserve(accs.size());
  for (size_t k = 0; k < accs.size(); ++k) {
    mine[k].assign(temps.begin() + std::ptrdiff_t(k * size_t(need)),
                   temps.begin() + std::ptrdiff_t((k + 1) * size_t(need)));
    e.emplace_back(g_, isa_, consts_, accs[k], mine[k], 0, u8_);
  }
  if (has_bias_)
    for (size_t k = 0; k < accs.size(); ++k) {
      if (!where[k].bias) fail(Code::internal, "epilogue: no bias operand");
      e[k].bias(where[k].bias());
    }
  for (size_t i = 0; i < ops_.size(); ++i)
    for (size_t k = 0; k < accs.size() && !folded_[i]; ++k)
      e[k].op(ops_[i], where[k], int(i), i + 1 == ops_.size(), qbounds_[i]);
}

void EpilogueEmitter::apply(int acc, const std::vector<int>& temps, const Operands& where,
                            int tail) {
  const int w = simd_width(isa_), nregs = isa_ == Isa::avx512 ? 32 : 16;
  if (tail < 0 || tail > w)
    fail(Code::internal,
         "epilogue: tail " + std::to_string(tail) + " outside 0.." + std::to_string(w));
  if (tail == w) tail = 0;
  const int need = temps_needed(tail > 0);
  if (int(temps.size()) < need)
    fail(Code::internal, "epilogue '" + post_ops_str(ops_) + "' needs " + std::to_string(need) +
                             " scratch registers, got " + std::to_string(temps.size()));
  auto bad_reg = [&](int r) { return r < 0 || r >= nregs; };
  if (bad_reg(acc)) fail(Code::internal, "epilogue: bad accumulator register");
  for (int k = 0; k < need; ++k) {
    int r = temps[size_t(k)];
    if (bad_reg(r) || r == acc || std::count(temps.begin(), temps.begin() + need, r) > 1)
      fail(Code::internal, "epilogue: scratch registers overlap or are out of range");
  }
  ChainEmitter e(g_, isa_, consts_, acc, temps, tail, u8_);
  if (has_bias_) {
    if (!where.bias) fail(Code::internal, "epilogue: no bias operand");
    e.bias(where.bias());
  }
  for (size_t i = 0; i < ops_.size(); ++i)
    if (!folded_[i]) e.op(ops_[i], where, int(i), i + 1 == ops_.size(), qbounds_[i]);
}

void EpilogueEmitter::emit_constants() {
  consts_.emit();
}

}  // namespace kiln
