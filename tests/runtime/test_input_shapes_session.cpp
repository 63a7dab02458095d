// Shapes decided by the caller in the C++ core: SessionOptions::input_shapes (height and width
// of a fully convolutional network against the reference path, on every JIT ISA) and runs at
// another batch (Session::run with inputs of another dim 0) against a load at that batch.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph/error.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::Shape;
using kiln::Tensor;

const std::string kModel = std::string(KILN_FIXTURE_DIR) + "/models/tiny_resnet_op13/model.onnx";

Tensor input(const Shape& shape, uint32_t seed) {
  Tensor x(kiln::DType::f32, shape);
  const std::vector<float> v = kiln::test::randoms(size_t(x.numel()), seed, -2.f, 2.f);
  std::copy(v.begin(), v.end(), x.data<float>());
  return x;
}

Tensor run(const kiln::Session& s, const Tensor& x, const Shape& out_shape) {
  std::vector<Tensor> out;
  out.emplace_back(kiln::DType::f32, out_shape);
  s.run({x}, out);
  return std::move(out[0]);
}

float max_rel_diff(const Tensor& a, const Tensor& b) {
  float worst = 0, scale = 1e-30f;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::fabs(a.data<float>()[i] - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(b.data<float>()[i]));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("input shapes: parse_input_shapes") {
  auto shapes = kiln::parse_input_shapes("input:0:1x3x8x8,b:5");
  CHECK(shapes.size() == 2);
  CHECK(shapes["input:0"] == Shape{1, 3, 8, 8});  // the name runs to the last ':'
  CHECK(shapes["b"] == Shape{5});
  CHECK(kiln::parse_input_shapes("").empty());
  for (const char* bad : {"x", ":1x2", "x:", "x:1x", "x:1,", "x:1x+2", "x:1,x:2", "x:0"}) {
    const std::string text = bad;
    CAPTURE(text);
    CHECK_THROWS_AS(kiln::parse_input_shapes(bad), kiln::Error);
  }
}

TEST_CASE("input shapes: height and width set at load match the reference path") {
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  ro.input_shapes = {{"input", {2, 3, 40, 24}}};
  auto ref = kiln::Session::load_file(kModel, ro);
  REQUIRE(ref->inputs()[0].shape == Shape{2, 3, 40, 24});
  const Shape out_shape = ref->outputs()[0].shape;
  CHECK(out_shape == Shape{2, 10});
  const Tensor x = input({2, 3, 40, 24}, 3);
  const Tensor want = run(*ref, x, out_shape);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o = ro;
    o.reference = false;
    o.max_isa = isa;
    o.threads = 2;
    o.tune = kiln::TuneMode::none;
    auto s = kiln::Session::load_file(kModel, o);
    for (const kiln::NodeChoice& c : s->selection().nodes)
      CHECK(c.label.kind != kiln::LabelKind::ref);
    CHECK(max_rel_diff(run(*s, x, out_shape), want) <= 1e-4f);

    // Another batch at run time: the same numbers as a load at that batch (tune none: one
    // plan), and the output has that batch.
    const Tensor x3 = input({3, 3, 40, 24}, 4);
    kiln::SessionOptions o3 = o;
    o3.batch = 3;
    auto s3 = kiln::Session::load_file(kModel, o3);
    const Tensor want3 = run(*s3, x3, {3, 10});
    const Tensor got3 = run(*s, x3, {3, 10});
    CHECK(max_rel_diff(got3, want3) == 0.f);
    CHECK(s->at_batch(3)->outputs()[0].shape == Shape{3, 10});
    CHECK(s->at_batch(2).get() == s.get());
    // Only dim 0 may differ, the same in every input; outputs must have the batch's shape.
    std::vector<Tensor> out;
    out.emplace_back(kiln::DType::f32, Shape{2, 10});
    CHECK_THROWS_AS(s->run({x3}, out), kiln::Error);
    CHECK_THROWS_AS(s->run({input({2, 3, 40, 25}, 5)}, out), kiln::Error);
  }
}

TEST_CASE("input shapes: at most kMaxBatchPlans other batches are kept") {
  kiln::SessionOptions o;
  o.use_cache = false;
  o.tune = kiln::TuneMode::none;
  o.threads = 1;
  o.input_shapes = {{"input", {1, 3, 8, 8}}};
  auto s = kiln::Session::load_file(kModel, o);
  auto first = s->at_batch(2);
  for (int64_t b = 3; b < 3 + int64_t(kiln::Session::kMaxBatchPlans); ++b) s->at_batch(b);
  // Batch 2 was the least recently used: dropped, planned again (the old one lives on while
  // held), with the same results.
  auto again = s->at_batch(2);
  CHECK(again.get() != first.get());
  const Tensor x = input({2, 3, 8, 8}, 6);
  CHECK(max_rel_diff(run(*again, x, {2, 10}), run(*first, x, {2, 10})) == 0.f);
}
