// The direct conv family against the reference Conv, on both ISA paths, over swept shapes.
#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

ConvImpl direct(Isa isa, Layout src = Layout::nChw16c, int ur_w = 0, int oc_blocks = 0) {
  return conv_impl(ConvFamily::direct, src == Layout::nchw ? Layout::nchw : blocked_layout(isa),
                   blocked_layout(isa), ur_w, oc_blocks);
}

// c forced to row pairs (ur_h = 2) of ur_w pixels and one oc block per group, groups outer.
convjit::DirectConf row_pairs(convjit::DirectConf c, int ur_w) {
  c.ur_w = ur_w;
  c.ur_h = 2;
  c.oc_blocks = 1;
  c.oc_groups = c.ocb;
  c.oc_blocks_last = 1;
  c.last_group_own = c.p.oc % c.simd != 0;
  c.ow_blocks = convjit::plan_ow_blocks(c.p, ur_w);
  c.rows_outer = false;
  return c;
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
    check_conv(problem("ic3ih32iw32_oc64oh16ow16kh7kw7sh2sw2ph3pw3"), direct(isa, Layout::nchw),
               isa, seed++);
    check_conv(problem("mb2ic1ih11iw13_oc10oh10ow13kh3kw5sh1sw1pt0pl2pb1pr2"),
               direct(isa, Layout::nchw), isa, seed++);
    check_conv(problem("ic19ih9iw9_oc17oh4ow5kh3kw3sh2sw2dh2dw1ph1pw1"), direct(isa, Layout::nchw),
               isa, seed++);
  }
}

// A first layer writing NHWC for NHWC consumers: whole channel vectors (16 / 8 per ISA), batch
// 2, strides, asymmetric padding, row pairs, post-op chains with an NHWC residual, computed
// weights; refused with a channel tail (a partial vector would spill into the next pixel).
TEST_CASE("direct conv with NCHW src and NHWC dst") {
  uint64_t seed = 250;
  const std::vector<std::string> shapes = {
      "ic3ih32iw32_oc32oh16ow16kh3kw3sh2sw2ph1pw1",
      "mb2ic3ih15iw13_oc48oh8ow7kh3kw3sh2sw2pt1pl0pb1pr2",
      "ic1ih11iw30_oc16oh10ow30kh3kw5sh1sw1pt1pl2pb0pr2",
      "ic4ih20iw20_oc64oh10ow10kh7kw7sh2sw2ph3pw3_nobias",
  };
  for (Isa isa : isas()) {
    const ConvImpl impl = conv_impl(ConvFamily::direct, Layout::nchw, Layout::nhwc);
    for (const std::string& s : shapes)
      for (const auto& post :
           {std::vector<PostOp>{}, chain({op(K::scale_shift), op(K::add), op(K::relu)})}) {
        const ConvProblem p = problem(s, post);
        CHECK(check_conv(p, impl, isa, seed++).find("nchw_to_nhwc") != std::string::npos);
        check_runtime_weights(p, impl, isa, seed);
        seed += 2;
      }
    // Two-row register blocks into NHWC.
    const ConvProblem p = problem("ic3ih14iw9_oc32oh14ow9kh3kw3sh1sw1ph1pw1");
    auto c = convjit::init_direct_conf(p, impl, isa);
    REQUIRE(c);
    const convjit::DirectConf conf = row_pairs(*c.conf, isa == Isa::avx512 ? int(p.ow) : 6);
    Operands o = make_operands(p, seed++);
    auto k = convjit::make_direct_kernel(conf, o.w, &o.b);
    CHECK(k->name().find("oh2ow") != std::string::npos);
    std::string first;
    CHECK(count_mismatches(run_kernel(*k, p, o, Layout::nchw, Layout::nhwc), reference(p, o),
                           p.ic * p.kh * p.kw, &first) == 0);
    auto tail =
        convjit::init_direct_conf(problem("ic3ih8iw8_oc20oh8ow8kh3kw3sh1sw1ph1pw1"), impl, isa);
    CHECK_FALSE(tail);
  }
}

// Computed weights (check_runtime_weights): blocked and NCHW sources, channel tails, strides,
// pads, a K split by many input channels, post-op chains.
TEST_CASE("direct conv with run-time weights matches the reference (both ISAs)") {
  uint64_t seed = 9100;
  const std::vector<std::pair<std::string, Layout>> cases = {
      {"ic16ih9iw9_oc32oh9ow9kh3kw3sh1sw1ph1pw1", Layout::nChw16c},
      {"mb2ic20ih8iw11_oc40oh4ow6kh3kw3sh2sw2ph1pw1", Layout::nChw16c},
      {"ic3ih15iw13_oc24oh8ow7kh3kw3sh2sw2ph1pw1", Layout::nchw},
      {"ic64ih7iw7_oc17oh7ow7kh1kw1sh1sw1ph0pw0_nobias", Layout::nChw16c},
      {"ic160ih6iw6_oc48oh6ow6kh3kw3sh1sw1ph1pw1", Layout::nChw16c},
  };
  for (Isa isa : isas())
    for (const auto& [s, l] : cases)
      for (const auto& post :
           {std::vector<PostOp>{}, chain({op(K::scale_shift), op(K::add), op(K::relu)})}) {
        check_runtime_weights(problem(s, post), direct(isa, l), isa, seed);
        seed += 2;
      }
}

TEST_CASE("direct conv: forced register blockings and their tails") {
  uint64_t seed = 300;
  const ConvProblem p = problem("ic21ih11iw19_oc52oh11ow19kh3kw3sh1sw1pt1pl2pb1pr0");
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
      chain({op(K::prelu), op(K::add), op(K::mish)}),
  };
  const std::vector<std::string> shapes = {
      "ic17ih9iw10_oc21oh9ow10kh3kw3sh1sw1ph1pw1",
      "mb2ic32ih7iw7_oc40oh4ow3kh3kw3sh2sw2pt1pl0pb1pr1_nobias",
  };
  for (Isa isa : isas())
    for (const auto& c : chains)
      for (const std::string& s : shapes) check_conv(problem(s, c), direct(isa), isa, seed++);
  // NCHW first-layer with a chain.
  for (Isa isa : isas())
    check_conv(
        problem("ic3ih20iw20_oc24oh10ow10kh7kw7sh2sw2ph3pw3", chain({op(K::add), op(K::relu)})),
        direct(isa, Layout::nchw), isa, seed++);
}

// The K split keeps partial sums in dst between calls; force it through the conf.
TEST_CASE("direct conv with the input channels split across calls") {
  uint64_t seed = 500;
  for (Isa isa : isas())
    for (bool with_chain : {false, true}) {
      const ConvProblem p =
          problem("ic53ih9iw12_oc33oh9ow12kh3kw3sh1sw1ph1pw1",
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
          CHECK(count_mismatches(run_kernel(*k, p, o, blocked_layout(isa), blocked_layout(isa)),
                                 reference(p, o), p.ic * 9, &first) == 0);
        }
      }
    }
}

// Row pairs (ur_h = 2): interior rows run two at a time, rows touching the top/bottom padding
// one at a time; with and without the K split and a chain.
TEST_CASE("direct conv with two-row register blocks") {
  uint64_t seed = 700;
  const std::vector<std::string> shapes = {
      "ic20ih7iw7_oc40oh7ow7kh3kw3sh1sw1ph1pw1",
      "mb2ic33ih14iw13_oc17oh7ow6kh3kw3sh2sw2pt1pl0pb1pr1",
      "ic16ih9iw5_oc24oh4ow5kh5kw3sh1sw1dh2dw1pt2pl1pb1pr1",
  };
  for (Isa isa : isas())
    for (const std::string& s : shapes)
      for (int variant = 0; variant < 3; ++variant) {
        const ConvProblem p =
            problem(s, variant == 2 ? chain({op(K::add), op(K::relu)}) : std::vector<PostOp>{});
        auto c = convjit::init_direct_conf(p, direct(isa), isa);
        REQUIRE(c);
        convjit::DirectConf conf = row_pairs(*c.conf, int(p.ow));
        conf.pf_next = variant != 0;  // the next group's weights prefetched (as 3x3 512 @ 7)
        conf.pf_every = variant == 2 ? 4 : 1;
        if (variant == 1) conf.ic_chunk = 1;
        Operands o = make_operands(p, seed++);
        auto k = convjit::make_direct_kernel(conf, o.w, &o.b);
        INFO(k->name() << " variant " << variant << " isa " << isa_name(isa));
        CHECK(k->name().find("oh2ow") != std::string::npos);
        std::string first;
        CHECK(count_mismatches(run_kernel(*k, p, o, blocked_layout(isa), blocked_layout(isa)),
                               reference(p, o), p.ic * p.kh * p.kw, &first) == 0);
      }
}

TEST_CASE("direct conv: AVX-512 register broadcast variant") {
  // bcast_reg is a conf-level option (not chosen by default); keep its code path alive.
  const ConvProblem p = problem("ic19ih8iw13_oc40oh8ow13kh3kw3sh1sw1ph1pw1");
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
