// The Winograd conv families (F(2x2,3x3), F(4x4,3x3), F(2x2,5x5) and the 1-D F(m, r)) against the
// reference Conv, on both ISA paths, over swept shapes, grouped convs, post-op chains,
// blockings; their reasons for not applying; two threads running one kernel at once; the 1-D
// transform matrices against the definition; and the measured error on ResNet-50 / VGG-16-like
// and Inception-v3-like layers.
#include <array>
#include <thread>

#include "jit/conv/conv_families.h"
#include "jit/winograd/winograd_conf.h"
#include "jit/winograd/winograd_kernel.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

ConvImpl wino(int m, Isa isa, int ur_w = 0, int oc_blocks = 0) {
  return conv_impl(m == 2 ? ConvFamily::winograd2 : ConvFamily::winograd4, blocked_layout(isa),
                   blocked_layout(isa), ur_w, oc_blocks);
}

// Tolerance, relative to max(1, max |ref|) over the output (Winograd's error is normwise: each
// output mixes its alpha x alpha patch with factors of up to ~10 (F4) in the transforms, so
// small outputs next to large ones carry the large ones' rounding).
// Measured on the ResNet-50-like layers below (K = 9 x 64 .. 9 x 512): F2 <= 2.8e-6 of
// max |ref|, the same as the direct family against the (f32-summing) reference; F4 <= 9.5e-6,
// 3-4x that. The bounds leave 7x / 10x of headroom, yet a wrong or missing tap changes an
// output by ~|w x| ~ 0.25, >= 4e-3 of max |ref| for every shape here (max |ref| < 60); a
// transform coefficient off by 1e-4 (8 -> 7.999) already fails.
// The 1-D family and F(2x2, 5x5) (m = 0 below): on Inception-v3's layers <= 2.1e-6 (1x7 /
// 7x1, K = 7 x 128 .. 7 x 192) and 3.0e-6 (1x3 / 3x1, K = 3 x 384 / 448), the direct
// family's 1.6e-6 / 2.0e-6; F(2x2, 5x5) on AlexNet's conv2 and Inception-v3's 5x5 <= 4.2e-6
// (direct 2.2e-6), <= 6.4e-6 over the swept shapes.
double tolerance(int m) {
  return m == 4 ? 1e-4 : 2e-5;
}
int family_m(ConvFamily f) {
  return f == ConvFamily::winograd2 ? 2 : f == ConvFamily::winograd4 ? 4 : 0;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, double(std::fabs(t.data<float>()[i])));
  return m;
}

// max |got - ref| / max(1, max |ref|); NaN anywhere in `got` counts as infinite error.
double rel_error(const Tensor& got, const Tensor& ref, std::string* first) {
  double worst = 0;
  const double scale = std::max(1.0, max_abs(ref));
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double g = got.data<float>()[i], r = ref.data<float>()[i];
    const double e = std::isnan(g) ? INFINITY : std::fabs(g - r) / scale;
    if (e > worst) {
      worst = e;
      if (first)
        *first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                 std::to_string(r);
    }
  }
  return worst;
}

// Builds the kernel, runs it (two halves, second first) and checks the error bound.
double check_wino(const ConvProblem& p, const ConvImpl& impl, Isa isa, uint64_t seed,
                  std::string* name = nullptr) {
  Operands o = make_operands(p, seed);
  std::string why;
  auto k = create_conv_kernel(p, impl, isa, o.w, p.bias ? &o.b : nullptr, &why);
  INFO("problem " << p.str() << " isa " << std::string(isa_name(isa)) << " family "
                  << std::string(conv_family_name(impl.family)));
  REQUIRE_MESSAGE(k != nullptr, "kernel not created: " << why);
  INFO("kernel " << k->name());
  if (name) *name = k->name();
  const Tensor ref = reference(p, o);
  const Tensor got = run_kernel(*k, p, o, impl.src, impl.dst);
  std::string first;
  const double err = rel_error(got, ref, &first);
  CHECK_MESSAGE(err <= tolerance(family_m(impl.family)),
                "relative error " << err << ", worst " << first);
  return err;
}

// tests/shapes/winograd.txt: channel tails, output sizes off the tile grid, pads 0 to 3 and
// asymmetric, bias on and off, batch 2, several groups and chunks.
TEST_CASE("winograd conv matches the reference on blocked layouts (both ISAs, F2 and F4)") {
  const std::vector<ConvProblem> shapes = shapes::read_shapes("winograd");
  uint64_t seed = 1000;
  for (Isa isa : isas())
    for (int m : {2, 4})
      for (const ConvProblem& p : shapes) check_wino(p, wino(m, isa), isa, seed++);
}

TEST_CASE("winograd conv: many tile groups, oc chunks and the last group's tail") {
  uint64_t seed = 1100;
  // 2 x 30 x 31 outputs: hundreds of tiles across both images -> several groups, the last
  // one shorter; 100 output channels -> several chunks with a lane tail; 150 input channels
  // -> K chunks on AVX-512 (the first zeroes, later ones accumulate, the last has the tail).
  const ConvProblem p =
      problem("mb2ic150ih30iw31_oc100oh30ow31kh3kw3sh1sw1ph1pw1", chain({op(K::relu)}));
  for (Isa isa : isas())
    for (int m : {2, 4}) {
      auto c = convjit::init_wino_conf(p, wino(m, isa), isa);
      REQUIRE(c);
      INFO("blocking " << c.conf->blocking_str());
      CHECK(c.conf->groups > 1);
      CHECK(c.conf->chunks > 1);
      if (isa == Isa::avx512) CHECK(c.conf->k_chunks(c.conf->k_max()) > 2);
      check_wino(p, wino(m, isa), isa, seed++);
    }
  // One group of a few tiles and 200 output channels: the chunks are cut into slices (2 of
  // 4 + 4 / 4 + 1 vectors on AVX-512; 13 of one chunk each on AVX2, as 13 is odd).
  const ConvProblem q = problem("ic24ih9iw10_oc200oh9ow10kh3kw3sh1sw1ph1pw1",
                                chain({op(K::scale_shift), op(K::add)}));
  for (Isa isa : isas())
    for (int m : {2, 4}) {
      auto c = convjit::init_wino_conf(q, wino(m, isa), isa);
      REQUIRE(c);
      INFO("blocking " << c.conf->blocking_str());
      CHECK(c.conf->groups == 1);
      CHECK(c.conf->slices == (isa == Isa::avx512 ? 2 : 13));
      check_wino(q, wino(m, isa), isa, seed++);
    }
}

TEST_CASE("winograd conv: forced register blockings") {
  uint64_t seed = 1200;
  const ConvProblem p = problem("ic21ih11iw19_oc52oh11ow19kh3kw3sh1sw1pt1pl2pb1pr0");
  for (Isa isa : isas()) {
    const std::vector<std::pair<int, int>> blockings =
        isa == Isa::avx512
            ? std::vector<std::pair<int, int>>{{1, 1}, {3, 2}, {6, 4}, {9, 3}, {13, 1}}
            : std::vector<std::pair<int, int>>{{1, 1}, {4, 3}, {6, 2}, {13, 1}};
    for (int m : {2, 4})
      for (auto [mr, nr] : blockings) {
        std::string name;
        check_wino(p, wino(m, isa, mr, nr), isa, seed++, &name);
        INFO("kernel " << name);
        // A register block holds at most one group's tiles.
        auto c = convjit::init_wino_conf(p, wino(m, isa, mr, nr), isa);
        REQUIRE(c);
        const int64_t want = std::min<int64_t>(mr, c.conf->tpg);
        CHECK(name.find("mr" + std::to_string(want) + "nr" + std::to_string(nr)) !=
              std::string::npos);
      }
  }
}

// Grouped convs: each oc chunk's GEMM reads its groups' columns of V. Groups of whole vectors
// (16, 32, 48 channels: RegNet / ResNeXt; fewer input than output channels a group; several K
// chunks in a group) read exactly their own; narrower or uneven ones (24, 8, 4, 12 -> 20, a
// channel tail) read neighbours' channels against zero weights. Batch 2, post-ops, tails off
// the tile grid, forced chunks that span groups.
TEST_CASE("winograd conv on grouped convs") {
  uint64_t seed = 1250;
  const std::vector<std::pair<std::string, std::vector<PostOp>>> shapes = {
      {"g2ic64ih9iw9_oc64oh9ow9kh3kw3sh1sw1ph1pw1", {}},
      {"g3ic144ih14iw13_oc144oh14ow13kh3kw3sh1sw1ph1pw1", chain({op(K::relu)})},
      {"g4ic64ih11iw10_oc64oh12ow9kh3kw3sh1sw1pt1pl0pb2pr1_nobias", {}},
      {"mb2g2ic32ih7iw7_oc96oh7ow7kh3kw3sh1sw1ph1pw1", chain({op(K::add), op(K::relu)})},
      {"g8ic128ih6iw5_oc128oh4ow3kh3kw3sh1sw1ph0pw0", chain({op(K::swish)})},
      {"g2ic384ih12iw12_oc64oh12ow12kh3kw3sh1sw1ph1pw1", {}},
      {"g3ic72ih14iw13_oc72oh14ow13kh3kw3sh1sw1ph1pw1", chain({op(K::relu)})},
      {"mb2g8ic64ih9iw9_oc64oh9ow9kh3kw3sh1sw1ph1pw1", {}},
      {"g16ic64ih7iw8_oc64oh7ow8kh3kw3sh1sw1ph1pw1_nobias", chain({op(K::add)})},
      {"g2ic24ih10iw9_oc40oh10ow9kh3kw3sh1sw1pt0pl1pb2pr1", {}},
      {"mb2ic40ih11iw9_oc36oh11ow9kh3kw3sh1sw1ph1pw1", chain({op(K::prelu), op(K::add)})},
  };
  for (Isa isa : isas()) {
    const int64_t simd = simd_width(isa);
    for (int m : {2, 4})
      for (const auto& shape : shapes) {  // (no structured binding: INFO captures it)
        const ConvProblem p = problem(shape.first, shape.second);
        auto c = convjit::init_wino_conf(p, wino(m, isa), isa);
        REQUIRE_MESSAGE(c, c.reason);
        INFO("problem " << shape.first << " blocking " << c.conf->blocking_str());
        // Groups of whole vectors: each chunk reads exactly its group's channels. Others: a
        // chunk's K covers its channels' groups, whole vectors clamped to ic.
        const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;
        const bool whole = icg % simd == 0 && ocg % simd == 0;
        for (int64_t ch = 0; ch < c.conf->chunks; ++ch) {
          const int64_t oc0 = ch * c.conf->nr * simd, k0 = c.conf->chunk_k0[size_t(ch)],
                        k = c.conf->chunk_k[size_t(ch)];
          CHECK(k0 % simd == 0);
          CHECK(k0 <= oc0 / ocg * icg);
          CHECK(k0 + k <= p.ic);
          if (whole) CHECK((k0 == oc0 / ocg * icg && k == icg));
        }
        check_wino(p, wino(m, isa), isa, seed++);
      }
    // Several chunks a group (forced one vector a chunk) and several slices; K chunks inside a
    // group of 192 input channels.
    const ConvProblem q = problem("g3ic144ih6iw7_oc144oh6ow7kh3kw3sh1sw1ph1pw1");
    for (int m : {2, 4}) check_wino(q, wino(m, isa, 3, 1), isa, seed++);
    const ConvProblem k = problem("g2ic384ih12iw12_oc64oh12ow12kh3kw3sh1sw1ph1pw1");
    auto ck = convjit::init_wino_conf(k, wino(2, isa), isa);
    REQUIRE(ck);
    if (isa == Isa::avx512) CHECK(ck.conf->k_chunks(ck.conf->k_max()) > 1);
    // Forced chunks of 2 and 4 vectors span two groups of 48 channels on AVX-512.
    for (int m : {2, 4})
      for (int nr : {2, 4}) check_wino(q, wino(m, isa, 0, nr), isa, seed++);
  }
}

// Dilated convs run as d_h x d_w phases (WinoConf): phases of unequal size, several tile
// groups and oc chunks across the phases of two images, post-ops with a residual read at the
// dilated pixels, grouped; and the family is offered only where each phase has 4 rows and
// columns (tests/shapes/winograd.txt has more dilated shapes).
TEST_CASE("winograd conv on dilated convs") {
  uint64_t seed = 1280;
  const std::vector<std::pair<std::string, std::vector<PostOp>>> shapes = {
      {"mb2ic48ih29iw30_oc72oh29ow30kh3kw3sh1sw1dh2dw2ph2pw2",
       chain({op(K::scale_shift), op(K::add), op(K::relu)})},
      {"ic64ih28iw28_oc64oh28ow28kh3kw3sh1sw1dh4dw4ph4pw4", chain({op(K::add)})},
      {"g2ic48ih14iw14_oc48oh14ow14kh3kw3sh1sw1dh2dw2ph2pw2", {}},
      {"ic24ih13iw18_oc32oh13ow10kh3kw3sh1sw1dh1dw4ph1pw0", chain({op(K::relu)})},
  };
  for (Isa isa : isas())
    for (int m : {2, 4})
      for (const auto& shape : shapes) {
        const ConvProblem p = problem(shape.first, shape.second);
        auto c = convjit::init_wino_conf(p, wino(m, isa), isa);
        REQUIRE_MESSAGE(c, c.reason);
        INFO("problem " << shape.first << " blocking " << c.conf->blocking_str());
        CHECK(c.conf->image_tiles() == p.dh * p.dw * c.conf->tiles_h * c.conf->tiles_w);
        check_wino(p, wino(m, isa), isa, seed++);
      }
  const ConvFamilyRow& w4 = conv_family(ConvFamily::winograd4);
  auto dilated = [](int64_t hw, int64_t d) {
    return problem({.ic = 64,
                    .ih = hw,
                    .iw = hw,
                    .oc = 64,
                    .kh = 3,
                    .kw = 3,
                    .pt = d,
                    .pl = d,
                    .pb = d,
                    .pr = d,
                    .dh = d,
                    .dw = d});
  };
  CHECK(w4.offered(dilated(28, 2)));
  CHECK(w4.offered(dilated(28, 8)));         // phases of 4 and 3 rows: the largest has 4
  CHECK_FALSE(w4.offered(dilated(28, 10)));  // phases of 3 rows
  CHECK_FALSE(w4.offered(dilated(28, 12)));  // DeepLab's ASPP
  CHECK(w4.offered(dilated(3, 1)));          // undilated: any size
  ConvProblem dw3 = dilated(3, 1);           // ... but never depthwise, whatever its size
  dw3.groups = dw3.ic;
  CHECK_FALSE(w4.offered(dw3));
}

TEST_CASE("winograd conv with fused post-op chains") {
  uint64_t seed = 1300;
  const std::vector<std::vector<PostOp>> chains = {
      chain({op(K::relu)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::add), op(K::sigmoid)}),
      chain({op(K::swish), op(K::clip, 0.f, 6.f)}),
  };
  const std::vector<std::string> shapes = {
      "ic17ih9iw10_oc21oh9ow10kh3kw3sh1sw1ph1pw1",
      "mb2ic32ih7iw7_oc40oh7ow6kh3kw3sh1sw1pt1pl0pb1pr1_nobias",
  };
  for (Isa isa : isas())
    for (int m : {2, 4})
      for (const auto& c : chains)
        for (const std::string& s : shapes) check_wino(problem(s, c), wino(m, isa), isa, seed++);
}

TEST_CASE("winograd conv says why it does not apply") {
  const Shp base = pad({.ic = 16, .ih = 12, .iw = 12, .oc = 16, .kh = 3, .kw = 3}, 1, 1, 1, 1);
  auto reason = [](const ConvProblem& p, const ConvImpl& impl, Isa isa) {
    Operands o = make_operands(p, 1);
    std::string why;
    auto k = create_conv_kernel(p, impl, isa, o.w, p.bias ? &o.b : nullptr, &why);
    CHECK(k == nullptr);
    return why;
  };
  const Isa isa = isas().front();
  Shp s = base;
  s.sh = s.sw = 2;
  CHECK(reason(problem(s), wino(4, isa), isa).find("stride 1") != std::string::npos);
  s = pad(base, 2, 2, 2, 2);
  s.kh = s.kw = 5;
  CHECK(reason(problem(s), wino(2, isa), isa).find("3x3 kernel") != std::string::npos);
  ConvProblem g = problem(base);
  g.groups = 3;
  // (the operands are made for groups 1, so ask the conf: create_conv_kernel checks them first)
  CHECK(convjit::init_wino_conf(g, wino(4, isa), isa).reason.find("do not divide") !=
        std::string::npos);
  ConvImpl nchw = wino(4, isa);
  nchw.src = Layout::nchw;
  CHECK(reason(problem(base), nchw, isa).find("same layout") != std::string::npos);
  nchw.dst = Layout::nchw;
  CHECK(reason(problem(base), nchw, isa).find("not blocked") != std::string::npos);
  // The other isa's block.
  ConvImpl wrong = wino(2, Isa::avx2);
  wrong.src = wrong.dst = Layout::nChw16c;
  CHECK(reason(problem(base), wrong, Isa::avx2).find("needs isa avx512") != std::string::npos);
}

// Two threads run the same kernel at once (each its half of the tiles, then each all tiles
// into its own output): the per-thread scratch must keep them apart.
TEST_CASE("winograd conv: concurrent runs of one kernel") {
  const ConvProblem p =
      problem("ic32ih20iw20_oc48oh20ow20kh3kw3sh1sw1ph1pw1", chain({op(K::relu)}));
  for (Isa isa : isas()) {
    const ConvImpl impl = wino(4, isa);
    Operands o = make_operands(p, 77);
    std::string why;
    auto k = create_conv_kernel(p, impl, isa, o.w, &o.b, &why);
    REQUIRE(k != nullptr);
    const Tensor ref = reference(p, o);
    const Shape ys{p.n, p.oc, p.oh, p.ow};
    const std::vector<float> src = to_layout(o.x, impl.src);
    const size_t elems = size_t(layout_elems(impl.dst, ys));
    std::vector<float> d0(elems, NAN), d1(elems, NAN), d2(elems, NAN);
    auto go = [&](float* d, int64_t b, int64_t e, int reps) {
      const float* ins[] = {src.data(), nullptr, nullptr};
      float* outs[] = {d};
      GuardedScratch scratch(*k);  // each caller its own, as each executor thread
      KernelArgs a;
      a.src = ins;
      a.dst = outs;
      a.scratch = scratch.get();
      for (int r = 0; r < reps; ++r) k->run(a, b, e);
      CHECK(scratch.guard_intact());
    };
    const int64_t t = k->tiles();
    REQUIRE(t >= 2);
    {
      std::thread a(go, d0.data(), 0, t / 2, 20), b(go, d0.data(), t / 2, t, 20);
      a.join();
      b.join();
    }
    {
      std::thread a(go, d1.data(), 0, t, 10), b(go, d2.data(), 0, t, 10);
      a.join();
      b.join();
    }
    for (std::vector<float>* d : {&d0, &d1, &d2}) {
      Tensor y(DType::f32, ys);
      convert_layout(d->data(), impl.dst, y.data<float>(), Layout::nchw, ys);
      CHECK(rel_error(y, ref, nullptr) <= tolerance(4));
    }
  }
}

// Normal(0, sd) by Box-Muller from the test's uniform generator.
Tensor normal_tensor(Shape s, uint64_t seed, double sd) {
  Tensor t(DType::f32, std::move(s));
  Rng r(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double u1 = std::max(1e-12, double(r.uniform(0.f, 1.f))), u2 = r.uniform(0.f, 1.f);
    t.data<float>()[i] = float(sd * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307 * u2));
  }
  return t;
}

// max |got - ref| of impl's kernel on p with operands o.
double kernel_max_diff(const ConvProblem& p, const Operands& o, const ConvImpl& impl, Isa isa,
                       const Tensor& ref) {
  std::string why;
  auto k = create_conv_kernel(p, impl, isa, o.w, &o.b, &why);
  REQUIRE_MESSAGE(k != nullptr, why);
  const Tensor got = run_kernel(*k, p, o, impl.src, impl.dst);
  double diff = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    diff = std::max(diff, std::fabs(double(got.data<float>()[i]) - ref.data<float>()[i]));
  return diff;
}

// The error on the 3x3 stride-1 layers of ResNet-50 (and VGG-16's channel counts at the same
// sizes), with weights ~ N(0, 1/sqrt(9 IC)) and inputs ~ U(-1, 1): max |diff| / max |ref|.
TEST_CASE("winograd conv: error on ResNet-50 / VGG-16 layers") {
  std::vector<ConvProblem> layers;  // 3x3 stride 1: 64@56, 128@28, 256@14, 512@7
  for (const ConvProblem& p : shapes::read_shapes("resnet50"))
    if (p.kh == 3 && p.sh == 1) layers.push_back(p);
  REQUIRE(layers.size() == 4);
  for (const ConvProblem& p : layers) {
    Operands o = make_operands(p, 500 + uint64_t(p.ic));
    o.w = normal_tensor({p.oc, p.ic, 3, 3}, 600 + uint64_t(p.ic), 1.0 / std::sqrt(9.0 * p.ic));
    const Tensor ref = reference(p, o);
    const double ref_max = max_abs(ref);
    for (Isa isa : isas())
      for (int m : {0, 2, 4}) {  // 0: the direct family, for scale (the reference sums in f32)
        ConvImpl impl = wino(m, isa);
        if (m == 0) impl.family = ConvFamily::direct;
        const double diff = kernel_max_diff(p, o, impl, isa, ref);
        const double rel = diff / ref_max;
        MESSAGE((m ? "F(" + std::to_string(m) + "x" + std::to_string(m) + ",3x3) " : "direct ")
                << std::string(isa_name(isa)) << " " << p.ic << "ch " << p.ih << "x" << p.iw
                << ": max|diff| " << diff << ", max|ref| " << ref_max << ", ratio " << rel);
        CHECK(rel <= tolerance(m ? m : 2));
      }
  }
}

// ---------------------------------------------------------------------------------------
// The 1-D family: F(m, r) along one axis of a 1 x r or r x 1 kernel (alpha = m + r - 1 = 8, or
// 6 where that covers the axis with fewer transformed values).

ConvImpl wino1d(Isa isa, int ur_w = 0, int oc_blocks = 0) {
  return conv_impl(ConvFamily::winograd1d, blocked_layout(isa), blocked_layout(isa), ur_w,
                   oc_blocks);
}

// The matrices against the definition, in double: A^T ((G g) . (B^T d)) is the correlation
// y_i = sum_k g_k d_(i + k) for random g and d (a wrong entry anywhere breaks it by ~1e-2);
// Lavin & Gray's F(2, 3) / F(4, 3), the 1-D family's F(9 - r, r) and F(2, 5), whose B^T must
// be F(4, 3)'s (the input transform's code is F(4x4, 3x3)'s); stride 2 (winograd_s2):
// y_i = sum_k g_k d_(2 i + k) over a patch of 2 m + 1.
TEST_CASE("winograd: transform matrices compute F(m, r)") {
  Rng rng(42);
  for (const auto& form : std::vector<std::array<int, 3>>{
           {2, 3, 1}, {4, 3, 1}, {6, 3, 1}, {4, 5, 1}, {2, 7, 1}, {2, 5, 1}, {3, 3, 2}}) {
    // (no structured binding: CHECK captures them)
    const int m = form[0], r = form[1], st = form[2];
    const convjit::WinoMatrices mt = convjit::wino_matrices(m, r, st);
    const int a = st == 1 ? m + r - 1 : 2 * m + 1;
    REQUIRE(mt.alpha == a);
    REQUIRE(mt.m == m);
    REQUIRE(mt.r == r);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> g(static_cast<size_t>(r)), d(static_cast<size_t>(a)),
          u(static_cast<size_t>(a)), v(static_cast<size_t>(a), 0.0);
      for (double& x : g) x = rng.uniform(-1.f, 1.f);
      for (double& x : d) x = rng.uniform(-1.f, 1.f);
      for (int j = 0; j < a; ++j) {
        u[size_t(j)] = 0;
        for (int k = 0; k < r; ++k) u[size_t(j)] += mt.g[j * r + k] * g[size_t(k)];
        for (int l = 0; l < a; ++l) v[size_t(j)] += mt.bt[j * a + l] * d[size_t(l)];
      }
      for (int i = 0; i < m; ++i) {
        double y = 0, want = 0;
        for (int j = 0; j < a; ++j) y += mt.at[i * a + j] * u[size_t(j)] * v[size_t(j)];
        for (int k = 0; k < r; ++k) want += g[size_t(k)] * d[size_t(st * i + k)];
        CHECK_MESSAGE(std::fabs(y - want) < 1e-12,
                      "F(" << m << ", " << r << ") stride " << st << " output " << i);
      }
    }
  }
  const convjit::WinoMatrices k5 = convjit::wino_matrices(2, 5), f4 = convjit::wino_matrices(4);
  for (int i = 0; i < 36; ++i) CHECK(k5.bt[i] == f4.bt[i]);
}

// 1 x r and r x 1 with 3, 5, 7 taps: channel tails, outputs off the tile grid (and shorter
// than a tile), "same" / none / asymmetric padding and padding past the kernel, batch 2, no
// bias, 1-D convs lifted to [N, C, 1, L], post-op chains with a residual.
TEST_CASE("winograd1d conv matches the reference (both ISAs)") {
  const std::vector<std::pair<std::string, std::vector<PostOp>>> shapes = {
      {"ic160ih17iw17_oc160oh17ow17kh1kw7sh1sw1ph0pw3", chain({op(K::relu)})},
      {"ic160ih17iw17_oc192oh17ow17kh7kw1sh1sw1ph3pw0", chain({op(K::relu)})},
      {"ic3ih9iw11_oc5oh9ow11kh1kw3sh1sw1ph0pw1", {}},
      {"ic17ih10iw9_oc24oh4ow9kh7kw1sh1sw1ph0pw0", {}},
      {"mb2ic40ih13iw13_oc17oh13ow13kh5kw1sh1sw1ph2pw0_nobias", chain({op(K::add)})},
      {"ic20ih8iw6_oc33oh8ow6kh1kw5sh1sw1pt0pl1pb0pr3", chain({op(K::scale_shift)})},
      {"ic16ih5iw3_oc16oh5ow7kh1kw7sh1sw1ph0pw5", {}},
      {"ic24ih1iw50_oc40oh1ow50kh1kw3sh1sw1ph0pw1", chain({op(K::swish)})},
      {"mb2ic64ih1iw37_oc64oh1ow31kh1kw7sh1sw1ph0pw0", chain({op(K::add), op(K::relu)})},
      {"ic48ih2iw2_oc32oh2ow2kh1kw3sh1sw1ph0pw1", {}},
      {"ic200ih12iw9_oc100oh12ow9kh1kw7sh1sw1ph0pw3", chain({op(K::clip, 0.f, 6.f)})},
  };
  uint64_t seed = 2000;
  for (Isa isa : isas())
    for (const auto& shape : shapes) {
      const ConvProblem p = problem(shape.first, shape.second);
      auto c = convjit::init_wino_conf(p, wino1d(isa), isa);
      REQUIRE_MESSAGE(c, c.reason);
      INFO("problem " << shape.first << " blocking " << c.conf->blocking_str());
      const bool w = p.kh == 1;
      CHECK(c.conf->one_d);
      CHECK(c.conf->along_w == w);
      CHECK(c.conf->a2 == c.conf->alpha);
      CHECK(c.conf->m == c.conf->alpha + 1 - c.conf->r);
      CHECK(c.conf->tiles_w == (w ? (p.ow + c.conf->m - 1) / c.conf->m : p.ow));
      CHECK(c.conf->tiles_h == (w ? p.oh : (p.oh + c.conf->m - 1) / c.conf->m));
      check_wino(p, wino1d(isa), isa, seed++);
    }
}

// Grouped (each chunk its groups' K), dilated along the axis (WaveNet / TCN 1-D convs: phases
// of unequal length; a dilation across the axis does nothing), forced register blockings and
// K chunks over many tile groups.
TEST_CASE("winograd1d conv: grouped, dilated, blockings") {
  const std::vector<std::pair<std::string, std::vector<PostOp>>> shapes = {
      {"g2ic64ih9iw15_oc64oh9ow15kh1kw7sh1sw1ph0pw3", chain({op(K::relu)})},
      {"g3ic72ih14iw6_oc96oh14ow6kh5kw1sh1sw1ph2pw0", {}},
      {"mb2ic32ih1iw40_oc48oh1ow40kh1kw3sh1sw1dh1dw2ph0pw2", chain({op(K::add)})},
      {"ic24ih1iw61_oc24oh1ow49kh1kw7sh1sw1dh1dw2ph0pw0", {}},
      {"ic40ih33iw5_oc24oh33ow5kh3kw1sh1sw1dh4dw1ph4pw0", chain({op(K::relu)})},
      {"ic16ih6iw20_oc16oh6ow20kh1kw5sh1sw1dh3dw1ph0pw2", {}},
      {"mb2ic150ih30iw31_oc100oh30ow31kh1kw7sh1sw1ph0pw3", chain({op(K::relu)})},
  };
  uint64_t seed = 2100;
  for (Isa isa : isas()) {
    for (const auto& shape : shapes) {
      const ConvProblem p = problem(shape.first, shape.second);
      auto c = convjit::init_wino_conf(p, wino1d(isa), isa);
      REQUIRE_MESSAGE(c, c.reason);
      INFO("problem " << shape.first << " blocking " << c.conf->blocking_str());
      // (the dilation across the axis is dropped: one phase that way)
      CHECK(c.conf->image_tiles() == (p.kh == 1 ? p.dw : p.dh) * c.conf->tiles_h * c.conf->tiles_w);
      check_wino(p, wino1d(isa), isa, seed++);
    }
    const ConvProblem big = problem(shapes.back().first, shapes.back().second);
    auto c = convjit::init_wino_conf(big, wino1d(isa), isa);
    REQUIRE(c);
    CHECK(c.conf->groups > 1);
    CHECK(c.conf->chunks > 1);
    if (isa == Isa::avx512) CHECK(c.conf->k_chunks(c.conf->k_max()) > 1);
    const ConvProblem q = problem("ic21ih11iw19_oc52oh11ow19kh1kw7sh1sw1pt0pl2pb0pr4");
    for (auto [mr, nr] : std::vector<std::pair<int, int>>{{1, 1}, {3, 2}, {5, 1}})
      check_wino(q, wino1d(isa, mr, nr), isa, seed++);
  }
}

TEST_CASE("winograd1d: offered shapes and reasons") {
  const ConvFamilyRow& w1 = conv_family(ConvFamily::winograd1d);
  auto shp = [](int64_t kh, int64_t kw) {
    return problem(pad({.ic = 32, .ih = 12, .iw = 12, .oc = 32, .kh = kh, .kw = kw}, kh / 2, kw / 2,
                       kh / 2, kw / 2));
  };
  for (int r : {3, 5, 7}) {
    CHECK(w1.offered(shp(1, r)));
    CHECK(w1.offered(shp(r, 1)));
  }
  CHECK_FALSE(w1.offered(shp(3, 3)));
  CHECK_FALSE(w1.offered(shp(1, 1)));
  CHECK_FALSE(w1.offered(shp(1, 9)));
  CHECK_FALSE(w1.offered(shp(1, 4)));
  const ConvProblem s2 =
      problem(pad({.ic = 32, .ih = 12, .iw = 12, .oc = 32, .kh = 1, .kw = 7, .sw = 2}, 0, 3, 0, 3));
  CHECK_FALSE(w1.offered(s2));
  ConvProblem dw = shp(1, 7);
  dw.groups = dw.ic;
  CHECK_FALSE(w1.offered(dw));
  // (the 2-D families do not take 1 x r kernels)
  CHECK_FALSE(conv_family(ConvFamily::winograd4).offered(shp(1, 3)));

  // The points: 8, or 6 where alpha x tiles over the axis is no larger (F(4, 3), F(2, 5)).
  auto alpha = [](const std::string& s) {
    const Isa isa = isas().front();
    auto c = convjit::init_wino_conf(problem(s), wino1d(isa), isa);
    REQUIRE_MESSAGE(c, c.reason);
    return c.conf->alpha;
  };
  CHECK(alpha("ic64ih8iw8_oc64oh8ow8kh1kw3sh1sw1ph0pw1") == 6);  // 2 x 6 < 2 x 8
  CHECK(alpha("ic64ih8iw8_oc64oh8ow8kh3kw1sh1sw1ph1pw0") == 6);
  CHECK(alpha("ic64ih17iw17_oc64oh17ow17kh1kw3sh1sw1ph0pw1") == 8);      // 3 x 8 < 5 x 6
  CHECK(alpha("ic64ih8iw8_oc64oh8ow8kh1kw5sh1sw1ph0pw2") == 8);          // 2 x 8 < 4 x 6
  CHECK(alpha("ic64ih8iw2_oc64oh8ow2kh1kw5sh1sw1ph0pw2") == 6);          // 1 x 6 < 1 x 8
  CHECK(alpha("ic64ih8iw8_oc64oh8ow8kh1kw7sh1sw1ph0pw3") == 8);          // (6 points: m = 0)
  CHECK(alpha("ic64ih1iw40_oc64oh1ow40kh1kw3sh1sw1dh1dw5ph0pw5") == 6);  // phases of 8
  const Isa isa = isas().front();
  CHECK(convjit::init_wino_conf(shp(3, 3), wino1d(isa), isa).reason.find("1 x r") !=
        std::string::npos);
  CHECK(convjit::init_wino_conf(shp(1, 9), wino1d(isa), isa).reason.find("3, 5 or 7 taps") !=
        std::string::npos);
  CHECK(convjit::init_wino_conf(s2, wino1d(isa), isa).reason.find("stride 1") != std::string::npos);
}

// The error on Inception-v3's factorised layers (1x7 / 7x1 at 17x17, 128-192 channels; 1x3 /
// 3x1 at 8x8, 384 / 448 channels), weights ~ N(0, 1/sqrt(r IC)), inputs ~ U(-1, 1), against
// the direct family's for scale.
TEST_CASE("winograd1d conv: error on Inception-v3 layers") {
  const std::vector<std::string> layers = {
      "ic128ih17iw17_oc128oh17ow17kh1kw7sh1sw1ph0pw3",
      "ic160ih17iw17_oc160oh17ow17kh7kw1sh1sw1ph3pw0",
      "ic192ih17iw17_oc192oh17ow17kh1kw7sh1sw1ph0pw3",
      "ic384ih8iw8_oc384oh8ow8kh3kw1sh1sw1ph1pw0",
      "ic448ih8iw8_oc384oh8ow8kh1kw3sh1sw1ph0pw1",
  };
  for (const std::string& s : layers) {
    const ConvProblem p = problem(s);
    const int64_t r = std::max(p.kh, p.kw);
    Operands o = make_operands(p, 700 + uint64_t(p.ic));
    o.w = normal_tensor({p.oc, p.ic, p.kh, p.kw}, 800 + uint64_t(p.ic),
                        1.0 / std::sqrt(double(r * p.ic)));
    const Tensor ref = reference(p, o);
    const double ref_max = max_abs(ref);
    for (Isa isa : isas())
      for (bool w1d : {false, true}) {
        ConvImpl impl = wino1d(isa);
        if (!w1d) impl.family = ConvFamily::direct;
        const double diff = kernel_max_diff(p, o, impl, isa, ref);
        const double rel = diff / ref_max;
        const int m = convjit::init_wino_conf(p, wino1d(isa), isa).conf->m;
        MESSAGE((w1d ? "F(" + std::to_string(m) + "," + std::to_string(r) + ") " : "direct ")
                << std::string(isa_name(isa)) << " " << s << ": max|diff| " << diff << ", max|ref| "
                << ref_max << ", ratio " << rel);
        CHECK(rel <= tolerance(0));
      }
  }
}

// ---------------------------------------------------------------------------------------
// F(2x2, 5x5).

ConvImpl wino5(Isa isa, int ur_w = 0, int oc_blocks = 0) {
  return conv_impl(ConvFamily::winograd5x5, blocked_layout(isa), blocked_layout(isa), ur_w,
                   oc_blocks);
}

// Channel tails, outputs off the tile grid and of one pixel, padding 0 .. 4 and asymmetric,
// batch 2, no bias, post-op chains with a residual, grouped (whole-vector and narrower groups),
// dilated (phases), forced blockings, several tile groups / chunks / K chunks.
TEST_CASE("winograd5x5 conv matches the reference (both ISAs)") {
  const std::vector<std::pair<std::string, std::vector<PostOp>>> shapes = {
      {"ic48ih35iw35_oc64oh35ow35kh5kw5sh1sw1ph2pw2", chain({op(K::relu)})},
      {"ic3ih9iw11_oc5oh9ow11kh5kw5sh1sw1ph2pw2", {}},
      {"ic17ih10iw9_oc24oh6ow5kh5kw5sh1sw1ph0pw0", {}},
      {"mb2ic40ih13iw13_oc17oh13ow13kh5kw5sh1sw1ph2pw2_nobias", chain({op(K::add)})},
      {"ic20ih8iw6_oc33oh8ow6kh5kw5sh1sw1pt1pl0pb3pr4", chain({op(K::scale_shift)})},
      {"ic16ih1iw1_oc16oh1ow1kh5kw5sh1sw1ph2pw2", {}},
      {"ic64ih27iw27_oc192oh27ow27kh5kw5sh1sw1ph2pw2", chain({op(K::relu)})},
      {"g2ic64ih9iw15_oc64oh9ow15kh5kw5sh1sw1ph2pw2", chain({op(K::swish)})},
      {"g3ic72ih14iw6_oc96oh14ow6kh5kw5sh1sw1ph2pw2", {}},
      {"ic24ih20iw21_oc32oh20ow21kh5kw5sh1sw1dh2dw2ph4pw4", chain({op(K::add), op(K::relu)})},
      {"mb2ic150ih30iw31_oc100oh30ow31kh5kw5sh1sw1ph2pw2", chain({op(K::relu)})},
  };
  uint64_t seed = 2200;
  for (Isa isa : isas()) {
    for (const auto& shape : shapes) {
      const ConvProblem p = problem(shape.first, shape.second);
      auto c = convjit::init_wino_conf(p, wino5(isa), isa);
      REQUIRE_MESSAGE(c, c.reason);
      INFO("problem " << shape.first << " blocking " << c.conf->blocking_str());
      CHECK(c.conf->m == 2);
      CHECK(c.conf->alpha == 6);
      CHECK(c.conf->family() == ConvFamily::winograd5x5);
      check_wino(p, wino5(isa), isa, seed++);
    }
    const ConvProblem q = problem("ic21ih11iw19_oc52oh11ow19kh5kw5sh1sw1pt2pl3pb2pr1");
    for (auto [mr, nr] : std::vector<std::pair<int, int>>{{1, 1}, {3, 2}, {5, 1}})
      check_wino(q, wino5(isa, mr, nr), isa, seed++);
  }
  const ConvFamilyRow& w5 = conv_family(ConvFamily::winograd5x5);
  CHECK(w5.offered(problem(shapes[0].first)));
  CHECK_FALSE(w5.offered(problem("ic16ih12iw12_oc16oh12ow12kh3kw3sh1sw1ph1pw1")));
  CHECK_FALSE(w5.offered(problem("ic16ih12iw12_oc16oh6ow6kh5kw5sh2sw2ph2pw2")));
  CHECK_FALSE(conv_family(ConvFamily::winograd4).offered(problem(shapes[0].first)));
  const Isa isa = isas().front();
  CHECK(convjit::init_wino_conf(problem("ic16ih12iw12_oc16oh12ow12kh3kw3sh1sw1ph1pw1"), wino5(isa),
                                isa)
            .reason.find("5x5 kernel") != std::string::npos);
}

// The error on AlexNet's conv2 and Inception-v3's 5x5 layers, weights ~ N(0, 1/sqrt(25 IC)),
// against the direct family's for scale.
TEST_CASE("winograd5x5 conv: error on AlexNet / Inception-v3 layers") {
  for (const std::string s : {"ic64ih27iw27_oc192oh27ow27kh5kw5sh1sw1ph2pw2",
                              "ic48ih35iw35_oc64oh35ow35kh5kw5sh1sw1ph2pw2"}) {
    const ConvProblem p = problem(s);
    Operands o = make_operands(p, 900 + uint64_t(p.ic));
    o.w = normal_tensor({p.oc, p.ic, 5, 5}, 950 + uint64_t(p.ic), 1.0 / std::sqrt(25.0 * p.ic));
    const Tensor ref = reference(p, o);
    const double ref_max = max_abs(ref);
    for (Isa isa : isas())
      for (bool w5 : {false, true}) {
        ConvImpl impl = wino5(isa);
        if (!w5) impl.family = ConvFamily::direct;
        const double diff = kernel_max_diff(p, o, impl, isa, ref);
        const double rel = diff / ref_max;
        MESSAGE(std::string(w5 ? "F(2x2,5x5) " : "direct ")
                << std::string(isa_name(isa)) << " " << s << ": max|diff| " << diff << ", max|ref| "
                << ref_max << ", ratio " << rel);
        CHECK(rel <= tolerance(0));
      }
  }
}

// ---------------------------------------------------------------------------------------
// Stride 2 (winograd_s2): F(3, 2) on the even taps and pixels, the odd ones as is, per axis.

ConvImpl wino_s2(Isa isa, int ur_w = 0, int oc_blocks = 0) {
  return conv_impl(ConvFamily::winograd_s2, blocked_layout(isa), blocked_layout(isa), ur_w,
                   oc_blocks);
}

// Channel tails, even and odd input sizes (the last tile's patch past the image), outputs off
// the 3 x 3 tile grid and of one pixel, "same" padding, none, TF's asymmetric SAME (0 before,
// 1 after) and padding wider than the kernel, batch 2, no bias, post-op chains with a
// residual, grouped convs (whole-vector and narrower groups), forced blockings, several tile
// groups, oc chunks and K chunks.
TEST_CASE("winograd_s2 conv matches the reference (both ISAs)") {
  const std::vector<std::pair<std::string, std::vector<PostOp>>> shapes = {
      {"ic32ih56iw56_oc64oh28ow28kh3kw3sh2sw2ph1pw1", chain({op(K::relu)})},
      {"ic3ih9iw11_oc5oh5ow6kh3kw3sh2sw2ph1pw1", {}},
      {"ic17ih10iw9_oc24oh4ow4kh3kw3sh2sw2ph0pw0", {}},
      {"mb2ic40ih13iw14_oc17oh7ow7kh3kw3sh2sw2ph1pw1_nobias", chain({op(K::add)})},
      {"ic20ih8iw8_oc33oh4ow4kh3kw3sh2sw2pt0pl0pb1pr1", chain({op(K::scale_shift)})},
      {"ic24ih11iw12_oc16oh8ow8kh3kw3sh2sw2pt3pl2pb3pr3", {}},
      {"ic16ih1iw1_oc16oh1ow1kh3kw3sh2sw2ph1pw1", {}},
      {"ic64ih2iw3_oc32oh1ow2kh3kw3sh2sw2ph1pw1", chain({op(K::swish)})},
      {"ic128ih14iw14_oc128oh7ow7kh3kw3sh2sw2ph1pw1", chain({op(K::add), op(K::relu)})},
      {"g2ic64ih15iw17_oc64oh8ow9kh3kw3sh2sw2ph1pw1", chain({op(K::relu)})},
      {"g3ic72ih12iw10_oc96oh6ow5kh3kw3sh2sw2ph1pw1", {}},
      {"mb2ic150ih61iw59_oc100oh31ow30kh3kw3sh2sw2ph1pw1", chain({op(K::relu)})},
      {"ic150ih73iw73_oc100oh37ow37kh3kw3sh2sw2ph1pw1", {}},  // 13 x 13 tiles
  };
  uint64_t seed = 3300;
  for (Isa isa : isas()) {
    for (const auto& shape : shapes) {
      const ConvProblem p = problem(shape.first, shape.second);
      auto c = convjit::init_wino_conf(p, wino_s2(isa), isa);
      REQUIRE_MESSAGE(c, c.reason);
      INFO("problem " << shape.first << " blocking " << c.conf->blocking_str());
      CHECK(c.conf->m == 3);
      CHECK(c.conf->alpha == 7);
      CHECK(c.conf->family() == ConvFamily::winograd_s2);
      // (U shared by the odd pixels' values: 16 planes of one, 8 of three, 1 of nine.)
      CHECK(c.conf->u_planes() == 25);
      check_wino(p, wino_s2(isa), isa, seed++);
    }
    // The largest: several tile groups (the last one shorter: its planes' members run one GEMM
    // each), oc chunks (a lane tail) and K chunks on AVX-512.
    auto big = convjit::init_wino_conf(problem(shapes.back().first), wino_s2(isa), isa);
    REQUIRE(big);
    CHECK(big.conf->groups > 1);
    CHECK(big.conf->last_group_tiles() < big.conf->tpg);
    CHECK(big.conf->chunks > 1);
    if (isa == Isa::avx512) CHECK(big.conf->k_chunks(big.conf->k_max()) > 1);
    const ConvProblem q = problem("ic21ih11iw19_oc52oh6ow10kh3kw3sh2sw2pt1pl2pb1pr1");
    for (auto [mr, nr] : std::vector<std::pair<int, int>>{{1, 1}, {3, 2}, {5, 1}})
      check_wino(q, wino_s2(isa, mr, nr), isa, seed++);
  }
}

TEST_CASE("winograd_s2: offered shapes and reasons") {
  const ConvFamilyRow& w = conv_family(ConvFamily::winograd_s2);
  const std::string base = "ic32ih28iw28_oc64oh14ow14kh3kw3sh2sw2ph1pw1";
  CHECK(w.offered(problem(base)));
  CHECK(w.offered(problem("g2ic64ih28iw28_oc64oh14ow14kh3kw3sh2sw2ph1pw1")));
  CHECK_FALSE(w.offered(problem("ic32ih28iw28_oc64oh28ow28kh3kw3sh1sw1ph1pw1")));
  CHECK_FALSE(w.offered(problem("ic32ih28iw28_oc64oh14ow28kh3kw3sh2sw1ph1pw1")));
  CHECK_FALSE(w.offered(problem("ic32ih28iw28_oc64oh14ow14kh5kw5sh2sw2ph2pw2")));
  CHECK_FALSE(w.offered(problem("ic32ih28iw28_oc64oh13ow13kh3kw3sh2sw2dh2dw2ph1pw1")));
  CHECK_FALSE(w.offered(problem("g32ic32ih28iw28_oc32oh14ow14kh3kw3sh2sw2ph1pw1")));
  // (the stride-1 families do not take it)
  CHECK_FALSE(conv_family(ConvFamily::winograd4).offered(problem(base)));
  const Isa isa = isas().front();
  auto reason = [&](const std::string& s) {
    return convjit::init_wino_conf(problem(s), wino_s2(isa), isa).reason;
  };
  CHECK(reason("ic32ih28iw28_oc64oh28ow28kh3kw3sh1sw1ph1pw1").find("stride 2") !=
        std::string::npos);
  CHECK(reason("ic32ih28iw28_oc64oh13ow13kh3kw3sh2sw2dh2dw2ph1pw1").find("dilation 1") !=
        std::string::npos);
  CHECK(reason("ic32ih28iw28_oc64oh14ow14kh5kw5sh2sw2ph2pw2").find("3x3 kernel") !=
        std::string::npos);
}

// The error on the stride-2 3x3 layers of ResNet-50 (its stage openings, torchvision's v1.5)
// and a stem (32 -> 64 at 112x112), weights ~ N(0, 1/sqrt(9 IC)), inputs ~ U(-1, 1), against
// the direct family's for scale.
TEST_CASE("winograd_s2 conv: error on ResNet-50 layers") {
  for (const std::string s : {"ic32ih112iw112_oc64oh56ow56kh3kw3sh2sw2ph1pw1",
                              "ic128ih56iw56_oc128oh28ow28kh3kw3sh2sw2ph1pw1",
                              "ic256ih28iw28_oc256oh14ow14kh3kw3sh2sw2ph1pw1"}) {
    const ConvProblem p = problem(s);
    Operands o = make_operands(p, 1200 + uint64_t(p.ic));
    o.w = normal_tensor({p.oc, p.ic, 3, 3}, 1300 + uint64_t(p.ic), 1.0 / std::sqrt(9.0 * p.ic));
    const Tensor ref = reference(p, o);
    const double ref_max = max_abs(ref);
    for (Isa isa : isas())
      for (bool s2 : {false, true}) {
        ConvImpl impl = wino_s2(isa);
        if (!s2) impl.family = ConvFamily::direct;
        const double diff = kernel_max_diff(p, o, impl, isa, ref);
        const double rel = diff / ref_max;
        MESSAGE(std::string(s2 ? "winograd_s2 " : "direct ")
                << std::string(isa_name(isa)) << " " << s << ": max|diff| " << diff << ", max|ref| "
                << ref_max << ", ratio " << rel);
        CHECK(rel <= tolerance(2));
      }
  }
}

}  // namespace
}  // namespace kiln::convtest
