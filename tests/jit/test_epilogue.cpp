// Tests of the fused epilogue emitter (jit/epilogue.h) and the vector exp (jit/vec_math.h):
// small JIT kernels load vectors, apply the emitter and store, on both the AVX-512 and the
// AVX2 path; results are compared with kiln::apply_post_op computed here (and with
// double-precision formulas for exp/sigmoid/swish).
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/post_ops.h"
#include "isa_coverage.h"
#include "jit/cpu.h"
#include "jit/epilogue.h"
#include "jit/glue/glue.h"
#include "jit/jit_generator.h"
#include "jit/vec_math.h"
#include "test_expect.h"
#include "test_glue_util.h"
#include "test_segv.h"

namespace kiln {
namespace {

using K = PostOp::Kind;
using Xbyak::Xmm;

using test::edge_values;
using test::Expect;
using test::kInf;
using test::kNaN;
using test::matches;
using test::mk;
using test::ulp_error;
using test::ulp_of;

std::vector<Isa> test_isas() {
  return testing::jit_isas();
}

Xmm vreg(Isa isa, int i) {
  return isa == Isa::avx512 ? Xmm(Xbyak::Zmm(i)) : Xmm(Xbyak::Ymm(i));
}
int nregs(Isa isa) {
  return isa == Isa::avx512 ? 32 : 16;
}

// ---------------------------------------------------------------------------------------------
// Test kernel: for n vectors, y = epilogue(x) with operands from `slot` arrays. Every vector
// register except the accumulator and the temps it was given is preloaded with a sentinel and
// dumped at the end (and k0..k6 on AVX-512), so clobbering anything else is caught.

constexpr int kMaxSlots = 8;
struct EpiArgs {
  const float* x;
  float* y;
  int64_t n;
  const float* slot[kMaxSlots];
  const float* sentinel;  // 32 x 16 floats
  float* dump;            // 32 x 16 floats
  const uint16_t* ksent;  // 8 opmasks
  uint16_t* kdump;
};

struct RegSet {
  int acc;
  std::vector<int> temps;
};

class EpiKernel : public JitGenerator {
 public:
  EpiKernel(Isa isa, bool has_bias, std::vector<PostOp> ops, int tail, RegSet regs)
      : JitGenerator("test_epilogue"),
        isa_(isa),
        has_bias_(has_bias),
        ops_(std::move(ops)),
        tail_(tail),
        regs_(std::move(regs)) {}

  int used_temps = 0;  // how many of regs.temps the emitter was given (= temps_needed)
  int slots = 0;

 protected:
  void generate() override {
    using namespace Xbyak::util;
    const Xbyak::Reg64 slot_reg[kMaxSlots] = {rsi, rdx, rcx, r8, r9, r10, r11, rax};
    EpilogueEmitter epi(*this, isa_, has_bias_, ops_);
    used_temps = epi.temps_needed(tail_ > 0);
    std::vector<int> temps(regs_.temps.begin(), regs_.temps.begin() + used_temps);

    // Operand slots: bias, then per op its residual or scale+shift.
    int bias_slot = -1;
    std::vector<int> first_slot(ops_.size(), -1);
    if (has_bias_) bias_slot = slots++;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i].kind == K::add || ops_[i].kind == K::prelu) first_slot[i] = slots++;
      if (ops_[i].kind == K::scale_shift) first_slot[i] = (slots += 2) - 2;
    }
    if (slots > kMaxSlots) throw std::runtime_error("too many operand slots");
    EpilogueEmitter::Operands where;
    where.bias = [&] { return ptr[slot_reg[bias_slot]]; };
    where.residual = [&](int i) { return ptr[slot_reg[first_slot[size_t(i)]]]; };
    where.scale = [&](int i) { return ptr[slot_reg[first_slot[size_t(i)]]]; };
    where.shift = [&](int i) { return ptr[slot_reg[first_slot[size_t(i)] + 1]]; };

    const int vb = simd_width(isa_) * 4;
    const bool z = isa_ == Isa::avx512;
    auto is_used = [&](int r) {
      return r == regs_.acc || std::find(temps.begin(), temps.end(), r) != temps.end();
    };
    preamble();
    mov(r12, ptr[rdi + offsetof(EpiArgs, x)]);
    mov(r13, ptr[rdi + offsetof(EpiArgs, y)]);
    mov(rbx, ptr[rdi + offsetof(EpiArgs, n)]);
    for (int j = 0; j < slots; ++j) mov(slot_reg[j], ptr[rdi + offsetof(EpiArgs, slot) + 8 * j]);
    mov(r14, ptr[rdi + offsetof(EpiArgs, sentinel)]);
    for (int r = 0; r < nregs(isa_); ++r)
      if (!is_used(r)) vmovups(vreg(isa_, r), ptr[r14 + 64 * r]);
    if (z) {
      mov(r15, ptr[rdi + offsetof(EpiArgs, ksent)]);
      for (int k = 0; k < 7; ++k) kmovw(Xbyak::Opmask(k), ptr[r15 + 2 * k]);
    }
    Xbyak::Label loop;
    L(loop);
    vmovups(vreg(isa_, regs_.acc), ptr[r12]);
    epi.apply(regs_.acc, temps, where, tail_);
    vmovups(ptr[r13], vreg(isa_, regs_.acc));
    add(r12, vb);
    add(r13, vb);
    for (int j = 0; j < slots; ++j) add(slot_reg[j], vb);
    dec(rbx);
    jnz(loop, T_NEAR);
    mov(r14, ptr[rdi + offsetof(EpiArgs, dump)]);
    for (int r = 0; r < nregs(isa_); ++r) vmovups(ptr[r14 + 64 * r], vreg(isa_, r));
    if (z) {
      mov(r15, ptr[rdi + offsetof(EpiArgs, kdump)]);
      for (int k = 0; k < 7; ++k) kmovw(ptr[r15 + 2 * k], Xbyak::Opmask(k));
    }
    postamble();
    epi.emit_constants();
  }

 private:
  Isa isa_;
  bool has_bias_;
  std::vector<PostOp> ops_;
  int tail_;
  RegSet regs_;
};

// Register sets: low registers, and (AVX-512) EVEX-only high ones.
std::vector<RegSet> reg_sets(Isa isa) {
  if (isa == Isa::avx512) return {{0, {1, 2, 3, 4}}, {29, {16, 31, 5, 22}}};
  return {{0, {1, 2, 3, 4}}, {15, {9, 0, 14, 7}}};
}

// ---------------------------------------------------------------------------------------------
// Reference: apply_post_op chain plus an error budget. Ops that the emitter implements with
// the reference's exact operations (bias, relu, leaky_relu, clip, add) must match bit for bit
// when their input does; the others get a budget from their own rounding (documented per op)
// plus the propagated input error times the op's Lipschitz bound.

Expect reference(float x, bool has_bias, float bias, const std::vector<PostOp>& ops,
                 const std::vector<float>& operand, const std::vector<int>& first_slot) {
  float v = has_bias ? x + bias : x;
  double e = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PostOp& op = ops[i];
    float r = 0, s = 0, sh = 0;
    if (op.kind == K::add) r = operand[size_t(first_slot[i])];
    if (op.kind == K::prelu) s = operand[size_t(first_slot[i])];
    if (op.kind == K::scale_shift) {
      s = operand[size_t(first_slot[i])];
      sh = operand[size_t(first_slot[i] + 1)];
    }
    const float in = v;
    v = apply_post_op(op, in, r, s, sh);
    const double din = in;
    if (const std::optional<double> common = test::common_op_err(op, in, v, e)) {
      e = *common;
    } else {
      switch (op.kind) {
        case K::scale_shift:  // robust to an FMA-contracted reference
          e = e * std::fabs(s) + ulp_of(double(in) * s) + ulp_of(v);
          break;
        case K::prelu:  // the reference's one multiply: exact while the input is
          e = e * std::max(1.0, std::fabs(double(s)));
          break;
        case K::hardsigmoid:  // same, before the clamp (Lipschitz 1)
          e = e * std::fabs(op.alpha) + ulp_of(double(op.alpha) * in) +
              ulp_of(op.alpha * in + op.beta);
          break;
        case K::hardswish:
          // The emitter forms x/6 + 0.5 as fma(x, 1/6f, 0.5): vs round(round(x/6) + 0.5) the
          // factor differs by < 2^-23 (1 + |x|/4) absolute, which matters only for |x| <= 3
          // (outside the factor is clamped to 0 or 1 on both sides); slope of x*h(x) <= 1.5.
          e = e * 1.5 + std::fabs(din) * 0x1p-22 + 2 * ulp_of(v);
          break;
        default:
          break;
      }
    }
    if (!std::isfinite(v)) e = 0;  // inf / NaN must come out exactly
  }
  return {v, e};
}

// Edge values, then random ones of three kinds: small, around the exp limits, any magnitude.
std::vector<float> test_inputs(size_t n_random, uint32_t seed) {
  std::vector<float> v = edge_values();
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n_random; ++i) v.push_back(test::random_input(i, rng));
  return v;
}

struct Sentinels {
  std::vector<float> vec = std::vector<float>(32 * 16), dump = std::vector<float>(32 * 16);
  std::vector<uint16_t> k = std::vector<uint16_t>(8), kdump = std::vector<uint16_t>(8);
  Sentinels() {
    for (size_t i = 0; i < vec.size(); ++i) vec[i] = 1000.f + float(i);
    for (int i = 0; i < 8; ++i) k[size_t(i)] = uint16_t(0x1234 + 0x1111 * i);
  }
  void check(Isa isa, const RegSet& regs, int used_temps) const {
    for (int r = 0; r < nregs(isa); ++r) {
      bool used = r == regs.acc;
      for (int t = 0; t < used_temps; ++t) used |= regs.temps[size_t(t)] == r;
      if (used) continue;
      bool same = true;
      for (int l = 0; l < simd_width(isa); ++l)
        same &= dump[size_t(16 * r + l)] == vec[size_t(16 * r + l)];
      CHECK_MESSAGE(same, "vector register " << r << " clobbered");
    }
    if (isa == Isa::avx512)
      for (int i = 0; i < 7; ++i)
        CHECK_MESSAGE(kdump[size_t(i)] == k[size_t(i)], "k" << i << " clobbered");
  }
};

// Runs one chain on `inputs` (padded to whole vectors) and checks every lane.
void check_chain(Isa isa, bool has_bias, const std::vector<PostOp>& ops, const RegSet& regs,
                 const std::vector<float>& inputs, uint32_t seed) {
  const int w = simd_width(isa);
  const size_t n = (inputs.size() + size_t(w) - 1) / size_t(w) * size_t(w);
  std::vector<float> x(inputs), y(n, -12345.f);
  x.resize(n, 0.25f);

  EpiKernel k(isa, has_bias, ops, 0, regs);
  k.create();
  // Operand arrays per slot: bias in [-1, 1], residual [-5, 5], scale [-2, 2], shift [-3, 3].
  std::mt19937 rng(seed);
  std::vector<std::vector<float>> slot(size_t(k.slots), std::vector<float>(n));
  std::vector<int> first_slot(ops.size(), -1);
  int s = has_bias ? 1 : 0;
  auto fill = [&](int j, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (auto& v : slot[size_t(j)]) v = d(rng);
  };
  if (has_bias) fill(0, -1.f, 1.f);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == K::add) fill(first_slot[i] = s++, -5.f, 5.f);
    if (ops[i].kind == K::prelu) fill(first_slot[i] = s++, -2.f, 2.f);
    if (ops[i].kind == K::scale_shift) {
      fill(first_slot[i] = s, -2.f, 2.f);
      fill(s + 1, -3.f, 3.f);
      s += 2;
    }
  }
  REQUIRE(s == k.slots);

  Sentinels sen;
  EpiArgs a{};
  a.x = x.data();
  a.y = y.data();
  a.n = int64_t(n / size_t(w));
  for (int j = 0; j < k.slots; ++j) a.slot[j] = slot[size_t(j)].data();
  a.sentinel = sen.vec.data();
  a.dump = sen.dump.data();
  a.ksent = sen.k.data();
  a.kdump = sen.kdump.data();
  k.fn<void (*)(const EpiArgs*)>()(&a);

  int bad = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> opnd(size_t(k.slots));
    for (int j = 0; j < k.slots; ++j) opnd[size_t(j)] = slot[size_t(j)][i];
    Expect ex = reference(x[i], has_bias, has_bias ? opnd[0] : 0.f, ops, opnd, first_slot);
    if (!matches(y[i], ex) && ++bad <= 5)
      FAIL_CHECK(std::string(isa_name(isa))
                 << " " << std::string(has_bias ? "bias_" : "") << post_ops_str(ops)
                 << " x=" << x[i] << " got " << y[i] << " want " << ex.v << " +- " << ex.err);
  }
  CHECK_MESSAGE(bad == 0, bad << " mismatches in " << post_ops_str(ops));
  sen.check(isa, regs, k.used_temps);
}

std::vector<std::vector<PostOp>> single_ops() {
  return {{mk(K::relu)},
          {mk(K::leaky_relu, 0.1f)},
          {mk(K::leaky_relu, 2.5f)},
          {mk(K::leaky_relu, -0.5f)},
          {mk(K::clip, 0.f, 6.f)},
          {mk(K::clip, -kInf, 1.5f)},
          {mk(K::clip, -2.f, kInf)},
          {mk(K::clip, -kInf, kInf)},
          {mk(K::sigmoid)},
          {mk(K::swish)},
          {mk(K::hardswish)},
          {mk(K::hardsigmoid, 0.2f, 0.5f)},
          {mk(K::hardsigmoid, 1.f / 6.f, 0.5f)},
          {mk(K::add)},
          {mk(K::scale_shift)},
          {mk(K::gelu)},
          {mk(K::quant_dequant_u8, 0.05f, 128.f)},
          {mk(K::quant_dequant_s8, 0.013f, -3.f)},
          {mk(K::tanh)},
          {mk(K::elu, 1.f)},
          {mk(K::elu, 0.3f)},
          {mk(K::selu, 1.67326319217681884765625f, 1.05070102214813232421875f)},
          {mk(K::selu, 0.5f, -2.f)},
          {mk(K::mish)},
          {mk(K::gelu_tanh)},
          {mk(K::prelu)}};
}

std::vector<std::pair<bool, std::vector<PostOp>>> chains() {
  return {{true, {}},
          {true, {mk(K::relu)}},
          {true, {mk(K::add), mk(K::relu)}},
          {true, {mk(K::clip, 0.f, 6.f)}},
          {false, {mk(K::clip, 0.f, 6.f)}},
          {true, {mk(K::swish)}},
          {false, {mk(K::hardswish)}},
          {false, {mk(K::sigmoid), mk(K::scale_shift)}},
          {true, {mk(K::leaky_relu, 0.01f)}},
          {true, {mk(K::scale_shift), mk(K::add), mk(K::relu), mk(K::sigmoid)}},
          {false, {mk(K::add), mk(K::add), mk(K::scale_shift), mk(K::clip, -1.f, 1.f)}},
          {true, {mk(K::swish), mk(K::hardsigmoid, 0.2f, 0.5f), mk(K::leaky_relu, 0.3f)}},
          {false, {mk(K::sigmoid), mk(K::swish), mk(K::hardswish)}},
          {true, {mk(K::scale_shift), mk(K::hardswish), mk(K::add), mk(K::clip, -kInf, 4.f)}},
          {false, {mk(K::relu), mk(K::relu), mk(K::sigmoid), mk(K::sigmoid)}},
          {true, {mk(K::gelu), mk(K::add)}},
          {false, {mk(K::scale_shift), mk(K::gelu)}},
          {true, {mk(K::relu), mk(K::quant_dequant_u8, 0.02f, 0.f)}},
          {true, {mk(K::relu), mk(K::quant_dequant_s8, 0.04f, 5.f)}},
          {false, {mk(K::clip, 0.f, 6.f), mk(K::quant_dequant_u8, 6.f / 255, 0.f)}},
          {true,
           {mk(K::quant_dequant_u8, 0.03f, 120.f), mk(K::add), mk(K::quant_dequant_s8, 0.04f, 5.f),
            mk(K::relu)}},
          {true, {mk(K::add), mk(K::tanh)}},
          {false, {mk(K::scale_shift), mk(K::mish), mk(K::add)}},
          {true, {mk(K::elu, 1.f), mk(K::clip, -0.5f, 1.f)}},
          {false, {mk(K::gelu_tanh), mk(K::tanh), mk(K::relu)}},
          {true, {mk(K::tanh), mk(K::quant_dequant_s8, 0.01f, 0.f)}},
          {true, {mk(K::prelu), mk(K::add), mk(K::prelu)}},
          {false, {mk(K::scale_shift), mk(K::prelu), mk(K::mish)}}};
}

TEST_CASE("epilogue: every post-op alone, with and without bias, both ISAs") {
  const auto inputs = test_inputs(3000, 7);
  for (Isa isa : test_isas())
    for (const auto& ops : single_ops())
      for (bool bias : {false, true})
        for (const auto& regs : reg_sets(isa)) {
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(post_ops_str(ops));
          check_chain(isa, bias, ops, regs, inputs, 11);
        }
}

TEST_CASE("epilogue: chains, both ISAs") {
  const auto inputs = test_inputs(3000, 8);
  for (Isa isa : test_isas())
    for (const auto& [bias, ops] : chains())
      for (const auto& regs : reg_sets(isa)) {
        CAPTURE(std::string(isa_name(isa)));
        const std::string chain = post_ops_str(ops);  // clang 14 cannot CAPTURE a binding
        CAPTURE(chain);
        check_chain(isa, bias, ops, regs, inputs, 12);
      }
}

TEST_CASE("epilogue: a relu / clip folded into a quantize-dequantize's clamp gives its bits") {
  // Folded (jit/epilogue.h): bounds inside, across and beyond the grid's range, an infinite
  // bound, relu on either grid; not folded: a clip whose range misses the grid's.
  const std::vector<std::vector<PostOp>> cases = {
      {mk(K::clip, 0.f, 6.f), mk(K::quant_dequant_u8, 6.f / 255, 0.f)},
      {mk(K::clip, 0.f, 6.f), mk(K::quant_dequant_u8, 0.0137f, 3.f)},
      {mk(K::clip, -1.f, 2.5f), mk(K::quant_dequant_s8, 0.013f, -3.f)},
      {mk(K::clip, -100.f, 100.f), mk(K::quant_dequant_u8, 0.02f, 7.f)},
      {mk(K::clip, -kInf, 0.5f), mk(K::quant_dequant_u8, 0.05f, 128.f)},
      {mk(K::clip, 0.31f, 0.33f), mk(K::quant_dequant_u8, 0.02f, 7.f)},
      {mk(K::relu), mk(K::quant_dequant_s8, 0.04f, 5.f)},
      {mk(K::relu), mk(K::quant_dequant_u8, 0.03f, 9.f)},
      {mk(K::clip, 2.f, 6.f), mk(K::quant_dequant_u8, 0.01f, 255.f)},
      {mk(K::clip, -6.f, -2.f), mk(K::quant_dequant_u8, 0.01f, 0.f)},
  };
  for (const auto& ops : cases) {
    // Inputs at and a few ulps around the clip bounds and the quantization's rounding
    // boundaries (k + 1/2) s, plus the edge values.
    std::vector<float> inputs = edge_values();
    auto around = [&](float v) {
      float lo = v, hi = v;
      for (int u = 0; u < 3; ++u) {
        inputs.push_back(lo = std::nextafter(lo, -kInf));
        inputs.push_back(hi = std::nextafter(hi, kInf));
      }
      inputs.push_back(v);
    };
    const float s = ops[1].alpha;
    for (int k = -300; k <= 300; ++k) around((float(k) + 0.5f) * s);
    if (ops[0].kind == K::clip) {
      around(ops[0].alpha);
      around(ops[0].beta);
    }
    for (Isa isa : test_isas()) {  // (no bias: it would move the inputs off the boundaries)
      CAPTURE(std::string(isa_name(isa)));
      const std::string chain = post_ops_str(ops);
      CAPTURE(chain);
      check_chain(isa, false, ops, reg_sets(isa)[0], inputs, 13);
    }
  }
}

TEST_CASE("epilogue: sigmoid and swish limits (hand-computed)") {
  for (Isa isa : test_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    const int w = simd_width(isa);
    const float in[8] = {-100.f, 100.f, -kInf, kInf, kNaN, 0.f, -1e30f, 1e30f};
    for (K kind : {K::sigmoid, K::swish}) {
      EpiKernel k(isa, false, {mk(kind)}, 0, reg_sets(isa)[0]);
      k.create();
      std::vector<float> x(size_t(w), 0.f), y(static_cast<size_t>(w));
      std::copy(in, in + 8, x.begin());
      Sentinels sen;
      EpiArgs a{x.data(),     y.data(),        1, {}, sen.vec.data(), sen.dump.data(),
                sen.k.data(), sen.kdump.data()};
      k.fn<void (*)(const EpiArgs*)>()(&a);
      if (kind == K::sigmoid) {
        CHECK(y[0] == 0.f);
        CHECK(y[1] == 1.f);
        CHECK(y[2] == 0.f);
        CHECK(y[3] == 1.f);
        CHECK(std::isnan(y[4]));
        CHECK(y[5] == 0.5f);
        CHECK(y[6] == 0.f);
        CHECK(y[7] == 1.f);
      } else {
        CHECK(y[0] == 0.f);  // -100 / (1 + e^100 = inf) = -0
        CHECK(std::signbit(y[0]));
        CHECK(y[1] == 100.f);
        CHECK(std::isnan(y[2]));  // -inf / inf, as the reference
        CHECK(y[3] == kInf);
        CHECK(std::isnan(y[4]));
        CHECK(y[5] == 0.f);
        CHECK(y[6] == 0.f);
        CHECK(y[7] == 1e30f);
      }
    }
  }
}

TEST_CASE("epilogue: sigmoid and swish accuracy against double precision") {
  // Dense sweep where the results are representable (below -88.72 the float formula's
  // exp(-x) overflows and gives 0, as the reference does; covered by the limits test).
  std::vector<float> in;
  for (int i = 0; i <= (1 << 20); ++i) in.push_back(float(-88.7 + 178.7 * i / (1 << 20)));
  for (Isa isa : test_isas())
    for (K kind : {K::sigmoid, K::swish}) {
      CAPTURE(std::string(isa_name(isa)));
      CAPTURE(std::string(post_op_name(kind)));
      const size_t w = size_t(simd_width(isa));
      std::vector<float> x(in), y((in.size() + w - 1) / w * w);
      x.resize(y.size(), 0.f);
      EpiKernel k(isa, false, {mk(kind)}, 0, reg_sets(isa)[1]);
      k.create();
      Sentinels sen;
      EpiArgs a{x.data(),       y.data(),        int64_t(y.size() / w), {},
                sen.vec.data(), sen.dump.data(), sen.k.data(),          sen.kdump.data()};
      k.fn<void (*)(const EpiArgs*)>()(&a);
      double max_ulp = 0, max_ref_ulp = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const double d = in[i];
        double truth = 1.0 / (1.0 + std::exp(-d));
        if (kind == K::swish) truth *= d;
        max_ulp = std::max(max_ulp, std::fabs(y[i] - truth) / ulp_of(truth));
        const float ref = apply_post_op(mk(kind), in[i], 0, 0, 0);
        max_ref_ulp = std::max(max_ref_ulp, std::fabs(ref - truth) / ulp_of(truth));
      }
      MESSAGE(std::string(isa_name(isa))
              << " " << std::string(post_op_name(kind)) << ": max error " << max_ulp
              << " ulp (apply_post_op: " << max_ref_ulp << " ulp)");
      CHECK(max_ulp <= 3.0);
    }
}

TEST_CASE("epilogue: gelu accuracy against double precision") {
  const std::vector<float> in = test::gelu_test_inputs();
  for (Isa isa : test_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    const size_t w = size_t(simd_width(isa));
    std::vector<float> x(in), y((in.size() + w - 1) / w * w);
    x.resize(y.size(), 0.f);
    EpiKernel k(isa, false, {mk(K::gelu)}, 0, reg_sets(isa)[1]);
    k.create();
    Sentinels sen;
    EpiArgs a{x.data(),       y.data(),        int64_t(y.size() / w), {},
              sen.vec.data(), sen.dump.data(), sen.k.data(),          sen.kdump.data()};
    k.fn<void (*)(const EpiArgs*)>()(&a);
    const test::GeluStats st = test::gelu_stats(in, y.data());
    MESSAGE(std::string(isa_name(isa)) << " gelu: erf term error " << st.erf_term
                                       << ", max |error| / max(1, |x|) = " << st.scaled);
    CHECK_MESSAGE(st.bad == 0, "first input out of budget: " << st.first_bad);
    CHECK(st.erf_term < 6e-7);
    CHECK(st.scaled < 3e-7);
  }
}

TEST_CASE("epilogue: the glue activations give the standalone elementwise kernel's bits") {
  // Same operations in both emitters (constants in vec_math.h): a conv's fused Tanh / Mish /
  // ELU computes exactly what the unfused elementwise kernel would.
  std::vector<float> in = edge_values();
  for (int i = 0; i <= (1 << 14); ++i) in.push_back(float(-12.0 + 24.0 * i / (1 << 14)));
  for (int i = 0; i <= (1 << 10); ++i) in.push_back(float(-1.0 + 2.0 * i / (1 << 10)));
  std::mt19937 rng(5);
  for (int i = 0; i < (1 << 12); ++i) in.push_back(test::random_input(size_t(i), rng));
  for (Isa isa : test_isas())
    for (const PostOp& op : {mk(K::tanh), mk(K::elu, 0.7f), mk(K::selu, 1.6732632f, 1.050701f),
                             mk(K::mish), mk(K::gelu_tanh)}) {
      CAPTURE(std::string(isa_name(isa)));
      CAPTURE(post_ops_str({op}));
      const size_t w = size_t(simd_width(isa));
      std::vector<float> x(in), y((in.size() + w - 1) / w * w), glue(y.size());
      x.resize(y.size(), 0.f);
      EpiKernel k(isa, false, {op}, 0, reg_sets(isa)[0]);
      k.create();
      Sentinels sen;
      EpiArgs a{x.data(),       y.data(),        int64_t(y.size() / w), {},
                sen.vec.data(), sen.dump.data(), sen.k.data(),          sen.kdump.data()};
      k.fn<void (*)(const EpiArgs*)>()(&a);
      std::string why;
      auto g = create_eltwise_kernel(int64_t(x.size()), {op}, isa, &why);
      REQUIRE_MESSAGE(g, why);
      test::run_split(*g, {x.data()}, {glue.data()});
      int differ = 0;
      for (size_t i = 0; i < in.size(); ++i)
        if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(glue[i]) &&
            !(std::isnan(y[i]) && std::isnan(glue[i])) && differ++ < 3)
          CHECK_MESSAGE(false, "x = " << in[i] << ": epilogue " << y[i] << ", glue " << glue[i]);
      CHECK(differ == 0);
    }
}

// ---------------------------------------------------------------------------------------------
// temps_needed per op (hand-derived from the emitter's design, see jit/epilogue.cpp).

TEST_CASE("epilogue: temps_needed per op and ISA") {
  Xbyak::CodeGenerator g(4096);
  struct Row {
    PostOp op;
    int avx512, avx512_tail, avx2, avx2_tail;
  };
  const Row rows[] = {
      {mk(K::relu), 0, 0, 1, 1},
      {mk(K::leaky_relu, 0.1f), 0, 0, 1, 1},
      {mk(K::clip, 0, 6), 0, 0, 1, 1},
      {mk(K::clip, -kInf, kInf), 0, 0, 0, 0},
      {mk(K::sigmoid), 2, 2, 2, 2},
      {mk(K::swish), 3, 3, 3, 3},
      {mk(K::hardswish), 1, 1, 1, 1},
      {mk(K::hardsigmoid, 0.2f, 0.5f), 0, 0, 1, 1},
      {mk(K::add), 0, 0, 0, 1},
      {mk(K::scale_shift), 0, 0, 0, 1},
      {mk(K::gelu), 3, 3, 3, 3},
      {mk(K::quant_dequant_u8, 0.1f, 3.f), 1, 1, 1, 1},
      {mk(K::tanh), 3, 3, 3, 3},
      {mk(K::elu, 1.f), 3, 3, 3, 3},
      {mk(K::selu, 1.f, 2.f), 3, 3, 3, 3},
      {mk(K::mish), 3, 3, 3, 3},
      {mk(K::gelu_tanh), 3, 3, 3, 3},
      {mk(K::prelu), 0, 0, 2, 2},
  };
  for (const auto& r : rows) {
    CAPTURE(post_op_name(r.op.kind));
    EpilogueEmitter e512(g, Isa::avx512, false, {r.op}), e2(g, Isa::avx2, false, {r.op});
    CHECK(e512.temps_needed(false) == r.avx512);
    CHECK(e512.temps_needed(true) == r.avx512_tail);
    CHECK(e512.temps_needed() == r.avx512_tail);
    CHECK(e2.temps_needed(false) == r.avx2);
    CHECK(e2.temps_needed(true) == r.avx2_tail);
    CHECK(e2.temps_needed() == r.avx2_tail);
  }
  EpilogueEmitter bias_relu2(g, Isa::avx2, true, {mk(K::clip, -kInf, kInf)});  // 0 temps
  CHECK(bias_relu2.temps_needed(false) == 0);
  CHECK(bias_relu2.temps_needed(true) == 1);
  EpilogueEmitter bias_relu5(g, Isa::avx512, true, {mk(K::relu)});
  CHECK(bias_relu5.temps_needed() == 0);
  EpilogueEmitter chain(g, Isa::avx2, true, {mk(K::add), mk(K::swish), mk(K::hardswish)});
  CHECK(chain.temps_needed() == 3);
  CHECK(EpilogueEmitter(g, Isa::avx512, false, {}).empty());
}

// ---------------------------------------------------------------------------------------------
// Tails: every operand ends exactly at a page followed by a PROT_NONE page, so reading one
// lane past the tail faults. SIGSEGV is turned into a test failure instead of a crash.

class GuardedBuffers {
 public:
  explicit GuardedBuffers(int count) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    for (int i = 0; i < count; ++i) {
      void* p =
          mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      REQUIRE(p != MAP_FAILED);
      REQUIRE(mprotect(static_cast<char*>(p) + page_, page_, PROT_NONE) == 0);
      maps_.push_back(p);
    }
  }
  ~GuardedBuffers() {
    for (void* p : maps_) munmap(p, 2 * page_);
  }
  // `n` floats ending at the guard page.
  float* tail_of(int i, int n) {
    return reinterpret_cast<float*>(static_cast<char*>(maps_[size_t(i)]) + page_) - n;
  }

 private:
  size_t page_ = 0;
  std::vector<void*> maps_;
};

// Runs the kernel; returns false if it faulted.
bool run_guarded(const EpiKernel& k, const EpiArgs& a) {
  return test::runs_without_segv([&] { k.fn<void (*)(const EpiArgs*)>()(&a); });
}

TEST_CASE("epilogue: tail loads never read past the tail (guard page)") {
  const std::vector<std::pair<bool, std::vector<PostOp>>> tail_chains = {
      {true, {mk(K::add), mk(K::relu)}},
      {true, {mk(K::scale_shift), mk(K::swish), mk(K::add)}},
      {false, {mk(K::leaky_relu, 0.1f), mk(K::add), mk(K::clip, 0.f, 6.f), mk(K::scale_shift)}},
      {true, {mk(K::hardsigmoid, 0.2f, 0.5f), mk(K::add), mk(K::hardswish), mk(K::add)}},
      {false, {mk(K::prelu)}},
      {true, {mk(K::add), mk(K::prelu), mk(K::scale_shift), mk(K::prelu)}},
  };
  const auto inputs = test_inputs(64, 9);
  for (Isa isa : test_isas())
    for (const auto& [bias, ops] : tail_chains)
      for (const auto& regs : reg_sets(isa)) {
        const int w = simd_width(isa);
        CAPTURE(std::string(isa_name(isa)));
        const std::string chain = post_ops_str(ops);  // clang 14 cannot CAPTURE a binding
        CAPTURE(chain);
        for (int tail = 1; tail <= w; ++tail) {
          CAPTURE(tail);
          EpiKernel k(isa, bias, ops, tail == w ? 0 : tail, regs);
          k.create();
          GuardedBuffers g(k.slots);
          std::mt19937 rng(uint32_t(100 + tail));
          std::uniform_real_distribution<float> d(-2.f, 2.f);
          std::vector<float*> slot;
          for (int j = 0; j < k.slots; ++j) {
            slot.push_back(g.tail_of(j, tail));
            for (int l = 0; l < tail; ++l) slot[size_t(j)][l] = d(rng);
          }
          std::vector<float> x(static_cast<size_t>(w)), y(static_cast<size_t>(w), -7.f);
          for (int l = 0; l < w; ++l) x[size_t(l)] = inputs[size_t(l + 3 * tail) % inputs.size()];
          Sentinels sen;
          EpiArgs a{x.data(),     y.data(),        1, {}, sen.vec.data(), sen.dump.data(),
                    sen.k.data(), sen.kdump.data()};
          for (int j = 0; j < k.slots; ++j) a.slot[j] = slot[size_t(j)];
          REQUIRE_MESSAGE(run_guarded(k, a), "read past the tail (SIGSEGV)");
          std::vector<int> first_slot(ops.size(), -1);
          int s = bias ? 1 : 0;
          for (size_t i = 0; i < ops.size(); ++i) {
            if (ops[i].kind == K::add || ops[i].kind == K::prelu) first_slot[i] = s++;
            if (ops[i].kind == K::scale_shift) first_slot[i] = (s += 2) - 2;
          }
          for (int l = 0; l < tail; ++l) {
            std::vector<float> opnd;
            for (int j = 0; j < k.slots; ++j) opnd.push_back(slot[size_t(j)][l]);
            Expect ex = reference(x[size_t(l)], bias, bias ? opnd[0] : 0.f, ops, opnd, first_slot);
            CHECK_MESSAGE(matches(y[size_t(l)], ex), "lane " << l << " x=" << x[size_t(l)]
                                                             << " got " << y[size_t(l)] << " want "
                                                             << ex.v);
          }
          sen.check(isa, regs, k.used_temps);
        }
      }
}

TEST_CASE("epilogue: the guard page does catch a full-width read (control)") {
  for (Isa isa : test_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    const int w = simd_width(isa);
    EpiKernel k(isa, true, {mk(K::relu)}, 0, reg_sets(isa)[0]);  // full vector, no mask
    k.create();
    GuardedBuffers g(1);
    float* bias = g.tail_of(0, w - 1);  // last lane would be past the page
    std::vector<float> x(size_t(w), 1.f), y(static_cast<size_t>(w));
    Sentinels sen;
    EpiArgs a{x.data(),     y.data(),        1, {bias}, sen.vec.data(), sen.dump.data(),
              sen.k.data(), sen.kdump.data()};
    CHECK_FALSE(run_guarded(k, a));
  }
}

TEST_CASE("epilogue: misuse is reported as kiln::Error") {
  struct Bad : JitGenerator {
    std::function<void(Bad&)> body;
    explicit Bad(std::function<void(Bad&)> b) : JitGenerator("bad"), body(std::move(b)) {}
    void generate() override { body(*this); }
  };
  EpilogueEmitter::Operands none;
  auto expect_throw = [](std::function<void(Bad&)> f) {
    Bad b(std::move(f));
    CHECK_THROWS_AS(b.create(), Error);
  };
  expect_throw([&](Bad& g) {  // too few temps
    EpilogueEmitter e(g, Isa::avx512, false, {mk(K::swish)});
    e.apply(0, {1, 2}, none);
  });
  expect_throw([&](Bad& g) {  // temp == acc
    EpilogueEmitter e(g, Isa::avx2, false, {mk(K::hardswish)});
    e.apply(3, {3}, none);
  });
  expect_throw([&](Bad& g) {  // tail too large
    EpilogueEmitter e(g, Isa::avx2, false, {mk(K::relu)});
    e.apply(0, {}, none, 9);
  });
  expect_throw([&](Bad& g) {  // ymm16 does not exist on AVX2
    EpilogueEmitter e(g, Isa::avx2, false, {mk(K::relu)});
    e.apply(16, {}, none);
  });
  expect_throw([&](Bad& g) {  // apply after the table was emitted
    EpilogueEmitter e(g, Isa::avx512, false, {mk(K::relu)});
    e.emit_constants();
    e.apply(0, {}, none);
  });
  expect_throw([&](Bad& g) {  // add without a residual address
    EpilogueEmitter e(g, Isa::avx512, false, {mk(K::add)});
    e.apply(0, {}, none);
  });
  expect_throw([&](Bad& g) { EpilogueEmitter e(g, Isa::scalar, false, {}); });
}

// ---------------------------------------------------------------------------------------------
// exp accuracy: y = exp(x) (or exp(-x)) straight from emit_exp, against std::exp in double.

struct ExpArgs {
  const float* x;
  float* y;
  int64_t n;
};

class ExpKernel : public JitGenerator {
 public:
  ExpKernel(Isa isa, bool negate, bool in_place)
      : JitGenerator("test_exp"), isa_(isa), negate_(negate), in_place_(in_place) {}

 protected:
  void generate() override {
    using namespace Xbyak::util;
    VecConsts c(*this, isa_);
    const int src = isa_ == Isa::avx512 ? 20 : 2, dst = in_place_ ? src : 5;
    mov(rax, ptr[rdi + offsetof(ExpArgs, x)]);
    mov(rdx, ptr[rdi + offsetof(ExpArgs, y)]);
    mov(rcx, ptr[rdi + offsetof(ExpArgs, n)]);
    Xbyak::Label loop;
    L(loop);
    vmovups(vreg(isa_, src), ptr[rax]);
    emit_exp(*this, isa_, c, dst, src, 7, isa_ == Isa::avx512 ? 30 : 11, negate_);
    vmovups(ptr[rdx], vreg(isa_, dst));
    add(rax, simd_width(isa_) * 4);
    add(rdx, simd_width(isa_) * 4);
    dec(rcx);
    jnz(loop, T_NEAR);
    vzeroupper();
    ret();
    c.emit();
  }

 private:
  Isa isa_;
  bool negate_, in_place_;
};

std::vector<float> run_exp(Isa isa, bool negate, bool in_place, std::vector<float> x) {
  const size_t w = size_t(simd_width(isa));
  const size_t n = x.size();
  x.resize((n + w - 1) / w * w, 0.f);
  std::vector<float> y(x.size());
  ExpKernel k(isa, negate, in_place);
  k.create();
  ExpArgs a{x.data(), y.data(), int64_t(x.size() / w)};
  k.fn<void (*)(const ExpArgs*)>()(&a);
  y.resize(n);
  return y;
}

TEST_CASE("vec_math: exp accuracy over the whole float range") {
  // Dense sweep of [-104, 89] (2^24 points), every float around the overflow, subnormal and
  // underflow thresholds, and every float in [-1, 1] spaced by 2^-20.
  const std::vector<float> x = test::exp_test_inputs(24, 20000, 20);

  for (Isa isa : test_isas())
    for (bool negate : {false, true}) {
      CAPTURE(std::string(isa_name(isa)));
      CAPTURE(negate);
      auto y = run_exp(isa, negate, true, x);
      double max_ulp = 0, max_ulp_normal = 0, max_ulp_sub = 0;
      float worst = 0;
      int bad_special = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double arg = negate ? -double(x[i]) : double(x[i]);
        const double ref = std::exp(arg);
        if (std::isnan(y[i])) ++bad_special;
        double e = ulp_error(y[i], ref);
        if (e > max_ulp) max_ulp = e, worst = x[i];
        (ref >= 0x1p-126 ? max_ulp_normal : max_ulp_sub) =
            std::max(ref >= 0x1p-126 ? max_ulp_normal : max_ulp_sub, e);
      }
      MESSAGE(std::string(isa_name(isa))
              << std::string(negate ? " exp(-x)" : " exp(x)") << ": max error " << max_ulp
              << " ulp (normal results " << max_ulp_normal << " ulp, subnormal results "
              << max_ulp_sub << " ulp) at x = " << worst << " over " << x.size() << " inputs");
      CHECK(bad_special == 0);
      CHECK(max_ulp <= 2.0);
    }
}

TEST_CASE("vec_math: exp special values and limits") {
  const std::vector<float> x = {0.f,      -0.f,    1e-45f, -1e-45f, 88.72f, 88.73f, 89.f,   100.f,
                                1e30f,    FLT_MAX, kInf,   -103.9f, -104.f, -105.f, -200.f, -1e30f,
                                -FLT_MAX, -kInf,   kNaN,   -kNaN,   -87.5f, -100.f, 1.f,    -1.f};
  for (Isa isa : test_isas())
    for (bool in_place : {true, false}) {
      CAPTURE(std::string(isa_name(isa)));
      auto y = run_exp(isa, false, in_place, x);
      auto yn = run_exp(isa, true, in_place, x);
      CHECK(y[0] == 1.f);
      CHECK(y[1] == 1.f);
      CHECK(y[2] == 1.f);
      CHECK(y[3] == 1.f);
      CHECK(std::isfinite(y[4]));  // e^88.72 = 3.40e38 < FLT_MAX
      CHECK(y[4] > 3.3e38f);
      for (int i = 5; i <= 10; ++i) CHECK(y[size_t(i)] == kInf);
      CHECK(y[11] == 0x1p-149f);  // e^-103.9 = 7.5e-46 rounds up to the smallest subnormal
      for (int i = 12; i <= 17; ++i) {
        CHECK(y[size_t(i)] == 0.f);
        CHECK_FALSE(std::signbit(y[size_t(i)]));
      }
      CHECK(std::isnan(y[18]));
      CHECK(std::isnan(y[19]));
      CHECK(std::fabs(y[20] / 9.98235e-39f - 1.f) < 1e-4f);  // subnormal: e^-87.5
      CHECK(std::fabs(y[21] / 3.7201e-44f - 1.f) < 0.05f);   // 26 ulps of 1.4e-45
      CHECK(y[22] == doctest::Approx(2.7182818f).epsilon(1e-7));
      CHECK(y[23] == doctest::Approx(0.36787944f).epsilon(1e-7));
      // exp(-x) of the same inputs mirrors them.
      CHECK(yn[0] == 1.f);
      CHECK(yn[10] == 0.f);
      CHECK(yn[17] == kInf);
      CHECK(yn[16] == kInf);
      CHECK(yn[13] == kInf);
      CHECK(std::isnan(yn[18]));
      CHECK(yn[22] == doctest::Approx(0.36787944f).epsilon(1e-7));
    }
}

}  // namespace
}  // namespace kiln
