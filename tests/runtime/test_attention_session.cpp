// A self-attention block end to end: Q x K^T, the scale, Softmax and P x V fused into the
// attention glue kernel, a batched constant right operand on the batched MatMul glue kernel
// (both label fc), not the reference kernels, on every JIT ISA, matching the reference path;
// and longer sequences (scores over several of the fused kernel's tiles) at 1 and 2 threads,
// with and without a bias added to the scores (a constant per head, a key mask as an input).
#include <doctest/doctest.h>

#include <cmath>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::Tensor;
using kiln::test::randoms;

// x [2, 10, 16]: q, k, v = x Wq, x Wk, x Wv (2-D constants: the FC family); s = q k^T / 4;
// p = Softmax(s); o = p v [2, 10, 16]; then per-head weights: o viewed as [2, 2, 10, 8] times a
// constant [2, 8, 5] (batched constant B), y [2, 2, 10, 5].
std::string attention_model() {
  kiln::test::OnnxBuilder b;
  b.input("x", {2, 10, 16}).output("y");
  b.init_f("wq", {16, 16}, randoms(256, 1, -0.3f, 0.3f));
  b.init_f("wk", {16, 16}, randoms(256, 2, -0.3f, 0.3f));
  b.init_f("wv", {16, 16}, randoms(256, 3, -0.3f, 0.3f));
  b.init_f("scale", {}, {4.f});
  b.init_i("heads", {4}, {2, 10, 2, 8});
  b.init_f("wh", {2, 8, 5}, randoms(80, 4, -0.3f, 0.3f));
  b.node("MatMul", {"x", "wq"}, {"q"});
  b.node("MatMul", {"x", "wk"}, {"k"});
  b.node("MatMul", {"x", "wv"}, {"v"});
  auto& t = b.node("Transpose", {"k"}, {"kt"});
  kiln::test::OnnxBuilder::attr_ints(t, "perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"s0"}, "qk");
  b.node("Div", {"s0", "scale"}, {"s"});
  b.node("Softmax", {"s"}, {"p"});
  b.node("MatMul", {"p", "v"}, {"o"}, "pv");
  b.node("Reshape", {"o", "heads"}, {"o4"});
  auto& t2 = b.node("Transpose", {"o4"}, {"oh"});
  kiln::test::OnnxBuilder::attr_ints(t2, "perm", {0, 2, 1, 3});
  b.node("MatMul", {"oh", "wh"}, {"y"}, "perhead");
  return b.bytes();
}

}  // namespace

TEST_CASE("attention session: activation x activation MatMuls run on JIT kernels") {
  const std::string bytes = attention_model();
  Tensor x(kiln::DType::f32, {2, 10, 16});
  const std::vector<float> xv = randoms(size_t(x.numel()), 10, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  auto run = [&](const kiln::SessionOptions& o, std::unique_ptr<kiln::Session>* keep) {
    auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
    std::vector<Tensor> out;
    out.emplace_back(kiln::DType::f32, s->outputs()[0].shape);
    s->run({x}, out);
    *keep = std::move(s);
    return std::move(out[0]);
  };
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  std::unique_ptr<kiln::Session> rs;
  const Tensor want = run(ro, &rs);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.use_cache = false;
    o.tune = kiln::TuneMode::none;
    o.max_isa = isa;
    o.threads = 2;
    std::unique_ptr<kiln::Session> s;
    const Tensor got = run(o, &s);
    const kiln::Graph& g = s->graph();
    int matmuls = 0, fused = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      CAPTURE(g.nodes[i].name);
      const kiln::Label& l = s->selection().nodes[i].label;
      if (g.nodes[i].op == "MatMul" || g.nodes[i].op == "SoftmaxAttention") {
        ++(g.nodes[i].op == "MatMul" ? matmuls : fused);
        CHECK(l.kind == kiln::LabelKind::fc);
      }
    }
    // qk, Div, Softmax, pv in one SoftmaxAttention (graph/rewrites.cpp fuse_attention); perhead
    // (the projections may have become convs).
    CHECK(fused == 1);
    CHECK(matmuls >= 1);
    REQUIRE(got.shape() == want.shape());
    double maxref = 0, maxdiff = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      maxref = std::max(maxref, std::fabs(double(want.data<float>()[i])));
      maxdiff = std::max(maxdiff, std::fabs(double(got.data<float>()[i] - want.data<float>()[i])));
    }
    CHECK(maxdiff <= 1e-5 * maxref);
  }
}

TEST_CASE("attention session: long sequences on the fused kernel at 1 and 2 threads") {
  // Q [1, 2, 300, 16] x K^T [1, 2, 16, 300], times 0.25, [+ a bias,] Softmax, x V [2, 300, 24]:
  // 300 keys and query rows in several tiles and a tail; V broadcast over the leading batch
  // dim. Biases: a constant [2, 300, 300] (relative positions per head), an input [1, 1, 1, 300]
  // (a key mask: every seventh key -inf).
  for (const std::string bias : {"", "const", "input"}) {
    CAPTURE(bias);
    kiln::test::OnnxBuilder b;
    b.input("q", {1, 2, 300, 16}).input("kt", {1, 2, 16, 300}).input("v", {2, 300, 24}).output("y");
    if (bias == "input") b.input("mask", {1, 1, 1, 300});
    b.init_f("c", {}, {0.25f});
    b.node("MatMul", {"q", "kt"}, {"s"});
    b.node("Mul", {"s", "c"}, {"t"});
    if (bias == "const") b.init_f("rel", {2, 300, 300}, randoms(2 * 300 * 300, 30, -3.f, 3.f));
    if (!bias.empty()) b.node("Add", {"t", bias == "const" ? "rel" : "mask"}, {"tb"});
    b.node("Softmax", {bias.empty() ? "t" : "tb"}, {"p"});
    b.node("MatMul", {"p", "v"}, {"y"});
    const std::string bytes = b.bytes();
    std::vector<Tensor> in;
    uint64_t seed = 20;
    std::vector<kiln::Shape> shapes{{1, 2, 300, 16}, {1, 2, 16, 300}, {2, 300, 24}};
    if (bias == "input") shapes.push_back({1, 1, 1, 300});
    for (const kiln::Shape& sh : shapes) {
      in.emplace_back(kiln::DType::f32, sh);
      const std::vector<float> v = randoms(size_t(in.back().numel()), seed++, -2.f, 2.f);
      std::copy(v.begin(), v.end(), in.back().data<float>());
    }
    if (bias == "input")
      for (int64_t i = 0; i < 300; i += 7) in.back().data<float>()[i] = -INFINITY;
    auto run = [&](const kiln::SessionOptions& o, int* fused) {
      auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
      *fused = 0;
      for (size_t i = 0; i < s->graph().nodes.size(); ++i)
        if (s->graph().nodes[i].op == "SoftmaxAttention")
          *fused += s->selection().nodes[i].label.kind == kiln::LabelKind::fc;
      std::vector<Tensor> out;
      out.emplace_back(kiln::DType::f32, s->outputs()[0].shape);
      s->run(in, out);
      return std::move(out[0]);
    };
    kiln::SessionOptions ro;
    ro.reference = true;
    ro.use_cache = false;
    int fused = 0;
    const Tensor want = run(ro, &fused);
    REQUIRE(want.shape() == kiln::Shape{1, 2, 300, 24});
    for (kiln::Isa isa : kiln::testing::jit_isas())
      for (int threads : {1, 2}) {
        CAPTURE(kiln::isa_name(isa));
        CAPTURE(threads);
        kiln::SessionOptions o;
        o.use_cache = false;
        o.tune = kiln::TuneMode::none;
        o.max_isa = isa;
        o.threads = threads;
        const Tensor got = run(o, &fused);
        CHECK(fused == 1);
        double maxref = 0, maxdiff = 0;
        for (int64_t i = 0; i < want.numel(); ++i) {
          maxref = std::max(maxref, std::fabs(double(want.data<float>()[i])));
          maxdiff =
              std::max(maxdiff, std::fabs(double(got.data<float>()[i] - want.data<float>()[i])));
        }
        CHECK(maxdiff <= 1e-5 * maxref);
      }
  }
}
