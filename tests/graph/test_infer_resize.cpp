// Shape inference of Resize (scales, sizes, axes, keep_aspect_ratio_policy, refusals), the
// import-time rewrites of Upsample and opset-10 Resize into the canonical Resize, the
// interpolation taps (graph/resize.h) against hand-derived values of ONNX's formulas, and
// DepthToSpace / SpaceToDepth.
#include "graph/onnx_builder.h"
#include "graph/resize.h"
#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

namespace {

ValueId scales(Builder& b, const std::vector<float>& v) {
  Tensor t(DType::f32, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return b.g.add_const("scales", t);
}

void attr_s(onnx::NodeProto& n, const std::string& k, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

}  // namespace

TEST_CASE("infer Resize: output sizes") {
  Builder b;
  SUBCASE("scales: floor(in * scale) per axis") {
    b.node("Resize", {b.in("x", {1, 3, 10, 10}), kNoValue, scales(b, {1, 1, 1.5f, 0.65f})});
    CHECK(b.shape() == Shape{1, 3, 15, 6});
  }
  SUBCASE("sizes with axes") {
    b.node("Resize", {b.in("x", {2, 3, 10, 20}), kNoValue, kNoValue, b.ints("s", {7, 9})});
    b.set_ints("axes", {-1, 2});
    CHECK(b.shape() == Shape{2, 3, 9, 7});
  }
  SUBCASE("keep_aspect_ratio_policy not_larger / not_smaller: round(scale * in)") {
    b.node("Resize", {b.in("x", {1, 1, 10, 20}), kNoValue, kNoValue, b.ints("s", {5, 5})});
    b.set_ints("axes", {2, 3});
    b.set_s("keep_aspect_ratio_policy", "not_larger");
    CHECK(b.shape() == Shape{1, 1, 3, 5});  // scale min(0.5, 0.25): 10*0.25 = 2.5 -> 3
    b.set_s("keep_aspect_ratio_policy", "not_smaller");
    CHECK(b.shape() == Shape{1, 1, 5, 10});
  }
  SUBCASE("empty scales of opset 11-13 mean sizes") {
    Tensor e(DType::f32, {0});
    b.node("Resize",
           {b.in("x", {1, 2, 4, 4}), kNoValue, b.g.add_const("e", e), b.ints("s", {1, 2, 3, 5})});
    CHECK(b.shape() == Shape{1, 2, 3, 5});
  }
  SUBCASE("refusals") {
    SUBCASE("scales computed at run time") {
      b.node("Resize", {b.in("x", {1, 3, 4, 4}), kNoValue, b.in("sc", {4})});
      check_fails(b, Code::unsupported, "data-dependent output size");
    }
    SUBCASE("both scales and sizes") {
      b.node("Resize", {b.in("x", {1, 3, 4, 4}), kNoValue, scales(b, {1, 1, 2, 2}),
                        b.ints("s", {1, 3, 8, 8})});
      check_fails(b, Code::invalid_model, "exactly one of");
    }
    SUBCASE("wrong count") {
      b.node("Resize", {b.in("x", {1, 3, 4, 4}), kNoValue, scales(b, {2, 2})});
      check_fails(b, Code::invalid_model, "scales has 2 values for 4 resized axes");
    }
    SUBCASE("unknown mode") {
      b.node("Resize", {b.in("x", {1, 3, 4, 4}), kNoValue, scales(b, {1, 1, 2, 2})});
      b.set_s("mode", "bicubic");
      check_fails(b, Code::invalid_model, "unknown mode 'bicubic'");
    }
    SUBCASE("integer input") {
      b.node("Resize", {b.in("x", {1, 3, 4, 4}, DType::i64), kNoValue, scales(b, {1, 1, 2, 2})});
      check_fails(b, Code::unsupported, "");
    }
  }
}

TEST_CASE("Resize taps follow ONNX's coordinate transforms and filters") {
  Node n;
  n.name = "r";
  n.op = "Resize";
  Tensor sc(DType::f32, {1});
  auto taps = [&](float scale, int64_t in) {
    sc.data<float>()[0] = scale;
    return resize_taps(resize_spec(n, {in}, nullptr, &sc, nullptr), 0);
  };
  SUBCASE("nearest half_pixel round_prefer_floor, downscale 0.6 of 5 -> 3") {
    // x = (o + 0.5) / 0.6 - 0.5 = 0.333, 2, 3.667 -> 0, 2, 4
    const ResizeTaps t = taps(0.6f, 5);
    CHECK(t.idx == std::vector<int64_t>{0, 2, 4});
  }
  SUBCASE("nearest asymmetric floor / ceil") {
    n.attrs["coordinate_transformation_mode"] = attr_s("asymmetric");
    n.attrs["nearest_mode"] = attr_s("floor");
    CHECK(taps(2.5f, 2).idx == std::vector<int64_t>{0, 0, 0, 1, 1});  // o / 2.5
    n.attrs["nearest_mode"] = attr_s("ceil");
    CHECK(taps(2.5f, 2).idx == std::vector<int64_t>{0, 1, 1, 1, 1});  // clamped to 1
  }
  SUBCASE("linear align_corners 3 -> 5: x = o / 2") {
    n.attrs["mode"] = attr_s("linear");
    n.attrs["coordinate_transformation_mode"] = attr_s("align_corners");
    Tensor sz(DType::i64, {1});
    sz.data<int64_t>()[0] = 5;
    const ResizeTaps t = resize_taps(resize_spec(n, {3}, nullptr, nullptr, &sz), 0);
    REQUIRE(t.taps == 2);
    // o = 1: x = 0.5 -> 0.5 * x0 + 0.5 * x1; o = 2: x = 1 (ratio 1 on [0, 1]).
    CHECK(t.idx[2] == 0);
    CHECK(t.idx[3] == 1);
    CHECK(t.w[2] == doctest::Approx(0.5));
    CHECK(t.w[3] == doctest::Approx(0.5));
    CHECK(t.w[4] == doctest::Approx(0));
    CHECK(t.w[5] == doctest::Approx(1));
  }
  SUBCASE("cubic half_pixel: weights sum to 1, 4 taps; antialias widens to 8 at 0.5") {
    n.attrs["mode"] = attr_s("cubic");
    const ResizeTaps t = taps(2.f, 4);
    REQUIRE(t.taps == 4);
    for (size_t o = 0; o < 8; ++o) {
      double s = 0;
      for (size_t k = 0; k < 4; ++k) s += t.w[o * 4 + k];
      CHECK(s == doctest::Approx(1));
    }
    n.attrs["antialias"] = attr_i(1);
    CHECK(taps(0.5f, 8).taps == 8);
    CHECK(taps(2.f, 8).taps == 4);
  }
  SUBCASE("tf_crop_and_resize marks extrapolated outputs") {
    n.attrs["mode"] = attr_s("linear");
    n.attrs["coordinate_transformation_mode"] = attr_s("tf_crop_and_resize");
    Tensor roi(DType::f32, {2});
    roi.data<float>()[0] = -0.5f;
    roi.data<float>()[1] = 1.f;
    sc.data<float>()[0] = 1;
    const ResizeTaps t = resize_taps(resize_spec(n, {5}, &roi, &sc, nullptr), 0);
    // x = -0.5 * 4 + o * 1.5 * 4 / 4 = -2, -0.5, 1, 2.5, 4
    CHECK(t.outside == std::vector<uint8_t>{1, 1, 0, 0, 0});
  }
}

TEST_CASE("import: Upsample and opset-10 Resize become the canonical Resize") {
  SUBCASE("Upsample opset 7, attribute scales") {
    test::OnnxBuilder b(7);
    b.input("x", {1, 2, 3, 4}).output("y");
    auto& n = b.node("Upsample", {"x"}, {"y"});
    auto* a = n.add_attribute();
    a->set_name("scales");
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float s : {1.f, 1.f, 2.f, 3.f}) a->add_floats(s);
    Graph g = test::import(b);
    REQUIRE(g.nodes.size() == 1);
    const Node& r = g.nodes[0];
    CHECK(r.op == "Resize");
    CHECK(r.attr_s("coordinate_transformation_mode", "") == "asymmetric");
    CHECK(r.attr_s("nearest_mode", "") == "floor");
    REQUIRE(r.inputs.size() == 3);
    CHECK(r.inputs[1] == kNoValue);
    CHECK(g.value(r.inputs[2]).is_const());
  }
  SUBCASE("Upsample opset 9 linear, input scales; Resize opset 10 downscale") {
    test::OnnxBuilder b(9);
    b.input("x", {1, 2, 3, 4}).output("y");
    b.init_f("s", {4}, {1, 1, 2, 2});
    attr_s(b.node("Upsample", {"x", "s"}, {"y"}), "mode", "linear");
    Graph g = test::import(b);
    CHECK(g.nodes[0].attr_s("mode", "") == "linear");
    CHECK(g.nodes[0].attr_f("cubic_coeff_a", 0) == -0.75f);
    CHECK(g.nodes[0].has("antialias"));

    test::OnnxBuilder b10(10);
    b10.input("x", {1, 2, 4, 4}).output("y");
    b10.init_f("s", {4}, {1, 1, 0.5f, 0.5f});
    b10.node("Resize", {"x", "s"}, {"y"});
    Graph g10 = test::import(b10);
    CHECK(g10.nodes[0].attr_s("nearest_mode", "") == "ceil");
    CHECK(g10.nodes[0].inputs.size() == 3);
  }
}

TEST_CASE("infer DepthToSpace / SpaceToDepth") {
  Builder b;
  SUBCASE("DepthToSpace") {
    b.node("DepthToSpace", {b.in("x", {2, 18, 3, 5})});
    b.set_i("blocksize", 3);
    CHECK(b.shape() == Shape{2, 2, 9, 15});
  }
  SUBCASE("SpaceToDepth") {
    b.node("SpaceToDepth", {b.in("x", {1, 3, 4, 6})});
    b.set_i("blocksize", 2);
    CHECK(b.shape() == Shape{1, 12, 2, 3});
  }
  SUBCASE("errors") {
    b.node("DepthToSpace", {b.in("x", {1, 5, 3, 3})});
    b.set_i("blocksize", 2);
    check_fails(b, Code::invalid_model, "not a multiple of blocksize^2");
  }
}
