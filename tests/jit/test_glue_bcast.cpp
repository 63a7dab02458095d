// Tests of the broadcast binary and per-channel affine kernels (create_binary_kernel,
// create_affine_kernel) against the scalar reference kernels (find_ref_kernel("Mul"), ...,
// "BatchNormalization" with its fused post-ops) on NCHW data; the kernel reads copies in
// the layouts a label would give each operand (pad lanes NaN: they must never reach a real
// lane) and its output is converted back. Every broadcast the kernel takes, channel tails,
// batch 2, long rows (the loop of 4 vectors), on both ISA paths.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/post_ops.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_expect.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;
using K = PostOp::Kind;

using test::kNaN;

Tensor random_tensor(const Shape& s, uint32_t seed, bool away_from_zero) {
  Tensor t(DType::f32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = d(rng);
    if (away_from_zero && std::fabs(v) < 0.25f) v = v < 0 ? -0.25f : 0.25f;
    p[i] = v;
  }
  return t;
}

// The element of the output's logical shape broadcast to 4-D.
Shape as4d(const Shape& s) {
  Shape r(4 - s.size(), 1);
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

// Offset of pad channel c (>= the channel count) of a blocked layout.
int64_t pad_offset(Layout l, const Shape& s, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t blk = layout_block(l), cb = round_up(s[1], blk) / blk;
  return ((n * cb + c / blk) * s[2] * s[3] + h * s[3] + w) * blk + c % blk;
}

// `t` in layout l (4-D operands only; pad lanes NaN) in a guarded buffer.
std::unique_ptr<GuardedBuf> in_layout(const Tensor& t, Layout l) {
  if (t.shape().size() != 4 || l == Layout::nchw) {
    auto b = std::make_unique<GuardedBuf>(size_t(std::max<int64_t>(t.numel(), 1)));
    std::memcpy(b->data(), t.data<float>(), size_t(t.numel()) * 4);
    return b;
  }
  auto b = std::make_unique<GuardedBuf>(size_t(layout_elems(l, t.shape())));
  convert_layout(t.data<float>(), Layout::nchw, b->data(), l, t.shape());
  const Shape& s = t.shape();
  const int blk = layout_block(l);
  if (blk > 1)
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t c = s[1]; c < round_up(s[1], blk); ++c)
        for (int64_t h = 0; h < s[2]; ++h)
          for (int64_t w = 0; w < s[3]; ++w) {
            (*b)[size_t(pad_offset(l, s, n, c, h, w))] = kNaN;
          }
  return b;
}

// Runs kernel k on the given operand buffers, checks the blocked output's pad lanes are zero
// and returns the output in NCHW.
Tensor run_to_nchw(const Kernel& k, const std::vector<const float*>& src, const Shape& y,
                   Layout l) {
  GuardedBuf dst(size_t(layout_elems(l, y)));
  dst.fill(kNaN);
  test::run_split(k, src, {dst.data()});
  const int blk = layout_block(l);
  int bad = 0;
  if (blk > 1)
    for (int64_t n = 0; n < y[0]; ++n)
      for (int64_t c = y[1]; c < round_up(y[1], blk); ++c)
        for (int64_t p = 0; p < y[2] * y[3]; ++p)
          bad += dst[size_t(pad_offset(l, y, n, c, p / y[3], p % y[3]))] != 0.f;
  CHECK_MESSAGE(bad == 0, bad << " pad lanes not zero");
  Tensor out(DType::f32, y);
  convert_layout(dst.data(), l, out.data<float>(), Layout::nchw, y);
  return out;
}

// The layout a label gives an operand (runtime/labels.cpp, bcast_slot_layout): full tensors
// and per-channel 4-D ones in `l` (`per_channel_plain`: the latter in nchw, as constants
// are), the rest nchw.
Layout operand_layout(const Shape& s, const Shape& y, Layout l, bool per_channel_plain) {
  if (s == y) return l;
  const bool per_channel = s.size() == 4 && s[1] == y[1] && s[2] == 1 && s[3] == 1;
  return per_channel && !per_channel_plain ? l : Layout::nchw;
}

// Whether the kernel walks this operand on output layout l: nchw takes every broadcast; the
// others need it over the whole image or none of it.
bool walkable(const Shape& s, const Shape& y) {
  const Shape s4 = as4d(s);
  const bool none = s4[2] == 1 && s4[3] == 1, full = s4[2] == y[2] && s4[3] == y[3];
  return none || full;
}

const char* const kOpNames[] = {"Add", "Sub", "Mul", "Div", "PRelu"};  // BinaryOp order

void check_binary(BinaryOp op, const Shape& y, const Shape& as, const Shape& bs,
                  const std::vector<PostOp>& ops, uint32_t seed) {
  const std::string opname = kOpNames[int(op)];
  CAPTURE(opname);
  CAPTURE(shape_str(y));
  CAPTURE(shape_str(as));
  CAPTURE(shape_str(bs));
  CAPTURE(post_ops_str(ops));
  const Tensor a = random_tensor(as, seed, false);
  const Tensor b = random_tensor(bs, seed + 7, op == BinaryOp::div);
  Tensor want(DType::f32, y);
  Node node;
  node.name = "bin";
  node.op = opname;
  find_ref_kernel(node.op)(node, {&a, &b}, {&want});
  float* wp = want.data<float>();
  for (int64_t i = 0; i < want.numel(); ++i)
    for (const PostOp& p : ops) wp[i] = apply_post_op(p, wp[i], 0, 0, 0);
  for (Isa isa : test::glue_isas())
    for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)})
      for (bool plain : {false, true}) {
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(std::string(layout_name(l)));
        CAPTURE(plain);
        const BcastOperand oa{as, operand_layout(as, y, l, plain), 0};
        const BcastOperand ob{bs, operand_layout(bs, y, l, plain), 1};
        std::string why;
        auto k = create_binary_kernel(op, y, l, oa, ob, ops, isa, &why);
        const bool expect = l == Layout::nchw || (walkable(as, y) && walkable(bs, y));
        REQUIRE_MESSAGE(bool(k) == expect, why);
        if (!k) {
          CHECK(!why.empty());
          continue;
        }
        auto ba = in_layout(a, oa.layout), bb = in_layout(b, ob.layout);
        const Tensor got = run_to_nchw(*k, {ba->data(), bb->data()}, y, l);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < got.numel(); ++i) {
          const float g = got.data<float>()[i], w = wp[i];
          // Exact but sigmoid (the vector exp: a few ulp).
          const bool ok = ops.empty() || ops.back().kind != K::sigmoid ? std::memcmp(&g, &w, 4) == 0
                                                                       : std::fabs(g - w) <= 1e-6f;
          if (!ok && bad++ == 0) first = i;
        }
        CHECK_MESSAGE(bad == 0, bad << " wrong, first at " << first << ": got "
                                    << (first >= 0 ? got.data<float>()[first] : 0.f) << " want "
                                    << (first >= 0 ? wp[first] : 0.f));
      }
}

TEST_CASE("bcast binary: every broadcast, layout, channel tail and ISA vs the reference") {
  const std::vector<std::vector<PostOp>> chains = {{},
                                                   {test::mk(K::relu)},
                                                   {test::mk(K::clip, 0.f, 6.f)},
                                                   {test::mk(K::hardswish)},
                                                   {test::mk(K::sigmoid)}};
  const std::vector<Shape> outs = {{1, 20, 5, 7},  {2, 35, 3, 4}, {2, 16, 7, 7}, {1, 40, 1, 1},
                                   {2, 3, 9, 11},  {1, 1, 6, 5},  {1, 70, 4, 3}, {1, 8, 30, 30},
                                   {1, 2, 13, 17}, {2, 300, 2, 2}};
  uint32_t seed = 1;
  int chain = 0;
  for (const Shape& y : outs) {
    const int64_t N = y[0], C = y[1], H = y[2], W = y[3];
    const std::vector<std::pair<Shape, Shape>> pairs = {
        {y, y},                        // same shape
        {y, {N, C, 1, 1}},             // squeeze-and-excitation scale
        {{1, C, 1, 1}, y},             // broadcast on the left
        {y, {C, 1, 1}},                // constant-like per-channel, rank 3
        {y, {N, 1, H, W}},             // per pixel
        {y, {1, 1, 1, 1}},             // scalar
        {y, {}},                       // rank 0
        {{N, C, 1, 1}, {N, 1, H, W}},  // both sides broadcast
        {y, {1, 1, H, 1}},             // per row: nchw only
        {{W}, y},                      // per column, rank 1: nchw only
    };
    for (const auto& [as, bs] : pairs) {
      const BinaryOp op = BinaryOp(seed % 5);
      check_binary(op, y, as, bs, chains[size_t(chain++ % int(chains.size()))], seed);
      seed += 3;
    }
  }
}

TEST_CASE("bcast binary: bad operands get a reason") {
  const Shape y{1, 4, 3, 3};
  std::string why;
  for (Isa isa : test::glue_isas()) {
    why.clear();
    CHECK(!create_binary_kernel(BinaryOp::add, y, Layout::nchw, {{1, 3, 3, 3}, Layout::nchw, 0},
                                {y, Layout::nchw, 1}, {}, isa, &why));
    CHECK(why.find("broadcast") != std::string::npos);
    why.clear();
    CHECK(!create_binary_kernel(BinaryOp::add, y, Layout::nchw, {y, Layout::nchw, 0},
                                {y, Layout::nchw, 1}, {test::mk(K::add)}, isa, &why));
    CHECK(!why.empty());
    why.clear();
    CHECK(!create_binary_kernel(BinaryOp::add, y, blocked_layout(isa), {y, Layout::nhwc, 0},
                                {y, blocked_layout(isa), 1}, {}, isa, &why));
    CHECK(!why.empty());
    // Rows of 2^29 channels: strides the generated displacements cannot hold (nothing is
    // allocated: the factory refuses first).
    const Shape huge{1, int64_t(1) << 29, 1, 2};
    why.clear();
    CHECK(!create_binary_kernel(BinaryOp::mul, huge, Layout::nhwc, {huge, Layout::nhwc, 0},
                                {{huge[1], 1, 1}, Layout::nchw, 1}, {}, isa, &why));
    CHECK(why.find("32-bit") != std::string::npos);
  }
}

// BatchNormalization (inference) with a fused activation: the kernel's one FMA with folded
// constants against the reference's double evaluation, within a few float roundings of the
// terms: |x*a| + |B - mean*a| + |y|.
TEST_CASE("bcast affine: BatchNormalization + activation vs the reference") {
  const std::vector<Shape> outs = {{1, 20, 5, 7}, {2, 35, 3, 4},  {1, 64, 7, 7},
                                   {2, 3, 1, 1},  {1, 150, 2, 3}, {1, 9, 20, 20}};
  const std::vector<std::vector<PostOp>> chains = {
      {test::mk(K::relu)}, {}, {test::mk(K::clip, 0.f, 6.f)}, {test::mk(K::leaky_relu, 0.1f)}};
  uint32_t seed = 11;
  int chain = 0;
  for (const Shape& y : outs) {
    const std::vector<PostOp>& ops = chains[size_t(chain++ % int(chains.size()))];
    CAPTURE(shape_str(y));
    CAPTURE(post_ops_str(ops));
    const int64_t C = y[1];
    const Tensor x = random_tensor(y, seed, false);
    Tensor scale = random_tensor({C}, seed + 1, false), bias = random_tensor({C}, seed + 2, false),
           mean = random_tensor({C}, seed + 3, false), var = random_tensor({C}, seed + 4, false);
    for (int64_t c = 0; c < C; ++c) var.data<float>()[c] = std::fabs(var.data<float>()[c]);
    seed += 10;
    Node node;
    node.name = "bn";
    node.op = "BatchNormalization";
    node.inputs.assign(5, kNoValue);
    for (const PostOp& p : ops) append_post_op(node, p, {});
    Tensor want(DType::f32, y);
    find_ref_kernel(node.op)(node, {&x, &scale, &bias, &mean, &var}, {&want});
    std::vector<float> a(static_cast<size_t>(C)), b(a.size());
    for (int64_t c = 0; c < C; ++c) {
      const double s =
          double(scale.data<float>()[c]) / std::sqrt(double(var.data<float>()[c]) + 1e-5);
      a[size_t(c)] = float(s);
      b[size_t(c)] = float(double(bias.data<float>()[c]) - double(mean.data<float>()[c]) * s);
    }
    for (Isa isa : test::glue_isas())
      for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(std::string(layout_name(l)));
        std::string why;
        auto k = create_affine_kernel(y, l, a, b, ops, isa, &why);
        REQUIRE_MESSAGE(k, why);
        auto bx = in_layout(x, l);
        const Tensor got = run_to_nchw(*k, {bx->data()}, y, l);
        int bad = 0;
        const int64_t plane = y[2] * y[3];
        for (int64_t i = 0; i < got.numel(); ++i) {
          const size_t c = size_t((i / plane) % C);
          const float g = got.data<float>()[i], w = want.data<float>()[i];
          const double tol = 4 * 0x1p-24 *
                             (std::fabs(double(x.data<float>()[i]) * a[c]) + std::fabs(b[c]) +
                              std::fabs(double(w)));
          if (!(std::fabs(double(g) - double(w)) <= tol)) ++bad;
        }
        CHECK_MESSAGE(bad == 0, bad << " elements off");
      }
  }
}

TEST_CASE("bcast expand: f32 Expand vs the reference, every broadcast, layout and ISA") {
  const std::vector<Shape> outs = {{1, 20, 5, 7}, {2, 35, 3, 4}, {1, 40, 1, 1},
                                   {2, 3, 9, 11}, {1, 1, 6, 5},  {2, 300, 2, 2}};
  uint32_t seed = 100;
  for (const Shape& y : outs) {
    const int64_t N = y[0], C = y[1], H = y[2], W = y[3];
    for (const Shape& xs : std::vector<Shape>{
             y, {1, C, 1, 1}, {N, 1, H, W}, {}, {C, 1, 1}, {1, 1, H, 1}, {W}, {N, C, 1, 1}}) {
      CAPTURE(shape_str(y));
      CAPTURE(shape_str(xs));
      const Tensor x = random_tensor(xs, seed++, false);
      Tensor shape(DType::i64, {4});
      std::copy(y.begin(), y.end(), shape.data<int64_t>());
      Tensor want(DType::f32, y);
      Node node;
      node.name = "expand";
      node.op = "Expand";
      find_ref_kernel(node.op)(node, {&x, &shape}, {&want});
      for (Isa isa : test::glue_isas())
        for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(std::string(layout_name(l)));
          const BcastOperand ox{xs, operand_layout(xs, y, l, false), 0};
          std::string why;
          auto k = create_expand_kernel(y, l, ox, isa, &why);
          REQUIRE_MESSAGE(bool(k) == (l == Layout::nchw || walkable(xs, y)), why);
          if (!k) continue;
          auto bx = in_layout(x, ox.layout);
          const Tensor got = run_to_nchw(*k, {bx->data()}, y, l);
          CHECK(std::memcmp(got.data<float>(), want.data<float>(), size_t(got.numel()) * 4) == 0);
        }
    }
  }
}

}  // namespace
}  // namespace kiln
