// The session's precision option (runtime/labels.h): names, f32 plans free of bf16 layouts,
// bf16 plans that compute 1x1 convolutions in bf16 (on CPUs with AVX512-BF16) within bf16's
// error of the reference, and plans kept apart per precision in the tuning cache.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/session.h"
#include "session_test_util.h"

namespace fs = std::filesystem;
using kiln::Precision;
using kiln::Tensor;

using namespace kiln::sessiontest;

namespace {

// A ResNet bottleneck with a projection shortcut: 1x1 (relu) -> 3x3 (relu) -> 1x1, plus a 1x1
// of the input, added, relu (1x1-heavy, so the cost model alone picks bf16 for them); channel
// counts with tails (136, 520) and a stride-2 variant.
std::string bottleneck(int64_t stride) {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 256, 14, 14});
  std::mt19937 rng(11);
  auto conv = [&](const std::string& n, const std::string& in, int64_t ic, int64_t oc, int64_t k,
                  int64_t s, const std::string& out) {
    std::normal_distribution<float> w(0.f, std::sqrt(2.f / float(k * k * ic)));
    std::vector<float> wv(static_cast<size_t>(oc * ic * k * k)), bv(static_cast<size_t>(oc));
    for (float& v : wv) v = w(rng);
    for (float& v : bv) v = 0.1f * w(rng);
    b.init_f("w" + n, {oc, ic, k, k}, wv);
    b.init_f("b" + n, {oc}, bv);
    auto& c = b.node("Conv", {in, "w" + n, "b" + n}, {out});
    kiln::test::OnnxBuilder::attr_ints(c, "kernel_shape", {k, k});
    kiln::test::OnnxBuilder::attr_ints(c, "strides", {s, s});
    const int64_t p = k / 2;
    kiln::test::OnnxBuilder::attr_ints(c, "pads", {p, p, p, p});
  };
  conv("1", "x", 256, 136, 1, 1, "c1");
  b.node("Relu", {"c1"}, {"r1"});
  conv("2", "r1", 136, 136, 3, stride, "c2");
  b.node("Relu", {"c2"}, {"r2"});
  conv("3", "r2", 136, 520, 1, 1, "c3");
  conv("s", "x", 256, 520, 1, stride, "cs");
  b.node("Add", {"c3", "cs"}, {"a"});
  b.node("Relu", {"a"}, {"y"});
  b.output("y");
  return b.bytes();
}

Tensor normal_input(uint64_t seed) {
  return normal_tensor({1, 256, 14, 14}, seed);
}

// Nodes whose label reads or writes a bf16 layout.
int bf16_nodes(const kiln::Selection& sel) {
  int n = 0;
  for (const kiln::NodeChoice& c : sel.nodes)
    n += kiln::layout_bf16(c.label.in) || kiln::layout_bf16(c.label.out);
  return n;
}

}  // namespace

TEST_CASE("precision names parse; other names are refused") {
  for (Precision p : {Precision::f32, Precision::bf16}) {
    Precision back = Precision::bf16;
    REQUIRE(kiln::parse_precision(kiln::precision_name(p), &back));
    CHECK(back == p);
  }
  Precision x = Precision::f32;
  for (const char* bad : {"", "BF16", "fp32", "bfloat16", "int8"})
    CHECK_FALSE(kiln::parse_precision(bad, &x));
  CHECK(x == Precision::f32);
  for (int l = 0; l < kiln::kNumLayouts; ++l) {
    const auto back = kiln::Label::parse(std::string("pool.") + kiln::layout_name(kiln::Layout(l)));
    REQUIRE(back);
    CHECK(back->in == kiln::Layout(l));
  }
  // fc carries its precision in the label (its operands are f32 rows either way).
  const auto fc = kiln::Label::parse("fc.nchw.bf16");
  REQUIRE(fc);
  CHECK(fc->precision == Precision::bf16);
  CHECK(fc->key() == "fc.nchw.bf16");
  CHECK(kiln::Label::parse("fc.nchw")->precision == Precision::f32);
  CHECK_FALSE(kiln::Label::parse("pool.nchw.bf16"));
  // An eltwise label may write another layout (a quantize-dequantize storing its integers).
  const auto q = kiln::Label::parse("eltwise.nChw16c.nChw16c_u8");
  REQUIRE(q);
  CHECK(q->in == kiln::Layout::nChw16c);
  CHECK(q->out == kiln::Layout::nChw16c_u8);
  CHECK(q->key() == "eltwise.nChw16c.nChw16c_u8");
  CHECK_FALSE(kiln::Label::parse("eltwise.nChw16c.nChw16c"));
  CHECK_FALSE(kiln::Label::parse("pool.nChw16c.nChw16c_u8"));
  CHECK_FALSE(kiln::Label::parse("fc.nchw.f16"));
}

TEST_CASE("precision f32 never offers a bf16 layout; bf16 offers them only where they run") {
  for (int64_t stride : {1, 2}) {
    const std::string m = bottleneck(stride);
    kiln::SessionOptions o;
    o.threads = 1;
    o.tune = kiln::TuneMode::none;
    o.use_cache = false;
    auto s = load(m, o);
    for (size_t i = 0; i < s->graph().nodes.size(); ++i)
      for (const kiln::Label& l : kiln::candidate_labels(s->graph(), int(i), s->isa(), false))
        CHECK_FALSE((kiln::layout_bf16(l.in) || kiln::layout_bf16(l.out)));
    CHECK(bf16_nodes(s->selection()) == 0);
    int offered = 0;
    for (size_t i = 0; i < s->graph().nodes.size(); ++i)
      for (const kiln::Label& l :
           kiln::candidate_labels(s->graph(), int(i), s->isa(), false, Precision::bf16))
        offered += kiln::layout_bf16(l.in);
    if (kiln::bf16_supported(s->isa()))
      CHECK(offered > 0);
    else
      CHECK(offered == 0);
  }
}

TEST_CASE("precision bf16 computes the 1x1 convs in bf16 within bf16's error") {
  if (!kiln::testing::has_bf16()) return;
  for (int64_t stride : {1, 2}) {
    CAPTURE(stride);
    const std::string m = bottleneck(stride);
    const Tensor x = normal_input(uint64_t(stride));
    kiln::SessionOptions ro;
    ro.reference = true;
    const Tensor ref = run(*load(m, ro), x);
    kiln::SessionOptions o;
    o.threads = 2;
    o.use_cache = false;
    o.tune = kiln::TuneMode::none;  // deterministic: the cost model prefers bf16 for the 1x1s
    auto f32 = load(m, o);
    o.precision = Precision::bf16;
    auto bf16 = load(m, o);
    CHECK(bf16->selection().precision == Precision::bf16);
    REQUIRE(bf16_nodes(bf16->selection()) > 0);
    const double e32 = rel_error(run(*f32, x), ref), e16 = rel_error(run(*bf16, x), ref);
    CHECK(e32 < 1e-5);
    // Inputs and weights rounded to 8 significant bits (2^-9 relative each) through two bf16
    // layers: ~1e-3 of the output's max; a wrong kernel is off by O(1).
    CHECK(e16 < 1.5e-2);
    CHECK(e16 > e32);  // it really computed in bf16
  }
}

std::vector<std::string> label_keys(const kiln::Selection& sel) {
  std::vector<std::string> k;
  for (const kiln::NodeChoice& c : sel.nodes) k.push_back(c.label.key());
  return k;
}

TEST_CASE("the tuning cache keeps plans apart per precision") {
  if (!kiln::testing::has_bf16()) return;
  const fs::path dir = fresh_dir("precision_cache");
  const std::string m = bottleneck(1);
  kiln::SessionOptions o;
  o.threads = 1;
  o.cache_dir = dir.string();
  o.tune = kiln::TuneMode::fast;  // (plans chosen by the cost model alone are not stored)
  std::vector<std::string> first_f, first_b;
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    o.precision = Precision::f32;
    auto f = load(m, o);
    CHECK(f->selection().plan_from_cache == (round == 1));
    CHECK(bf16_nodes(f->selection()) == 0);  // never bf16's stored plan
    o.precision = Precision::bf16;
    auto b = load(m, o);
    CHECK(b->selection().plan_from_cache == (round == 1));
    if (round == 0) {
      first_f = label_keys(f->selection());
      first_b = label_keys(b->selection());
    } else {
      CHECK(label_keys(f->selection()) == first_f);
      CHECK(label_keys(b->selection()) == first_b);
    }
  }
}
