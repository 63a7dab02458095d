// The grouped conv family against the reference Conv (runtime/ref with group = g), on both ISA
// paths, over swept shapes (tests/shapes/grouped.txt), forced register blocks, fused post-op
// chains, shared code and weights read in place at any byte offset.
#include <cstring>

#include "jit/conv/conv_families.h"
#include "jit/grouped/grouped_conf.h"
#include "jit/shared_code.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

ConvImpl grouped(Isa isa, int ur_w = 0, int oc_blocks = 0) {
  return conv_impl(ConvFamily::grouped, blocked_layout(isa), blocked_layout(isa), ur_w, oc_blocks);
}

TEST_CASE("grouped conv matches the reference over the grouped shape list (both ISAs)") {
  const std::vector<ConvProblem> shapes = shapes::read_shapes("grouped");
  uint64_t seed = 100;
  for (Isa isa : isas())
    for (const ConvProblem& p : shapes) check_conv(p, grouped(isa), isa, seed++);
}

// Both modes on every shape the shuffle mode takes (the automatic choice runs only one).
TEST_CASE("grouped conv: sparse and shuffle modes on narrow groups, forced block widths") {
  const std::vector<ConvProblem> shapes = shapes::read_shapes("grouped");
  uint64_t seed = 150;
  int shuffled = 0;
  for (Isa isa : isas())
    for (const ConvProblem& p : shapes) {
      if (!convjit::grouped_shuffle_fits(p, simd_width(isa))) continue;
      ++shuffled;
      for (const auto& mode_ur : {std::pair{convjit::GroupedMode::sparse, 0},
                                  {convjit::GroupedMode::shuffle, 0},
                                  {convjit::GroupedMode::shuffle, 1},
                                  {convjit::GroupedMode::shuffle, 5}}) {
        // Named copies: clang cannot capture structured bindings in INFO's lambda.
        const convjit::GroupedMode mode = mode_ur.first;
        const int ur = mode_ur.second;
        INFO(p.str() << " " << std::string(isa_name(isa)) << " mode " << int(mode) << " ur " << ur);
        auto c = convjit::init_grouped_conf_mode(p, grouped(isa, ur), isa, mode);
        REQUIRE_MESSAGE(c, c.reason);
        CHECK(c.conf->shuffle == (mode == convjit::GroupedMode::shuffle));
        Operands o = make_operands(p, seed++);
        auto k = convjit::make_grouped_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
        INFO(k->name());
        check_kernel(*k, p, o, grouped(isa));
      }
    }
  CHECK(shuffled >= 12);
}

TEST_CASE("grouped conv: the shapes of RegNet and ResNeXt at a small resolution") {
  // 8, 16, 24 and 32 channels per group (RegNetY-400MF, RegNetX-400MF, RegNetX-1.6GF,
  // ResNeXt-50's last stage), 3x3 stride 1 and 2, pad 1.
  const std::vector<std::string> shapes = {
      "g6ic48ih10iw10_oc48oh10ow10kh3kw3sh1sw1ph1pw1",
      "g10ic160ih9iw9_oc160oh5ow5kh3kw3sh2sw2ph1pw1",
      "g4ic96ih14iw14_oc96oh7ow7kh3kw3sh2sw2ph1pw1",
      "g7ic168ih7iw7_oc168oh7ow7kh3kw3sh1sw1ph1pw1",
      "g4ic128ih7iw7_oc128oh7ow7kh3kw3sh1sw1ph1pw1",
      "g8ic32ih16iw16_oc32oh16ow16kh3kw3sh1sw1ph1pw1",  // ResNeXt-50's first stage: 4 per group
  };
  uint64_t seed = 200;
  for (Isa isa : isas())
    for (const std::string& s : shapes) check_conv(problem(s), grouped(isa), isa, seed++);
}

TEST_CASE("grouped conv: forced register blocks, also spanning several groups") {
  // oc_blocks 2 and 3 on 8 or 24 channels per group cover several groups: the register
  // block's range is their union, the weights of the other groups zero.
  const std::vector<std::string> shapes = {
      "g8ic64ih9iw13_oc64oh9ow13kh3kw3sh1sw1ph1pw1",
      "g3ic72ih8iw11_oc72oh8ow11kh3kw3sh1sw1pt1pl0pb1pr2",
      "mb2g5ic50ih7iw9_oc35oh7ow9kh3kw3sh1sw1ph1pw1",
  };
  uint64_t seed = 300;
  for (Isa isa : isas())
    for (const std::string& s : shapes)
      for (auto [ur, ob] : {std::pair{1, 1}, {5, 2}, {3, 3}, {13, 1}, {2, 4}}) {
        const ConvProblem p = problem(s);
        const std::string name = check_conv(p, grouped(isa, ur, ob), isa, seed++);
        const int64_t simd = simd_width(isa),
                      want = std::min<int64_t>(ob, (p.oc + simd - 1) / simd);
        CHECK(name.find("oc" + std::to_string(want) + "__") != std::string::npos);
      }
}

TEST_CASE("grouped conv with fused post-op chains") {
  const std::vector<std::vector<PostOp>> chains = {
      chain({op(K::relu)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::add), op(K::hardswish)}),
      chain({op(K::leaky_relu, 0.1f), op(K::scale_shift), op(K::swish)}),
      chain({op(K::prelu), op(K::add), op(K::tanh)}),
  };
  const std::vector<std::string> shapes = {
      "g3ic72ih9iw10_oc72oh9ow10kh3kw3sh1sw1ph1pw1",
      "mb2g4ic40ih7iw7_oc28oh4ow4kh3kw3sh2sw2ph1pw1_nobias",
      "g16ic64ih7iw7_oc64oh7ow7kh3kw3sh1sw1ph1pw1",
      "mb2g13ic104ih6iw6_oc104oh6ow6kh3kw3sh1sw1ph1pw1",
  };
  uint64_t seed = 400;
  for (Isa isa : isas())
    for (const auto& c : chains)
      for (const std::string& s : shapes) check_conv(problem(s, c), grouped(isa), isa, seed++);
}

TEST_CASE("grouped kernels share their code, not their weights, and read weights in place") {
  const Isa isa = isas().front();
  const ConvProblem p = problem("g3ic72ih8iw8_oc72oh8ow8kh3kw3sh1sw1ph1pw1_relu");
  const ConvImpl impl = grouped(isa);
  Operands o1 = make_operands(p, 1), o2 = make_operands(p, 2);
  std::string why;
  auto k1 = create_conv_kernel(p, impl, isa, o1.w, &o1.b, &why);
  REQUIRE_MESSAGE(k1, why);
  const SharedCodeStats before = shared_code_stats();
  // The second kernel's weights sit at an odd byte offset, as a model file may keep them.
  auto buf = std::shared_ptr<unsigned char[]>(new unsigned char[size_t(o2.w.nbytes()) + 4]);
  std::memcpy(buf.get() + 3, o2.w.raw(), size_t(o2.w.nbytes()));
  const Tensor w2 = Tensor::alias_unaligned(DType::f32, o2.w.shape(), buf, buf.get() + 3);
  auto k2 = create_conv_kernel(p, impl, isa, w2, &o2.b, &why);
  REQUIRE_MESSAGE(k2, why);
  const SharedCodeStats after = shared_code_stats();
  CHECK(after.lookups > before.lookups);
  CHECK(after.reused - before.reused == after.lookups - before.lookups);
  check_kernel(*k1, p, o1, impl);
  check_kernel(*k2, p, o2, impl);
}

TEST_CASE("grouped conv: input channels of other groups never reach an output") {
  // Any lane of another group that leaked into an output channel (a weight packed in the wrong
  // place) changes it: run once, then again with one group's input replaced by large values,
  // and only that group's outputs may change.
  for (Isa isa : isas()) {
    const ConvProblem p = problem("g3ic72ih6iw6_oc72oh6ow6kh3kw3sh1sw1ph1pw1");
    Operands o = make_operands(p, 7);
    std::string why;
    auto k = create_conv_kernel(p, grouped(isa), isa, o.w, &o.b, &why);
    REQUIRE_MESSAGE(k, why);
    const Tensor before = run_kernel(*k, p, o, grouped(isa).src, grouped(isa).dst);
    const int64_t plane = p.ih * p.iw;
    float* x = o.x.data<float>();
    for (int64_t i = 24 * plane; i < 48 * plane; ++i) x[i] = 1000.f;  // group 1's input
    const Tensor after = run_kernel(*k, p, o, grouped(isa).src, grouped(isa).dst);
    const int64_t oplane = p.oh * p.ow;
    int64_t changed_outside = 0, changed_inside = 0;
    for (int64_t i = 0; i < after.numel(); ++i) {
      const bool inside = i / oplane >= 24 && i / oplane < 48;
      const bool changed = before.data<float>()[i] != after.data<float>()[i];
      (inside ? changed_inside : changed_outside) += changed ? 1 : 0;
    }
    CHECK(changed_outside == 0);
    CHECK(changed_inside == 24 * oplane);
  }
}

}  // namespace
}  // namespace kiln::convtest
