// The im2col conv family (jit/im2col/) against the reference Conv (runtime/ref through
// test_conv_util.h), on both ISA paths and both layouts (NCHW, NHWC), over swept shapes:
// channel counts 1..64, OC tails, kernels 1x1..7x7 and 1x3, strides 1-3, dilation 2,
// asymmetric padding, 1x1 outputs, batch 2, bias on/off, fused post-op chains, forced
// register tiles, K splits, an in-place residual and concurrent runs.
//
// Tolerance: count_mismatches (test_conv_util.h) accepts 1e-5 * sqrt(K) * max(1, |ref|),
// K = ic * kh * kw. The kernel sums the same K products as the reference in another order
// (register-blocked FMAs, K chunks): fp32 reordering error grows like sqrt(K) * eps * the size
// of the partial sums (~sqrt(K) for inputs in [-1, 1]), which this bound covers ~100x over,
// while one missing, duplicated or misplaced tap changes a result by ~0.3 on average.
#include <thread>

#include "jit/conv/conv_families.h"
#include "jit/im2col/im2col_conf.h"
#include "jit/im2col/im2col_kernel.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

ConvImpl im2col(Layout l, int mr = 0, int nr = 0) {
  return conv_impl(ConvFamily::im2col, l, l, mr, nr);
}

const Layout kLayouts[] = {Layout::nchw, Layout::nhwc};

// tests/shapes/im2col.txt: kernels 1x1 to 7x7, strides 1 to 3, dilation 2, asymmetric and
// wide padding, 1x1 outputs, K splits, batch 2, bias on and off.
TEST_CASE("im2col conv matches the reference, NCHW and NHWC (both ISAs)") {
  const std::vector<ConvProblem> shapes = shapes::read_shapes("im2col");
  uint64_t seed = 4000;
  for (Isa isa : isas())
    for (Layout l : kLayouts)
      for (const ConvProblem& p : shapes) check_conv(p, im2col(l), isa, seed++);
}

TEST_CASE("im2col conv: 1x1 stride-1 unpadded reads the input directly") {
  for (Isa isa : isas())
    for (Layout l : kLayouts) {
      auto c = im2col::init_im2col_conf(problem("ic40ih9iw9_oc33oh9ow9kh1kw1sh1sw1ph0pw0"),
                                        im2col(l), isa);
      REQUIRE(c);
      CHECK(c.conf->no_copy);
      CHECK(c.conf->pack_floats == 0);
      auto c2 = im2col::init_im2col_conf(problem("ic40ih9iw9_oc33oh5ow5kh1kw1sh2sw2ph0pw0"),
                                         im2col(l), isa);
      REQUIRE(c2);
      CHECK_FALSE(c2.conf->no_copy);
    }
}

TEST_CASE("im2col conv with fused post-op chains") {
  uint64_t seed = 4200;
  const std::vector<std::vector<PostOp>> chains = {
      chain({op(K::relu)}),
      chain({op(K::clip, 0.f, 6.f)}),
      chain({op(K::sigmoid)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::add), op(K::clip, -0.5f, 0.5f)}),
      chain({op(K::scale_shift), op(K::swish), op(K::scale_shift)}),
      chain({op(K::leaky_relu, 0.1f), op(K::add), op(K::hardswish), op(K::sigmoid)}),
      chain({op(K::prelu), op(K::scale_shift), op(K::prelu), op(K::elu, 0.5f)}),
  };
  const std::vector<std::string> shapes = {
      "ic5ih7iw8_oc21oh7ow8kh3kw3sh1sw1pt1pl0pb1pr2",
      "mb2ic17ih9iw9_oc40oh5ow5kh3kw3sh2sw2ph1pw1_nobias",
      "ic24ih6iw5_oc35oh6ow5kh1kw1sh1sw1ph0pw0",  // 1x1 no copy
      "ic64ih9iw9_oc24oh9ow9kh3kw3sh1sw1ph1pw1",  // K split
  };
  for (Isa isa : isas())
    for (Layout l : kLayouts)
      for (const auto& c : chains)
        for (const std::string& s : shapes) check_conv(problem(s, c), im2col(l), isa, seed++);
}

TEST_CASE("im2col conv: forced register tiles, their row and column tails") {
  uint64_t seed = 4400;
  const ConvProblem p1 =
      problem("ic7ih9iw11_oc45oh9ow11kh3kw3sh1sw1ph1pw1", chain({op(K::add), op(K::relu)}));
  const ConvProblem p2 = problem("ic37ih9iw11_oc45oh9ow11kh1kw1sh1sw1ph0pw0");  // no copy
  for (Isa isa : isas()) {
    const std::vector<std::pair<int, int>> tiles =
        isa == Isa::avx512
            ? std::vector<std::pair<int, int>>{{1, 1}, {5, 3}, {6, 4}, {12, 2}, {28, 1}, {3, 7}}
            : std::vector<std::pair<int, int>>{{1, 1}, {4, 2}, {6, 2}, {2, 4}, {12, 1}, {3, 3}};
    for (Layout l : kLayouts)
      for (auto [mr, nr] : tiles) {
        check_conv(p1, im2col(l, mr, nr), isa, seed++);
        check_conv(p2, im2col(l, mr, nr), isa, seed++);
      }
  }
}

// Kernel of a conf with forced K chunk / tile size.
std::unique_ptr<Kernel> make(const ConvProblem& p, Layout l, Isa isa, const Operands& o, int64_t kc,
                             int64_t tile_units) {
  auto c = im2col::init_im2col_conf(p, im2col(l), isa);
  REQUIRE(c);
  im2col::Im2colConf conf = *c.conf;
  if (kc) conf.kc = kc;
  if (tile_units) {
    const int64_t unit = conf.nhwc ? conf.mr : conf.group_cols();
    conf.tile_pix = tile_units * unit;
    conf.tiles_per_image = (conf.pix + conf.tile_pix - 1) / conf.tile_pix;
    if (!conf.nhwc && !conf.no_copy) conf.ldb = conf.tile_pix + 16 * tile_units;  // any stride
    conf.pack_floats = conf.no_copy ? 0 : conf.nhwc ? conf.tile_pix * conf.lda : conf.k * conf.ldb;
  }
  return im2col::make_im2col_kernel(conf, o.w, p.bias ? &o.b : nullptr);
}

TEST_CASE("im2col conv: K chunks and tile sizes") {
  uint64_t seed = 4600;
  const std::vector<ConvProblem> probs = {
      problem("ic19ih8iw9_oc37oh8ow9kh3kw3sh1sw1ph1pw1",
              chain({op(K::scale_shift), op(K::add), op(K::relu)})),
      problem("mb2ic45ih5iw7_oc18oh5ow7kh1kw1sh1sw1ph0pw0"),  // no copy
  };
  for (Isa isa : isas())
    for (Layout l : kLayouts)
      for (const ConvProblem& p : probs)
        for (int64_t kc : {1, 5, 16, 0})
          for (int64_t units : {1, 3, 0}) {
            Operands o = make_operands(p, seed++);
            auto k = make(p, l, isa, o, kc, units);
            INFO(k->name() << " " << p.str() << " kc " << kc << " tile units " << units);
            std::string first;
            CHECK(count_mismatches(run_kernel(*k, p, o, l, l), reference(p, o), p.ic * p.kh * p.kw,
                                   &first) == 0);
          }
}

// Runs with the residual of an `add` post-op being dst itself (written in place), as the plan
// may do when the residual dies at this conv: a K split must not keep partial sums in dst then.
TEST_CASE("im2col conv: residual added in place") {
  uint64_t seed = 4700;
  const ConvProblem p =
      problem("ic64ih9iw8_oc21oh9ow8kh3kw3sh1sw1ph1pw1", chain({op(K::add), op(K::relu)}));
  for (Isa isa : isas())
    for (Layout l : kLayouts)
      for (int64_t kc : {7, 0}) {
        Operands o = make_operands(p, seed++);
        auto k = make(p, l, isa, o, kc, 0);
        INFO(k->name() << " kc " << kc);
        std::vector<float> src = to_layout(o.x, l);
        std::vector<float> dst = to_layout(o.extra[0], l);
        const float* ins[] = {src.data(), nullptr, nullptr, dst.data()};
        float* outs[] = {dst.data()};
        KernelArgs a;
        a.src = ins;
        a.dst = outs;
        k->run_all(a);
        const Shape ys{p.n, p.oc, p.oh, p.ow};
        Tensor y(DType::f32, ys);
        convert_layout(dst.data(), l, y.data<float>(), Layout::nchw, ys);
        std::string first;
        CHECK(count_mismatches(y, reference(p, o), p.ic * p.kh * p.kw, &first) == 0);
      }
}

// One kernel object run by two threads at once (each its own half of the tiles, then each the
// whole conv into its own output), each with its own scratch.
TEST_CASE("im2col conv: concurrent runs of one kernel") {
  uint64_t seed = 4800;
  const ConvProblem p = problem("mb2ic13ih30iw31_oc24oh30ow31kh3kw3sh1sw1ph1pw1",
                                chain({op(K::scale_shift), op(K::relu)}));
  for (Isa isa : isas())
    for (Layout l : kLayouts) {
      Operands o = make_operands(p, seed++);
      std::string why;
      auto k = create_conv_kernel(p, im2col(l), isa, o.w, &o.b, &why);
      REQUIRE_MESSAGE(k, why);
      REQUIRE(k->tiles() >= 4);
      const Shape ys{p.n, p.oc, p.oh, p.ow};
      std::vector<float> src = to_layout(o.x, l);
      const float* ins[] = {src.data(), nullptr, nullptr, o.extra[0].data<float>(),
                            o.extra[1].data<float>()};
      const size_t elems = size_t(layout_elems(l, ys));
      std::vector<float> shared(elems), own0(elems), own1(elems);
      float* out_shared[] = {shared.data()};
      float* out0[] = {own0.data()};
      float* out1[] = {own1.data()};
      // Each caller its own scratch, as each executor thread has its slice.
      GuardedScratch s0(*k), s1(*k);
      KernelArgs as0{ins, out_shared, s0.get()}, as1{ins, out_shared, s1.get()};
      KernelArgs a0{ins, out0, s0.get()}, a1{ins, out1, s1.get()};
      const int64_t t = k->tiles();
      for (int rep = 0; rep < 20; ++rep) {
        std::thread th([&] {
          k->run(as1, t / 2, t);
          k->run_all(a1);
        });
        k->run(as0, 0, t / 2);
        k->run_all(a0);
        th.join();
      }
      CHECK(s0.guard_intact());
      CHECK(s1.guard_intact());
      const Tensor ref = reference(p, o);
      for (const std::vector<float>* out : {&shared, &own0, &own1}) {
        Tensor y(DType::f32, ys);
        convert_layout(out->data(), l, y.data<float>(), Layout::nchw, ys);
        std::string first;
        CHECK_MESSAGE(count_mismatches(y, ref, p.ic * 9, &first) == 0, first);
      }
    }
}

// A full-size first layer (ResNet-50 conv1, 7x7 stride 2, 3 -> 64) and a 3x3 64 -> 64 with the
// plans init_conf picks for them (the benchmark's kernels).
TEST_CASE("im2col conv on ResNet-50 shapes with their chosen plans") {
  uint64_t seed = 4900;
  const ConvProblem conv1 =
      problem("ic3ih224iw224_oc64oh112ow112kh7kw7sh2sw2ph3pw3", chain({op(K::relu)}));
  const ConvProblem c3 =
      problem("ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1", chain({op(K::add), op(K::relu)}));
  for (Isa isa : isas())
    for (Layout l : kLayouts) {
      check_conv(conv1, im2col(l), isa, seed++);
      check_conv(c3, im2col(l), isa, seed++);
    }
}

TEST_CASE("im2col conv says why it does not apply") {
  const ConvProblem p = problem("ic8ih6iw6_oc8oh6ow6kh3kw3sh1sw1ph1pw1");
  auto why = [&](const ConvProblem& q, const ConvImpl& impl, Isa isa) {
    Operands o = make_operands(q, 1);
    std::string w;
    auto k = create_conv_kernel(q, impl, isa, o.w, q.bias ? &o.b : nullptr, &w);
    CHECK(k == nullptr);
    return w;
  };
  CHECK(why(p, im2col(Layout::nChw16c), Isa::avx512).find("blocked") != std::string::npos);
  ConvImpl mixed = im2col(Layout::nchw);
  mixed.dst = Layout::nhwc;
  CHECK(why(p, mixed, Isa::avx2).find("differs") != std::string::npos);
  CHECK(why(p, im2col(Layout::nchw), Isa::scalar).find("avx2 or avx512") != std::string::npos);
  CHECK(why(p, im2col(Layout::nhwc, 20, 8), Isa::avx2).find("exceeds") != std::string::npos);
  // groups > 1: NHWC only, groups dividing the channels.
  ConvProblem g = p;
  g.groups = 2;
  auto c = im2col::init_im2col_conf(g, im2col(Layout::nchw), Isa::avx2);
  CHECK_FALSE(c);
  CHECK(c.reason.find("need nhwc") != std::string::npos);
  CHECK(im2col::init_im2col_conf(g, im2col(Layout::nhwc), Isa::avx2));
  g.groups = 3;
  auto c3 = im2col::init_im2col_conf(g, im2col(Layout::nhwc), Isa::avx2);
  CHECK_FALSE(c3);
  CHECK(c3.reason == "groups do not divide the channels");
}

// Grouped convs, NHWC (one GEMM per conv group): the grouped family's shape list (channels per
// group 1..32, in != out, tails, strides, dilation, asymmetric padding, 1x1 no-copy, batch 2)
// and RegNet-like groups of 24 / 56 that are not whole vectors.
TEST_CASE("im2col conv, NHWC, grouped: matches the reference (both ISAs)") {
  std::vector<ConvProblem> shapes = shapes::read_shapes("grouped");
  for (const char* s : {"g4ic224ih13iw11_oc224oh7ow6kh3kw3sh2sw2ph1pw1",  // 56 per group
                        "g3ic72ih9iw9_oc72oh9ow9kh3kw3sh1sw1ph1pw1",      // 24 per group
                        "mb2g2ic96ih5iw6_oc64oh5ow6kh1kw1sh1sw1ph0pw0"})  // 1x1 no copy
    shapes.push_back(problem(s));
  uint64_t seed = 5000;
  for (Isa isa : isas())
    for (const ConvProblem& p : shapes) check_conv(p, im2col(Layout::nhwc), isa, seed++);
}

// Offered for grouped convs only where its GEMM per group beats the grouped family: at least
// 48 output channels per group, not whole vectors.
TEST_CASE("im2col is offered for wide groups that are not whole vectors") {
  auto offered = [](const char* s) { return conv_family(ConvFamily::im2col).offered(problem(s)); };
  CHECK(offered("ic64ih8iw8_oc64oh8ow8kh3kw3sh1sw1ph1pw1"));               // dense
  CHECK(offered("g4ic224ih14iw14_oc224oh7ow7kh3kw3sh2sw2ph1pw1"));         // 56
  CHECK(offered("g4ic672ih14iw14_oc672oh7ow7kh3kw3sh2sw2ph1pw1"));         // 168
  CHECK_FALSE(offered("g4ic256ih14iw14_oc256oh7ow7kh3kw3sh2sw2ph1pw1"));   // 64
  CHECK_FALSE(offered("g6ic288ih14iw14_oc288oh7ow7kh3kw3sh2sw2ph1pw1"));   // 48
  CHECK_FALSE(offered("g3ic72ih14iw14_oc72oh7ow7kh3kw3sh2sw2ph1pw1"));     // 24
  CHECK_FALSE(offered("g32ic32ih14iw14_oc32oh14ow14kh3kw3sh1sw1ph1pw1"));  // depthwise
}

TEST_CASE("im2col conv, NHWC, grouped: post-op chains, register tiles, K chunks, tile sizes") {
  uint64_t seed = 5400;
  const ConvProblem p =
      problem("mb2g3ic60ih8iw9_oc84oh8ow9kh3kw3sh1sw1ph1pw1",  // 20 in, 28 out per group
              chain({op(K::scale_shift), op(K::add), op(K::relu)}));
  const ConvProblem q = problem("g2ic64ih7iw9_oc80oh7ow9kh1kw1sh1sw1ph0pw0",
                                chain({op(K::add), op(K::sigmoid)}));  // no copy
  for (Isa isa : isas()) {
    for (auto [mr, nr] : std::vector<std::pair<int, int>>{{1, 1}, {5, 2}, {6, 1}, {4, 2}}) {
      check_conv(p, im2col(Layout::nhwc, mr, nr), isa, seed++);
      check_conv(q, im2col(Layout::nhwc, mr, nr), isa, seed++);
    }
    for (const ConvProblem& r : {p, q})
      for (int64_t kc : {1, 5, 0})
        for (int64_t units : {1, 3, 0}) {
          Operands o = make_operands(r, seed++);
          auto k = make(r, Layout::nhwc, isa, o, kc, units);
          INFO(k->name() << " " << r.str() << " kc " << kc << " tile units " << units);
          std::string first;
          CHECK(count_mismatches(run_kernel(*k, r, o, Layout::nhwc, Layout::nhwc), reference(r, o),
                                 r.ic / r.groups * r.kh * r.kw, &first) == 0);
        }
  }
}

// Computed weights (create_conv_kernel_runtime_weights, check_runtime_weights): the dense and
// grouped shape lists, depthwise, post-op chains and both layouts.
TEST_CASE("im2col conv with run-time weights matches the reference (both ISAs)") {
  std::vector<std::pair<ConvProblem, Layout>> cases;
  for (const ConvProblem& p : shapes::read_shapes("im2col"))
    for (Layout l : kLayouts) cases.push_back({p, l});
  for (const ConvProblem& p : shapes::read_shapes("grouped")) cases.push_back({p, Layout::nhwc});
  for (const char* s : {"g16ic16ih9iw10_oc16oh9ow10kh3kw3sh1sw1ph1pw1",  // depthwise
                        "mb2g8ic16ih7iw7_oc32oh4ow4kh3kw3sh2sw2ph1pw1"})
    cases.push_back({problem(s), Layout::nhwc});
  for (const char* s :
       {"mb2ic17ih9iw9_oc40oh5ow5kh3kw3sh2sw2ph1pw1", "ic24ih6iw5_oc35oh6ow5kh1kw1sh1sw1ph0pw0"})
    for (Layout l : kLayouts)
      cases.push_back({problem(s, chain({op(K::scale_shift), op(K::add), op(K::relu)})), l});
  uint64_t seed = 5600;
  for (Isa isa : isas())
    for (const auto& [p, l] : cases) {
      check_runtime_weights(p, im2col(l), isa, seed);
      seed += 2;
    }
  CHECK(cases.size() > 40);
}

TEST_CASE("run-time weights: im2col, depthwise and direct in f32 read them, no other family") {
  const ConvProblem p = problem("ic8ih6iw6_oc8oh6ow6kh3kw3sh1sw1ph1pw1");
  std::string why;
  for (Isa isa : isas()) {
    const Layout b = blocked_layout(isa);
    for (ConvFamily f : {ConvFamily::winograd4, ConvFamily::winograd2, ConvFamily::gemm1x1}) {
      CHECK(create_conv_kernel_runtime_weights(p, conv_impl(f, b, b), isa, &why) == nullptr);
      CHECK(why.find("packs its weights at load") != std::string::npos);
    }
    ConvImpl q = im2col(Layout::nhwc);
    q.int8 = std::make_shared<ConvInt8>();
    CHECK(create_conv_kernel_runtime_weights(p, q, isa, &why) == nullptr);
    CHECK(why.find("int8") != std::string::npos);
    ConvProblem dw = problem("g8ic8ih6iw6_oc8oh6ow6kh3kw3sh1sw1ph1pw1");
    CHECK(create_conv_kernel_runtime_weights(dw, im2col(Layout::nchw), isa, &why) == nullptr);
    CHECK(why.find("need nhwc") != std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::convtest
