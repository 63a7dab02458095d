// NaN propagates end to end as ONNX and PyTorch define it (max(0, NaN) = NaN, max-pooling
// over a NaN is NaN): an all-NaN input must not come out as a valid-looking output, and a
// single NaN pixel poisons exactly the outputs that depend on it — here every output, through
// the global pooling. Checked on the reference kernels and on every JIT ISA and conv family.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::Tensor;
using kiln::test::randoms;

// x [1, 16, 12, 12]: conv 3x3 + Relu, MaxPool 3x3/2, conv 1x1 + Relu, depthwise 3x3 + Clip,
// grouped conv (4 groups) + Relu + residual Add, Relu, then a head: GlobalAveragePool,
// Flatten, Gemm (10) — and a second output before the head, [1, 16, 6, 6].
std::string nan_model() {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 16, 12, 12}).output("y").output("feat");
  b.init_f("w1", {16, 16, 3, 3}, randoms(16 * 16 * 9, 1, -0.2f, 0.2f));
  b.init_f("w2", {16, 16, 1, 1}, randoms(256, 2, -0.3f, 0.3f));
  b.init_f("w3", {16, 1, 3, 3}, randoms(144, 3, -0.3f, 0.3f));
  b.init_f("w4", {16, 4, 3, 3}, randoms(576, 4, -0.3f, 0.3f));
  b.init_f("fc", {10, 16}, randoms(160, 5, -0.3f, 0.3f));
  b.init_f("lo", {}, {0.f});
  b.init_f("hi", {}, {6.f});
  auto& c1 = b.node("Conv", {"x", "w1"}, {"c1"});
  kiln::test::OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"});
  auto& mp = b.node("MaxPool", {"r1"}, {"p"});
  kiln::test::OnnxBuilder::attr_ints(mp, "kernel_shape", {3, 3});
  kiln::test::OnnxBuilder::attr_ints(mp, "strides", {2, 2});
  kiln::test::OnnxBuilder::attr_ints(mp, "pads", {1, 1, 1, 1});
  b.node("Conv", {"p", "w2"}, {"c2"});
  b.node("Relu", {"c2"}, {"r2"});
  auto& dw = b.node("Conv", {"r2", "w3"}, {"c3"});
  kiln::test::OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  kiln::test::OnnxBuilder::attr_i(dw, "group", 16);
  b.node("Clip", {"c3", "lo", "hi"}, {"r3"});
  auto& gc = b.node("Conv", {"r3", "w4"}, {"c4"});
  kiln::test::OnnxBuilder::attr_ints(gc, "pads", {1, 1, 1, 1});
  kiln::test::OnnxBuilder::attr_i(gc, "group", 4);
  b.node("Relu", {"c4"}, {"r4"});
  b.node("Add", {"r4", "p"}, {"s"});
  b.node("Relu", {"s"}, {"feat"});
  b.node("GlobalAveragePool", {"feat"}, {"g"});
  b.node("Flatten", {"g"}, {"f"});
  auto& gm = b.node("Gemm", {"f", "fc"}, {"y"});
  kiln::test::OnnxBuilder::attr_i(gm, "transB", 1);
  return b.bytes();
}

std::vector<Tensor> run(const std::string& bytes, const kiln::SessionOptions& o, const Tensor& x) {
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> out;
  for (const auto& io : s->outputs()) out.emplace_back(kiln::DType::f32, io.shape);
  s->run({x}, out);
  return out;
}

int64_t count_nan(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isnan(t.data<float>()[i]);
  return n;
}

}  // namespace

TEST_CASE("NaN semantics: NaN inputs give NaN outputs on every path") {
  const std::string bytes = nan_model();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor all_nan(kiln::DType::f32, {1, 16, 12, 12}), one_nan(kiln::DType::f32, {1, 16, 12, 12});
  const std::vector<float> xv = randoms(size_t(one_nan.numel()), 6, -2.f, 2.f);
  for (int64_t i = 0; i < all_nan.numel(); ++i) {
    all_nan.data<float>()[i] = nan;
    one_nan.data<float>()[i] = xv[size_t(i)];
  }
  one_nan.data<float>()[5 * 144 + 7 * 12 + 3] = -nan;  // channel 5, row 7, column 3 (sign set)

  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  const std::vector<Tensor> ref_all = run(bytes, ro, all_nan), ref_one = run(bytes, ro, one_nan);
  // The reference itself: everything NaN for an all-NaN input; a single NaN pixel reaches every
  // logit through the global pooling, and only part of the feature map.
  CHECK(count_nan(ref_all[0]) == ref_all[0].numel());
  CHECK(count_nan(ref_all[1]) == ref_all[1].numel());
  CHECK(count_nan(ref_one[0]) == ref_one[0].numel());
  CHECK(count_nan(ref_one[1]) > 0);
  CHECK(count_nan(ref_one[1]) < ref_one[1].numel());

  using F = kiln::ConvFamily;
  const std::optional<F> families[] = {std::nullopt, F::direct, F::gemm1x1, F::winograd4,
                                       F::im2col};
  for (kiln::Isa isa : kiln::testing::jit_isas())
    for (const std::optional<F>& fam : families) {
      CAPTURE(kiln::isa_name(isa));
      CAPTURE(fam ? kiln::conv_family_name(*fam) : "chosen");
      kiln::SessionOptions o;
      o.use_cache = false;
      o.tune = kiln::TuneMode::none;
      o.max_isa = isa;
      o.threads = 2;
      o.force_family = fam;
      const std::vector<Tensor> all = run(bytes, o, all_nan), one = run(bytes, o, one_nan);
      CHECK(count_nan(all[0]) == all[0].numel());
      CHECK(count_nan(all[1]) == all[1].numel());
      CHECK(count_nan(one[0]) == one[0].numel());
      if (fam != F::winograd4) {
        // Exactly the reference's NaN positions in the feature map (Winograd mixes a whole
        // tile in its transforms, so a NaN spreads to the tile: not compared).
        int64_t same = 0;
        for (int64_t i = 0; i < one[1].numel(); ++i)
          same += std::isnan(one[1].data<float>()[i]) == std::isnan(ref_one[1].data<float>()[i]);
        CHECK(same == one[1].numel());
      }
    }
}
