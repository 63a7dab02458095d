// graph/rewrites.cpp fuse_attention: MatMul -> [Mul / Div by a scalar] -> [Add(bias)] ->
// Softmax(last axis) -> MatMul becomes one SoftmaxAttention whose reference kernel gives the
// unfused graph's output exactly; near-misses (another axis, a non-scalar or reversed scale, a
// per-query or widening bias, a bias before the scale, an intermediate read twice or a graph
// output) stay as they are.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "graph/passes.h"
#include "ref_graph.h"

namespace kiln {
namespace {

using test::OnnxBuilder;

struct AttnOpts {
  Shape a{2, 5, 8}, b{2, 8, 7}, v{2, 7, 6};
  std::string scale_op;      // "", "Mul", "Div", "Add" (between the scores and the Softmax)
  bool scale_first = false;  // the constant as the Mul's / Div's first input
  Shape scale_shape{};       // the constant's shape (one element: a scalar)
  float scale_value = 0.7f;  // its values
  int64_t axis = -1;         // the Softmax's
  bool scores_out = false;   // the scores also a graph output
  bool probs_twice = false;  // the probabilities also read by a Relu (a second output)
  // An Add of a bias after the scale (or, bias_before_scale, between the MatMul and it):
  // bias_kind "" none, "const" an initializer, "input" a graph input, "matmul" a product of
  // a and a second [.., K, N] input (BoTNet's position logits).
  std::string bias_kind;
  Shape bias{7};
  bool bias_first = false;  // Add(bias, scores)
  bool bias_before_scale = false;
  bool biased_out = false;  // the biased scores also a graph output
};

// Adds the bias's Add after x (per o); returns its output.
std::string add_bias(OnnxBuilder& b, const AttnOpts& o, const std::string& x) {
  if (o.bias_kind == "const") {
    int64_t n = 1;
    for (int64_t d : o.bias) n *= d;
    std::vector<float> vals(static_cast<size_t>(n));
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = 0.1f * float(i % 13) - 0.6f;
    b.init_f("bias", o.bias, vals);
  } else if (o.bias_kind == "input") {
    b.input("bias", o.bias);
  } else {
    Shape kn = o.b;
    kn.back() = o.bias.back();
    b.input("rel", kn);
    b.node("MatMul", {"a", "rel"}, {"bias"});
  }
  const std::string y = x + "_biased";
  b.node("Add",
         o.bias_first ? std::vector<std::string>{"bias", x} : std::vector<std::string>{x, "bias"},
         {y});
  return y;
}

OnnxBuilder attention(const AttnOpts& o) {
  OnnxBuilder b;
  b.input("a", o.a).input("b", o.b).input("v", o.v).output("y");
  b.node("MatMul", {"a", "b"}, {"s"});
  std::string x = "s";
  if (!o.bias_kind.empty() && o.bias_before_scale) x = add_bias(b, o, x);
  if (!o.scale_op.empty()) {
    int64_t n = 1;
    for (int64_t d : o.scale_shape) n *= d;
    b.init_f("c", o.scale_shape, std::vector<float>(static_cast<size_t>(n), o.scale_value));
    b.node(o.scale_op,
           o.scale_first ? std::vector<std::string>{"c", "s"} : std::vector<std::string>{"s", "c"},
           {"t"});
    x = "t";
  }
  if (!o.bias_kind.empty() && !o.bias_before_scale) x = add_bias(b, o, x);
  auto& sm = b.node("Softmax", {x}, {"p"});
  OnnxBuilder::attr_i(sm, "axis", o.axis);
  b.node("MatMul", {"p", "v"}, {"y"});
  if (o.scores_out) b.output("s");
  if (o.biased_out) b.output(x);
  if (o.probs_twice) {
    b.node("Relu", {"p"}, {"r"});
    b.output("r");
  }
  return b;
}

struct Fused {
  std::map<std::string, int> ops;
  const Node* node = nullptr;  // the SoftmaxAttention, if any
  Graph g;
  std::vector<float> before, after;
};

Fused fuse(const AttnOpts& o) {
  Fused f;
  f.g = test::import(attention(o));
  infer_shapes(f.g);
  f.before = test::run_first_output(f.g, 1.5f);
  fuse_attention(f.g);
  remove_dead_code(f.g);
  f.after = test::run_first_output(f.g, 1.5f);
  for (const Node& n : f.g.nodes) {
    ++f.ops[n.op];
    if (n.op == "SoftmaxAttention") f.node = &n;
  }
  return f;
}

}  // namespace

TEST_CASE("fuse_attention: the pattern becomes one node with the unfused output") {
  struct Case {
    AttnOpts o;
    float scale;
    bool divide;
  };
  std::vector<Case> cases;
  cases.push_back({AttnOpts{}, 1.f, false});
  AttnOpts mul;
  mul.scale_op = "Mul";
  cases.push_back({mul, 0.7f, false});
  mul.scale_first = true;  // Mul(c, s)
  mul.scale_shape = {1, 1, 1};
  cases.push_back({mul, 0.7f, false});
  AttnOpts div;
  div.scale_op = "Div";
  cases.push_back({div, 0.7f, true});
  AttnOpts bc;  // broadcast batch dims; the axis spelled positively
  bc.a = {2, 1, 5, 8};
  bc.b = {1, 3, 8, 7};
  bc.v = {3, 7, 6};
  bc.axis = 3;
  cases.push_back({bc, 1.f, false});
  // Biases: a constant over the keys after a scale, per query and batch entry as an input on
  // the Add's left, a product (both of the Add's operands MatMuls), a broadcast 4-D one.
  AttnOpts bias = mul;
  bias.bias_kind = "const";
  cases.push_back({bias, 0.7f, false});
  AttnOpts bias_in = div;
  bias_in.bias_kind = "input";
  bias_in.bias = {2, 5, 7};
  bias_in.bias_first = true;
  cases.push_back({bias_in, 0.7f, true});
  AttnOpts bias_mm;
  bias_mm.bias_kind = "matmul";
  bias_mm.bias = {2, 5, 7};
  cases.push_back({bias_mm, 1.f, false});
  AttnOpts bias_bc = bc;
  bias_bc.bias_kind = "const";
  bias_bc.bias = {3, 1, 7};
  bias_bc.bias_first = true;
  cases.push_back({bias_bc, 1.f, false});
  for (const Case& c : cases) {
    CAPTURE(c.o.scale_op);
    CAPTURE(c.o.scale_first);
    Fused f = fuse(c.o);
    REQUIRE(f.node != nullptr);
    CHECK(f.g.nodes.size() == (c.o.bias_kind == "matmul" ? 2u : 1u));
    CHECK(f.node->attr_f("scale", 0.f) == c.scale);
    CHECK((f.node->attr_i("divide", 0) != 0) == c.divide);
    CHECK((f.node->inputs.size() == 4) == !c.o.bias_kind.empty());
    CHECK(f.before == f.after);  // the reference kernel runs the same ops
  }
}

TEST_CASE("fuse_attention: attention written as Einsums (MaxViT's) fuses once they are MatMuls") {
  // q, k, v [1, 3, 2, 5, 8] (batch, window, head, token, dim): "bghid,bghjd->bghij", times a
  // scalar, plus a per-head bias [2, 5, 5], Softmax, "bghij,bghjd->bghid". rewrite_einsums
  // (graph/einsum.cpp) must leave each product's MatMul feeding its consumer directly.
  OnnxBuilder b;
  b.input("q", {1, 3, 2, 5, 8}).input("k", {1, 3, 2, 5, 8}).input("v", {1, 3, 2, 5, 8});
  b.output("y");
  b.init_f("c", {}, {0.35f});
  std::vector<float> rel(50);
  for (size_t i = 0; i < rel.size(); ++i) rel[i] = 0.07f * float(i % 11) - 0.3f;
  b.init_f("rel", {2, 5, 5}, rel);
  OnnxBuilder::attr_s(b.node("Einsum", {"q", "k"}, {"s"}), "equation", "bghid,bghjd->bghij");
  b.node("Mul", {"s", "c"}, {"t"});
  b.node("Add", {"t", "rel"}, {"tb"});
  b.node("Softmax", {"tb"}, {"p"});
  OnnxBuilder::attr_s(b.node("Einsum", {"p", "v"}, {"y"}), "equation", "bghij,bghjd->bghid");
  Graph g = test::import(b);
  infer_shapes(g);
  const std::vector<float> before = test::run_first_output(g, 1.5f);
  CHECK(rewrite_einsums(g) == 2);
  CHECK(fuse_attention(g) == 1);
  remove_dead_code(g);
  std::map<std::string, int> ops;
  for (const Node& n : g.nodes) ++ops[n.op];
  CHECK(ops["SoftmaxAttention"] == 1);
  CHECK(ops["Softmax"] == 0);
  CHECK(ops["Reshape"] == 0);
  const std::vector<float> after = test::run_first_output(g, 1.5f);
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < before.size(); ++i) CHECK(std::fabs(after[i] - before[i]) <= 1e-6f);
}

TEST_CASE("fuse_attention: near-misses stay unfused") {
  std::vector<AttnOpts> misses(12);
  misses[0].axis = 1;          // not the last axis
  misses[1].scale_op = "Mul";  // a per-key vector, not a scalar
  misses[1].scale_shape = {7};
  misses[2].scale_op = "Div";  // c / s
  misses[2].scale_first = true;
  misses[3].scale_op = "Add";    // a bias (relative positions) between
  misses[4].scores_out = true;   // the scores are needed
  misses[5].probs_twice = true;  // the probabilities are read twice
  misses[6].scale_op = "Mul";    // a scale of 0
  misses[6].scale_value = 0.f;
  misses[7].scale_op = "Mul";  // scaled, and the unscaled scores are needed
  misses[7].scores_out = true;
  misses[8].bias_kind = "const";  // one value per query: leaves the softmax as it is
  misses[8].bias = {2, 5, 1};
  misses[9].bias_kind = "input";  // widens the scores' batch dims
  misses[9].bias = {3, 2, 5, 7};
  misses[10].bias_kind = "const";  // added before the scale: the scale would apply to it
  misses[10].scale_op = "Mul";
  misses[10].bias_before_scale = true;
  misses[11].bias_kind = "const";  // the biased scores are needed
  misses[11].biased_out = true;
  for (size_t i = 0; i < misses.size(); ++i) {
    CAPTURE(i);
    Fused f = fuse(misses[i]);
    CHECK(f.node == nullptr);
    CHECK(f.ops["Softmax"] == 1);
    CHECK(f.before == f.after);
  }
}

}  // namespace kiln
