// The bf16 conv kernels (AVX512-BF16: src nChw16c_bf16, dst nChw16c or nChw16c_bf16) of the
// gemm1x1, direct and grouped families against the reference Conv run on the same bf16-rounded src
// and weights, and the nChw16c <-> nChw16c_bf16 conversion against float_to_bf16.
#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "jit/glue/glue.h"
#include "jit/grouped/grouped_conf.h"
#include "runtime/labels.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

Tensor bf16_rounded(const Tensor& t) {
  Tensor r(DType::f32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    r.data<float>()[i] = bf16_to_float(float_to_bf16(t.data<float>()[i]));
  return r;
}

// The kernel's products are exact in f32 (8-bit x 8-bit mantissas), so against a reference
// on the rounded operands only the f32 summation order differs (count_mismatches' tolerance);
// a bf16 dst adds its own rounding, where the two sides may land one bf16 ulp (2^-7 relative)
// apart.
// (round_w false: the kernel keeps f32 weights, as depthwise does; a bf16 src is rounded.)
void check_bf16_kernel(const Kernel& k, const ConvProblem& p, const Operands& o,
                       const ConvImpl& impl, bool round_w = true) {
  CHECK(k.name().find("_bf16_") != std::string::npos);
  Operands r = o;
  if (layout_bf16(impl.src)) r.x = bf16_rounded(o.x);
  if (round_w) r.w = bf16_rounded(o.w);
  Tensor want = reference(p, r);
  const Tensor got = run_kernel(k, p, o, impl.src, impl.dst);
  const bool bf16_dst = layout_bf16(impl.dst);
  const double tol = 1e-5 * std::sqrt(double(p.ic * p.kh * p.kw));
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    const double lim = tol * std::max(1.0, std::fabs(w)) + (bf16_dst ? std::fabs(w) / 128 : 0);
    if (!(std::fabs(g - w) <= lim) && bad++ == 0)
      first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
              std::to_string(w);
  }
  CHECK_MESSAGE(bad == 0, bad << " mismatches, first " << first);
}

void check_bf16(const ConvProblem& p, const ConvImpl& impl, uint64_t seed,
                const convjit::Gemm1x1Force& force = {}) {
  Operands o = make_operands(p, seed);
  auto c = convjit::init_gemm1x1_conf(p, impl, Isa::avx512, force);
  REQUIRE_MESSAGE(c, "conf refused: " << c.reason);
  REQUIRE(c.conf->bf16);
  auto k = convjit::make_gemm1x1_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
  INFO(k->name() << " " << p.str() << " m_outer " << c.conf->m_outer << " pack " << c.conf->pack
                 << " ic_chunk " << c.conf->ic_chunk);
  check_bf16_kernel(*k, p, o, impl);
}

// Any family through the family table's factory.
void check_bf16_family(const ConvProblem& p, const ConvImpl& impl, uint64_t seed,
                       bool round_w = true) {
  Operands o = make_operands(p, seed);
  std::string why;
  auto k = create_conv_kernel(p, impl, Isa::avx512, o.w, p.bias ? &o.b : nullptr, &why);
  INFO(p.str() << " " << layout_name(impl.src) << "->" << layout_name(impl.dst));
  REQUIRE_MESSAGE(k != nullptr, "kernel not created: " << why);
  INFO(k->name());
  check_bf16_kernel(*k, p, o, impl, round_w);
}

ConvImpl bf16_impl(bool bf16_dst, int ur = 0, int ob = 0) {
  return conv_impl(ConvFamily::gemm1x1, Layout::nChw16c_bf16,
                   bf16_dst ? Layout::nChw16c_bf16 : Layout::nChw16c, ur, ob);
}

TEST_CASE("gemm1x1 bf16 matches the reference on bf16-rounded operands") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5000;
  // tests/shapes/conv_gemm1x1.txt (channel tails, odd channel counts, strides 1 and 2, batch 2)
  for (const ConvProblem& p : shapes::read_shapes("conv_gemm1x1"))
    for (bool bf16_dst : {false, true}) check_bf16(p, bf16_impl(bf16_dst), seed++);
}

TEST_CASE("gemm1x1 bf16: tiles, odd channel counts, loop orders, K split, stride 2, prefetch") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5100;
  const std::vector<std::string> shapes = {
      "ic37ih9iw11_oc45oh9ow11kh1kw1sh1sw1ph0pw0",  // odd ic: the last channel alone
      "ic1ih5iw5_oc17oh5ow5kh1kw1sh1sw1ph0pw0",
      "mb2ic64ih14iw14_oc48oh7ow7kh1kw1sh2sw2ph0pw0",
      "ic33ih15iw8_oc20oh8ow4kh1kw1sh2sw2ph0pw0_nobias",
  };
  for (const std::string& s : shapes)
    for (bool bf16_dst : {false, true})
      for (auto [ur, ob] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {5, 3}, {4, 2}})
        for (int m_outer : {0, 1})
          for (int pack : {0, 1})
            for (int pf : {0, 1}) {
              const ConvProblem p = problem(s);
              if (pack && p.sh == 1) continue;
              convjit::Gemm1x1Force f;
              f.m_outer = m_outer;
              f.pack = pack;
              f.pf_next = pf;
              f.pf_src = pf;
              f.pf_dst = pf;
              f.chunk_blocks = 1;
              f.ic_chunk = bf16_dst ? -1 : 1;  // K split accumulates in an f32 dst only
              check_bf16(p, bf16_impl(bf16_dst, ur, ob), seed++, f);
            }
}

TEST_CASE("gemm1x1 bf16 with fused post-op chains and the register broadcast") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5200;
  const std::vector<std::vector<PostOp>> f32_chains = {
      chain({op(K::add), op(K::relu)}), chain({op(K::scale_shift), op(K::add), op(K::sigmoid)})};
  const std::vector<std::vector<PostOp>> chains = {
      {}, chain({op(K::relu)}), chain({op(K::clip, 0.f, 6.f)}), chain({op(K::hardswish)})};
  const std::vector<std::string> shapes = {"ic19ih6iw7_oc21oh6ow7kh1kw1sh1sw1ph0pw0",
                                           "mb2ic32ih7iw7_oc40oh4ow4kh1kw1sh2sw2ph0pw0_nobias"};
  for (const std::string& s : shapes)
    for (int reg : {0, 1}) {
      convjit::Gemm1x1Force f;
      f.bcast_reg = reg;
      for (const auto& c : f32_chains) check_bf16(problem(s, c), bf16_impl(false), seed++, f);
      for (const auto& c : chains)
        for (bool bf16_dst : {false, true})
          check_bf16(problem(s, c), bf16_impl(bf16_dst), seed++, f);
    }
}

TEST_CASE("gemm1x1 bf16 on ResNet-50's 1x1 shapes with their chosen plans") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5300;
  for (const std::string& s : {"ic256ih56iw56_oc64oh56ow56kh1kw1sh1sw1ph0pw0",
                               "ic512ih28iw28_oc256oh28ow28kh1kw1sh1sw1ph0pw0",
                               "ic1024ih14iw14_oc512oh7ow7kh1kw1sh2sw2ph0pw0",
                               "ic512ih7iw7_oc2048oh7ow7kh1kw1sh1sw1ph0pw0"})
    for (bool bf16_dst : {false, true})
      check_bf16(problem(s, chain({op(K::relu)})), bf16_impl(bf16_dst), seed++);
}

ConvImpl direct_bf16(bool bf16_dst, int ur = 0, int ob = 0) {
  return conv_impl(ConvFamily::direct, Layout::nChw16c_bf16,
                   bf16_dst ? Layout::nChw16c_bf16 : Layout::nChw16c, ur, ob);
}

// tests/shapes/conv_direct.txt: channel tails (odd ones too), strides, asymmetric padding,
// dilation, kernel sizes, 1x1 outputs, batch 2.
TEST_CASE("direct bf16 matches the reference on bf16-rounded operands") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5400;
  for (const ConvProblem& p : shapes::read_shapes("conv_direct"))
    for (bool bf16_dst : {false, true}) check_bf16_family(p, direct_bf16(bf16_dst), seed++);
}

TEST_CASE("direct bf16: forced tiles, row pairs, post-ops, K split, prefetch, big layers") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5500;
  const std::vector<std::string> shapes = {
      "ic37ih9iw11_oc45oh9ow11kh3kw3sh1sw1ph1pw1",   // odd ic, lane tail
      "mb2ic32ih7iw7_oc40oh7ow7kh3kw3sh1sw1ph1pw1",  // 7-wide: row pairs
      "ic21ih12iw12_oc33oh6ow6kh3kw3sh2sw2ph1pw1_nobias",
      "ic16ih15iw15_oc16oh11ow11kh3kw3sh1sw1dh2dw2ph0pw0",
  };
  for (const std::string& s : shapes)
    for (bool bf16_dst : {false, true})
      for (auto [ur, ob] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {5, 3}, {3, 2}})
        check_bf16_family(problem(s, chain({op(K::relu)})), direct_bf16(bf16_dst, ur, ob), seed++);
  for (const std::string& s : shapes) {
    check_bf16_family(problem(s, chain({op(K::add), op(K::relu)})), direct_bf16(false), seed++);
    check_bf16_family(problem(s, chain({op(K::scale_shift), op(K::hardswish)})), direct_bf16(true),
                      seed++);
  }
  // ResNet-50's 3x3 layers with the plans init_conf picks (K split, prefetch, groups outer).
  for (const std::string& s : {"ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1",
                               "ic128ih56iw56_oc128oh28ow28kh3kw3sh2sw2ph1pw1",
                               "ic256ih14iw14_oc256oh14ow14kh3kw3sh1sw1ph1pw1",
                               "ic512ih7iw7_oc512oh7ow7kh3kw3sh1sw1ph1pw1"})
    for (bool bf16_dst : {false, true})
      check_bf16_family(problem(s, chain({op(K::relu)})), direct_bf16(bf16_dst), seed++);
}

// Depthwise: bf16 activations on either side (f32 weights and arithmetic).
TEST_CASE("depthwise bf16 matches the reference on bf16-rounded activations") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5600;
  const Layout h = Layout::nChw16c_bf16, f = Layout::nChw16c;
  const std::vector<std::string> shapes = {
      "g40ic40ih14iw14_oc40oh14ow14kh3kw3sh1sw1ph1pw1",  // lane tail
      "mb2g32ic32ih15iw15_oc32oh8ow8kh3kw3sh2sw2ph1pw1",
      "g96ic96ih28iw28_oc96oh28ow28kh5kw5sh1sw1ph2pw2",
      "g48ic48ih17iw13_oc48oh9ow7kh5kw5sh2sw2ph2pw2_nobias",
      "g16ic16ih12iw12_oc16oh12ow12kh3kw3sh1sw1dh2dw2ph2pw2",
      "g24ic24ih9iw9_oc24oh3ow3kh7kw7sh1sw1ph0pw0",
      "g32ic32ih16iw18_oc32oh16ow18kh21kw21sh1sw1ph10pw10",  // (streamed taps)
  };
  const std::vector<std::vector<PostOp>> chains = {
      {},
      chain({op(K::relu)}),
      chain({op(K::hardswish)}),
      chain({op(K::scale_shift), op(K::clip, 0.f, 6.f)})};
  for (const std::string& s : shapes)
    for (auto [src, dst] : std::vector<std::pair<Layout, Layout>>{{h, h}, {h, f}, {f, h}})
      for (const auto& c : chains)
        for (int ur : {0, 3})
          check_bf16_family(problem(s, c), conv_impl(ConvFamily::depthwise, src, dst, ur), seed++,
                            false);
  // A residual into an f32 dst.
  check_bf16_family(problem(shapes[0], chain({op(K::add), op(K::relu)})),
                    conv_impl(ConvFamily::depthwise, h, f), seed++, false);
}

// Grouped: the sparse mode's bf16 code (tests/shapes/grouped.txt: channel tails, odd and
// narrow groups, strides, dilation), RegNet's / ResNeXt's groups, forced register blocks that
// span several groups (the other groups' weights must be zero pairs), post-op chains.
TEST_CASE("grouped bf16 matches the reference on bf16-rounded operands") {
  if (!testing::has_bf16()) return;
  uint64_t seed = 5700;
  const Layout h = Layout::nChw16c_bf16, f = Layout::nChw16c;
  for (const ConvProblem& p : shapes::read_shapes("grouped"))
    for (Layout dst : {f, h}) check_bf16_family(p, conv_impl(ConvFamily::grouped, h, dst), seed++);
  const std::vector<std::string> shapes = {
      "g6ic48ih10iw10_oc48oh10ow10kh3kw3sh1sw1ph1pw1",   // 8 a group
      "g10ic160ih9iw9_oc160oh5ow5kh3kw3sh2sw2ph1pw1",    // 16 a group, stride 2
      "g7ic168ih7iw7_oc168oh7ow7kh3kw3sh1sw1ph1pw1",     // 24 a group
      "mb2g4ic128ih7iw7_oc128oh7ow7kh3kw3sh1sw1ph1pw1",  // 32 a group, batch 2
      "g8ic32ih16iw16_oc32oh16ow16kh3kw3sh1sw1ph1pw1",   // 4 a group
      "g3ic21ih9iw9_oc33oh9ow9kh3kw3sh1sw1ph1pw1",       // 7 in, 11 out a group: odd pairs
  };
  for (const std::string& s : shapes)
    for (Layout dst : {f, h})
      for (auto [ur, ob] : std::vector<std::pair<int, int>>{{0, 0}, {3, 1}, {5, 2}, {2, 3}})
        check_bf16_family(problem(s, chain({op(K::relu)})),
                          conv_impl(ConvFamily::grouped, h, dst, ur, ob), seed++);
  for (const std::string& s : shapes) {
    check_bf16_family(problem(s, chain({op(K::add), op(K::relu)})),
                      conv_impl(ConvFamily::grouped, h, f), seed++);
    check_bf16_family(problem(s, chain({op(K::scale_shift), op(K::hardswish)})),
                      conv_impl(ConvFamily::grouped, h, h), seed++);
  }
  // The shuffle mode permutes single channels, not pairs: refused in bf16.
  auto c = convjit::init_grouped_conf_mode(problem(shapes[0]), conv_impl(ConvFamily::grouped, h, h),
                                           Isa::avx512, convjit::GroupedMode::shuffle);
  CHECK_FALSE(c);
  CHECK(c.reason.find("f32") != std::string::npos);
}

TEST_CASE("bf16 kernels are refused where they cannot run or would be wrong") {
  const ConvProblem p = problem("ic32ih8iw8_oc32oh8ow8kh1kw1sh1sw1ph0pw0");
  // Other families do not read bf16 layouts.
  for (const ConvFamilyRow& f : conv_families()) {
    if (f.bf16_layouts) continue;
    Operands o = make_operands(p, 1);
    std::string why;
    CHECK(create_conv_kernel(p, conv_impl(f.id, Layout::nChw16c_bf16, Layout::nChw16c), Isa::avx512,
                             o.w, &o.b, &why) == nullptr);
  }
  auto avx2 = convjit::init_gemm1x1_conf(p, bf16_impl(false), Isa::avx2);
  CHECK_FALSE(avx2);
  if (!testing::has_bf16()) return;
  auto res = convjit::init_gemm1x1_conf(
      problem("ic32ih8iw8_oc32oh8ow8kh1kw1sh1sw1ph0pw0", chain({op(K::add)})), bf16_impl(true),
      Isa::avx512);
  CHECK_FALSE(res);
  CHECK(res.reason.find("residual") != std::string::npos);
  auto nhwc = convjit::init_gemm1x1_conf(
      p, conv_impl(ConvFamily::gemm1x1, Layout::nChw16c_bf16, Layout::nhwc), Isa::avx512);
  CHECK_FALSE(nhwc);
}

// A bf16 network's input: nchw straight to nChw16c_bf16 (the transpose rounding each pixel
// vector), the same bits as convert_layout's float_to_bf16 (normal values, ties, infinities,
// NaN; no subnormals, which vcvtneps2bf16 flushes); pad lanes zero, nothing written past the
// end.
TEST_CASE("nchw -> nChw16c_bf16 in one pass rounds like float_to_bf16") {
  if (!testing::has_bf16()) return;
  for (const Shape& s : std::vector<Shape>{
           {1, 3, 17, 19}, {2, 37, 9, 11}, {1, 16, 8, 8}, {1, 64, 30, 30}, {3, 5, 1, 1}}) {
    INFO("shape " << shape_str(s));
    const int64_t n = shape_numel(s), out = layout_elems(Layout::nChw16c_bf16, s);
    std::vector<float> src(static_cast<size_t>(n));
    test::XorShift rng(uint64_t(n), 23);
    for (int64_t i = 0; i < n; ++i) {
      float v = std::ldexp(rng.uniform(-1.f, 1.f), int(rng.pick(-30, 30)));
      if (i % 89 == 1) v = bits_to_float(0x3f808000u);  // ties: to even, down and up
      if (i % 89 == 2) v = bits_to_float(0xbf818000u);
      if (i % 89 == 3) v = -std::numeric_limits<float>::infinity();
      if (i % 89 == 4) v = std::numeric_limits<float>::quiet_NaN();
      src[size_t(i)] = v;
    }
    std::vector<uint16_t> want(static_cast<size_t>(out));
    convert_layout(src.data(), Layout::nchw, want.data(), Layout::nChw16c_bf16, s);
    std::string why;
    auto k = create_reorder_kernel(s, Layout::nchw, Layout::nChw16c_bf16, Isa::avx512, &why);
    REQUIRE_MESSAGE(k, why);
    CHECK(k->name() == "reorder_nchw_to_nChw16c_bf16__avx512");
    std::vector<uint16_t> got(size_t(out) + 32, 0xabcd);
    const float* in[] = {src.data()};
    float* outp[] = {reinterpret_cast<float*>(got.data())};
    KernelArgs a;
    a.src = in;
    a.dst = outp;
    const int64_t half = k->tiles() / 2;  // in two pieces, as two threads would
    k->run(a, 0, half);
    k->run(a, half, k->tiles());
    int64_t bad = 0;
    for (int64_t i = 0; i < out; ++i) bad += got[size_t(i)] != want[size_t(i)];
    CHECK(bad == 0);
    CHECK(std::count(got.begin() + out, got.end(), uint16_t(0xabcd)) == 32);
  }
}

TEST_CASE("nChw16c <-> nChw16c_bf16 conversion rounds to nearest even and widens exactly") {
  if (!testing::has_bf16()) return;
  for (const Shape& s : std::vector<Shape>{{1, 3, 5, 7}, {2, 37, 9, 11}, {1, 64, 56, 56}}) {
    INFO("shape " << shape_str(s));
    const int64_t n = layout_elems(Layout::nChw16c, s);
    std::vector<float> src(static_cast<size_t>(n), 0.f);
    test::XorShift rng(uint64_t(n), 19);
    for (int64_t i = 0; i < n; ++i) {
      // Random values over a wide exponent range, plus ties, infinities and NaN.
      float v = std::ldexp(rng.uniform(-1.f, 1.f), int(rng.pick(-30, 30)));
      if (i % 97 == 1) v = bits_to_float(0x3f808000u);  // a tie: rounds to even (down)
      if (i % 97 == 2) v = bits_to_float(0x3f818000u);  // a tie: rounds to even (up)
      if (i % 97 == 3) v = std::numeric_limits<float>::infinity();
      if (i % 97 == 4) v = std::numeric_limits<float>::quiet_NaN();
      src[size_t(i)] = v;
    }
    std::string why;
    auto to = create_reorder_kernel(s, Layout::nChw16c, Layout::nChw16c_bf16, Isa::avx512, &why);
    auto back = create_reorder_kernel(s, Layout::nChw16c_bf16, Layout::nChw16c, Isa::avx512, &why);
    REQUIRE_MESSAGE((to && back), why);
    std::vector<uint16_t> h(size_t(n) + 32, 0xabcd);
    std::vector<float> f(size_t(n) + 16, 7.f);
    const float* in0[] = {src.data()};
    float* out0[] = {reinterpret_cast<float*>(h.data())};
    KernelArgs a;
    a.src = in0;
    a.dst = out0;
    to->run_all(a);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += h[size_t(i)] != float_to_bf16(src[size_t(i)]);
    CHECK(bad == 0);
    CHECK(std::count(h.begin() + n, h.end(), uint16_t(0xabcd)) == 32);
    const float* in1[] = {reinterpret_cast<const float*>(h.data())};
    float* out1[] = {f.data()};
    a.src = in1;
    a.dst = out1;
    back->run_all(a);
    bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = bf16_to_float(h[size_t(i)]);
      bad += !(f[size_t(i)] == want || (std::isnan(want) && std::isnan(f[size_t(i)])));
    }
    CHECK(bad == 0);
    CHECK(std::count(f.begin() + n, f.end(), 7.f) == 16);
  }
}

}  // namespace
}  // namespace kiln::convtest
