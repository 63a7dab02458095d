// The glue rewrites (graph/rewrite_glue.cpp): channel shuffle / slice / split / concat into
// ChannelShuffle, ReduceMean over H,W into a global pool, constant Pad into the consumer's pads;
// and a Transpose of axes of size 1 into a Reshape (graph/rewrite_forms.cpp).
// Each graph is run by the reference kernels before and after optimize(): the results must
// agree, and the cases that are not exact must be left alone.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>

#include "graph/onnx_builder.h"
#include "graph/passes.h"
#include "ref_graph.h"
#include "test_rng.h"

namespace kiln {
namespace {

using test::OnnxBuilder;

const Evaluator& kEval = test::ref_eval();

// Runs g on the reference kernels with a seeded random input per graph input, named outputs.
std::map<std::string, Tensor> run_named_outputs(const Graph& g, bool non_negative = false) {
  test::XorShift rng(7, 1);
  auto vals = test::run_graph_ref(g, [&](size_t, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = float(rng.pick(0, 2000) - (non_negative ? 0 : 1000)) / 250.f;
  });
  std::map<std::string, Tensor> r;
  for (ValueId v : g.outputs)
    r[g.value(v).name] = g.value(v).is_const() ? *g.value(v).constant : vals.at(v);
  return r;
}

int count_op(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes) c += n.op == op;
  return c;
}

// Imports b twice: once only inferred (the ONNX graph as written), once optimized. Checks that
// both compute the same outputs (bit for bit: the rewrites move data or sum in the same
// order) and returns the optimized graph.
Graph check_same(const OnnxBuilder& b, bool non_negative = false) {
  Graph plain = test::import(b);
  infer_shapes(plain, &kEval);
  Graph opt = test::import(b);
  optimize(opt, kEval);
  const auto want = run_named_outputs(plain, non_negative),
             got = run_named_outputs(opt, non_negative);
  REQUIRE(want.size() == got.size());
  for (const auto& kv : want) {  // no structured binding: clang cannot capture one in CHECK
    const std::string& name = kv.first;
    const Tensor& t = kv.second;
    const Tensor& u = got.at(name);
    REQUIRE(t.shape() == u.shape());
    int bad = 0;
    for (int64_t i = 0; i < t.numel(); ++i) bad += t.data<float>()[i] != u.data<float>()[i];
    CHECK_MESSAGE(bad == 0, name << ": " << bad << " elements differ");
  }
  return opt;
}

// ShuffleNetV2 unit: Concat(a, b) -> channel shuffle (groups 2) -> two channel halves.
OnnxBuilder shuffle_unit(int64_t c, bool slice_gap = false,
                         std::vector<int64_t> perm = {0, 2, 1, 3, 4}) {
  OnnxBuilder b;
  b.input("x", {2, c, 3, 5}).output("y1").output("y2");
  b.init_i("s5", {5}, {2, 2, c, 3, 5});
  b.init_i("s4", {4}, {2, 2 * c, 3, 5});
  b.init_i("st0", {1}, {0});
  b.init_i("en0", {1}, {slice_gap ? c - 1 : c});
  b.init_i("st1", {1}, {c});
  b.init_i("en1", {1}, {2 * c});
  b.init_i("ax", {1}, {1});
  b.node("Relu", {"x"}, {"a"});
  b.node("Sigmoid", {"x"}, {"s"});
  OnnxBuilder::attr_i(b.node("Concat", {"a", "s"}, {"cat"}), "axis", 1);
  b.node("Reshape", {"cat", "s5"}, {"r5"});
  OnnxBuilder::attr_ints(b.node("Transpose", {"r5"}, {"t5"}), "perm", perm);
  b.node("Reshape", {"t5", "s4"}, {"sh"});
  b.node("Slice", {"sh", "st0", "en0", "ax"}, {"h0"});
  b.node("Slice", {"sh", "st1", "en1", "ax"}, {"h1"});
  b.node("Tanh", {"h0"}, {"y1"});
  b.node("Relu", {"h1"}, {"y2"});
  return b;
}

TEST_CASE("rewrite: a ShuffleNet unit becomes one ChannelShuffle node") {
  for (int64_t c : {4, 12, 24}) {
    CAPTURE(c);
    Graph g = check_same(shuffle_unit(c));
    CHECK(count_op(g, "ChannelShuffle") == 1);
    for (const char* op : {"Concat", "Reshape", "Transpose", "Slice"}) CHECK(count_op(g, op) == 0);
    for (const Node& n : g.nodes)
      if (n.op == "ChannelShuffle") {
        CHECK(n.inputs.size() == 2);
        CHECK(n.outputs.size() == 2);
        CHECK(n.attr_i("groups", 0) == 2);
        CHECK(n.attr_ints("split") == std::vector<int64_t>{c, c});
      }
  }
}

TEST_CASE("rewrite: what is not a channel shuffle, or cannot fold, is left") {
  // Another permutation: no shuffle (the slices still become groups-1 ChannelShuffles).
  Graph g = check_same(shuffle_unit(4, false, {0, 1, 2, 4, 3}));
  CHECK(count_op(g, "Transpose") == 1);
  CHECK(count_op(g, "Concat") == 1);
  // Slices with a gap between them: the shuffle keeps its output, each slice is its own node.
  g = check_same(shuffle_unit(4, true));
  CHECK(count_op(g, "ChannelShuffle") == 3);
  CHECK(count_op(g, "Transpose") == 0);
  // An intermediate that is a graph output stays materialised.
  OnnxBuilder b = shuffle_unit(4);
  b.output("t5");
  g = check_same(b);
  CHECK(count_op(g, "Transpose") == 1);
}

TEST_CASE("rewrite: channel Split and strided Slice") {
  OnnxBuilder b;
  b.input("x", {2, 10, 3, 3}).output("y0").output("y1").output("z");
  b.init_i("sp", {2}, {3, 7});
  b.init_i("st", {1}, {1});
  b.init_i("en", {1}, {9});
  b.init_i("ax", {1}, {1});
  b.init_i("step", {1}, {2});
  OnnxBuilder::attr_i(b.node("Split", {"x", "sp"}, {"y0", "y1"}), "axis", 1);
  b.node("Slice", {"x", "st", "en", "ax", "step"}, {"z"});  // step 2: not a channel range
  Graph g = check_same(b);
  CHECK(count_op(g, "ChannelShuffle") == 1);
  CHECK(count_op(g, "Slice") == 1);
}

OnnxBuilder reduce_mean(std::vector<int64_t> axes, int64_t keepdims) {
  OnnxBuilder b;
  b.input("x", {2, 6, 4, 5}).output("y");
  auto& n = b.node("ReduceMean", {"x"}, {"y"});
  OnnxBuilder::attr_ints(n, "axes", axes);
  OnnxBuilder::attr_i(n, "keepdims", keepdims);
  return b;
}

TEST_CASE("rewrite: ReduceMean over H,W becomes a global average pool") {
  Graph g = check_same(reduce_mean({2, 3}, 0));
  CHECK(count_op(g, "GlobalAveragePool") == 1);
  CHECK(count_op(g, "Flatten") == 1);
  CHECK(g.value(g.outputs[0]).shape == Shape{2, 6});
  g = check_same(reduce_mean({-1, -2}, 1));
  CHECK(count_op(g, "GlobalAveragePool") == 1);
  CHECK(count_op(g, "Flatten") == 0);
  g = check_same(reduce_mean({1, 2}, 0));
  CHECK(count_op(g, "ReduceMean") == 1);
  g = check_same(reduce_mean({2}, 1));
  CHECK(count_op(g, "ReduceMean") == 1);
}

// x -> [Relu] -> Pad(pads, value) -> consumer.
OnnxBuilder pad_then(const std::string& op, std::vector<int64_t> pads, float value, bool relu,
                     std::vector<int64_t> pool_pads = {0, 0, 0, 0}, int64_t ceil = 0,
                     int64_t include = 0) {
  OnnxBuilder b(13);
  b.input("x", {2, 3, 7, 6}).output("y");
  b.init_i("pads", {8}, pads);
  b.init_f("v", {}, {value});
  b.node(relu ? "Relu" : "Identity", {"x"}, {"r"});
  b.node("Pad", {"r", "pads", "v"}, {"p"});
  if (op == "Conv") {
    std::vector<float> w(4 * 3 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) / 4.f;
    b.init_f("w", {4, 3, 3, 3}, w);
    OnnxBuilder::attr_ints(b.node("Conv", {"p", "w"}, {"y"}), "pads", pool_pads);
  } else {
    auto& n = b.node(op, {"p"}, {"y"});
    OnnxBuilder::attr_ints(n, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(n, "pads", pool_pads);
    OnnxBuilder::attr_i(n, "ceil_mode", ceil);
    if (op == "AveragePool") OnnxBuilder::attr_i(n, "count_include_pad", include);
  }
  return b;
}

TEST_CASE("rewrite: constant Pads fold into the consumer where exact") {
  const std::vector<int64_t> hw = {0, 0, 1, 2, 0, 0, 2, 1};
  struct Case {
    const char* what;
    OnnxBuilder b;
    bool folded, non_negative;
  };
  const float inf = std::numeric_limits<float>::infinity();
  Case cases[] = {
      {"avgpool (inception)", pad_then("AveragePool", {0, 0, 1, 1, 0, 0, 1, 1}, 0, false), true,
       false},
      {"avgpool, own pads counted", pad_then("AveragePool", hw, 0, false, {1, 0, 0, 1}, 0, 1), true,
       false},
      {"avgpool, own pads not counted", pad_then("AveragePool", hw, 0, false, {1, 0, 0, 1}), false,
       false},
      {"avgpool, ceil_mode", pad_then("AveragePool", hw, 0, false, {0, 0, 0, 0}, 1), false, false},
      {"avgpool, value 1", pad_then("AveragePool", hw, 1, false), false, false},
      {"conv", pad_then("Conv", hw, 0, false, {1, 1, 0, 0}), true, false},
      {"conv, value 2", pad_then("Conv", hw, 2, false), false, false},
      {"avgpool, channel pad", pad_then("AveragePool", {0, 1, 0, 0, 0, 0, 0, 0}, 0, false), false,
       false},
      {"maxpool after relu", pad_then("MaxPool", hw, 0, true), true, true},
      {"maxpool, -inf", pad_then("MaxPool", hw, -inf, false), true, false},
      {"maxpool, maybe negative", pad_then("MaxPool", hw, 0, false), false, false},
      {"maxpool, all-pad window", pad_then("MaxPool", {0, 0, 3, 0, 0, 0, 0, 0}, 0, true), false,
       true},
      {"avgpool, pads reach a whole window",
       pad_then("AveragePool", {0, 0, 3, 0, 0, 0, 0, 0}, 0, false), false, false},
      {"no padding at all", pad_then("Conv", std::vector<int64_t>(8, 0), 5, false), true, false},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.what));
    Graph g = check_same(c.b, c.non_negative);
    CHECK(count_op(g, "Pad") == (c.folded ? 0 : 1));
  }
}

// x -> Transpose(perm; ONNX's reversal when empty) -> Relu.
OnnxBuilder transpose_of(const Shape& in, const std::vector<int64_t>& perm) {
  OnnxBuilder b;
  b.input("x", in).output("y");
  auto& t = b.node("Transpose", {"x"}, {"t"});
  if (!perm.empty()) OnnxBuilder::attr_ints(t, "perm", perm);
  b.node("Relu", {"t"}, {"y"});
  return b;
}

TEST_CASE("rewrite: a Transpose that moves only axes of size 1 becomes a Reshape") {
  struct Case {
    Shape in;
    std::vector<int64_t> perm;
    bool reshape;
  };
  const Case cases[] = {
      {{2, 1, 3, 4, 5}, {0, 2, 1, 3, 4}, true},  // a 3-D conv's frames of a 1-channel volume
      {{2, 6, 1, 1}, {0, 2, 3, 1}, true},        // NCHW -> NHWC of a pooled tensor
      {{1, 1, 7}, {}, true},                     // the default reversal
      {{3, 1, 1, 5}, {0, 2, 1, 3}, true},        // two 1s swapped
      {{1, 3, 1, 5}, {2, 0, 3, 1}, false},       // the 3 and the 5 swap
      {{2, 3, 4}, {}, false},
      {{2, 1, 3, 4}, {0, 1, 3, 2}, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CAPTURE(c.perm);
    Graph g = check_same(transpose_of(c.in, c.perm));
    CHECK(count_op(g, "Transpose") == (c.reshape ? 0 : 1));
    CHECK(count_op(g, "Reshape") == (c.reshape ? 1 : 0));
  }
}

TEST_CASE("rewrite: a model may not use the internal ChannelShuffle op") {
  OnnxBuilder b;
  b.input("x", {1, 4, 2, 2}).output("y");
  auto& n = b.node("ChannelShuffle", {"x"}, {"y"});
  OnnxBuilder::attr_i(n, "groups", 2);
  OnnxBuilder::attr_ints(n, "split", {4});
  bool threw = false;
  try {
    test::import(b);
  } catch (const Error& e) {
    threw = true;
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("internal") != std::string::npos);
  }
  CHECK(threw);
}

}  // namespace
}  // namespace kiln
