// The gemm1x1 conv family against the reference Conv, on both ISA paths, blocked and NHWC.
#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

ConvImpl gemm(Isa isa, bool nhwc, int ur = 0, int ob = 0) {
  const Layout l = nhwc ? Layout::nhwc : blocked_layout(isa);
  return conv_impl(ConvFamily::gemm1x1, l, l, ur, ob);
}

// tests/shapes/conv_gemm1x1.txt: channel tails, strides 1 and 2, bias on and off, batch 2.
TEST_CASE("gemm1x1 conv matches the reference, blocked and NHWC (both ISAs)") {
  const std::vector<ConvProblem> shapes = shapes::read_shapes("conv_gemm1x1");
  uint64_t seed = 1000;
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const ConvProblem& p : shapes) check_conv(p, gemm(isa, nhwc), isa, seed++);
}

TEST_CASE("gemm1x1 conv: forced register tiles and their tails") {
  uint64_t seed = 1100;
  const ConvProblem p1 = problem("ic37ih9iw11_oc45oh9ow11kh1kw1sh1sw1ph0pw0");
  const ConvProblem p2 = problem("ic37ih9iw11_oc45oh5ow6kh1kw1sh2sw2ph0pw0");
  for (Isa isa : isas()) {
    const std::vector<std::pair<int, int>> tiles =
        isa == Isa::avx512
            ? std::vector<std::pair<int, int>>{{1, 1}, {5, 3}, {7, 4}, {14, 2}, {28, 1}}
            : std::vector<std::pair<int, int>>{{1, 1}, {4, 3}, {6, 2}, {2, 5}, {14, 1}};
    for (bool nhwc : {false, true})
      for (auto [ur, ob] : tiles) {
        check_conv(p1, gemm(isa, nhwc, ur, ob), isa, seed++);
        check_conv(p2, gemm(isa, nhwc, ur, ob), isa, seed++);
      }
  }
}

TEST_CASE("gemm1x1 conv with fused post-op chains") {
  uint64_t seed = 1200;
  const std::vector<std::vector<PostOp>> chains = {
      chain({op(K::relu)}),
      chain({op(K::clip, 0.f, 6.f)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::add), op(K::sigmoid)}),
      chain({op(K::leaky_relu, 0.1f), op(K::add), op(K::swish)}),
  };
  const std::vector<std::string> shapes = {
      "ic19ih6iw7_oc21oh6ow7kh1kw1sh1sw1ph0pw0",
      "mb2ic32ih7iw7_oc40oh4ow4kh1kw1sh2sw2ph0pw0_nobias",
  };
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const auto& c : chains)
        for (const std::string& s : shapes) check_conv(problem(s, c), gemm(isa, nhwc), isa, seed++);
}

TEST_CASE("gemm1x1 conv with the input channels split across calls") {
  uint64_t seed = 1300;
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (bool with_chain : {false, true}) {
        const ConvProblem p =
            problem("ic75ih6iw9_oc35oh6ow9kh1kw1sh1sw1ph0pw0",
                    with_chain ? chain({op(K::add), op(K::relu)}) : std::vector<PostOp>{});
        for (int64_t chunk : {int64_t(1), int64_t(3)})
          for (bool m_outer : {false, true}) {
            convjit::Gemm1x1Force f;
            f.ic_chunk = chunk;
            f.m_outer = m_outer;
            auto c = convjit::init_gemm1x1_conf(p, gemm(isa, nhwc), isa, f);
            REQUIRE(c);
            const convjit::Gemm1x1Conf& conf = *c.conf;
            REQUIRE(conf.ic_chunk == chunk);
            Operands o = make_operands(p, seed++);
            auto k = convjit::make_gemm1x1_kernel(conf, o.w, &o.b);
            INFO(k->name() << " chunk " << chunk << " m_outer " << m_outer);
            std::string first;
            const Layout l = nhwc ? Layout::nhwc : blocked_layout(isa);
            CHECK(count_mismatches(run_kernel(*k, p, o, l, l), reference(p, o), p.ic, &first) == 0);
          }
      }
}

// Stride 2 with the strided pixels packed into a dense buffer first ("rtus") and without:
// pixel tails across output rows, channel tails, both loop orders (the buffer holds one chunk
// or the whole image), several chunks per image, a K split over the packed buffer, batch 2
// and fused chains with a residual add.
TEST_CASE("gemm1x1 conv stride 2: packed and strided input, tails, loop orders, K split") {
  uint64_t seed = 1500;
  const std::vector<std::string> shapes = {
      "ic37ih9iw11_oc45oh5ow6kh1kw1sh2sw2ph0pw0",  // 5x6 out: odd, tails
      "mb2ic64ih14iw14_oc48oh7ow7kh1kw1sh2sw2ph0pw0",
      "ic20ih15iw8_oc20oh8ow4kh1kw1sh2sw2ph0pw0_nobias",
  };
  const std::vector<std::vector<PostOp>> chains = {
      {}, chain({op(K::add), op(K::relu)}), chain({op(K::scale_shift), op(K::add)})};
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const std::string& s : shapes)
        for (const auto& ch : chains)
          for (int pack : {0, 1})
            for (int m_outer : {0, 1})
              for (int64_t chunk_blocks : {int64_t(-1), int64_t(1)})
                for (int64_t ic_chunk : {int64_t(-1), int64_t(1)}) {
                  const ConvProblem p = problem(s, ch);
                  convjit::Gemm1x1Force f;
                  f.pack = pack;
                  f.m_outer = m_outer;
                  f.chunk_blocks = chunk_blocks;
                  f.ic_chunk = ic_chunk;
                  // Small tiles so the 5x6 .. 7x7 outputs have several chunks and a tail.
                  auto c = convjit::init_gemm1x1_conf(p, gemm(isa, nhwc, 4, 2), isa, f);
                  REQUIRE(c);
                  REQUIRE(c.conf->pack == bool(pack));
                  Operands o = make_operands(p, seed++);
                  auto k = convjit::make_gemm1x1_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
                  INFO(k->name() << " " << p.str() << " pack " << pack << " m_outer " << m_outer
                                 << " chunk_blocks " << c.conf->chunk_blocks << " chunks "
                                 << c.conf->chunks << " ic_chunk " << c.conf->ic_chunk);
                  std::string first;
                  const Layout l = nhwc ? Layout::nhwc : blocked_layout(isa);
                  CHECK_MESSAGE(count_mismatches(run_kernel(*k, p, o, l, l), reference(p, o), p.ic,
                                                 &first) == 0,
                                first);
                }
}

// The AVX-512 register-broadcast variant of the microkernel (forced), against the reference.
TEST_CASE("gemm1x1 conv: AVX-512 register broadcast variant") {
  if (!testing::has_isa(Isa::avx512)) return;
  uint64_t seed = 1600;
  const std::vector<std::string> shapes = {
      "ic37ih9iw11_oc45oh9ow11kh1kw1sh1sw1ph0pw0",
      "ic40ih10iw10_oc70oh5ow5kh1kw1sh2sw2ph0pw0",
  };
  for (bool nhwc : {false, true})
    for (const std::string& s : shapes)
      for (auto [ur, ob] : std::vector<std::pair<int, int>>{{6, 4}, {9, 3}, {13, 2}, {1, 1}}) {
        const ConvProblem p = problem(s, chain({op(K::add), op(K::relu)}));
        convjit::Gemm1x1Force f;
        f.bcast_reg = 1;
        auto c = convjit::init_gemm1x1_conf(p, gemm(Isa::avx512, nhwc, ur, ob), Isa::avx512, f);
        REQUIRE(c);
        REQUIRE(c.conf->bcast_reg);
        Operands o = make_operands(p, seed++);
        auto k = convjit::make_gemm1x1_kernel(*c.conf, o.w, &o.b);
        INFO(k->name() << " " << p.str());
        std::string first;
        const Layout l = nhwc ? Layout::nhwc : Layout::nChw16c;
        CHECK_MESSAGE(
            count_mismatches(run_kernel(*k, p, o, l, l), reference(p, o), p.ic, &first) == 0,
            first);
      }
}

// Software prefetches of the next tile's src / dst lines (forced) leave the results unchanged.
TEST_CASE("gemm1x1 conv: prefetch variants") {
  uint64_t seed = 1700;
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (int pfs : {0, 1})
        for (int pfd : {0, 1})
          for (int pfn : {0, 1}) {
            const ConvProblem p = problem("ic37ih9iw11_oc45oh9ow11kh1kw1sh1sw1ph0pw0",
                                          chain({op(K::add), op(K::relu)}));
            convjit::Gemm1x1Force f;
            f.pf_src = pfs;
            f.pf_dst = pfd;
            f.pf_next = pfn;
            f.pf_ahead = pfs + 2 * pfd;  // 0 .. 3 blocks ahead (one past the end included)
            f.m_outer = pfn ? 0 : -1;    // the next group's weights are walked with groups outer
            f.pf_every = pfs ? 4 : 1;
            auto c = convjit::init_gemm1x1_conf(p, gemm(isa, nhwc), isa, f);
            REQUIRE(c);
            Operands o = make_operands(p, seed++);
            auto k = convjit::make_gemm1x1_kernel(*c.conf, o.w, &o.b);
            INFO(k->name() << " pf_src " << pfs << " pf_dst " << pfd << " pf_next " << pfn
                           << " pf_ahead " << c.conf->pf_ahead);
            std::string first;
            const Layout l = nhwc ? Layout::nhwc : blocked_layout(isa);
            CHECK_MESSAGE(
                count_mismatches(run_kernel(*k, p, o, l, l), reference(p, o), p.ic, &first) == 0,
                first);
          }
}

// The conf prefetches a tile's src blocks ahead exactly where its K blocks are channel planes
// apart (blocked, unpacked, more than one block): there the hardware prefetcher does not.
TEST_CASE("gemm1x1 conf: src blocks prefetched ahead only where they are planes apart") {
  const ConvProblem s1 = problem("ic64ih14iw14_oc64oh14ow14kh1kw1sh1sw1ph0pw0");
  const ConvProblem one_block = problem("ic8ih14iw14_oc64oh14ow14kh1kw1sh1sw1ph0pw0");
  const ConvProblem s2 = problem("ic64ih14iw14_oc64oh7ow7kh1kw1sh2sw2ph0pw0");
  for (Isa isa : isas()) {
    auto pf = [&](const ConvProblem& p, bool nhwc, int pack) {
      convjit::Gemm1x1Force f;
      f.pack = pack;
      auto c = convjit::init_gemm1x1_conf(p, gemm(isa, nhwc), isa, f);
      REQUIRE(c);
      return c.conf->pf_ahead;
    };
    INFO(std::string(isa_name(isa)));
    CHECK(pf(s1, false, -1) > 0);
    CHECK(pf(s2, false, 0) > 0);  // strided, read in place
    CHECK(pf(s1, true, -1) == 0);
    CHECK(pf(one_block, false, -1) == 0);
    CHECK(pf(s2, false, 1) == 0);  // packed: the chunk is in L1
  }
}

// Full-size ResNet-50 shapes with the blockings, loop orders and K splits init_conf picks for
// them (the benchmark's kernels), on both ISAs.
TEST_CASE("conv families on ResNet-50 shapes with their chosen plans") {
  uint64_t seed = 1400;
  auto d = [](Isa isa, Layout src) {
    ConvImpl i;
    i.src = src;
    i.dst = blocked_layout(isa);
    return i;
  };
  for (Isa isa : isas()) {
    // conv1 (NCHW src), 3x3 with 2-row blocks, 3x3 stride 2.
    check_conv(problem("ic3ih224iw224_oc64oh112ow112kh7kw7sh2sw2ph3pw3", chain({op(K::relu)})),
               d(isa, Layout::nchw), isa, seed++);
    check_conv(problem("ic512ih7iw7_oc64oh7ow7kh3kw3sh1sw1ph1pw1"), d(isa, blocked_layout(isa)),
               isa, seed++);
    check_conv(problem("ic128ih56iw56_oc32oh28ow28kh3kw3sh2sw2ph1pw1"), d(isa, blocked_layout(isa)),
               isa, seed++);
    // 1x1: K split over pixel chunks (512 -> 128 at 28), NHWC with 1024 channels, stride 2.
    for (bool nhwc : {false, true}) {
      check_conv(problem("ic512ih28iw28_oc128oh28ow28kh1kw1sh1sw1ph0pw0",
                         chain({op(K::add), op(K::relu)})),
                 gemm(isa, nhwc), isa, seed++);
      check_conv(problem("ic1024ih14iw14_oc64oh14ow14kh1kw1sh1sw1ph0pw0"), gemm(isa, nhwc), isa,
                 seed++);
      check_conv(problem("ic256ih56iw56_oc64oh28ow28kh1kw1sh2sw2ph0pw0"), gemm(isa, nhwc), isa,
                 seed++);
    }
  }
}

}  // namespace
}  // namespace kiln::convtest
