// init_grouped_conf on its own: the input-block range of each register block, the useful lane
// fraction, the register-block choice and the reasons it refuses (expectations hand-computed).
#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "jit/grouped/grouped_conf.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using convjit::grouped_lane_use;
using convjit::grouped_range;
using convjit::GroupedRange;
using convjit::init_grouped_conf;
using convjit::init_grouped_conf_mode;

ConvImpl impl(Layout src, Layout dst, int ur = 0, int ob = 0) {
  ConvImpl i = conv_impl(ConvFamily::grouped, src, dst, ur, ob);
  i.cache = CacheSizes{};
  return i;
}

// 3x3 pad 1 on an 8x8 input with `g` groups.
ConvProblem grouped(int64_t g, int64_t ic, int64_t oc) {
  ConvProblem p =
      problem(pad({.ic = ic, .ih = 8, .iw = 8, .oc = oc, .kh = 3, .kw = 3}, 1, 1, 1, 1));
  p.groups = g;
  return p;
}

GroupedRange range(int64_t lo, int64_t k, bool tail) {
  GroupedRange r;
  r.ib_lo = lo;
  r.k_blocks = k;
  r.ic_tail = tail;
  return r;
}

TEST_CASE("grouped conf: input-block ranges of output vectors") {
  // 24 channels per group on 16 lanes: 72 channels = 4 full blocks + 8.
  const ConvProblem p24 = grouped(3, 72, 72);
  CHECK(grouped_range(p24, 16, 1, 0) == range(0, 2, false));  // oc 0-15: group 0, ic 0-23
  CHECK(grouped_range(p24, 16, 1, 1) == range(0, 3, false));  // oc 16-31: groups 0 and 1
  CHECK(grouped_range(p24, 16, 1, 2) == range(1, 2, false));  // oc 32-47: group 1, ic 24-47
  CHECK(grouped_range(p24, 16, 1, 3) == range(3, 1, true));   // oc 48-63: ic 48-71, tail
  CHECK(grouped_range(p24, 16, 1, 4) == range(3, 1, true));   // oc 64-71 (lane tail)
  CHECK(grouped_range(p24, 16, 2, 1) == range(1, 3, true));   // oc 32-63: groups 1 and 2
  // On 8 lanes each group is 3 whole blocks.
  CHECK(grouped_range(p24, 8, 1, 2) == range(0, 3, false));
  CHECK(grouped_range(p24, 8, 3, 1) == range(3, 3, false));
  // 3 channels in per group, 15 in all: no full block, only the tail.
  const ConvProblem small = grouped(5, 15, 25);
  CHECK(grouped_range(small, 16, 1, 1) == range(0, 0, true));
  CHECK(grouped_range(small, 8, 1, 0) == range(0, 1, false));  // oc 0-7: groups 0-1 = ic 0-5
  CHECK(grouped_range(small, 8, 1, 1) == range(0, 1, true));   // oc 8-15: groups 1-3 = ic 3-11
}

TEST_CASE("grouped conf: useful lane fraction") {
  CHECK(grouped_lane_use(grouped(4, 64, 64), 16) == 1.0);  // 16 per group
  CHECK(grouped_lane_use(grouped(2, 64, 64), 16) == 1.0);  // 32
  CHECK(grouped_lane_use(grouped(8, 64, 64), 16) == 0.5);  // 8 per group on 16 lanes
  CHECK(grouped_lane_use(grouped(8, 64, 64), 8) == 1.0);
  CHECK(grouped_lane_use(grouped(16, 64, 64), 16) == 0.25);
  CHECK(grouped_lane_use(grouped(16, 64, 64), 8) == 0.5);
  // 24 per group on 16 lanes: 72 x 24 useful of (32 + 48 + 32 + 24 + 24) x 16 executed.
  CHECK(grouped_lane_use(grouped(3, 72, 72), 16) == doctest::Approx(1728.0 / 2560.0));
  CHECK(grouped_lane_use(grouped(3, 72, 72), 8) == 1.0);
}

TEST_CASE("grouped conf: register blocks share exact ranges; reasons it refuses") {
  const Layout b16 = Layout::nChw16c, b8 = Layout::nChw8c;
  for (Isa isa : isas()) {
    const Layout b = blocked_layout(isa);
    const int simd = simd_width(isa);
    // 32 per group: up to 32 / simd output vectors share one range, never more.
    for (int64_t cpg : {8, 16, 24, 32}) {
      const ConvProblem p = grouped(4, 4 * cpg, 4 * cpg);
      auto c = init_grouped_conf_mode(p, impl(b, b), isa, convjit::GroupedMode::sparse);
      REQUIRE_MESSAGE(c, c.reason);
      const int ob = c.conf->d.oc_blocks;
      INFO(p.str() << " " << std::string(isa_name(isa)) << " ob " << ob);
      CHECK((cpg % simd == 0 ? (cpg / simd) % ob == 0 : ob == 1));
      CHECK(c.conf->icg == cpg);
      CHECK(c.conf->ranges.size() == size_t(c.conf->d.oc_groups));
      for (int64_t g = 0; g < c.conf->d.oc_groups; ++g)
        CHECK(c.conf->ranges[size_t(g)] == grouped_range(p, simd, ob, g));
      CHECK(c.conf->d.ic_chunk == c.conf->d.icb_total());  // no K split
      const std::string name = c.conf->name();             // e.g. ..._oh2ow8oc1__avx512 (row pairs)
      CHECK(name.rfind(
                std::string("conv_grouped_f32_") + layout_name(b) + "_to_" + layout_name(b) + "_",
                0) == 0);
      CHECK(name.find(std::string("oc") + std::to_string(ob) + "__" + isa_name(isa)) !=
            std::string::npos);
    }
    // A forced oc_blocks is kept even where it spans groups.
    auto forced = init_grouped_conf(grouped(8, 64, 64), impl(b, b, 2, 3), isa);
    REQUIRE_MESSAGE(forced, forced.reason);
    CHECK(forced.conf->d.oc_blocks == 3);
    CHECK(forced.conf->d.ur_w == 2);
  }
  const ConvProblem p = grouped(4, 64, 64);
  const Isa isa = isas().front();
  const Layout b = blocked_layout(isa);
  CHECK(init_grouped_conf(grouped(1, 64, 64), impl(b, b), isa).reason ==
        "groups == 1 (a dense conv)");
  CHECK(init_grouped_conf(grouped(3, 64, 64), impl(b, b), isa).reason ==
        "groups do not divide the channels");
  CHECK(init_grouped_conf(p, impl(Layout::nhwc, b), isa).reason.find("not blocked") !=
        std::string::npos);
  CHECK(init_grouped_conf(p, impl(b16, b16), Isa::avx2).reason.find("needs isa avx512") !=
        std::string::npos);
  if (testing::has_isa(Isa::avx512))
    CHECK(init_grouped_conf(p, impl(b8, b8), Isa::avx512).reason.find("needs isa avx2") !=
          std::string::npos);
  CHECK(init_grouped_conf(p, impl(b, b), Isa::scalar).reason.find("needs isa avx2 or avx512") !=
        std::string::npos);
}

TEST_CASE("grouped conf: the shuffle mode for equal narrow groups") {
  using convjit::grouped_shuffle_fits;
  CHECK(grouped_shuffle_fits(grouped(8, 64, 64), 16));       // 8 per group
  CHECK_FALSE(grouped_shuffle_fits(grouped(8, 64, 64), 8));  // a whole vector: sparse
  CHECK(grouped_shuffle_fits(grouped(16, 64, 64), 8));
  CHECK_FALSE(grouped_shuffle_fits(grouped(12, 72, 72), 16));  // 6: some permutes need 3 blocks
  CHECK(grouped_shuffle_fits(grouped(4, 96, 96), 16));         // 24: two blocks (vpermt2ps)
  CHECK_FALSE(grouped_shuffle_fits(grouped(4, 96, 96), 8));    // 24 on 8 lanes: sparse, exact
  // 24 per group on 16 lanes: vector 1 holds oc 16-23 (group 0) and 24-31 (group 1).
  const ConvProblem p24 = grouped(3, 72, 72);
  auto s1 = convjit::grouped_shuffle_sources(p24, 16, 1, false);
  REQUIRE(s1);
  CHECK((*s1)[0].a == 0);  // r = 0: channel 0 (block 0, lane 0), channel 24 (block 1, lane 8)
  CHECK((*s1)[0].b == 1);
  CHECK((*s1)[0].lanes == std::vector<int>{0, 0, 0, 0, 0, 0, 0, 0, 24, 24, 24, 24, 24, 24, 24, 24});
  CHECK((*s1)[10].b == 2);  // r = 10: channel 10 (block 0), channel 34 (block 2, lane 2)
  CHECK((*s1)[10].lanes ==
        std::vector<int>{10, 10, 10, 10, 10, 10, 10, 10, 18, 18, 18, 18, 18, 18, 18, 18});
  // The last vector (oc 64-71, group 2), relative to block 3: only real lanes read.
  auto last = convjit::grouped_shuffle_sources(p24, 16, 4, true);
  REQUIRE(last);
  CHECK((*last)[20].a == 1);  // channel 68: block 4, lane 4
  CHECK((*last)[20].b == 1);
  CHECK((*last)[20].lanes == std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK_FALSE(grouped_shuffle_fits(grouped(16, 64, 128), 16));  // 4 in, 8 out
  for (Isa isa : isas()) {
    const Layout b = blocked_layout(isa);
    const ConvProblem p = grouped(16, 64, 64);  // 4 per group: 8 x 8 output
    auto c = init_grouped_conf(p, impl(b, b), isa);
    REQUIRE_MESSAGE(c, c.reason);
    CHECK(c.conf->shuffle);
    CHECK(c.conf->ur_w == 8);
    CHECK(c.conf->name().find("_shuf4ow8__") != std::string::npos);
    CHECK(c.conf->d.oc_groups == 64 / simd_width(isa));  // one vector per tile row
    // Forced oc_blocks means sparse; a forced shuffle where it does not fit is refused.
    CHECK_FALSE(init_grouped_conf(p, impl(b, b, 0, 2), isa).conf->shuffle);
    CHECK(
        init_grouped_conf_mode(grouped(12, 72, 72), impl(b, b), isa, convjit::GroupedMode::shuffle)
            .reason.find("shuffle needs") != std::string::npos);
  }
  if (testing::has_isa(Isa::avx512)) {
    // 60 wide: index, permuted vector and 3 weights leave 27 accumulators -> 3 blocks of 20.
    ConvProblem wide =
        problem(pad({.ic = 64, .ih = 4, .iw = 60, .oc = 64, .kh = 3, .kw = 3}, 1, 1, 1, 1));
    wide.groups = 8;
    auto c = init_grouped_conf(wide, impl(Layout::nChw16c, Layout::nChw16c), Isa::avx512);
    REQUIRE(c);
    CHECK(c.conf->ur_w == 20);
    CHECK(c.conf->ow_blocks.size() == 3);
  }
}

TEST_CASE("grouped family row: offered for grouped convs only, blocked layouts") {
  const ConvFamilyRow& r = conv_family(ConvFamily::grouped);
  CHECK(std::string(r.name) == "grouped");
  CHECK(r.offered(grouped(4, 64, 64)));
  CHECK(r.offered(grouped(32, 32, 64)));  // one input channel per group, two outputs
  CHECK_FALSE(r.offered(grouped(1, 64, 64)));
  CHECK_FALSE(r.offered(grouped(64, 64, 64)));  // depthwise has its own family
  const auto pairs = r.layouts(grouped(4, 64, 64), Layout::nChw16c);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0] == std::pair{Layout::nChw16c, Layout::nChw16c});
  // The cost model's efficiency follows the lane use of the sparse mode (24 in, 16 out).
  CHECK(grouped_lane_use(grouped(4, 96, 64), 16) == 0.75);
  CHECK(r.efficiency(grouped(4, 96, 64), Layout::nChw16c, Layout::nChw16c) ==
        doctest::Approx(0.75 * r.efficiency(grouped(4, 64, 64), Layout::nChw16c, Layout::nChw16c)));
}

}  // namespace
}  // namespace kiln::convtest
