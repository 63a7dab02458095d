// The direct conv family against the reference Conv, on both ISA paths, over swept shapes.
#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

ConvImpl direct(Isa isa, Layout src = Layout::nChw16c, int ur_w = 0, int oc_blocks = 0) {
  ConvImpl i;
  i.family = ConvFamily::direct;
  i.src = src == Layout::nchw ? Layout::nchw : blocked(isa);
  i.dst = blocked(isa);
  i.ur_w = ur_w;
  i.oc_blocks = oc_blocks;
  return i;
}

// tests/shapes/conv_direct.txt: channel tails, strides, asymmetric padding, dilation, kernel
// sizes, 1x1 outputs, batch 2.
TEST_CASE("direct conv matches the reference on blocked layouts (both ISAs)") {
  const std::vector<ConvProblem> shapes = shapes::read_shapes("conv_direct");
  uint64_t seed = 100;
  for (Isa isa : isas())
    for (const ConvProblem& p : shapes) check_conv(p, direct(isa), isa, seed++);
}

TEST_CASE("direct conv with NCHW src (first layers)") {
  uint64_t seed = 200;
  for (Isa isa : isas()) {
    // ResNet-50's conv1 shape at a smaller resolution, and odd channel counts.
    check_conv(problem({.ic = 3,
                        .ih = 32,
                        .iw = 32,
                        .oc = 64,
                        .kh = 7,
                        .kw = 7,
                        .sh = 2,
                        .sw = 2,
                        .pt = 3,
                        .pl = 3,
                        .pb = 3,
                        .pr = 3}),
               direct(isa, Layout::nchw), isa, seed++);
    check_conv(problem({.n = 2,
                        .ic = 1,
                        .ih = 11,
                        .iw = 13,
                        .oc = 10,
                        .kh = 3,
                        .kw = 5,
                        .pt = 0,
                        .pl = 2,
                        .pb = 1,
                        .pr = 2}),
               direct(isa, Layout::nchw), isa, seed++);
    check_conv(problem({.ic = 19,
                        .ih = 9,
                        .iw = 9,
                        .oc = 17,
                        .kh = 3,
                        .kw = 3,
                        .sh = 2,
                        .sw = 2,
                        .pt = 1,
                        .pl = 1,
                        .pb = 1,
                        .pr = 1,
                        .dh = 2,
                        .dw = 1}),
               direct(isa, Layout::nchw), isa, seed++);
  }
}

TEST_CASE("direct conv: forced register blockings and their tails") {
  uint64_t seed = 300;
  const ConvProblem p = problem({.ic = 21,
                                 .ih = 11,
                                 .iw = 19,
                                 .oc = 52,
                                 .kh = 3,
                                 .kw = 3,
                                 .pt = 1,
                                 .pl = 2,
                                 .pb = 1,
                                 .pr = 0});
  for (Isa isa : isas()) {
    const std::vector<std::pair<int, int>> blockings =
        isa == Isa::avx512
            ? std::vector<std::pair<int, int>>{{1, 1}, {5, 3}, {7, 4}, {14, 2}, {19, 1}, {28, 1}}
            : std::vector<std::pair<int, int>>{{1, 1}, {4, 3}, {6, 2}, {2, 5}, {13, 1}};
    for (auto [ur, ob] : blockings) {
      const std::string name = check_conv(p, direct(isa, Layout::nChw16c, ur, ob), isa, seed++);
      const int want_ur = std::min<int>(ur, int(p.ow));
      CHECK(name.find("_ow" + std::to_string(want_ur) + "oc") != std::string::npos);
    }
  }
}

TEST_CASE("direct conv with fused post-op chains") {
  uint64_t seed = 400;
  const std::vector<std::vector<PostOp>> chains = {
      chain({op(K::relu)}),
      chain({op(K::clip, 0.f, 6.f)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::add), op(K::sigmoid)}),
      chain({op(K::swish), op(K::add), op(K::hardswish)}),
  };
  const std::vector<Shp> shapes = {
      {.ic = 17, .ih = 9, .iw = 10, .oc = 21, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1},
      {.n = 2,
       .ic = 32,
       .ih = 7,
       .iw = 7,
       .oc = 40,
       .kh = 3,
       .kw = 3,
       .sh = 2,
       .sw = 2,
       .pt = 1,
       .pl = 0,
       .pb = 1,
       .pr = 1,
       .bias = false},
  };
  for (Isa isa : isas())
    for (const auto& c : chains)
      for (const Shp& s : shapes) check_conv(problem(s, c), direct(isa), isa, seed++);
  // NCHW first-layer with a chain.
  for (Isa isa : isas())
    check_conv(problem({.ic = 3,
                        .ih = 20,
                        .iw = 20,
                        .oc = 24,
                        .kh = 7,
                        .kw = 7,
                        .sh = 2,
                        .sw = 2,
                        .pt = 3,
                        .pl = 3,
                        .pb = 3,
                        .pr = 3},
                       chain({op(K::add), op(K::relu)})),
               direct(isa, Layout::nchw), isa, seed++);
}

// The K split keeps partial sums in dst between calls; force it through the conf.
TEST_CASE("direct conv with the input channels split across calls") {
  uint64_t seed = 500;
  for (Isa isa : isas())
    for (bool with_chain : {false, true}) {
      const ConvProblem p =
          problem({.ic = 53,
                   .ih = 9,
                   .iw = 12,
                   .oc = 33,
                   .kh = 3,
                   .kw = 3,
                   .pt = 1,
                   .pl = 1,
                   .pb = 1,
                   .pr = 1},
                  with_chain ? chain({op(K::add), op(K::relu)}) : std::vector<PostOp>{});
      auto c = convjit::init_direct_conf(p, direct(isa), isa);
      REQUIRE(c);
      for (int64_t chunk : {int64_t(1), int64_t(2)}) {
        for (int order : {0, 1, 2}) {  // groups outer, + next-group weight prefetch, rows outer
          const bool rows_outer = order == 2;
          convjit::DirectConf conf = *c.conf;
          conf.ic_chunk = chunk;
          conf.rows_outer = rows_outer;
          conf.pf_next = order == 1;
          conf.pf_every = 2;
          Operands o = make_operands(p, seed++);
          auto k = convjit::make_direct_kernel(conf, o.w, &o.b);
          INFO(k->name() << " chunk " << chunk << " rows_outer " << rows_outer << " pf_next "
                         << conf.pf_next);
          std::string first;
          CHECK(count_mismatches(run_kernel(*k, p, o, blocked(isa), blocked(isa)), reference(p, o),
                                 p.ic * 9, &first) == 0);
        }
      }
    }
}

// Row pairs (ur_h = 2): interior rows run two at a time, rows touching the top/bottom padding
// one at a time; with and without the K split and a chain.
TEST_CASE("direct conv with two-row register blocks") {
  uint64_t seed = 700;
  const std::vector<Shp> shapes = {
      {.ic = 20, .ih = 7, .iw = 7, .oc = 40, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1},
      {.n = 2,
       .ic = 33,
       .ih = 14,
       .iw = 13,
       .oc = 17,
       .kh = 3,
       .kw = 3,
       .sh = 2,
       .sw = 2,
       .pt = 1,
       .pl = 0,
       .pb = 1,
       .pr = 1},
      {.ic = 16,
       .ih = 9,
       .iw = 5,
       .oc = 24,
       .kh = 5,
       .kw = 3,
       .pt = 2,
       .pl = 1,
       .pb = 1,
       .pr = 1,
       .dh = 2,
       .dw = 1},
  };
  for (Isa isa : isas())
    for (const Shp& s : shapes)
      for (int variant = 0; variant < 3; ++variant) {
        const ConvProblem p =
            problem(s, variant == 2 ? chain({op(K::add), op(K::relu)}) : std::vector<PostOp>{});
        auto c = convjit::init_direct_conf(p, direct(isa), isa);
        REQUIRE(c);
        convjit::DirectConf conf = *c.conf;
        conf.ur_w = int(p.ow);
        conf.ur_h = 2;
        conf.oc_blocks = 1;
        conf.oc_groups = conf.ocb;
        conf.oc_blocks_last = 1;
        conf.last_group_own = p.oc % conf.simd != 0;
        conf.ow_blocks = convjit::plan_ow_blocks(p, conf.ur_w);
        conf.rows_outer = false;
        conf.pf_next = variant != 0;  // the next group's weights prefetched (as 3x3 512 @ 7)
        conf.pf_every = variant == 2 ? 4 : 1;
        if (variant == 1) conf.ic_chunk = 1;
        Operands o = make_operands(p, seed++);
        auto k = convjit::make_direct_kernel(conf, o.w, &o.b);
        INFO(k->name() << " variant " << variant << " isa " << isa_name(isa));
        CHECK(k->name().find("oh2ow") != std::string::npos);
        std::string first;
        CHECK(count_mismatches(run_kernel(*k, p, o, blocked(isa), blocked(isa)), reference(p, o),
                               p.ic * p.kh * p.kw, &first) == 0);
      }
}

TEST_CASE("direct conv: AVX-512 register broadcast variant") {
  // bcast_reg is a conf-level option (not chosen by default); keep its code path alive.
  const ConvProblem p = problem({.ic = 19,
                                 .ih = 8,
                                 .iw = 13,
                                 .oc = 40,
                                 .kh = 3,
                                 .kw = 3,
                                 .pt = 1,
                                 .pl = 1,
                                 .pb = 1,
                                 .pr = 1});
  if (!testing::has_isa(Isa::avx512)) return;
  auto c = convjit::init_direct_conf(p, direct(Isa::avx512, Layout::nChw16c, 6, 3), Isa::avx512);
  REQUIRE(c);
  convjit::DirectConf conf = *c.conf;
  conf.bcast_reg = true;
  Operands o = make_operands(p, 600);
  auto k = convjit::make_direct_kernel(conf, o.w, &o.b);
  std::string first;
  CHECK(count_mismatches(run_kernel(*k, p, o, Layout::nChw16c, Layout::nChw16c), reference(p, o),
                         p.ic * 9, &first) == 0);
}

}  // namespace
}  // namespace kiln::convtest
