// Graph passes, each on its own: shape inference + constant folding, identity removal,
// BatchNormalization folding, dead-code removal.
#include <doctest/doctest.h>

#include <cmath>

#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "ref_graph.h"

using kiln::Code;
using kiln::Graph;
using kiln::Shape;
using kiln::test::OnnxBuilder;

namespace {

using kiln::test::import;

using kiln::test::ref_eval;

int count_op(const Graph& g, const std::string& op) {
  int c = 0;
  for (const auto& n : g.nodes) c += n.op == op;
  return c;
}

// x[1,2,3,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape: the pattern
// torch emits for x.view(x.size(0), -1).
OnnxBuilder flatten_by_shape_arithmetic() {
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 4}).output("y");
  b.init_i("zero", {}, {0});
  b.init_i("axes0", {1}, {0});
  b.init_i("minus1", {1}, {-1});
  b.node("Shape", {"x"}, {"s"});
  auto& gather = b.node("Gather", {"s", "zero"}, {"n"});
  OnnxBuilder::attr_i(gather, "axis", 0);
  b.node("Unsqueeze", {"n", "axes0"}, {"n1"});
  auto& cat = b.node("Concat", {"n1", "minus1"}, {"shape"});
  OnnxBuilder::attr_i(cat, "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  return b;
}

}  // namespace

TEST_CASE("infer_shapes folds shape arithmetic so Reshape gets a constant shape") {
  Graph g = import(flatten_by_shape_arithmetic());
  int folded = kiln::infer_shapes(g, &ref_eval());
  CHECK(folded == 4);  // Shape, Gather, Unsqueeze, Concat
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op == "Reshape");
  CHECK(g.value(g.outputs[0]).shape == Shape{1, 24});
  const auto& shape = g.value(g.nodes[0].inputs[1]);
  REQUIRE(shape.is_const());
  CHECK(shape.constant->data<int64_t>()[0] == 1);
  CHECK(shape.constant->data<int64_t>()[1] == -1);
}

TEST_CASE("infer_shapes without folding cannot resolve a computed Reshape shape") {
  Graph g = import(flatten_by_shape_arithmetic());
  try {
    kiln::infer_shapes(g, nullptr);
    FAIL("expected an error");
  } catch (const kiln::Error& e) {
    CHECK(std::string(e.what()).find("'reshape' (Reshape)") != std::string::npos);
  }
}

TEST_CASE("remove_identities rewires consumers and keeps output names") {
  OnnxBuilder b;
  b.input("x", {2}).output("out").output("x_copy");
  b.node("Relu", {"x"}, {"a"});
  b.node("Identity", {"a"}, {"b"});
  b.node("Dropout", {"b"}, {"c"});
  b.node("Relu", {"c"}, {"d"});
  b.node("Identity", {"d"}, {"out"});     // graph output: its name must survive
  b.node("Identity", {"x"}, {"x_copy"});  // input -> output: must stay a copy
  Graph g = import(b);
  kiln::infer_shapes(g);
  CHECK(kiln::remove_identities(g) == 3);
  CHECK(count_op(g, "Relu") == 2);
  CHECK(count_op(g, "Identity") == 1);
  CHECK(count_op(g, "Dropout") == 0);
  // The second Relu now reads the first Relu's output and writes the value named "out".
  CHECK(g.value(g.nodes[1].inputs[0]).name == "a");
  CHECK(g.value(g.outputs[0]).name == "out");
  CHECK(g.nodes[1].outputs[0] == g.outputs[0]);
  CHECK(g.find("out") == g.outputs[0]);
}

TEST_CASE("remove_identities keeps a Dropout whose mask is read, drops one whose mask is not") {
  OnnxBuilder b;
  b.input("x", {2}).output("y").output("m2");
  b.node("Dropout", {"x"}, {"a", "m1"});  // mask unused: removed
  b.node("Relu", {"a"}, {"y"});
  b.node("Dropout", {"y"}, {"c", "m2"});  // mask is a graph output: stays
  Graph g = import(b);
  CHECK(kiln::remove_identities(g) == 1);
  CHECK(count_op(g, "Dropout") == 1);
}

// Once inferred, a Dropout with a mask output is an Identity (removed next) and an Expand of a
// true for the mask (inference drops nothing).
TEST_CASE("a Dropout's mask output becomes an Expand of a true at inference") {
  OnnxBuilder b;
  b.input("x", {2, 3}).output("y").output("m");
  b.node("Dropout", {"x"}, {"a", "m"});
  b.node("Relu", {"a"}, {"y"});
  Graph g = import(b);
  kiln::infer_shapes(g);
  CHECK(count_op(g, "Dropout") == 0);
  CHECK(count_op(g, "Expand") == 1);
  CHECK(g.value(g.outputs[1]).dtype == kiln::DType::boolean);
  CHECK(g.value(g.outputs[1]).shape == kiln::Shape{2, 3});
  CHECK(kiln::remove_identities(g) == 1);
  CHECK(count_op(g, "Identity") == 0);
}

TEST_CASE("fold_batchnorm: hand-computed 1x1 single-channel case") {
  // y = scale * (w*x + b - mean) / sqrt(var + eps) + B
  //   = 2 * (3*2 + 1 - 1) / sqrt(3 + 1) + 0.5 = 6.5 for x = 2.
  OnnxBuilder b;
  b.input("x", {1, 1, 1, 1}).output("y");
  b.init_f("w", {1, 1, 1, 1}, {3.f}).init_f("b", {1}, {1.f});
  b.init_f("s", {1}, {2.f})
      .init_f("B", {1}, {0.5f})
      .init_f("m", {1}, {1.f})
      .init_f("v", {1}, {3.f});
  b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  auto& bn = b.node("BatchNormalization", {"c", "s", "B", "m", "v"}, {"y"}, "bn");
  OnnxBuilder::attr_f(bn, "epsilon", 1.f);
  Graph g = import(b);
  kiln::infer_shapes(g);
  CHECK(kiln::fold_batchnorm(g) == 1);
  REQUIRE(g.nodes.size() == 1);
  const auto& conv = g.nodes[0];
  CHECK(conv.outputs[0] == g.outputs[0]);
  float w = g.value(conv.inputs[1]).constant->data<float>()[0];
  float bias = g.value(conv.inputs[2]).constant->data<float>()[0];
  CHECK(w * 2.f + bias == doctest::Approx(6.5f));
  CHECK(w == doctest::Approx(3.f));  // s = 2 / sqrt(4) = 1
}

TEST_CASE("fold_batchnorm preserves results on a grouped conv without bias") {
  // Folded and unfolded graphs run through the reference kernels must agree.
  const int c = 4, m = 6, groups = 2;
  std::vector<float> w(size_t(m * (c / groups) * 9)), x(size_t(c * 25));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i)) * 0.5f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(float(i) * 0.7f);
  std::vector<float> s(m), bb(m), mean(m), var(m);
  for (int i = 0; i < m; ++i) {
    s[size_t(i)] = 0.5f + i * 0.25f;
    bb[size_t(i)] = -0.3f + i * 0.1f;
    mean[size_t(i)] = 0.2f * i - 0.4f;
    var[size_t(i)] = 0.3f + i;
  }
  OnnxBuilder b;
  b.input("x", {1, c, 5, 5}).output("y");
  b.init_f("w", {m, c / groups, 3, 3}, w).init_f("s", {m}, s).init_f("B", {m}, bb);
  b.init_f("m", {m}, mean).init_f("v", {m}, var);
  auto& conv = b.node("Conv", {"x", "w"}, {"c"}, "conv");
  OnnxBuilder::attr_i(conv, "group", groups);
  OnnxBuilder::attr_ints(conv, "pads", {1, 0, 0, 1});
  b.node("BatchNormalization", {"c", "s", "B", "m", "v"}, {"y"}, "bn");

  auto run = [&](bool fold) {
    Graph g = import(b);
    kiln::infer_shapes(g);
    if (fold) CHECK(kiln::fold_batchnorm(g) == 1);
    auto vals = kiln::test::run_graph_ref(
        g, [&](size_t, kiln::Tensor& t) { std::copy(x.begin(), x.end(), t.data<float>()); });
    return vals.at(g.outputs[0]);
  };
  kiln::Tensor a = run(false), f = run(true);
  REQUIRE(a.shape() == f.shape());
  CHECK(a.shape() == Shape{1, m, 4, 4});
  for (int64_t i = 0; i < a.numel(); ++i)
    CHECK(f.data<float>()[i] == doctest::Approx(a.data<float>()[i]).epsilon(1e-5));
}

TEST_CASE("fold_batchnorm leaves a conv whose output has other consumers") {
  OnnxBuilder b;
  b.input("x", {1, 1, 2, 2}).output("y").output("c");
  b.init_f("w", {1, 1, 1, 1}, {3.f});
  b.init_f("s", {1}, {2.f})
      .init_f("B", {1}, {0.5f})
      .init_f("m", {1}, {1.f})
      .init_f("v", {1}, {3.f});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("BatchNormalization", {"c", "s", "B", "m", "v"}, {"y"});
  Graph g = import(b);
  kiln::infer_shapes(g);
  CHECK(kiln::fold_batchnorm(g) == 0);
  CHECK(g.nodes.size() == 2);
}

TEST_CASE("remove_dead_code drops unused branches and their weights") {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.init_f("unused_w", {4}, {1, 2, 3, 4});
  b.node("Relu", {"x"}, {"y"});
  b.node("Add", {"x", "unused_w"}, {"dead1"});
  b.node("Relu", {"dead1"}, {"dead2"});
  Graph g = import(b);
  kiln::infer_shapes(g);
  CHECK(kiln::remove_dead_code(g) == 2);
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.find("unused_w") == kiln::kNoValue);
  CHECK(g.find("dead2") == kiln::kNoValue);
  // Ids were remapped consistently.
  CHECK(g.value(g.nodes[0].inputs[0]).name == "x");
  CHECK(g.value(g.nodes[0].outputs[0]).name == "y");
  CHECK(g.value(g.outputs[0]).name == "y");
}

TEST_CASE("optimize runs the whole pipeline") {
  OnnxBuilder b = flatten_by_shape_arithmetic();
  b.node("Identity", {"y"}, {"z"});
  b.model().mutable_graph()->mutable_output(0)->set_name("z");
  Graph g = import(b);
  auto st = kiln::optimize(g, ref_eval());
  CHECK(st.folded == 4);
  CHECK(st.identities == 1);
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.value(g.outputs[0]).name == "z");
}
