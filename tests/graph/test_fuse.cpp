// fuse_epilogues: which chains fuse, which must not, and the resulting node shape.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "graph/post_ops.h"
#include "ref_graph.h"

using kiln::Graph;
using kiln::PostOp;
using kiln::test::OnnxBuilder;

namespace {

Graph prepared(const OnnxBuilder& b) {
  Graph g = kiln::test::import(b);
  kiln::infer_shapes(g);
  return g;
}

OnnxBuilder conv_base(int outputs_conv = 1) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.init_f("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  b.init_f("w2", {2, 2, 1, 1}, {1, 0, 0, 1});
  b.init_f("lo", {}, {0.f}).init_f("hi", {}, {6.f});
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  return b;
}

std::vector<PostOp::Kind> kinds(const kiln::Node& n, int first = 3) {
  std::vector<PostOp::Kind> k;
  for (const auto& op : kiln::parse_post_ops(n, first)) k.push_back(op.kind);
  return k;
}

}  // namespace

TEST_CASE("fuse: conv -> clip(0,6) chain collapses into the conv") {
  OnnxBuilder b = conv_base();
  b.node("Clip", {"c", "lo", "hi"}, {"y"});
  b.output("y");
  Graph g = prepared(b);
  CHECK(kiln::fuse_epilogues(g) == 1);
  REQUIRE(g.nodes.size() == 1);
  const auto& conv = g.nodes[0];
  auto ops = kiln::parse_post_ops(conv, 3);
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].kind == PostOp::Kind::clip);
  CHECK(ops[0].alpha == 0.f);
  CHECK(ops[0].beta == 6.f);
  CHECK(g.value(conv.outputs[0]).name == "y");
}

TEST_CASE("fuse: residual add then relu, into the later conv") {
  // c = conv(x); d = conv2(x); y = relu(c + d). d is produced later, so the chain fuses into
  // conv2 with c as the residual.
  OnnxBuilder b = conv_base();
  b.node("Conv", {"x", "w2"}, {"d"}, "conv2");
  b.node("Add", {"c", "d"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  b.output("y");
  Graph g = prepared(b);
  CHECK(kiln::fuse_epilogues(g) == 2);
  REQUIRE(g.nodes.size() == 2);
  const auto& fused = g.nodes[1];
  CHECK(fused.name == "conv2");
  CHECK(kinds(fused) == std::vector<PostOp::Kind>{PostOp::Kind::add, PostOp::Kind::relu});
  REQUIRE(fused.inputs.size() == 4);
  CHECK(fused.inputs[2] == kiln::kNoValue);  // no bias: the residual still sits at index 3
  CHECK(g.value(fused.inputs[3]).name == "c");
  CHECK(g.value(fused.outputs[0]).name == "y");
}

TEST_CASE("fuse: residual from a non-conv producer after the conv moves the conv later") {
  OnnxBuilder b = conv_base();
  b.node("Relu", {"x"}, {"r"});  // produced after the conv
  b.node("Add", {"r", "c"}, {"y"});
  b.output("y");
  Graph g = prepared(b);
  CHECK(kiln::fuse_epilogues(g) == 1);
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op == "Relu");  // the fused conv now runs after its residual exists
  CHECK(g.nodes[1].op == "Conv");
  CHECK(g.value(g.nodes[1].inputs[3]).name == "r");
}

TEST_CASE("fuse: swish pattern x * sigmoid(x)") {
  OnnxBuilder b = conv_base();
  b.node("Sigmoid", {"c"}, {"s"});
  b.node("Mul", {"c", "s"}, {"y"});
  b.output("y");
  Graph g = prepared(b);
  CHECK(kiln::fuse_epilogues(g) == 1);
  REQUIRE(g.nodes.size() == 1);
  CHECK(kinds(g.nodes[0]) == std::vector<PostOp::Kind>{PostOp::Kind::swish});
}

TEST_CASE("fuse: the glue activations the conv epilogue computes join it; the others stay") {
  using K = PostOp::Kind;
  struct Case {
    const char* op;
    std::optional<K> kind;  // nothing: stays a node of its own
  };
  for (const Case& c :
       {Case{"Tanh", K::tanh}, Case{"Elu", K::elu}, Case{"Selu", K::selu}, Case{"Mish", K::mish},
        Case{"Gelu", K::gelu_tanh}, Case{"Softplus", std::nullopt}, Case{"Celu", std::nullopt},
        Case{"Exp", std::nullopt}, Case{"Softsign", std::nullopt}}) {
    CAPTURE(c.op);
    OnnxBuilder b = conv_base();
    auto& n = b.node(c.op, {"c"}, {"y"});
    if (std::string(c.op) == "Gelu") OnnxBuilder::attr_s(n, "approximate", "tanh");
    if (std::string(c.op) == "Elu") OnnxBuilder::attr_f(n, "alpha", 0.5f);
    b.output("y");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == (c.kind ? 1 : 0));
    REQUIRE(g.nodes.size() == (c.kind ? 1u : 2u));
    if (c.kind) {
      CHECK(kinds(g.nodes[0]) == std::vector<K>{*c.kind});
      CHECK(g.value(g.nodes[0].outputs[0]).name == "y");
      if (*c.kind == K::elu) CHECK(kiln::parse_post_ops(g.nodes[0], 3)[0].alpha == 0.5f);
    } else {
      CHECK(g.nodes[1].op == c.op);
    }
  }
}

TEST_CASE("fuse: mish as exported before opset 18, x * tanh(softplus(x))") {
  for (bool swapped : {false, true}) {
    CAPTURE(swapped);
    OnnxBuilder b = conv_base();
    b.node("Softplus", {"c"}, {"sp"});
    b.node("Tanh", {"sp"}, {"t"});
    b.node("Mul", swapped ? std::vector<std::string>{"t", "c"} : std::vector<std::string>{"c", "t"},
           {"y"});
    b.output("y");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == 2);  // the Tanh into the Softplus, then all into the conv
    REQUIRE(g.nodes.size() == 1);
    CHECK(kinds(g.nodes[0]) == std::vector<PostOp::Kind>{PostOp::Kind::mish});
  }
  // tanh(softplus(x)) * z with another z, or softplus without the tanh: no mish.
  for (int variant = 0; variant < 2; ++variant) {
    CAPTURE(variant);
    OnnxBuilder b = conv_base();
    b.node("Conv", {"x", "w2"}, {"c2"}, "conv2");
    b.node("Softplus", {"c"}, {"sp"});
    if (variant == 0) b.node("Tanh", {"sp"}, {"t"});
    b.node("Mul", {variant == 0 ? "c2" : "c", variant == 0 ? "t" : "sp"}, {"y"});
    b.output("y");
    Graph g = prepared(b);
    kiln::fuse_epilogues(g);
    for (const auto& n : g.nodes)
      for (PostOp::Kind k : kinds(n, n.op == "Conv" ? 3 : 1)) CHECK(k != PostOp::Kind::mish);
  }
}

TEST_CASE("fuse: Instance / Group / LayerNormalization take one-input activations, no residual") {
  using K = PostOp::Kind;
  for (const char* norm : {"InstanceNormalization", "GroupNormalization", "LayerNormalization"}) {
    CAPTURE(norm);
    OnnxBuilder b;
    b.input("x", {1, 4, 3, 3});
    b.init_f("s", {4}, {1, 2, 3, 4}).init_f("bb", {4}, {0, 1, 0, 1});
    b.init_f("s3", {3}, {1, 2, 3}).init_f("b3", {3}, {0, 1, 0});
    const bool ln = std::string(norm) == "LayerNormalization";
    auto& n = b.node(norm, {"x", ln ? "s3" : "s", ln ? "b3" : "bb"}, {"y"});
    if (std::string(norm) == "GroupNormalization") OnnxBuilder::attr_i(n, "num_groups", 2);
    if (ln) OnnxBuilder::attr_i(n, "axis", -1);
    b.node("Sigmoid", {"y"}, {"sg"});  // y * sigmoid(y): SiLU
    b.node("Mul", {"y", "sg"}, {"z"});
    b.node("Tanh", {"z"}, {"t"});
    b.node("Add", {"t", "x"}, {"r"});  // a residual: stays a node
    b.output("r");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == 2);
    REQUIRE(g.nodes.size() == 2);
    CHECK(g.nodes[0].op == norm);
    CHECK(kinds(g.nodes[0], int(g.nodes[0].inputs.size())) == std::vector<K>{K::swish, K::tanh});
    CHECK(g.nodes[1].op == "Add");
  }
}

TEST_CASE("fuse: PRelu after a conv: per-channel slope a prelu post-op, one slope leaky_relu") {
  using K = PostOp::Kind;
  struct Case {
    std::vector<int64_t> dims;
    std::vector<float> slope;
    std::optional<K> kind;  // nothing: stays a node
  };
  for (const Case& c :
       {Case{{2, 1, 1}, {0.5f, -0.25f}, K::prelu}, Case{{1, 2, 1, 1}, {0.5f, -0.25f}, K::prelu},
        Case{{1}, {0.1f}, K::leaky_relu}, Case{{4}, {1, 2, 3, 4}, std::nullopt},  // along W: stays
        Case{{1, 4, 1}, {1, 2, 3, 4}, std::nullopt}}) {                           // along H: stays
    CAPTURE(c.dims.size());
    OnnxBuilder b = conv_base();
    b.init_f("slope", c.dims, c.slope);
    b.node("PRelu", {"c", "slope"}, {"y"});
    b.output("y");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == (c.kind ? 1 : 0));
    REQUIRE(g.nodes.size() == (c.kind ? 1u : 2u));
    if (!c.kind) continue;
    const auto ops = kiln::parse_post_ops(g.nodes[0], 3);
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].kind == *c.kind);
    if (*c.kind == K::leaky_relu) {
      CHECK(ops[0].alpha == 0.1f);
      continue;
    }
    const kiln::Value& sv = g.value(g.nodes[0].inputs[size_t(ops[0].input)]);
    REQUIRE(sv.is_const());
    CHECK(sv.shape == kiln::Shape{2});
    CHECK(sv.constant->data<float>()[1] == -0.25f);
  }
}

TEST_CASE("fuse: a unary op after moves of a conv's output goes before them, into the conv") {
  // YOLOv5's head (Reshape, Transpose, Sigmoid) and ESPCN's (DepthToSpace, Sigmoid).
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    OnnxBuilder b = conv_base();
    b.init_i("shape", {5}, {1, 2, 1, 4, 4});
    std::string last = "c";
    if (variant == 0 || variant == 2 || variant == 3) {
      b.node("Reshape", {"c", "shape"}, {"r"});
      OnnxBuilder::attr_ints(b.node("Transpose", {"r"}, {"t"}), "perm", {0, 1, 3, 4, 2});
      last = "t";
    } else {
      b.init_f("w4", {4, 2, 1, 1}, {1, 2, 3, 4, 5, 6, 7, 8});  // DepthToSpace(2): 4 channels
      b.node("Conv", {"x", "w4"}, {"c8"}, "conv8");
      OnnxBuilder::attr_i(b.node("DepthToSpace", {"c8"}, {"d"}), "blocksize", 2);
      last = "d";
    }
    b.node("Sigmoid", {last}, {"y"});
    b.output("y");
    if (variant == 2) b.output(last);  // the moved tensor is read by another: stays
    if (variant == 3) b.output("c");
    Graph g = prepared(b);
    const std::vector<float> before = kiln::test::run_first_output(g, 3);
    const int n = kiln::fuse_epilogues(g);
    const std::vector<float> after = kiln::test::run_first_output(g, 3);
    CHECK(after == before);  // the same elements through the same operations
    int sigmoid_nodes = 0, fused = 0;
    for (const auto& node : g.nodes) {
      sigmoid_nodes += node.op == "Sigmoid";
      if (node.op == "Conv")
        for (PostOp::Kind k : kinds(node)) fused += k == PostOp::Kind::sigmoid;
    }
    if (variant <= 1) {
      CHECK(n == 2);  // moved, then fused
      CHECK(sigmoid_nodes == 0);
      CHECK(fused == 1);
    } else {
      CHECK(sigmoid_nodes == 1);
      CHECK(fused == 0);
    }
  }
}

TEST_CASE("fuse: hardswish as exported before opset 14, x * hardsigmoid(x; 1/6, 0.5)") {
  for (float alpha : {1.f / 6.f, 0.2f}) {
    CAPTURE(alpha);
    OnnxBuilder b = conv_base();
    auto& hs = b.node("HardSigmoid", {"c"}, {"s"});
    OnnxBuilder::attr_f(hs, "alpha", alpha);
    OnnxBuilder::attr_f(hs, "beta", 0.5f);
    b.node("Mul", {"s", "c"}, {"y"});
    b.output("y");
    Graph g = prepared(b);
    const int fused = kiln::fuse_epilogues(g);
    if (alpha == 1.f / 6.f) {
      // One hardswish post-op; the HardSigmoid is gone.
      CHECK(fused == 1);
      REQUIRE(g.nodes.size() == 1);
      CHECK(kinds(g.nodes[0]) == std::vector<PostOp::Kind>{PostOp::Kind::hardswish});
    } else {
      // Another slope is not HardSwish, and the conv output has two consumers: nothing fuses.
      CHECK(fused == 0);
      CHECK(g.nodes.size() == 3);
    }
  }
}

TEST_CASE("fuse: nothing fuses across a shared or exported conv output") {
  SUBCASE("two consumers") {
    OnnxBuilder b = conv_base();
    b.node("Relu", {"c"}, {"y"});
    b.node("Sigmoid", {"c"}, {"z"});
    b.output("y").output("z");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == 0);
    CHECK(g.nodes.size() == 3);
  }
  SUBCASE("conv output is a graph output") {
    OnnxBuilder b = conv_base();
    b.node("Relu", {"c"}, {"y"});
    b.output("c").output("y");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == 0);
  }
  SUBCASE("broadcasting add is not a residual") {
    OnnxBuilder b = conv_base();
    b.init_f("k", {1, 2, 1, 1}, {1, 2});
    b.node("Add", {"c", "k"}, {"y"});
    b.output("y");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == 0);
  }
  SUBCASE("clip with a non-constant bound") {
    OnnxBuilder b = conv_base();
    b.input("m", {});
    b.node("Clip", {"c", "m"}, {"y"});
    b.output("y");
    Graph g = prepared(b);
    CHECK(kiln::fuse_epilogues(g) == 0);
  }
}

// Pre-activation BN + Relu (DenseNet): the BN cannot fold into a conv (none precedes it), so
// the Relu becomes its post-op; a residual Add never fuses into a BN (its kernels take none).
TEST_CASE("fuse: standalone BatchNormalization takes a unary activation, not a residual add") {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  for (const char* p : {"s", "bb", "m", "v"}) b.init_f(p, {2}, {1.f, 0.5f});
  b.node("BatchNormalization", {"x", "s", "bb", "m", "v"}, {"n"}, "bn");
  b.node("Relu", {"n"}, {"r"});
  b.node("BatchNormalization", {"r", "s", "bb", "m", "v"}, {"n2"}, "bn2");
  b.node("Add", {"n2", "x"}, {"y"});
  b.output("y");
  Graph g = prepared(b);
  CHECK(kiln::fuse_epilogues(g) == 1);
  REQUIRE(g.nodes.size() == 3);
  CHECK(g.nodes[0].op == "BatchNormalization");
  CHECK(kinds(g.nodes[0], 5) == std::vector<PostOp::Kind>{PostOp::Kind::relu});
  CHECK(g.nodes[0].inputs.size() == 5);
  CHECK(g.value(g.nodes[0].outputs[0]).name == "r");
  CHECK(!g.nodes[1].has("post_ops"));
  CHECK(g.nodes[2].op == "Add");
}

// DenseNet's layer input: Concat -> BatchNormalization -> Relu becomes one Concat carrying the
// BN's affine map and the Relu; the graph computes the same (unfused reference kernels as the
// oracle). A Concat read by another node too, or a BN with a runtime parameter, stays apart.
TEST_CASE("fuse: Concat -> BatchNormalization (+ activation) becomes one Concat") {
  OnnxBuilder b;
  b.input("x", {2, 3, 5, 4});
  b.init_f("w", {2, 3, 1, 1}, {0.5f, -1.f, 0.25f, 1.f, 0.75f, -0.5f});
  b.node("Conv", {"x", "w"}, {"f1"});
  OnnxBuilder::attr_i(b.node("Concat", {"x", "f1"}, {"cat1"}), "axis", 1);
  b.init_f("s1", {5}, {1.f, 0.5f, -2.f, 1.5f, 0.25f});
  b.init_f("b1", {5}, {0.1f, -0.2f, 0.3f, 0.f, 1.f});
  b.init_f("m1", {5}, {0.f, 1.f, -1.f, 0.5f, 2.f});
  b.init_f("v1", {5}, {1.f, 2.f, 0.5f, 4.f, 0.25f});
  b.node("BatchNormalization", {"cat1", "s1", "b1", "m1", "v1"}, {"bn1"});
  b.node("Relu", {"bn1"}, {"r1"});
  b.init_f("w2", {1, 5, 1, 1}, {1.f, -1.f, 0.5f, 2.f, -0.25f});
  b.node("Conv", {"r1", "w2"}, {"f2"});
  OnnxBuilder::attr_i(b.node("Concat", {"x", "f1", "f2"}, {"cat2"}), "axis", -3);
  for (const char* p : {"s2", "b2", "m2", "v2"})
    b.init_f(p, {6}, {1.f, 0.5f, 2.f, 0.25f, 1.5f, 3.f});
  b.node("BatchNormalization", {"cat2", "s2", "b2", "m2", "v2"}, {"y"});
  // Not fused: cat3 is also an output; the BN after cat4 has a runtime mean.
  OnnxBuilder::attr_i(b.node("Concat", {"x", "f2"}, {"cat3"}), "axis", 1);
  b.init_f("m4", {4}, {0.f, 0.f, 0.f, 0.f});
  for (const char* p : {"s4", "b4", "v4"}) b.init_f(p, {4}, {1.f, 1.f, 1.f, 1.f});
  b.node("BatchNormalization", {"cat3", "s4", "b4", "m4", "v4"}, {"y3"});
  b.input("mean", {4});
  OnnxBuilder::attr_i(b.node("Concat", {"x", "f2"}, {"cat4"}), "axis", 1);
  b.node("BatchNormalization", {"cat4", "s4", "b4", "mean", "v4"}, {"y4"});
  b.output("y").output("cat3").output("y3").output("y4");
  const Graph before = prepared(b);
  Graph g = before;
  // The BN+Relu, two Concat+BN, and the Sqrt of y4's expansion (its statistics computed:
  // graph/function_ops.h) into the Add before it.
  CHECK(kiln::fuse_epilogues(g) == 4);
  int fused = 0, cats = 0;
  for (const kiln::Node& n : g.nodes) {
    CHECK(n.op != "Relu");
    if (n.op != "Concat") continue;
    ++cats;
    if (!n.has("affine_scale")) continue;
    ++fused;
    CHECK(n.attr_i("axis", 0) == 1);
    CHECK(n.attr_floats("affine_scale").size() == n.attr_floats("affine_shift").size());
  }
  CHECK(cats == 4);
  CHECK(fused == 2);
  auto fill = [](size_t i, kiln::Tensor& t) {
    for (int64_t k = 0; k < t.numel(); ++k)
      t.data<float>()[k] = i == 0 ? float(k * 37 % 23 - 11) / 4.f : float(k) * 0.5f;
  };
  auto want = kiln::test::run_graph_ref(before, fill);
  auto got = kiln::test::run_graph_ref(g, fill);
  for (size_t o = 0; o < before.outputs.size(); ++o) {
    const kiln::Tensor& a = want.at(before.outputs[o]);
    const kiln::Tensor& c = got.at(g.outputs[o]);
    REQUIRE(a.numel() == c.numel());
    for (int64_t k = 0; k < a.numel(); ++k)
      CHECK(std::fabs(a.data<float>()[k] - c.data<float>()[k]) <=
            1e-5f * (1.f + std::fabs(a.data<float>()[k])));
  }
}

TEST_CASE("fuse: a chain longer than kMaxPostOps keeps its tail as a node (the conv stays JIT)") {
  // conv -> 11 x (Clip, Relu alternately): the conv takes kMaxPostOps of them, the rest stay
  // one standalone elementwise node carrying the last two; a conv carrying more would have no
  // JIT kernel.
  OnnxBuilder b = conv_base();
  std::string prev = "c";
  const int chain = kiln::kMaxPostOps + 3;
  for (int i = 0; i < chain; ++i) {
    const std::string out = i + 1 == chain ? "y" : "t" + std::to_string(i);
    if (i % 2)
      b.node("Relu", {prev}, {out});
    else
      b.node("Clip", {prev, "lo", "hi"}, {out});
    prev = out;
  }
  b.output("y");
  Graph g = prepared(b);
  CHECK(kiln::fuse_epilogues(g) == kiln::kMaxPostOps + 2);
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op == "Conv");
  CHECK(kinds(g.nodes[0]).size() == size_t(kiln::kMaxPostOps));
  CHECK(g.nodes[1].op == "Clip");
  CHECK(kinds(g.nodes[1]).size() == 2);
}
