// init_conf of the conv families on their own: applicability reasons, blocking choices,
// output-width plans and kernel names (expectations hand-computed).
#include <cstring>
#include <memory>
#include <set>

#include "isa_coverage.h"
#include "jit/conv/conv_direct_conf.h"
#include "jit/conv/conv_families.h"
#include "jit/conv/conv_gemm1x1_conf.h"
#include "jit/shared_code.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using convjit::init_direct_conf;
using convjit::init_gemm1x1_conf;
using convjit::OwBlock;

// The choices checked below assume a 48 KB L1d and a 1 MB L2 (CacheSizes{}), whatever the host.
ConvImpl impl(ConvFamily f, Layout src, Layout dst, int ur = 0, int ob = 0) {
  ConvImpl i = conv_impl(f, src, dst, ur, ob);
  i.cache = CacheSizes{};
  return i;
}

const ConvImpl kDirect16 = impl(ConvFamily::direct, Layout::nChw16c, Layout::nChw16c);
const ConvImpl kDirect8 = impl(ConvFamily::direct, Layout::nChw8c, Layout::nChw8c);

using OwBlocks = std::vector<OwBlock>;

// A 3x3 stride-1 conv with padding 1 on a square hw x hw input.
ConvProblem conv3x3(int64_t ic, int64_t hw, int64_t oc) {
  return problem(pad({.ic = ic, .ih = hw, .iw = hw, .oc = oc, .kh = 3, .kw = 3}, 1, 1, 1, 1));
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("conv init_conf: reasons for problems a family cannot run") {
  ConvProblem p3 = conv3x3(32, 8, 32);
  ConvProblem g2 = p3;
  g2.groups = 2;
  CHECK(init_direct_conf(g2, kDirect16, Isa::avx512).reason == "groups > 1");
  CHECK(init_gemm1x1_conf(g2, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), Isa::avx512)
            .reason == "groups > 1");
  CHECK(init_gemm1x1_conf(p3, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), Isa::avx2)
            .reason == "needs 1x1 kernel");
  // Blocked layout with the wrong isa, both ways.
  CHECK(has(init_direct_conf(p3, kDirect16, Isa::avx2).reason, "needs isa avx512"));
  CHECK(has(init_direct_conf(p3, kDirect8, Isa::avx512).reason, "needs isa avx2"));
  CHECK(has(
      init_direct_conf(p3, impl(ConvFamily::direct, Layout::nChw8c, Layout::nChw16c), Isa::avx512)
          .reason,
      "needs isa avx2"));
  CHECK(
      has(init_direct_conf(p3, impl(ConvFamily::direct, Layout::nChw16c, Layout::nchw), Isa::avx512)
              .reason,
          "not blocked"));
  // NHWC dst: whole channel vectors only.
  ConvProblem oc20 = conv3x3(32, 8, 20);
  CHECK(
      has(init_direct_conf(oc20, impl(ConvFamily::direct, Layout::nchw, Layout::nhwc), Isa::avx512)
              .reason,
          "nhwc dst needs oc a multiple of 16"));
  CHECK(init_direct_conf(p3, kDirect16, Isa::scalar).reason == "needs isa avx2 or avx512");

  ConvProblem p1 = problem("ic32ih8iw8_oc32oh8ow8kh1kw1sh1sw1ph0pw0");
  CHECK(init_gemm1x1_conf(p1, impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nhwc), Isa::avx512)
            .reason == "src and dst layouts differ (both nhwc or both blocked)");
  CHECK(has(
      init_gemm1x1_conf(p1, impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c), Isa::avx2)
          .reason,
      "needs isa avx512"));
  ConvProblem padded = problem("ic32ih8iw8_oc32oh9ow8kh1kw1sh1sw1pt1pl0pb0pr0");
  CHECK(
      init_gemm1x1_conf(padded, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), Isa::avx512)
          .reason == "needs zero padding");
  ConvProblem s3 = problem("ic32ih9iw9_oc32oh3ow3kh1kw1sh3sw3ph0pw0");
  CHECK(
      has(init_gemm1x1_conf(s3, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), Isa::avx512)
              .reason,
          "stride"));
  // Forced blocking beyond the register file: 8 x 3 = 24 accumulators > 16 ymm.
  CHECK(has(init_direct_conf(p3, impl(ConvFamily::direct, Layout::nChw8c, Layout::nChw8c, 8, 3),
                             Isa::avx2)
                .reason,
            "exceeds"));
  // A wrong output shape is a reason, not a crash.
  ConvProblem bad = p3;
  bad.ow = 9;
  CHECK(init_direct_conf(bad, kDirect16, Isa::avx512).reason ==
        "output shape does not match the window");
}

TEST_CASE("conv create_conv_kernel: reasons for bad operands") {
  ConvProblem p = conv3x3(8, 4, 8);
  Tensor w(DType::f32, {8, 8, 1, 1}), b(DType::f32, {8});
  std::string why;
  CHECK(create_conv_kernel(p, kDirect8, Isa::avx2, w, &b, &why) == nullptr);
  CHECK(has(why, "weights"));
  Tensor w3(DType::f32, {8, 8, 3, 3});
  CHECK(create_conv_kernel(p, kDirect8, Isa::avx2, w3, nullptr, &why) == nullptr);
  CHECK(has(why, "bias"));
  CHECK(create_conv_kernel(p, kDirect8, Isa::avx2, w3, &b, &why) != nullptr);
}

TEST_CASE("conv init_conf: output-width plans (edges, interior loop, tail)") {
  // 3x3 pad 1 on 56 columns in blocks of 14: left edge, 2 interior blocks, right edge.
  ConvProblem p = problem("ic16ih56iw56_oc16oh56ow56kh3kw3sh1sw1ph1pw1");
  CHECK(convjit::plan_ow_blocks(p, 14) ==
        OwBlocks{{0, 14, 1, false}, {14, 14, 2, true}, {42, 14, 1, false}});
  // 15 columns in blocks of 4: edge, 2 interior, a 3-pixel tail touching the right pad.
  ConvProblem q = problem("ic16ih15iw15_oc16oh15ow15kh3kw3sh1sw1ph1pw1");
  CHECK(convjit::plan_ow_blocks(q, 4) ==
        OwBlocks{{0, 4, 1, false}, {4, 4, 2, true}, {12, 3, 1, false}});
  // ResNet conv1: 7x7 s2 pad 3, 224 -> 112: column 98 + 13 reads up to 2*111-3+6 = 225.
  ConvProblem c1 = problem("ic3ih224iw224_oc64oh112ow112kh7kw7sh2sw2ph3pw3");
  CHECK(convjit::plan_ow_blocks(c1, 14) ==
        OwBlocks{{0, 14, 1, false}, {14, 14, 6, true}, {98, 14, 1, false}});
  // No padding: one interior loop.
  ConvProblem u = problem("ic16ih8iw8_oc16oh8ow8kh1kw1sh1sw1ph0pw0");
  CHECK(convjit::plan_ow_blocks(u, 4) == OwBlocks{{0, 4, 2, true}});
}

TEST_CASE("conv init_conf: register blocking fits and uses the register file") {
  for (int64_t ow : {56, 28, 14, 7}) {
    ConvProblem p = conv3x3(64, ow, 512);
    auto c = init_direct_conf(p, kDirect16, Isa::avx512);
    REQUIRE(c);
    INFO("ow " << ow << " blocking " << c.conf->blocking_str());
    const int accs = c.conf->ur_h * c.conf->ur_w * c.conf->oc_blocks;
    CHECK(accs >= 14);  // enough chains to hide the FMA latency
    CHECK(accs + c.conf->oc_blocks <= 32);
    CHECK(ow % c.conf->ur_w == 0);  // no output-width tail on these widths
    auto c2 = init_direct_conf(p, kDirect8, Isa::avx2);
    REQUIRE(c2);
    const int accs2 = c2.conf->ur_h * c2.conf->ur_w * c2.conf->oc_blocks;
    CHECK(accs2 >= 8);
    CHECK(accs2 + c2.conf->oc_blocks + 1 <= 16);  // + the broadcast register
    CHECK(accs2 >= 12);
  }
  // ow 7 on AVX-512: 2 rows x 7 pixels x 1 vector (7 x 1 cannot hide the FMA latency; more
  // vectors per pixel cost more loads with embedded broadcasts).
  ConvProblem p7 = conv3x3(512, 7, 512);
  auto c7 = init_direct_conf(p7, kDirect16, Isa::avx512);
  REQUIRE(c7);
  CHECK(c7.conf->blocking_str() == "oh2ow7oc1");
  CHECK_FALSE(c7.conf->rows_outer);  // row pairs are formed along the rows of one group
  // With a post-op chain the epilogue's 4 scratch registers are reserved too.
  ConvProblem pe = p7;
  pe.post = chain({op(PostOp::Kind::swish)});
  auto ce = init_direct_conf(pe, kDirect8, Isa::avx2);
  REQUIRE(ce);
  CHECK(ce.conf->ur_w * ce.conf->oc_blocks + 4 <= 16);
}

TEST_CASE("conv init_conf: forced values, tails and derived counts") {
  ConvProblem p = problem("mb2ic17ih10iw10_oc40oh10ow10kh3kw3sh1sw1ph1pw1");
  auto c = init_direct_conf(p, impl(ConvFamily::direct, Layout::nChw16c, Layout::nChw16c, 5, 2),
                            Isa::avx512);
  REQUIRE(c);
  const auto& d = *c.conf;
  CHECK(d.ur_w == 5);
  CHECK(d.oc_blocks == 2);
  CHECK(d.icb_full == 1);
  CHECK(d.ic_tail == 1);
  CHECK(d.ocb == 3);        // 40 -> 48 = 3 x 16
  CHECK(d.oc_groups == 2);  // 2 + 1
  CHECK(d.oc_blocks_last == 1);
  CHECK(d.last_group_own);
  // A forced ur_w wider than the output is clamped to it.
  auto w = init_direct_conf(p, impl(ConvFamily::direct, Layout::nChw16c, Layout::nChw16c, 20, 1),
                            Isa::avx512);
  REQUIRE(w);
  CHECK(w.conf->ur_w == 10);

  // gemm1x1: stride 1 runs the image as one line; stride 2 packed as one line too, or (not
  // packed) row by row.
  ConvProblem g1 = problem("ic24ih7iw7_oc20oh7ow7kh1kw1sh1sw1ph0pw0");
  auto a = init_gemm1x1_conf(g1, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc, 10, 1),
                             Isa::avx2);
  REQUIRE(a);
  CHECK(a.conf->m_len == 49);
  CHECK(a.conf->m_lines == 1);
  CHECK(a.conf->m_tail == 9);
  CHECK(a.conf->icb_full == 3);
  CHECK(a.conf->ic_tail == 0);
  CHECK(a.conf->ocv == 3);  // 20 -> 3 x 8
  CHECK(a.conf->last_group_own);
  ConvProblem g2 = problem("ic24ih7iw7_oc16oh4ow4kh1kw1sh2sw2ph0pw0");
  auto b =
      init_gemm1x1_conf(g2, impl(ConvFamily::gemm1x1, Layout::nChw8c, Layout::nChw8c), Isa::avx2);
  REQUIRE(b);
  CHECK(b.conf->pack);
  CHECK(b.conf->m_len == 16);  // 4 x 4 packed pixels
  CHECK(b.conf->m_lines == 1);
  CHECK_FALSE(b.conf->last_group_own);
  convjit::Gemm1x1Force unpacked;
  unpacked.pack = 0;
  auto u = init_gemm1x1_conf(g2, impl(ConvFamily::gemm1x1, Layout::nChw8c, Layout::nChw8c),
                             Isa::avx2, unpacked);
  REQUIRE(u);
  CHECK_FALSE(u.conf->pack);
  CHECK(u.conf->m_len == 4);
  CHECK(u.conf->m_lines == 4);
}

TEST_CASE("gemm1x1 init_conf: stride-2 packed buffer geometry") {
  // 1024 -> 2048 at 14x14 stride 2: 8 MB of weights -> groups outer, the buffer holds the
  // whole 7x7 image; NHWC rows of 4 KB are padded to 65 lines.
  ConvProblem p = problem("ic1024ih14iw14_oc2048oh7ow7kh1kw1sh2sw2ph0pw0");
  auto c = init_gemm1x1_conf(p, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), Isa::avx512);
  REQUIRE(c);
  CHECK(c.conf->pack);
  CHECK_FALSE(c.conf->m_outer);
  CHECK(c.conf->pack_pix == 49);
  CHECK(c.conf->pack_pix_bytes == 65 * 64);
  CHECK(c.conf->src_kb_bytes() == 64);
  // 256 -> 512 at 56x56 stride 2, blocked: weights fit L2 -> the buffer holds one chunk.
  ConvProblem q = problem("ic256ih56iw56_oc512oh28ow28kh1kw1sh2sw2ph0pw0");
  auto d = init_gemm1x1_conf(q, impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c),
                             Isa::avx512);
  REQUIRE(d);
  CHECK(d.conf->m_outer);
  CHECK(d.conf->m_len == 28 * 28);
  CHECK(d.conf->pack_pix == d.conf->chunk_blocks * d.conf->ur_m + d.conf->m_tail);
  CHECK(d.conf->src_kb_bytes() == d.conf->pack_pix * 64);
  // 12 channels (48 bytes) stay dense.
  ConvProblem r = problem("ic12ih8iw8_oc16oh4ow4kh1kw1sh2sw2ph0pw0");
  auto e = init_gemm1x1_conf(r, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), Isa::avx2);
  REQUIRE(e);
  CHECK(e.conf->pack_pix_bytes == 48);
}

TEST_CASE("conv init_conf: weights beyond L2 split the input channels") {
  // 2048 input channels x 3x3 x 2 oc vectors = 2.3 MB of weights per group.
  ConvProblem p = problem("ic2048ih7iw7_oc64oh7ow7kh3kw3sh1sw1ph1pw1");
  auto c = init_direct_conf(p, impl(ConvFamily::direct, Layout::nChw16c, Layout::nChw16c, 7, 2),
                            Isa::avx512);
  REQUIRE(c);
  const int64_t icb_bytes = 9 * 16 * 2 * 16 * 4;      // kh kw x 16 ic x 2 x 16 oc floats
  CHECK(c.conf->ic_chunk == 384 * 1024 / icb_bytes);  // 21 blocks
  CHECK_FALSE(c.conf->rows_outer);
  // Small weights: no split.
  ConvProblem q = conv3x3(64, 7, 64);
  auto d = init_direct_conf(q, kDirect16, Isa::avx512);
  REQUIRE(d);
  CHECK(d.conf->ic_chunk == d.conf->icb_total());
}

TEST_CASE("gemm1x1 init_conf: loop order, pixel chunks and K split") {
  const ConvImpl nchw16 = impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c, 28, 1);
  // 512 -> 64 at 14x14: all weights (128 KB) fit L2 -> pixel chunk outer; one 28-pixel tile of
  // src is 56 KB > the 32 KB L1 share -> input channels in slices of 32768 / (4*28*16) = 18
  // blocks.
  ConvProblem a = problem("ic512ih14iw14_oc64oh14ow14kh1kw1sh1sw1ph0pw0");
  auto ca = init_gemm1x1_conf(a, nchw16, Isa::avx512);
  REQUIRE(ca);
  CHECK(ca.conf->m_outer);
  CHECK(ca.conf->chunk_blocks == 1);
  CHECK(ca.conf->chunks == 7);  // 196 / 28
  CHECK(ca.conf->ic_chunk == 18);
  // 64 -> 64 at 56x56: a 28-pixel tile is 7 KB -> 4 tiles per chunk (32 KB), no split.
  ConvProblem b = problem("ic64ih56iw56_oc64oh56ow56kh1kw1sh1sw1ph0pw0");
  auto cb = init_gemm1x1_conf(b, nchw16, Isa::avx512);
  REQUIRE(cb);
  CHECK(cb.conf->chunk_blocks == 4);
  CHECK(cb.conf->chunks == 28);  // 112 tiles / 4
  CHECK(cb.conf->ic_chunk == cb.conf->icb_total());
  // 1024 -> 1024: 4 MB of weights -> group outer, no split.
  ConvProblem d = problem("ic1024ih14iw14_oc1024oh14ow14kh1kw1sh1sw1ph0pw0");
  auto cd = init_gemm1x1_conf(d, nchw16, Isa::avx512);
  REQUIRE(cd);
  CHECK_FALSE(cd.conf->m_outer);
  CHECK(cd.conf->ic_chunk == cd.conf->icb_total());
}

TEST_CASE("gemm1x1 init_conf: NHWC tiles avoid crowding one L1 set") {
  // One oc vector per tile (forced) so that wide pixel tiles are the model's choice.
  const ConvImpl nhwc_ob1 = impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc, 0, 1);
  // 1024 channels: pixels 4 KB apart share one L1 set -> at most 10 pixels per tile.
  ConvProblem p = problem("ic1024ih14iw14_oc256oh14ow14kh1kw1sh1sw1ph0pw0");
  auto c = init_gemm1x1_conf(p, nhwc_ob1, Isa::avx512);
  REQUIRE(c);
  CHECK(c.conf->ur_m <= 10);
  // 64 channels (256 B apart): 28 pixels spread over 28 sets, no limit.
  ConvProblem q = problem("ic64ih56iw56_oc64oh56ow56kh1kw1sh1sw1ph0pw0");
  auto d = init_gemm1x1_conf(q, nhwc_ob1, Isa::avx512);
  REQUIRE(d);
  CHECK(d.conf->ur_m > 10);
}

TEST_CASE("gemm1x1 init_conf: register broadcast tiles on AVX-512") {
  // The model prefers fewer loads per FMA: 6 pixels x 4 oc vectors with the src broadcast
  // into a register (10 loads per 24 FMAs) over 28 x 1 with embedded broadcasts (29 per 28).
  ConvProblem p = problem("ic256ih56iw56_oc64oh56ow56kh1kw1sh1sw1ph0pw0");
  auto c = init_gemm1x1_conf(p, impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c),
                             Isa::avx512);
  REQUIRE(c);
  CHECK(c.conf->ur_m == 6);
  CHECK(c.conf->ur_n == 4);
  CHECK(c.conf->bcast_reg);
  // One oc vector keeps the embedded broadcast (fewer uops); forcing overrides it.
  auto e = init_gemm1x1_conf(p, impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c, 28, 1),
                             Isa::avx512);
  REQUIRE(e);
  CHECK_FALSE(e.conf->bcast_reg);
  convjit::Gemm1x1Force f;
  f.bcast_reg = 0;
  auto g = init_gemm1x1_conf(p, impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c, 6, 4),
                             Isa::avx512, f);
  REQUIRE(g);
  CHECK_FALSE(g.conf->bcast_reg);
  // Every blocking leaves the registers the tile, weights, broadcast and epilogue need.
  for (Isa isa : isas())
    for (int64_t oc : {16, 48, 64, 200, 2048}) {
      ConvProblem q = problem({.ic = 64, .ih = 7, .iw = 7, .oc = oc});
      auto h = init_gemm1x1_conf(q, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), isa);
      REQUIRE(h);
      const bool reg = h.conf->bcast_reg || isa != Isa::avx512;
      CHECK(h.conf->ur_m * h.conf->ur_n + h.conf->ur_n + (reg ? 1 : 0) <=
            (isa == Isa::avx512 ? 32 : 16));
    }
}

TEST_CASE("conv init_conf: next-group weight prefetch for weights read cold, not for tiny ones") {
  const ConvImpl g16 = impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c);
  // 1x1 512 -> 2048 at 7x7: 4 MB of weights -> groups outer, prefetched.
  auto a =
      init_gemm1x1_conf(problem("ic512ih7iw7_oc2048oh7ow7kh1kw1sh1sw1ph0pw0"), g16, Isa::avx512);
  REQUIRE(a);
  CHECK_FALSE(a.conf->m_outer);
  CHECK(a.conf->pf_next);
  // 2048 -> 512: groups of at most 256 KB of weights (2048 ic x 2 vectors x 64 B).
  auto b =
      init_gemm1x1_conf(problem("ic2048ih7iw7_oc512oh7ow7kh1kw1sh1sw1ph0pw0"), g16, Isa::avx512);
  REQUIRE(b);
  CHECK(b.conf->ur_n <= 2);
  // 1024 -> 256 at 14x14: 1 MB, beyond the 512 KB L2 share -> groups outer, prefetched.
  auto c = init_gemm1x1_conf(problem("ic1024ih14iw14_oc256oh14ow14kh1kw1sh1sw1ph0pw0"), g16,
                             Isa::avx512);
  REQUIRE(c);
  CHECK_FALSE(c.conf->m_outer);
  CHECK(c.conf->pf_next);
  // 256 -> 128 at 56x56: 128 KB -> pixel chunks outer; the first chunk's sweep prefetches.
  auto f =
      init_gemm1x1_conf(problem("ic256ih56iw56_oc128oh56ow56kh1kw1sh1sw1ph0pw0"), g16, Isa::avx512);
  REQUIRE(f);
  CHECK(f.conf->m_outer);
  CHECK(f.conf->n_groups > 1);
  CHECK(f.conf->pf_next);
  // 32 -> 64: 8 KB, below 64 KB -> no prefetch.
  auto g =
      init_gemm1x1_conf(problem("ic32ih56iw56_oc64oh56ow56kh1kw1sh1sw1ph0pw0"), g16, Isa::avx512);
  REQUIRE(g);
  CHECK_FALSE(g.conf->pf_next);
  // Direct 3x3 512 at 7x7 (9.4 MB) and 256 at 14x14 (2.4 MB): groups outer, prefetched.
  auto d = init_direct_conf(conv3x3(512, 7, 512), kDirect16, Isa::avx512);
  REQUIRE(d);
  CHECK_FALSE(d.conf->rows_outer);
  CHECK(d.conf->pf_next);
  auto e = init_direct_conf(conv3x3(256, 14, 256), kDirect16, Isa::avx512);
  REQUIRE(e);
  CHECK_FALSE(e.conf->rows_outer);
  CHECK(e.conf->pf_next);
  // 3x3 64 at 56x56 (144 KB) with rows outer: the first row's sweep prefetches; 3x3 16 -> 32
  // (18 KB): not.
  auto h = init_direct_conf(conv3x3(64, 56, 64), kDirect16, Isa::avx512);
  REQUIRE(h);
  CHECK(h.conf->rows_outer);
  CHECK(h.conf->oc_groups > 1);
  CHECK(h.conf->pf_next);
  auto k = init_direct_conf(conv3x3(16, 56, 32), kDirect16, Isa::avx512);
  REQUIRE(k);
  CHECK_FALSE(k.conf->pf_next);
}

TEST_CASE("conv kernel names and tile counts") {
  ConvProblem p = problem("mb2ic16ih10iw28_oc64oh10ow28kh3kw3sh1sw1ph1pw1");
  Tensor w = random_tensor({64, 16, 3, 3}, 1), b = random_tensor({64}, 2);
  std::string why;
  for (Isa isa : isas()) {
    if (isa != Isa::avx512) continue;
    auto k = create_conv_kernel(
        p, impl(ConvFamily::direct, Layout::nChw16c, Layout::nChw16c, 14, 2), isa, w, &b, &why);
    REQUIRE(k);
    CHECK(k->name() == "conv_direct_f32_nChw16c_to_nChw16c_ow14oc2__avx512");
    CHECK(k->tiles() == 2 * 2 * 10);  // n x oc groups (64 / 32) x rows
    CHECK(k->macs() == doctest::Approx(2.0 * 64 * 10 * 28 * 16 * 9));
  }
  if (testing::has_isa(Isa::avx2)) {
    ConvProblem q = problem("ic16ih10iw28_oc64oh10ow28kh1kw1sh1sw1ph0pw0");
    Tensor w1 = random_tensor({64, 16, 1, 1}, 3);
    auto k = create_conv_kernel(q, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc, 6, 2),
                                Isa::avx2, w1, &b, &why);
    REQUIRE(k);
    CHECK(k->name() == "conv_gemm1x1_f32_nhwc_to_nhwc_m6oc2__avx2");
  }
}

TEST_CASE("conv init_conf: the cache budgets follow the cache sizes of the hardware model") {
  if (!testing::has_isa(Isa::avx512)) return;
  // 1x1 1024 -> 256 at 14x14 has 1 MB of weights: beyond half of a 1 MB L2 (groups outer), within
  // half of a 4 MB L2 (pixel chunks outer, all weights stay in L2).
  const ConvProblem p = problem({.ic = 1024, .ih = 14, .iw = 14, .oc = 256});
  ConvImpl g16 = impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c);
  auto small = init_gemm1x1_conf(p, g16, Isa::avx512);
  g16.cache.l2 = 4 << 20;
  auto big = init_gemm1x1_conf(p, g16, Isa::avx512);
  REQUIRE(small);
  REQUIRE(big);
  CHECK_FALSE(small.conf->m_outer);
  CHECK(big.conf->m_outer);
  // Direct 3x3 2048 -> 32 at 7x7: 2.3 MB of weights in one group, split along the input
  // channels above 3/4 of L2 (into chunks of 3/8): split with a 1 MB L2, not with 4 MB.
  const ConvProblem q = problem({.ic = 2048,
                                 .ih = 7,
                                 .iw = 7,
                                 .oc = 32,
                                 .kh = 3,
                                 .kw = 3,
                                 .pt = 1,
                                 .pl = 1,
                                 .pb = 1,
                                 .pr = 1});
  ConvImpl d = kDirect16;
  auto d1 = init_direct_conf(q, d, Isa::avx512);
  d.cache.l2 = 4 << 20;
  auto d4 = init_direct_conf(q, d, Isa::avx512);
  REQUIRE(d1);
  REQUIRE(d4);
  CHECK(d1.conf->ic_chunk < d1.conf->icb_total());
  CHECK(d4.conf->ic_chunk > d1.conf->ic_chunk);
}

TEST_CASE("hardware model: detected once, consistent with the ISA and the OS") {
  const CpuInfo& c = host_cpu();
  CHECK(&c == &host_cpu());
  CHECK(c.isa == detect_isa());
  CHECK(c.cores >= 1);
  CHECK(c.cache.l1d >= 4096);
  CHECK(c.cache.l2 >= c.cache.l1d);
  // Reduced-precision AVX-512 units are only reported with AVX-512 itself, AMX only with OS
  // tile state, and a permission only where there are tiles.
  if (c.isa != Isa::avx512) CHECK_FALSE((c.avx512_bf16 || c.avx512_vnni || c.avx512_fp16));
  if (!c.amx_bf16 && !c.amx_int8) CHECK_FALSE(c.amx_permitted);
  const std::string s = c.summary();
  CHECK(s.find(c.vendor) != std::string::npos);
  CHECK(s.find(isa_name(c.isa)) != std::string::npos);
  CHECK(s.find(" L2 " + std::to_string(c.cache.l2 >> 10) + "K") != std::string::npos);
  MESSAGE("host: ", s, ", ", c.cores, " cores", c.amx_permitted ? ", AMX permitted" : "");
}

TEST_CASE(
    "conv family table: one row per family, names parse back, offered where the conf applies") {
  std::set<std::string> names;
  for (int f = 0; f < kNumConvFamilies; ++f) {
    const ConvFamilyRow& r = conv_family(ConvFamily(f));
    CHECK(int(r.id) == f);
    CHECK(names.insert(r.name).second);
    CHECK(parse_conv_family(r.name) == ConvFamily(f));
    CHECK(std::string(conv_family_name(ConvFamily(f))) == r.name);
  }
  CHECK(conv_families().size() == size_t(kNumConvFamilies));
  CHECK_FALSE(parse_conv_family("winograd3").has_value());
  if (!testing::has_isa(Isa::avx512)) return;  // the confs below are asked for AVX-512
  // A family the table does not offer for a problem must not be able to run it either (the
  // runtime would never try), and every offered layout pair is one the conf accepts or
  // explains: over a spread of shapes, offered(p) is never stricter than init_conf.
  const std::vector<ConvProblem> probs = {
      problem({.ic = 64, .ih = 14, .iw = 14, .oc = 64}),
      problem({.ic = 64,
               .ih = 14,
               .iw = 14,
               .oc = 128,
               .kh = 3,
               .kw = 3,
               .pt = 1,
               .pl = 1,
               .pb = 1,
               .pr = 1}),
      problem({.ic = 3, .ih = 32, .iw = 32, .oc = 32, .kh = 7, .kw = 7, .sh = 2, .sw = 2}),
      problem({.ic = 128, .ih = 28, .iw = 28, .oc = 64, .sh = 2, .sw = 2}),
  };
  for (const ConvProblem& p : probs) {
    int offered = 0;
    for (const ConvFamilyRow& r : conv_families()) {
      if (!r.offered(p)) continue;
      ++offered;
      for (const auto& [s, d] : r.layouts(p, Layout::nChw16c)) {
        ConvImpl i = impl(r.id, s, d);
        CHECK_MESSAGE(r.efficiency(p, s, d) > 0, r.name);
        if (r.id == ConvFamily::direct)
          CHECK_MESSAGE(init_direct_conf(p, i, Isa::avx512), p.str(), " ", r.name);
        if (r.id == ConvFamily::gemm1x1)
          CHECK_MESSAGE(init_gemm1x1_conf(p, i, Isa::avx512), p.str(), " ", r.name);
      }
    }
    CHECK_MESSAGE(offered >= 2, p.str());  // direct and im2col run every dense conv
  }
  ConvProblem grouped = problem({.ic = 64, .ih = 8, .iw = 8, .oc = 64, .kh = 3, .kw = 3});
  grouped.groups = 4;  // grouped, not depthwise: the grouped family only
  for (const ConvFamilyRow& r : conv_families())
    CHECK_MESSAGE(r.offered(grouped) == (r.id == ConvFamily::grouped), r.name);
  ConvProblem dw = problem({.ic = 32, .ih = 8, .iw = 8, .oc = 32, .kh = 3, .kw = 3});
  dw.groups = 32;
  CHECK(conv_family(ConvFamily::depthwise).offered(dw));
  CHECK_FALSE(conv_family(ConvFamily::direct).offered(dw));
}

TEST_CASE("kernels of the same problem and implementation share their code, not their weights") {
  const Isa isa = isas().front();
  const Layout b = blocked_layout(isa);
  const ConvProblem k3 = ConvProblem::parse("ic32ih10iw10_oc48oh10ow10kh3kw3sh1sw1ph1pw1_relu");
  const ConvProblem k1 = ConvProblem::parse("ic40ih9iw9_oc24oh9ow9kh1kw1sh1sw1ph0pw0");
  const ConvProblem dw = ConvProblem::parse("g32ic32ih12iw12_oc32oh12ow12kh3kw3sh1sw1ph1pw1");
  const struct {
    ConvProblem p;
    ConvImpl impl;
  } cases[] = {{k3, conv_impl(ConvFamily::direct, b, b)},
               {k3, conv_impl(ConvFamily::winograd4, b, b)},
               {k3, conv_impl(ConvFamily::im2col, Layout::nhwc, Layout::nhwc)},
               {k1, conv_impl(ConvFamily::gemm1x1, b, b)},
               {dw, conv_impl(ConvFamily::depthwise, b, b)}};
  for (const auto& c : cases) {
    INFO(c.p.str() << " " << conv_family_name(c.impl.family));
    Operands o1 = make_operands(c.p, 1), o2 = make_operands(c.p, 2);
    std::string why;
    auto k1st = create_conv_kernel(c.p, c.impl, isa, o1.w, &o1.b, &why);
    REQUIRE_MESSAGE(k1st, why);
    const SharedCodeStats before = shared_code_stats();
    auto k2nd = create_conv_kernel(c.p, c.impl, isa, o2.w, &o2.b, &why);
    REQUIRE_MESSAGE(k2nd, why);
    const SharedCodeStats after = shared_code_stats();
    // Every generator of the second kernel was found, none generated again.
    CHECK(after.lookups > before.lookups);
    CHECK(after.reused - before.reused == after.lookups - before.lookups);
    // Each computes with its own weights.
    check_kernel(*k1st, c.p, o1, c.impl);
    check_kernel(*k2nd, c.p, o2, c.impl);
  }
  // Another leaky slope is another problem: its code is not taken from the first.
  ConvProblem a = k3, s = k3;
  a.post = {op(PostOp::Kind::leaky_relu, 0.1f)};
  s.post = {op(PostOp::Kind::leaky_relu, 0.2f)};
  const ConvImpl d = conv_impl(ConvFamily::direct, b, b);
  Operands oa = make_operands(a, 3), os = make_operands(s, 3);
  std::string why;
  auto ka = create_conv_kernel(a, d, isa, oa.w, &oa.b, &why);
  const SharedCodeStats before = shared_code_stats();
  auto ks = create_conv_kernel(s, d, isa, os.w, &os.b, &why);
  REQUIRE(ka);
  REQUIRE(ks);
  CHECK(shared_code_stats().reused == before.reused);
  check_kernel(*ks, s, os, d);
}

TEST_CASE("every family packs weights read in place at any byte offset") {
  // A model file's weights sit wherever protobuf put them; the packers read those bytes in
  // place (Tensor::alias_unaligned, as the ONNX importer makes them), never as float&.
  const Isa isa = isas().front();
  const Layout b = blocked_layout(isa);
  const ConvProblem k3 = ConvProblem::parse("ic24ih9iw9_oc40oh9ow9kh3kw3sh1sw1ph1pw1");
  const ConvProblem k1 = ConvProblem::parse("ic40ih7iw7_oc24oh7ow7kh1kw1sh1sw1ph0pw0");
  const ConvProblem dw = ConvProblem::parse("g24ic24ih10iw10_oc24oh10ow10kh3kw3sh1sw1ph1pw1");
  const struct {
    ConvProblem p;
    ConvImpl impl;
  } cases[] = {{k3, conv_impl(ConvFamily::direct, b, b)},
               {k3, conv_impl(ConvFamily::winograd4, b, b)},
               {k3, conv_impl(ConvFamily::winograd2, b, b)},
               {k3, conv_impl(ConvFamily::im2col, Layout::nhwc, Layout::nhwc)},
               {k3, conv_impl(ConvFamily::im2col, Layout::nchw, Layout::nchw)},
               {k1, conv_impl(ConvFamily::gemm1x1, b, b)},
               {k1, conv_impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc)},
               {dw, conv_impl(ConvFamily::depthwise, b, b)},
               {dw, conv_impl(ConvFamily::depthwise, Layout::nhwc, Layout::nhwc)}};
  for (const auto& c : cases)
    for (int offset : {1, 2, 3}) {
      INFO(c.p.str() << " " << conv_family_name(c.impl.family) << " offset " << offset);
      const Operands o = make_operands(c.p, 11);
      auto buf = std::shared_ptr<unsigned char[]>(new unsigned char[size_t(o.w.nbytes()) + 4]);
      std::memcpy(buf.get() + offset, o.w.raw(), size_t(o.w.nbytes()));
      const Tensor w = Tensor::alias_unaligned(DType::f32, o.w.shape(), buf, buf.get() + offset);
      REQUIRE(w.unaligned());
      std::string why;
      auto k = create_conv_kernel(c.p, c.impl, isa, w, &o.b, &why);
      REQUIRE_MESSAGE(k, why);
      check_kernel(*k, c.p, o, c.impl);
    }
}
}  // namespace
}  // namespace kiln::convtest
