// init_dw_conf of the depthwise family on its own: applicability reasons, row segments, input
// reuse counts, register plans and tiles (expectations hand-computed).
#include <set>

#include "jit/dw/dw_conf.h"
#include "jit/dw/dw_kernel.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using convjit::DwConf;
using convjit::DwRowSeg;
using convjit::DwWeights;
using convjit::init_dw_conf;
using convjit::plan_dw_rows;

ConvImpl dwi(Layout l, int ur = 0, int ob = 0) {
  ConvImpl i = conv_impl(ConvFamily::depthwise, l, l, ur, ob);
  i.cache = CacheSizes{};  // the tilings checked below assume a 48 KB L1d
  return i;
}

ConvProblem dwp(Shp s, std::vector<PostOp> post = {}) {
  s.oc = s.ic;
  ConvProblem p = problem(s, std::move(post));
  p.groups = p.ic;
  return p;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using DwRowSegs = std::vector<DwRowSeg>;

const ConvProblem k3 = problem("g32ic32ih14iw14_oc32oh14ow14kh3kw3sh1sw1ph1pw1");

TEST_CASE("depthwise init_conf: reasons") {
  const Isa z = Isa::avx512, y = Isa::avx2;
  ConvImpl direct = dwi(Layout::nChw16c);
  direct.family = ConvFamily::direct;
  CHECK(init_dw_conf(k3, direct, z).reason == "not the depthwise family");
  ConvProblem g1 = k3;
  g1.groups = 1;
  CHECK(init_dw_conf(g1, dwi(Layout::nChw16c), z).reason ==
        "not depthwise: groups != input channels");
  ConvProblem mult = k3;
  mult.oc = 64;  // channel multiplier 2
  CHECK(init_dw_conf(mult, dwi(Layout::nChw16c), z).reason ==
        "channel multiplier != 1 (output channels != groups)");
  CHECK(init_dw_conf(k3, dwi(Layout::nChw16c), Isa::scalar).reason == "needs isa avx2 or avx512");
  ConvImpl mixed = dwi(Layout::nhwc);
  mixed.dst = Layout::nChw16c;
  CHECK(init_dw_conf(k3, mixed, z).reason == "depthwise needs src layout == dst layout");
  CHECK(has(init_dw_conf(k3, dwi(Layout::nChw16c), y).reason, "nChw16c needs isa avx512"));
  CHECK(has(init_dw_conf(k3, dwi(Layout::nChw8c), z).reason, "nChw8c needs isa avx2"));
  CHECK(has(init_dw_conf(k3, dwi(Layout::nchw), z).reason, "not blocked"));
  CHECK(has(init_dw_conf(k3, dwi(Layout::nhwc, 0, 2), z).reason, "oc_blocks > 1"));
  CHECK(init_dw_conf(k3, dwi(Layout::nhwc, -1), z).reason == "negative forced blocking");
  ConvProblem bad = k3;
  bad.ow = 13;
  CHECK(init_dw_conf(bad, dwi(Layout::nhwc), z).reason == "output shape does not match the window");
  // 25 weight registers + 14 accumulators + 1 input do not fit 16 (or 32) registers.
  const ConvProblem k5 = problem("g8ic8ih20iw20_oc8oh20ow20kh5kw5sh1sw1ph2pw2");
  CHECK(init_dw_conf(k5, dwi(Layout::nChw8c), y, DwWeights::all).reason ==
        "no register blocking fits 16 vector registers with all taps in registers");
  CHECK(has(init_dw_conf(k5, dwi(Layout::nhwc, 14), z, DwWeights::all).reason,
            "no register blocking fits 32 vector registers with ow14"));
  // oc_blocks 0 and 1 both mean one vector per block.
  CHECK(init_dw_conf(k3, dwi(Layout::nhwc, 0, 1), z));
  CHECK(init_dw_conf(k3, dwi(Layout::nhwc), y));
}

TEST_CASE("depthwise factory: operand checks") {
  const Tensor w_ok(DType::f32, {32, 1, 3, 3}), w_bad(DType::f32, {32, 2, 3, 3}),
      b_ok(DType::f32, {32}), b_bad(DType::f32, {16});
  std::string why;
  ConvProblem p = k3;
  p.bias = true;
  CHECK(!create_conv_kernel(p, dwi(Layout::nhwc), Isa::avx2, w_bad, &b_ok, &why));
  CHECK(why == "weights are not f32 [32,1,3,3]");
  CHECK(!create_conv_kernel(p, dwi(Layout::nhwc), Isa::avx2, w_ok, nullptr, &why));
  CHECK(why == "bias presence does not match the problem");
  CHECK(!create_conv_kernel(p, dwi(Layout::nhwc), Isa::avx2, w_ok, &b_bad, &why));
  CHECK(why == "bias is not f32 [32]");
  CHECK(!create_conv_kernel(p, dwi(Layout::nChw16c), Isa::avx2, w_ok, &b_ok, &why));
  CHECK(has(why, "needs isa avx512"));
  CHECK(create_conv_kernel(p, dwi(Layout::nhwc), Isa::avx2, w_ok, &b_ok, &why));
}

TEST_CASE("depthwise: row segments (valid kernel rows per output row)") {
  // 3x3, pad 1, 7 rows: the first row misses kernel row 0, the last misses row 2.
  CHECK(plan_dw_rows(problem("ic1ih7iw7_oc1oh7ow7kh3kw3sh1sw1ph1pw1")) ==
        DwRowSegs{{0, 1, 1, 3}, {1, 5, 0, 3}, {6, 1, 0, 2}});
  // Stride 2: oh = 4; rows read input 2r-1 .. 2r+1.
  CHECK(plan_dw_rows(problem("ic1ih7iw7_oc1oh4ow4kh3kw3sh2sw2ph1pw1")) ==
        DwRowSegs{{0, 1, 1, 3}, {1, 2, 0, 3}, {3, 1, 0, 2}});
  // Asymmetric: no bottom padding, no bottom edge row.
  CHECK(plan_dw_rows(problem("ic1ih7iw7_oc1oh3ow4kh3kw3sh2sw2pt1pl1pb0pr1")) ==
        DwRowSegs{{0, 1, 1, 3}, {1, 2, 0, 3}});
  // One input row, padding 3 on both sides: row 0 and row 4 see only padding.
  CHECK(plan_dw_rows(problem("ic1ih1iw1_oc1oh5ow1kh3kw3sh1sw1ph3pw1")) ==
        DwRowSegs{{0, 1, 3, 3}, {1, 1, 2, 3}, {2, 1, 1, 2}, {3, 1, 0, 1}, {4, 1, 0, 0}});
  // Dilation 2 with pad 2 over 5 rows: rows 0-1 miss kernel row 0, rows 3-4 miss row 2.
  CHECK(plan_dw_rows(problem("ic1ih5iw5_oc1oh5ow5kh3kw3sh1sw1dh2dw2ph2pw2")) ==
        DwRowSegs{{0, 2, 1, 3}, {2, 1, 0, 3}, {3, 2, 0, 2}});
}

TEST_CASE("depthwise: distinct input columns per block (input reuse)") {
  // Stride 1, 3 taps, 8 pixels: columns 0..9. Stride 2: 0..16.
  CHECK(convjit::dw_block_inputs(problem("ic1ih9iw9_oc1oh7ow7kh3kw3sh1sw1ph0pw0"), 8) == 10);
  CHECK(convjit::dw_block_inputs(problem("ic1ih9iw19_oc1oh4ow9kh3kw3sh2sw2ph0pw0"), 8) == 17);
  // Dilation 2: {0..3} u {2..5} u {4..7}; with stride 2 as well only even columns 0..10.
  CHECK(convjit::dw_block_inputs(problem("ic1ih9iw9_oc1oh5ow5kh3kw3sh1sw1dh2dw2ph0pw0"), 4) == 8);
  CHECK(convjit::dw_block_inputs(problem("ic1ih9iw19_oc1oh3ow8kh3kw3sh2sw2dh2dw2ph0pw0"), 4) == 6);
}

TEST_CASE("depthwise: register plans fit and weights stay in registers where they fit") {
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    const int nregs = isa == Isa::avx512 ? 32 : 16;
    for (Layout l : {blocked_layout(isa), Layout::nhwc})
      for (int64_t k : {1, 3, 5, 7})
        for (int64_t c : {16, 17})
          for (auto post : {std::vector<PostOp>{}, chain({op(PostOp::Kind::swish)}),
                            chain({op(PostOp::Kind::add), op(PostOp::Kind::clip, 0.f, 6.f)})}) {
            const ConvProblem p = dwp({.ic = c,
                                       .ih = 30,
                                       .iw = 30,
                                       .kh = k,
                                       .kw = k,
                                       .pt = k / 2,
                                       .pl = k / 2,
                                       .pb = k / 2,
                                       .pr = k / 2},
                                      post);
            auto r = init_dw_conf(p, dwi(l), isa);
            REQUIRE_MESSAGE(r, r.reason);
            const DwConf& conf = *r.conf;
            CAPTURE(conf.name());
            CHECK(convjit::dw_vector_regs(conf, conf.ur_w, conf.weights) <= nregs);
            CHECK(conf.ur_w >= 1);
            // With 32 registers a 3x3 filter (9 registers) always stays in registers.
            if (isa == Isa::avx512 && k <= 3) CHECK(conf.weights == DwWeights::all);
            // 25 weight registers never fit 16.
            if (isa == Isa::avx2 && k >= 5) CHECK(conf.weights == DwWeights::row);
          }
  }
  // The register count: 8 accumulators + 9 weights + 1 input; row mode 8 + 3 + 1; an AVX2
  // NHWC channel tail adds the lane-mask register.
  auto r = init_dw_conf(k3, dwi(Layout::nhwc, 8), Isa::avx2, DwWeights::row);
  REQUIRE(r);
  CHECK(convjit::dw_vector_regs(*r.conf, 8, DwWeights::all) == 18);
  CHECK(convjit::dw_vector_regs(*r.conf, 8, DwWeights::row) == 12);
  ConvProblem t = k3;
  t.ic = t.oc = t.groups = 19;
  auto rt = init_dw_conf(t, dwi(Layout::nhwc), Isa::avx2);
  REQUIRE(rt);
  CHECK(rt.conf->tail == 3);
  CHECK(rt.conf->tail_code);
  CHECK(convjit::dw_vector_regs(*rt.conf, 8, DwWeights::row) == 13);
  // Blocked with a channel tail needs tail code only for plain [C] scale/shift operands.
  auto rb = init_dw_conf(t, dwi(Layout::nChw8c), Isa::avx2);
  REQUIRE(rb);
  CHECK(!rb.conf->tail_code);
}

// Every (image, channel vector, output row) is covered by exactly one tile.
void check_tiles(const DwConf& c) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (int64_t t = 0; t < c.tiles(); ++t) {
    const convjit::DwTile tl = c.tile(t);
    for (int64_t v = tl.cv0; v < tl.cv1; ++v)
      for (int64_t r = tl.r0; r < tl.r1; ++r) {
        const bool fresh = seen.insert({tl.n, v, r}).second;
        CHECK(fresh);
      }
  }
  CHECK(int64_t(seen.size()) == c.p.n * c.cv * c.p.oh);
}

TEST_CASE("depthwise: tiles cover the output once and split evenly over two threads") {
  // 112x112x32 on AVX-512, blocked: 2 channel vectors of 12544 pixels each, so rows are split
  // into 4 chunks of 28 to reach 8 tiles; order (n, cv, row chunk).
  ConvProblem p = problem("g32ic32ih112iw112_oc32oh112ow112kh3kw3sh1sw1ph1pw1");
  auto r = init_dw_conf(p, dwi(Layout::nChw16c), Isa::avx512);
  REQUIRE(r);
  CHECK(r.conf->tiles() == 8);
  const convjit::DwTile t5 = r.conf->tile(5);
  CHECK(t5.cv0 == 1);
  CHECK(t5.cv1 == 2);
  CHECK(t5.r0 == 28);
  CHECK(t5.r1 == 56);
  check_tiles(*r.conf);
  // MobileNetV2's depthwise layers: the two halves of the tile range carry equal work (+-10%).
  const int64_t layers[][3] = {{112, 32, 1}, {112, 96, 2}, {56, 144, 1}, {56, 144, 2}, {28, 192, 1},
                               {28, 192, 2}, {14, 384, 1}, {14, 576, 1}, {14, 576, 2}, {7, 960, 1}};
  for (Isa isa : {Isa::avx512, Isa::avx2})
    for (Layout l : {blocked_layout(isa), Layout::nhwc})
      for (const auto& L : layers)
        for (int64_t n : {1, 2}) {
          const ConvProblem q = dwp({.n = n,
                                     .ic = L[1],
                                     .ih = L[0],
                                     .iw = L[0],
                                     .kh = 3,
                                     .kw = 3,
                                     .sh = L[2],
                                     .sw = L[2],
                                     .pt = 1,
                                     .pl = 1,
                                     .pb = 1,
                                     .pr = 1});
          auto rq = init_dw_conf(q, dwi(l), isa);
          REQUIRE(rq);
          const DwConf& c = *rq.conf;
          CAPTURE(c.name());
          CAPTURE(q.str());
          check_tiles(c);
          CHECK(c.tiles() >= 8);
          double half[2] = {0, 0};
          for (int64_t t = 0; t < c.tiles(); ++t) {
            const convjit::DwTile tl = c.tile(t);
            half[t < c.tiles() / 2 ? 0 : 1] += double((tl.cv1 - tl.cv0) * (tl.r1 - tl.r0));
          }
          CHECK(std::fabs(half[0] - half[1]) <= 0.1 * (half[0] + half[1]) / 2);
        }
}

TEST_CASE("depthwise: conf names") {
  auto r = init_dw_conf(k3, dwi(Layout::nChw16c, 7), Isa::avx512, DwWeights::all);
  REQUIRE(r);
  CHECK(r.conf->name() == "conv_dw_f32_nChw16c_k3s1_ow7__avx512");
  auto q = init_dw_conf(k3, dwi(Layout::nhwc, 12), Isa::avx2, DwWeights::row);
  REQUIRE(q);
  CHECK(q.conf->name() == "conv_dw_f32_nhwc_k3s1_ow12wr__avx2");
}

}  // namespace
}  // namespace kiln::convtest
