// ConvTranspose: shape inference (output formula, output_shape, auto_pad, output_padding made
// explicit as pads; errors) and graph/rewrite_convt.cpp's sub-pixel Conv + SubpixelInterleave,
// run through the reference kernels against the ConvTranspose reference over a sweep.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "graph/convt_case.h"
#include "graph/onnx_builder.h"
#include "graph/passes.h"
#include "ref_graph.h"

namespace kiln {
namespace {

using test::ConvTCase;
using test::OnnxBuilder;

void attr_str(onnx::NodeProto& n, const std::string& k, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// x [1, 2, 3, 4], w [2, 3, 3, 3]; `edit` sets attributes. Returns the inferred graph.
Graph infer_one(const std::function<void(onnx::NodeProto&)>& edit, int64_t wc = 2,
                int64_t group = 1) {
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 4});
  b.init_f("wt", {wc, 3, 3, 3}, std::vector<float>(size_t(wc * 27), 0.5f));
  auto& n = b.node("ConvTranspose", {"x", "wt"}, {"y"}, "ct");
  if (group != 1) OnnxBuilder::attr_i(n, "group", group);
  edit(n);
  b.output("y");
  Graph g = test::import(b);
  infer_shapes(g);
  return g;
}

Shape out_shape(const Graph& g) {
  return g.value(g.outputs[0]).shape;
}

TEST_CASE("ConvTranspose inference: the spec's output size, attributes made explicit") {
  // Default: s 1, out = in + k - 1.
  Graph g = infer_one([](onnx::NodeProto&) {});
  CHECK(out_shape(g) == Shape{1, 3, 5, 6});
  const Node& n = g.nodes[0];
  CHECK(n.attr_ints("pads") == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(n.attr_ints("strides") == std::vector<int64_t>{1, 1});
  CHECK(n.attr_ints("kernel_shape") == std::vector<int64_t>{3, 3});
  // Strides, pads, dilation, output_padding (folded into the end pads).
  g = infer_one([](onnx::NodeProto& n) {
    OnnxBuilder::attr_ints(n, "strides", {3, 2});
    OnnxBuilder::attr_ints(n, "pads", {1, 0, 2, 1});
    OnnxBuilder::attr_ints(n, "dilations", {2, 1});
    OnnxBuilder::attr_ints(n, "output_padding", {1, 1});
  });
  // h: 3 * 2 + 1 + 5 - 3 = 9; w: 2 * 3 + 1 + 3 - 1 = 9.
  CHECK(out_shape(g) == Shape{1, 3, 9, 9});
  CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{1, 0, 1, 0});
  CHECK_FALSE(g.nodes[0].has("output_padding"));
  // output_shape: total padding split begin-heavy (NOTSET) ...
  g = infer_one([](onnx::NodeProto& n) {
    OnnxBuilder::attr_ints(n, "strides", {2, 2});
    OnnxBuilder::attr_ints(n, "output_shape", {6, 8});
  });
  CHECK(out_shape(g) == Shape{1, 3, 6, 8});  // full 7 x 9: total 1 each
  CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{1, 1, 0, 0});
  CHECK_FALSE(g.nodes[0].has("output_shape"));
  // ... or SAME_UPPER: end-heavy; out = in * s.
  g = infer_one([](onnx::NodeProto& n) {
    OnnxBuilder::attr_ints(n, "strides", {2, 2});
    attr_str(n, "auto_pad", "SAME_UPPER");
  });
  CHECK(out_shape(g) == Shape{1, 3, 6, 8});
  CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{0, 0, 1, 1});
  CHECK_FALSE(g.nodes[0].has("auto_pad"));
  g = infer_one([](onnx::NodeProto& n) {
    OnnxBuilder::attr_ints(n, "strides", {2, 2});
    attr_str(n, "auto_pad", "SAME_LOWER");
  });
  CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{1, 1, 0, 0});
  // An output_shape past the full size grows the end (ONNX's reference rounds half down).
  g = infer_one([](onnx::NodeProto& n) {
    OnnxBuilder::attr_ints(n, "strides", {2, 2});
    OnnxBuilder::attr_ints(n, "output_shape", {8, 11});
  });
  CHECK(out_shape(g) == Shape{1, 3, 8, 11});  // full 7 x 9: totals -1, -2
  CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{0, -1, -1, -1});
  // Full 4-D output_shape accepted; groups multiply the weight's output channels.
  g = infer_one(
      [](onnx::NodeProto& n) {
        OnnxBuilder::attr_ints(n, "output_shape", {1, 6, 5, 6});
      },
      2, 2);
  CHECK(out_shape(g) == Shape{1, 6, 5, 6});
}

TEST_CASE("ConvTranspose inference: clear errors") {
  auto fails = [](const std::function<void(onnx::NodeProto&)>& edit, Code code,
                  const std::string& what, int64_t wc = 2, int64_t group = 1) {
    try {
      infer_one(edit, wc, group);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == code);
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find("ct") != std::string::npos);
      CHECK(msg.find(what) != std::string::npos);
    }
  };
  fails([](onnx::NodeProto&) {}, Code::invalid_model, "input channels", 3);
  fails([](onnx::NodeProto&) {}, Code::invalid_model, "group 3", 2, 3);
  fails(
      [](onnx::NodeProto& n) {
        OnnxBuilder::attr_ints(n, "pads", {3, 3, 3, 3});
      },
      Code::invalid_model, "no output");
  fails(
      [](onnx::NodeProto& n) {
        OnnxBuilder::attr_ints(n, "strides", {0, 1});
      },
      Code::invalid_model, "strides");
  fails([](onnx::NodeProto& n) { attr_str(n, "auto_pad", "MIDDLE"); }, Code::invalid_model,
        "auto_pad");
  fails([](onnx::NodeProto& n) { OnnxBuilder::attr_ints(n, "output_shape", {5}); },
        Code::invalid_model, "output_shape");
  fails(
      [](onnx::NodeProto& n) {
        OnnxBuilder::attr_ints(n, "kernel_shape", {2, 2});
      },
      Code::invalid_model, "kernel_shape");
  // 1-D ConvTranspose runs as the 2-D form (import lifts it): [1, 2, 5] -> [1, 3, 7].
  {
    OnnxBuilder b;
    b.input("x", {1, 2, 5});
    b.init_f("wt", {2, 3, 3}, std::vector<float>(18, 1.f));
    b.node("ConvTranspose", {"x", "wt"}, {"y"}, "ct1");
    b.output("y");
    Graph g = test::import(b);
    infer_shapes(g);
    CHECK(g.value(g.outputs[0]).shape == Shape{1, 3, 7});
  }
  // 3-D ConvTranspose (rewrite_conv3d lowers it): D, H, W each by the formula; a 4-D one is
  // valid ONNX Kiln does not run.
  {
    OnnxBuilder b;
    b.input("x", {1, 2, 5, 4, 3});
    b.init_f("wt", {2, 3, 3, 3, 2}, std::vector<float>(108, 1.f));
    auto& n = b.node("ConvTranspose", {"x", "wt"}, {"y"}, "ct3");
    OnnxBuilder::attr_ints(n, "strides", {2, 1, 3});
    OnnxBuilder::attr_ints(n, "pads", {1, 0, 0, 1, 1, 0});
    OnnxBuilder::attr_ints(n, "output_padding", {1, 0, 2});
    b.output("y");
    Graph g = test::import(b);
    infer_shapes(g);
    // d: 2 * 4 + 1 + 3 - 2 = 10; h: 3 + 3 - 1 = 5; w: 3 * 2 + 2 + 2 = 10.
    CHECK(g.value(g.outputs[0]).shape == Shape{1, 3, 10, 5, 10});
    CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{1, 0, 0, 0, 1, -2});
  }
  OnnxBuilder b;
  b.input("x", {1, 2, 5, 5, 5, 5});
  b.init_f("wt", {2, 3, 1, 1, 1, 1}, std::vector<float>(6, 1.f));
  b.node("ConvTranspose", {"x", "wt"}, {"y"}, "ct4");
  b.output("y");
  Graph g = test::import(b);
  try {
    infer_shapes(g);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("2-D") != std::string::npos);
  }
}

std::vector<float> run_y(const Graph& g) {
  auto vals = test::run_graph_ref(g, [](size_t, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(0.37f * float(i) + 1);
  });
  const Tensor& y = vals.at(g.outputs[0]);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

// The rewritten graph g's output equals `want` (its output before the rewrite) within 1e-5.
void check_output(const Graph& g, const std::vector<float>& want) {
  const std::vector<float> after = run_y(g);
  REQUIRE(after.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    REQUIRE(after[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

TEST_CASE("rewrite_conv_transposes: sub-pixel Conv + interleave == ConvTranspose (sweep)") {
  int interleaved = 0, direct = 0, phased = 0;
  for (const ConvTCase& k : test::convt_sweep(300, 5)) {
    const std::string desc = k.str();
    CAPTURE(desc);
    Graph g = test::import(test::convt_model(k));
    infer_shapes(g);
    const std::vector<float> before = run_y(g);
    // The ConvTranspose reference against the independent oracle, on the same input.
    std::vector<float> x(size_t(k.n * k.c * k.h * k.w));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i) + 1);
    const std::vector<float> want = test::convt_oracle(k, x);
    REQUIRE(before.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i)
      REQUIRE(before[i] == doctest::Approx(want[i]).epsilon(1e-5));

    REQUIRE(rewrite_conv_transposes(g) == 1);
    for (const Node& n : g.nodes) CHECK(n.op != "ConvTranspose");
    interleaved += g.nodes.back().op == "SubpixelInterleave";
    direct += g.nodes.back().op == "Conv";
    phased += g.nodes.back().attr_i("phase_major", 0) == 1;
    check_output(g, want);
  }
  CHECK(interleaved > 100);  // every form is exercised
  CHECK(direct > 5);
  CHECK(phased > 30);
  CHECK(interleaved - phased > 30);
}

TEST_CASE(
    "rewrite_conv_transposes: a following BatchNormalization and Relu move before the "
    "interleave") {
  for (int64_t stride : {1, 2}) {
    CAPTURE(stride);
    ConvTCase k;
    k.c = 3, k.m = 5, k.sh = k.sw = stride, k.kh = k.kw = 3, k.pt = k.pl = k.pb = k.pr = 1;
    OnnxBuilder b = test::convt_model(k);
    for (const char* p : {"sc", "sh", "mu", "var"})
      b.init_f(p, {5}, test::randoms(5, uint32_t(p[0] + p[1]), 0.5f, 1.5f));
    b.node("BatchNormalization", {"y", "sc", "sh", "mu", "var"}, {"bn"});
    b.node("Relu", {"bn"}, {"r"});
    b.output("r");
    Graph g = test::import(b);
    g.outputs = {g.find("r")};
    infer_shapes(g);
    const std::vector<float> before = run_y(g);
    REQUIRE(rewrite_conv_transposes(g) == 1);
    remove_dead_code(g);
    std::vector<std::string> ops;
    for (const Node& n : g.nodes) ops.push_back(n.op);
    if (stride == 1) {
      CHECK(ops == std::vector<std::string>{"Conv", "Relu"});
    } else {  // k3s2: a Conv per phase (their 2x2, 2x1, 1x2, 1x1 taps), each with its Relu
      CHECK(ops == std::vector<std::string>{"Conv", "Relu", "Conv", "Relu", "Conv", "Relu", "Conv",
                                            "Relu", "Concat", "SubpixelInterleave"});
    }
    check_output(g, before);
  }
}

// k4s2p1 (DCGAN, U-Net decoders): one Conv computes (H + 1) x (W + 1) phase planes, so on a
// small map a Conv per phase (H x W each) is cheaper; on a large one the single Conv stays.
TEST_CASE("rewrite_conv_transposes: a Conv per phase on small maps") {
  for (int64_t hw : {4, 6, 32}) {
    CAPTURE(hw);
    ConvTCase k;
    k.c = 3, k.m = 4, k.h = k.w = hw, k.kh = k.kw = 4, k.pt = k.pl = k.pb = k.pr = 1;
    Graph g = test::import(test::convt_model(k));
    infer_shapes(g);
    const std::vector<float> before = run_y(g);
    REQUIRE(rewrite_conv_transposes(g) == 1);
    int convs = 0;
    for (const Node& n : g.nodes) {
      convs += n.op == "Conv";
      if (n.op == "Conv" && hw < 32)  // each phase: 2x2 taps, hw x hw outputs
        CHECK(g.value(n.outputs[0]).shape == Shape{1, 4, hw, hw});
    }
    CHECK(convs == (hw < 32 ? 4 : 1));
    check_output(g, before);
  }
}

TEST_CASE("rewrite_conv_transposes: negative begin pads (output_shape past the full size)") {
  for (int64_t stride : {1, 2, 3}) {
    CAPTURE(stride);
    OnnxBuilder b;
    b.input("x", {1, 2, 3, 4});
    b.init_f("wt", {2, 3, 3, 2}, test::randoms(36, 3, -1.f, 1.f));
    auto& n = b.node("ConvTranspose", {"x", "wt"}, {"y"}, "ct");
    OnnxBuilder::attr_ints(n, "strides", {stride, stride});
    // Full size 2s + 3 by 3s + 2; 3 and 4 more: pads (-1, -2, -2, -2).
    OnnxBuilder::attr_ints(n, "output_shape", {2 * stride + 6, 3 * stride + 6});
    b.output("y");
    Graph g = test::import(b);
    infer_shapes(g);
    CHECK(g.nodes[0].attr_ints("pads") == std::vector<int64_t>{-1, -2, -2, -2});
    const std::vector<float> before = run_y(g);
    REQUIRE(rewrite_conv_transposes(g) == 1);
    check_output(g, before);
  }
}

TEST_CASE("rewrite_conv_transposes: weights that are not constant are left alone") {
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3});
  b.input("wt", {2, 2, 2, 2});
  b.node("ConvTranspose", {"x", "wt"}, {"y"}, "ct");
  b.output("y");
  Graph g = test::import(b);
  infer_shapes(g);
  CHECK(rewrite_conv_transposes(g) == 0);
  CHECK(g.nodes.size() == 1);
  CHECK(g.nodes[0].op == "ConvTranspose");
}

}  // namespace
}  // namespace kiln
