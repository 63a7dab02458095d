// graph/rewrites.cpp: channels-last regions back to NCHW, LayerNorm, GroupNorm and GELU patterns,
// per-channel Add/Mul folded into a Conv, parallel conv branches of one input merged. Each rewrite
// is checked by what it leaves (op counts, post-ops) and by running the graph before and after it
// through the reference kernels; near-misses must be left alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>

#include "convnext_block.h"
#include "graph/onnx_builder.h"
#include "graph/passes.h"
#include "graph/post_ops.h"
#include "ref_graph.h"

namespace kiln {
namespace {

using test::BlockOpts;
using test::OnnxBuilder;

// Per op: its nodes, and the post-ops of that name fused into others ("Erf" counts an erf).
std::map<std::string, int> ops(const Graph& g) {
  std::map<std::string, int> m;
  for (const Node& n : g.nodes) {
    ++m[n.op];
    if (const auto it = n.attrs.find("post_ops"); it != n.attrs.end())
      for (std::string name : it->second.strings) {
        if (!name.empty()) name[0] = char(std::toupper(name[0]));
        ++m[name];
      }
  }
  return m;
}

struct Rewritten {
  Graph g;
  PassStats stats;
  std::vector<float> before, after;
};

// The load pipeline's graph passes (without constant folding) on b's model.
Rewritten rewrite(const OnnxBuilder& b) {
  Rewritten r{test::import(b), {}, {}, {}};
  infer_shapes(r.g);
  r.before = test::run_first_output(r.g, 2);
  r.stats.rewrites = sink_channels_last(r.g);
  r.stats.rewrites += fuse_layer_norm(r.g);
  r.stats.rewrites += fuse_group_norm(r.g);
  r.stats.rewrites += fuse_gelu(r.g);
  r.stats.rewrites += fold_conv_affine(r.g);
  r.stats.rewrites += merge_branches(r.g);
  fuse_epilogues(r.g);
  remove_dead_code(r.g);
  r.after = test::run_first_output(r.g, 2);
  return r;
}

void check_same(const Rewritten& r) {
  REQUIRE(r.before.size() == r.after.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < r.before.size(); ++i) {
    worst = std::max(worst, std::fabs(double(r.before[i]) - r.after[i]));
    scale = std::max(scale, std::fabs(double(r.before[i])));
  }
  CAPTURE(scale);
  CHECK(worst <= 1e-5 * std::max(1.0, scale));
}

std::vector<PostOp::Kind> kinds(const Node& n) {
  std::vector<PostOp::Kind> k;
  for (const auto& op : parse_post_ops(n, 3)) k.push_back(op.kind);
  return k;
}

}  // namespace

TEST_CASE("rewrites: a ConvNeXt block becomes dwconv, LayerNorm, conv+gelu, conv+add") {
  for (bool half_first : {false, true}) {
    BlockOpts o;
    o.gelu_half_first = half_first;
    o.n = half_first ? 2 : 1;
    Rewritten r = rewrite(test::convnext_block(o));
    auto m = ops(r.g);
    CAPTURE(half_first);
    CHECK(m["Transpose"] == 0);
    CHECK(m["LayerNormalization"] == 2);
    CHECK(m["Conv"] == 3);
    CHECK(m["MatMul"] == 0);
    CHECK(r.g.nodes.size() == 5);  // stem LN, dwconv, LN, conv + gelu, conv + add
    for (const Node& n : r.g.nodes) {
      if (n.op == "LayerNormalization") {
        CHECK(n.attr_i("axis", -1) == 1);
        CHECK(n.attr_i("norm_dims", -1) == 1);
        CHECK(n.attr_f("epsilon", 0) == 1e-6f);
      }
    }
    // conv1 carries the gelu, conv2 the residual add (layer scale folded into its weights).
    int gelu = 0, add = 0;
    for (const Node& n : r.g.nodes)
      if (n.op == "Conv") {
        gelu += kinds(n) == std::vector<PostOp::Kind>{PostOp::Kind::gelu};
        add += kinds(n) == std::vector<PostOp::Kind>{PostOp::Kind::add};
      }
    CHECK(gelu == 1);
    CHECK(add == 1);
    check_same(r);
  }
}

TEST_CASE("rewrites: LayerNorm over the last axis without sinking is ONNX's LayerNormalization") {
  OnnxBuilder b;
  b.input("x", {2, 3, 10}).output("ln");
  test::add_layernorm(b, "p_", "x", "ln", 10);
  Rewritten r = rewrite(b);
  REQUIRE(r.g.nodes.size() == 1);
  CHECK(r.g.nodes[0].op == "LayerNormalization");
  CHECK(r.g.nodes[0].attr_i("axis", -1) == 2);
  CHECK(r.g.nodes[0].inputs.size() == 3);
  check_same(r);
}

// PyTorch's GroupNorm before opset 18 on x [2, 8, 3, 5] with 4 groups: Reshape [2, 4, -1],
// InstanceNormalization (scale `in_scale`, B 0), Reshape back, [Mul gamma, Add beta of shape
// `affine_shape`], then SiLU.
OnnxBuilder groupnorm_export(float in_scale, bool affine, std::vector<int64_t> affine_shape) {
  OnnxBuilder b;
  b.input("x", {2, 8, 3, 5}).output("y");
  b.init_i("to_groups", {3}, {2, 4, -1}).init_i("back", {4}, {2, 8, 3, 5});
  b.init_f("ones", {4}, std::vector<float>(4, in_scale)).init_f("zeros", {4}, {0, 0, 0, 0});
  const int64_t n = affine_shape[0] * affine_shape[1] * affine_shape[2];
  std::vector<float> gamma, beta;
  for (int64_t i = 0; i < n; ++i) {
    gamma.push_back(0.5f + 0.25f * float(i));
    beta.push_back(0.1f * float(i) - 0.3f);
  }
  b.init_f("gamma", affine_shape, gamma).init_f("beta", affine_shape, beta);
  b.node("Reshape", {"x", "to_groups"}, {"g"});
  b.node("InstanceNormalization", {"g", "ones", "zeros"}, {"gi"});
  b.node("Reshape", {"gi", "back"}, {affine ? "r" : "a"});
  if (affine) {
    b.node("Mul", {"r", "gamma"}, {"m"});
    b.node("Add", {"m", "beta"}, {"a"});
  }
  b.node("Sigmoid", {"a"}, {"s"});
  b.node("Mul", {"a", "s"}, {"y"});
  return b;
}

TEST_CASE("rewrites: PyTorch's exported GroupNorm becomes GroupNormalization (+ its SiLU)") {
  for (bool affine : {true, false}) {
    CAPTURE(affine);
    Rewritten r = rewrite(groupnorm_export(1.f, affine, {8, 1, 1}));
    REQUIRE(r.g.nodes.size() == 1);
    const Node& gn = r.g.nodes[0];
    CHECK(gn.op == "GroupNormalization");
    CHECK(gn.attr_i("num_groups", 0) == 4);
    CHECK(kinds(gn) == std::vector<PostOp::Kind>{PostOp::Kind::swish});
    check_same(r);
  }
  SUBCASE("an instance norm's own scale is not 1: left alone") {
    Rewritten r = rewrite(groupnorm_export(1.5f, true, {8, 1, 1}));
    CHECK(ops(r.g)["GroupNormalization"] == 0);
    CHECK(ops(r.g)["InstanceNormalization"] == 1);
    check_same(r);
  }
  SUBCASE("a Mul that is not per channel stays a node after the GroupNormalization") {
    Rewritten r = rewrite(groupnorm_export(1.f, true, {1, 1, 5}));
    CHECK(ops(r.g)["GroupNormalization"] == 1);
    CHECK(ops(r.g)["Reshape"] == 0);
    CHECK(ops(r.g)["Mul"] == 1);  // the gamma along W (the Add and SiLU fused into it)
    check_same(r);
  }
}

TEST_CASE("rewrites: near-misses are left alone") {
  SUBCASE("Pow by 3 is no variance") {
    BlockOpts o;
    o.pow = 3;
    o.stem_ln = false;
    Rewritten r = rewrite(test::convnext_block(o));
    CHECK(ops(r.g)["LayerNormalization"] == 0);
    CHECK(ops(r.g)["Transpose"] == 0);  // the region still sinks: Pow is elementwise
    check_same(r);
  }
  SUBCASE("a GELU divisor that is not sqrt 2") {
    BlockOpts o;
    o.sqrt2 = 1.5f;
    Rewritten r = rewrite(test::convnext_block(o));
    CHECK(ops(r.g)["Gelu"] == 0);
    CHECK(ops(r.g)["Erf"] == 1);
    check_same(r);
  }
  SUBCASE("a region read from outside in NHWC keeps its transposes") {
    OnnxBuilder b;
    b.input("x", {1, 4, 3, 2}).input("z", {1, 3, 2, 4}).output("y");
    OnnxBuilder::attr_ints(b.node("Transpose", {"x"}, {"t"}), "perm", {0, 2, 3, 1});
    b.node("Add", {"t", "z"}, {"s"});
    OnnxBuilder::attr_ints(b.node("Transpose", {"s"}, {"y"}), "perm", {0, 3, 1, 2});
    Rewritten r = rewrite(b);
    CHECK(ops(r.g)["Transpose"] == 2);
  }
  SUBCASE("a region value that is a graph output") {
    OnnxBuilder b;
    b.input("x", {1, 4, 3, 2}).output("y").output("t");
    OnnxBuilder::attr_ints(b.node("Transpose", {"x"}, {"t"}), "perm", {0, 2, 3, 1});
    OnnxBuilder::attr_ints(b.node("Transpose", {"t"}, {"y"}), "perm", {0, 3, 1, 2});
    Rewritten r = rewrite(b);
    CHECK(ops(r.g)["Transpose"] == 2);
  }
  SUBCASE("MatMul by a non-constant matrix") {
    OnnxBuilder b;
    b.input("x", {1, 4, 3, 2}).input("w", {4, 4}).output("y");
    OnnxBuilder::attr_ints(b.node("Transpose", {"x"}, {"t"}), "perm", {0, 2, 3, 1});
    b.node("MatMul", {"t", "w"}, {"m"});
    OnnxBuilder::attr_ints(b.node("Transpose", {"m"}, {"y"}), "perm", {0, 3, 1, 2});
    Rewritten r = rewrite(b);
    CHECK(ops(r.g)["Transpose"] == 2);
  }
  SUBCASE("the normalised value also read elsewhere") {
    OnnxBuilder b;
    b.input("x", {2, 6}).output("ln").output("p_d");
    test::add_layernorm(b, "p_", "x", "ln", 6);
    Rewritten r = rewrite(b);
    CHECK(ops(r.g)["LayerNormalization"] == 0);
  }
  SUBCASE("a per-pixel Mul after a conv is not folded") {
    OnnxBuilder b;
    b.input("x", {1, 2, 3, 3}).output("y");
    b.init_f("w", {2, 2, 1, 1}, {1, 2, 3, 4});
    b.init_f("s", {1, 1, 3, 3}, test::block_weights(9, 1.f, 3));
    b.node("Conv", {"x", "w"}, {"c"});
    b.node("Mul", {"c", "s"}, {"y"});
    Rewritten r = rewrite(b);
    CHECK(ops(r.g)["Mul"] == 1);
    check_same(r);
  }
}

TEST_CASE("rewrites: per-channel Add and Mul after a conv fold into it") {
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y");
  b.init_f("w", {3, 2, 1, 1}, {1, 2, 3, 4, 5, 6});
  b.init_f("bias", {3, 1, 1}, {0.5f, -1, 2});
  b.init_f("s", {1, 3, 1, 1}, {2, -0.5f, 3});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Add", {"bias", "c"}, {"a"});
  b.node("Mul", {"a", "s"}, {"y"});
  Rewritten r = rewrite(b);
  REQUIRE(r.g.nodes.size() == 1);
  CHECK(r.g.nodes[0].op == "Conv");
  check_same(r);
}

// The chain is composed and the weights rebuilt once: left as they are when only Adds follow,
// never changed in place when another conv reads them too (the model's own weights are shared
// state), scaled in place only in a tensor a pass made for this conv alone (a ConvNeXt block's
// layer scale, checked by the block test above).
TEST_CASE("rewrites: a folded chain leaves shared weights alone") {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y").output("z").output("u");
  b.init_f("w", {3, 2, 1, 1}, w);
  b.init_f("w2", {3, 2, 1, 1}, {-1, 0.5f, 2, 1, -3, 0.25f});
  b.init_f("bias", {3, 1, 1}, {0.5f, -1, 2});
  b.init_f("s", {1, 3, 1, 1}, {2, -0.5f, 3});
  b.node("Conv", {"x", "w"}, {"c"});  // folds Add and Mul: new weights
  b.node("Add", {"c", "bias"}, {"a"});
  b.node("Mul", {"a", "s"}, {"y"});
  b.node("Conv", {"x", "w"}, {"z"});   // reads the same weights, folds nothing
  b.node("Conv", {"x", "w2"}, {"d"});  // folds one Add: its weights stay
  b.node("Add", {"d", "bias"}, {"u"});
  Graph g = test::import(b);
  infer_shapes(g);
  const ValueId wid = g.find("w"), w2id = g.find("w2");
  auto outputs = [](const Graph& h) {
    auto vals = test::run_graph_ref(h, [](size_t, Tensor& t) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::cos(0.5f * float(i));
    });
    std::vector<float> all;
    for (ValueId v : h.outputs) {
      const Tensor& y = vals.at(v);
      all.insert(all.end(), y.data<float>(), y.data<float>() + y.numel());
    }
    return all;
  };
  const std::vector<float> before = outputs(g);
  CHECK(fold_conv_affine(g) == 3);
  remove_dead_code(g);
  const std::vector<float> after = outputs(g);
  REQUIRE(before.size() == after.size());
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == doctest::Approx(before[i]));
  int convs = 0;
  for (const Node& n : g.nodes) {
    if (n.op != "Conv") continue;
    ++convs;
    if (n.outputs[0] == g.find("y")) CHECK(n.inputs[1] != wid);
    if (n.outputs[0] == g.find("z")) CHECK(n.inputs[1] == wid);
    if (n.outputs[0] == g.find("u")) CHECK(n.inputs[1] == w2id);  // only the bias changed
  }
  CHECK(convs == 3);
  const Tensor& wt = *g.value(wid).constant;
  CHECK(std::vector<float>(wt.data<float>(), wt.data<float>() + wt.numel()) == w);
}

}  // namespace kiln

namespace kiln {
namespace {

// Weights of a given shape from a fixed pattern (distinct per name through `seed`).
std::vector<float> pattern(int64_t n, float seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(seed + 0.73f * float(i)) * 0.5f;
  return v;
}

// A branch of the sum: a Conv (kernel, pads {top, left, bottom, right}, stride, group, bias), an
// inference BatchNormalization of x ("bn") or x itself ("x").
struct BranchSpec {
  std::string kind;  // "conv", "bn", "x"
  int64_t kh = 3, kw = 3;
  std::vector<int64_t> pads = {1, 1, 1, 1};
  int64_t stride = 1, group = 1, dilation = 1;
  bool bias = true;
};

// x [1, c, h, w] -> the branches summed (a chain of Adds, in order) -> y; `extra`: one more
// summand, a second input z of y's shape.
OnnxBuilder branches(int64_t c, int64_t m, int64_t h, int64_t w, const std::vector<BranchSpec>& bs,
                     bool extra = false) {
  OnnxBuilder b;
  b.input("x", {1, c, h, w});
  std::vector<std::string> terms;
  for (size_t i = 0; i < bs.size(); ++i) {
    const BranchSpec& s = bs[i];
    const std::string n = std::to_string(i);
    if (s.kind == "x") {
      terms.push_back("x");
      continue;
    }
    if (s.kind == "bn") {
      for (const char* p : {"scale", "shift", "mean", "var"}) {
        std::vector<float> v = pattern(c, float(i) + float(p[1]));
        if (std::string(p) == "var")
          for (float& x : v) x = 0.5f + x * x;
        b.init_f(p + n, {c}, v);
      }
      b.node("BatchNormalization", {"x", "scale" + n, "shift" + n, "mean" + n, "var" + n},
             {"t" + n});
      terms.push_back("t" + n);
      continue;
    }
    b.init_f("w" + n, {m, c / s.group, s.kh, s.kw},
             pattern(m * c / s.group * s.kh * s.kw, float(i)));
    std::vector<std::string> in = {"x", "w" + n};
    if (s.bias) {
      b.init_f("b" + n, {m}, pattern(m, 10.f + float(i)));
      in.push_back("b" + n);
    }
    auto& conv = b.node("Conv", in, {"t" + n});
    OnnxBuilder::attr_ints(conv, "kernel_shape", {s.kh, s.kw});
    OnnxBuilder::attr_ints(conv, "pads", s.pads);
    OnnxBuilder::attr_ints(conv, "strides", {s.stride, s.stride});
    OnnxBuilder::attr_ints(conv, "dilations", {s.dilation, s.dilation});
    OnnxBuilder::attr_i(conv, "group", s.group);
    terms.push_back("t" + n);
  }
  if (extra) terms.push_back("z");
  std::string acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    const std::string out = i + 1 == terms.size() ? "y" : "s" + std::to_string(i);
    b.node("Add", {acc, terms[i]}, {out});
    acc = out;
  }
  b.output("y");
  return b;
}

BranchSpec conv(int64_t kh, int64_t kw, std::vector<int64_t> pads, int64_t stride = 1,
                int64_t group = 1, bool bias = true) {
  BranchSpec s;
  s.kind = "conv";
  s.kh = kh, s.kw = kw, s.pads = std::move(pads), s.stride = stride, s.group = group;
  s.bias = bias;
  return s;
}

BranchSpec of(const std::string& kind) {
  BranchSpec s;
  s.kind = kind;
  return s;
}

}  // namespace
}  // namespace kiln

namespace kiln {

// Structural re-parameterisation: the branches trained in parallel and exported as such become
// one Conv computing the same function (checked by the reference kernels before and after).
TEST_CASE("rewrites: parallel branches of one input become one conv") {
  struct Case {
    const char* name;
    int64_t c, m, h, w;
    std::vector<BranchSpec> bs;
  };
  const Case cases[] = {
      {"RepVGG: 3x3, 1x1, BN of x",
       8,
       8,
       6,
       7,
       {conv(3, 3, {1, 1, 1, 1}), conv(1, 1, {0, 0, 0, 0}), of("bn")}},
      {"RepVGG, strided: 3x3 and 1x1 of stride 2 on odd sizes",
       4,
       8,
       7,
       9,
       {conv(3, 3, {1, 1, 1, 1}, 2), conv(1, 1, {0, 0, 0, 0}, 2, 1, false)}},
      {"ACNet: 3x3, 1x3, 3x1",
       6,
       5,
       5,
       6,
       {conv(3, 3, {1, 1, 1, 1}), conv(1, 3, {0, 1, 0, 1}), conv(3, 1, {1, 0, 1, 0}, 1, 1, false)}},
      {"MobileOne: three depthwise 3x3, a depthwise 1x1, BN of x and x",
       8,
       8,
       5,
       5,
       {conv(3, 3, {1, 1, 1, 1}, 1, 8), conv(3, 3, {1, 1, 1, 1}, 1, 8),
        conv(3, 3, {1, 1, 1, 1}, 1, 8), conv(1, 1, {0, 0, 0, 0}, 1, 8), of("bn"), of("x")}},
      {"grouped 3x3 and x", 8, 8, 4, 6, {conv(3, 3, {1, 1, 1, 1}, 1, 2), of("x")}},
      {"large and small kernels (RepLKNet)",
       4,
       4,
       9,
       8,
       {conv(7, 7, {3, 3, 3, 3}, 1, 4), conv(3, 3, {1, 1, 1, 1}, 1, 4)}},
      {"windows that differ at the end: 2x2 padded after, 1x1",
       3,
       4,
       5,
       5,
       {conv(2, 2, {0, 0, 1, 1}), conv(1, 1, {0, 0, 0, 0})}},
      {"a conv and x (a residual around one conv)",
       4,
       4,
       5,
       5,
       {conv(3, 3, {1, 1, 1, 1}), of("x")}},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    Rewritten r = rewrite(branches(c.c, c.m, c.h, c.w, c.bs));
    CHECK(r.stats.rewrites == 1);
    const auto n = ops(r.g);
    CHECK(n.at("Conv") == 1);
    CHECK(n.count("Add") == 0);
    CHECK(n.count("BatchNormalization") == 0);
    check_same(r);
  }
  // A summand of another input stays an Add (here fused as the merged conv's residual).
  Rewritten r = rewrite(
      branches(4, 4, 5, 5, {conv(3, 3, {1, 1, 1, 1}), conv(1, 1, {0, 0, 0, 0})}, /*extra=*/true)
          .input("z", {1, 4, 5, 5}));
  CHECK(r.stats.rewrites == 1);
  CHECK(ops(r.g).at("Conv") == 1);
  check_same(r);
}

TEST_CASE("rewrites: branches that are not one conv's are left alone") {
  // Dilated: its taps are not a kernel's of the others' window.
  BranchSpec dil = conv(3, 3, {2, 2, 2, 2});
  dil.dilation = 2;
  // Another group count, another input, a branch read elsewhere, x on a strided sum.
  const std::vector<std::pair<const char*, OnnxBuilder>> cases = {
      {"dilated", branches(4, 4, 6, 6, {dil, conv(1, 1, {0, 0, 0, 0})})},
      {"groups differ",
       branches(4, 4, 6, 6, {conv(3, 3, {1, 1, 1, 1}, 1, 2), conv(1, 1, {0, 0, 0, 0})})},
      {"no conv: x and a BN of x", branches(4, 4, 5, 5, {of("bn"), of("x")})},
  };
  for (const auto& [what, b] : cases) {
    const std::string name = what;
    CAPTURE(name);
    Rewritten r = rewrite(b);
    CHECK(r.stats.rewrites == 0);
    check_same(r);
  }
  {  // a branch also read as an output
    OnnxBuilder b = branches(4, 4, 5, 5, {conv(3, 3, {1, 1, 1, 1}), conv(1, 1, {0, 0, 0, 0})});
    b.output("t0");
    Rewritten r = rewrite(b);
    CHECK(r.stats.rewrites == 0);
    CHECK(ops(r.g).at("Conv") == 2);
  }
  {  // convs of two different inputs
    OnnxBuilder b;
    b.input("x", {1, 4, 5, 5}).input("z", {1, 4, 5, 5}).output("y");
    b.init_f("w0", {4, 4, 3, 3}, pattern(144, 1));
    b.init_f("w1", {4, 4, 1, 1}, pattern(16, 2));
    auto& c0 = b.node("Conv", {"x", "w0"}, {"a"});
    OnnxBuilder::attr_ints(c0, "pads", {1, 1, 1, 1});
    b.node("Conv", {"z", "w1"}, {"c"});
    b.node("Add", {"a", "c"}, {"y"});
    Rewritten r = rewrite(b);
    CHECK(r.stats.rewrites == 0);
    CHECK(ops(r.g).at("Conv") == 2);
  }
}

}  // namespace kiln
