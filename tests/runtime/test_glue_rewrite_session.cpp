// ShuffleNet-like and DenseNet/Inception-like graphs (and DenseNet's Concat+BN+Relu layers) end to
// end: after the glue rewrites (graph/rewrite_glue.cpp) every node has a JIT label and none picks a
// reference kernel (Flatten excepted: a view, planned elsewhere; see below for tiny global pools),
// and the outputs match the reference path, on both ISAs and strategies.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"

namespace kiln {
namespace {

using test::OnnxBuilder;

void conv1x1(OnnxBuilder& b, const std::string& x, const std::string& y, int64_t ci, int64_t co) {
  std::vector<float> w(size_t(ci * co));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 7 % 11) - 5) / 16.f;
  b.init_f(y + "_w", {co, ci, 1, 1}, w);
  b.node("Conv", {x, y + "_w"}, {y + "_c"});
  b.node("Relu", {y + "_c"}, {y});
}

// Concat(a, b) -> Reshape -> Transpose -> Reshape (groups 2) as torchvision exports it.
void shuffle(OnnxBuilder& b, const std::string& a, const std::string& c, const std::string& y,
             int64_t ch, int64_t n, int64_t h, int64_t w) {
  OnnxBuilder::attr_i(b.node("Concat", {a, c}, {y + "_cat"}), "axis", 1);
  b.init_i(y + "_s5", {5}, {n, 2, ch, h, w});
  b.init_i(y + "_s4", {4}, {n, 2 * ch, h, w});
  b.node("Reshape", {y + "_cat", y + "_s5"}, {y + "_r"});
  OnnxBuilder::attr_ints(b.node("Transpose", {y + "_r"}, {y + "_t"}), "perm", {0, 2, 1, 3, 4});
  b.node("Reshape", {y + "_t", y + "_s4"}, {y});
}

// Two ShuffleNetV2 units on `ch` channels per branch, then ReduceMean over H,W.
std::string shufflenet_like(int64_t ch) {
  const int64_t n = 2, h = 6, w = 5;
  OnnxBuilder b;
  b.input("x", {n, ch, h, w}).output("y");
  conv1x1(b, "x", "a0", ch, ch);
  conv1x1(b, "x", "b0", ch, ch);
  shuffle(b, "a0", "b0", "s0", ch, n, h, w);
  b.init_i("st0", {1}, {0});
  b.init_i("mid", {1}, {ch});
  b.init_i("en1", {1}, {2 * ch});
  b.init_i("ax", {1}, {1});
  b.node("Slice", {"s0", "st0", "mid", "ax"}, {"h0"});
  b.node("Slice", {"s0", "mid", "en1", "ax"}, {"h1"});
  conv1x1(b, "h1", "b1", ch, ch);
  shuffle(b, "h0", "b1", "s1", ch, n, h, w);
  conv1x1(b, "s1", "c2", 2 * ch, 2 * ch);
  auto& rm = b.node("ReduceMean", {"c2"}, {"y"});
  OnnxBuilder::attr_ints(rm, "axes", {2, 3});
  OnnxBuilder::attr_i(rm, "keepdims", 0);
  return b.bytes();
}

// DenseNet's transition (zero Pad of nothing, AveragePool 2x2) and Inception's pooled branch
// (Pad 1, AveragePool 3x3 counting the pad).
std::string densenet_like(int64_t ch) {
  OnnxBuilder b;
  b.input("x", {2, ch, 8, 7}).output("y");
  conv1x1(b, "x", "c0", ch, ch);
  b.init_i("pads0", {8}, std::vector<int64_t>(8, 0));
  b.node("Pad", {"c0", "pads0"}, {"p0"});
  auto& ap = b.node("AveragePool", {"p0"}, {"a0"});
  OnnxBuilder::attr_ints(ap, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(ap, "strides", {2, 2});
  conv1x1(b, "a0", "c1", ch, ch);
  b.init_i("pads1", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  b.node("Pad", {"c1", "pads1"}, {"p1"});
  OnnxBuilder::attr_ints(b.node("AveragePool", {"p1"}, {"y"}), "kernel_shape", {3, 3});
  return b.bytes();
}

// Two DenseNet layers: each layer's input is the Concat of all earlier features, then
// BatchNormalization + Relu (fused into the Concat, graph/fuse.cpp) and a 1x1 conv.
std::string densenet_block(int64_t ch) {
  OnnxBuilder b;
  b.input("x", {2, ch, 6, 5}).output("y");
  conv1x1(b, "x", "f1", ch, ch);
  std::vector<std::string> feats{"x", "f1"};
  for (int k = 1; k <= 2; ++k) {
    const std::string cat = "cat" + std::to_string(k), bn = "bn" + std::to_string(k);
    OnnxBuilder::attr_i(b.node("Concat", feats, {cat}), "axis", 1);
    const int64_t c = ch * int64_t(feats.size());
    const size_t n = static_cast<size_t>(c);
    std::vector<float> sc(n), sh(n), mean(n), var(n);
    for (int64_t i = 0; i < c; ++i) {
      sc[size_t(i)] = 0.5f + float(i % 5) / 4.f;
      sh[size_t(i)] = float(i % 7 - 3) / 8.f;
      mean[size_t(i)] = float(i % 3 - 1) / 4.f;
      var[size_t(i)] = 0.5f + float(i % 4);
    }
    b.init_f(bn + "_s", {c}, sc).init_f(bn + "_b", {c}, sh);
    b.init_f(bn + "_m", {c}, mean).init_f(bn + "_v", {c}, var);
    b.node("BatchNormalization", {cat, bn + "_s", bn + "_b", bn + "_m", bn + "_v"}, {bn});
    if (k == 2) {
      b.node("Relu", {bn}, {"y"});
      break;
    }
    b.node("Relu", {bn}, {bn + "_r"});
    conv1x1(b, bn + "_r", "f2", c, ch);
    feats.push_back("f2");
  }
  return b.bytes();
}

// Batch 1, a Concat of two conv outputs read only by it (what plan.cpp writes in place, the
// convs storing straight into its slices) -> BatchNormalization -> Relu: fused into the Concat,
// which then must still run (its affine map) rather than vanish.
std::string concat_bn(int64_t ch) {
  OnnxBuilder b;
  b.input("x", {1, ch, 5, 6}).output("y");
  conv1x1(b, "x", "a", ch, 2 * ch);
  conv1x1(b, "x", "b", ch, 2 * ch);
  OnnxBuilder::attr_i(b.node("Concat", {"a", "b"}, {"cat"}), "axis", 1);
  const size_t c = size_t(4 * ch);
  std::vector<float> sc(c), sh(c), mean(c, 0.25f), var(c, 2.f);
  for (size_t i = 0; i < c; ++i) {
    sc[i] = 0.5f + float(i % 5) / 4.f;
    sh[i] = float(i % 7) / 8.f - 0.5f;
  }
  b.init_f("s", {int64_t(c)}, sc).init_f("sh", {int64_t(c)}, sh);
  b.init_f("m", {int64_t(c)}, mean).init_f("v", {int64_t(c)}, var);
  b.node("BatchNormalization", {"cat", "s", "sh", "m", "v"}, {"bn"});
  b.node("Relu", {"bn"}, {"y"});
  return b.bytes();
}

std::vector<Tensor> run(const std::string& bytes, const SessionOptions& o,
                        std::unique_ptr<Session>* keep) {
  auto s = Session::load_memory(bytes.data(), bytes.size(), o);
  Tensor x(DType::f32, s->inputs()[0].shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(int(i * 13 % 29) - 14) / 7.f;
  std::vector<Tensor> out;
  for (const auto& io : s->outputs()) out.emplace_back(io.dtype, io.shape);
  s->run({x}, out);
  if (keep) *keep = std::move(s);
  return out;
}

TEST_CASE("glue rewrites: shuffle / pad / reduce graphs pick no reference label") {
  int shuffles = 0;
  for (Isa isa : testing::jit_isas())
    for (int64_t ch : {8, 12, 24})
      for (int graph : {0, 1, 2, 3})
        for (Strategy st : {Strategy::global, Strategy::fixed}) {
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(ch);
          CAPTURE(graph);
          CAPTURE(std::string(strategy_name(st)));
          const std::string bytes = graph == 0   ? shufflenet_like(ch)
                                    : graph == 1 ? densenet_like(ch)
                                    : graph == 2 ? densenet_block(ch)
                                                 : concat_bn(ch);
          SessionOptions o;
          o.threads = 2;
          o.max_isa = isa;
          o.strategy = st;
          o.use_cache = false;
          o.tune = TuneMode::none;
          SessionOptions ref = o;
          ref.reference = true;
          std::unique_ptr<Session> s;
          const std::vector<Tensor> got = run(bytes, o, &s), want = run(bytes, ref, nullptr);
          const Graph& g = s->graph();
          for (size_t i = 0; i < g.nodes.size(); ++i) {
            CAPTURE(g.nodes[i].op);
            shuffles += g.nodes[i].op == "ChannelShuffle";
            for (const char* gone :
                 {"Pad", "Slice", "Transpose", "ReduceMean", "BatchNormalization", "Relu"})
              CHECK(g.nodes[i].op != gone);
            if (g.nodes[i].op == "Concat" && graph >= 2) CHECK(g.nodes[i].has("affine_scale"));
            if (g.nodes[i].op == "Flatten") continue;
            const auto c = candidate_labels(g, int(i), s->isa(), false);
            CHECK(c.front().kind != LabelKind::ref);
            // The cost model may keep a tiny global pool on its reference kernel rather than
            // convert its NCHW input (there is no NCHW pool kernel).
            // The fixed strategy's one (blocked) layout has no Concat of inputs that are not
            // whole blocks: the reference kernel it is.
            const bool blocked_concat =
                g.nodes[i].op != "Concat" || ch % layout_block(blocked_layout(isa)) == 0;
            if (g.nodes[i].op != "GlobalAveragePool" && (st != Strategy::fixed || blocked_concat))
              CHECK(s->selection().nodes[i].label.kind != LabelKind::ref);
          }
          REQUIRE(got.size() == want.size());
          double maxref = 0, maxdiff = 0;
          for (int64_t i = 0; i < want[0].numel(); ++i) {
            maxref = std::max(maxref, double(std::fabs(want[0].data<float>()[i])));
            maxdiff = std::max(
                maxdiff, double(std::fabs(want[0].data<float>()[i] - got[0].data<float>()[i])));
          }
          CHECK(maxref > 0);
          CHECK(maxdiff <= 1e-5 * maxref);
        }
  CHECK(shuffles > 0);
}

}  // namespace
}  // namespace kiln
