// Broadcast binary ops and standalone BatchNormalization end to end: a graph with a
// squeeze-and-excitation scale, a pre-activation BN+Relu, a per-pixel Mul and a constant
// per-channel Add picks no reference label on either ISA and matches the reference path.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::Tensor;

using kiln::test::randoms;

// x [2, 20, 9, 9] -> BN -> Relu -> conv 1x1 (24) = c; SE: GAP -> conv (6) -> Relu -> conv (24)
// -> Sigmoid = s [2, 24, 1, 1]; y = (c * s) * p + k with p = Sigmoid(conv (1) of c), one value
// per pixel, and k a constant [24, 1, 1].
std::string bcast_model() {
  kiln::test::OnnxBuilder b;
  b.input("x", {2, 20, 9, 9}).output("y");
  b.init_f("scale", {20}, randoms(20, 1, 0.5f, 2.f));
  b.init_f("bias", {20}, randoms(20, 2, -1.f, 1.f));
  b.init_f("mean", {20}, randoms(20, 3, -1.f, 1.f));
  b.init_f("var", {20}, randoms(20, 4, 0.1f, 2.f));
  b.init_f("w1", {24, 20, 1, 1}, randoms(480, 5, -0.3f, 0.3f));
  b.init_f("w2", {6, 24, 1, 1}, randoms(144, 6, -0.3f, 0.3f));
  b.init_f("w3", {24, 6, 1, 1}, randoms(144, 7, -0.3f, 0.3f));
  b.init_f("w4", {1, 24, 1, 1}, randoms(24, 8, -0.3f, 0.3f));
  b.init_f("k", {24, 1, 1}, randoms(24, 9, -1.f, 1.f));
  b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"n"});
  b.node("Relu", {"n"}, {"r"});
  b.node("Conv", {"r", "w1"}, {"c"});
  b.node("GlobalAveragePool", {"c"}, {"g"});
  b.node("Conv", {"g", "w2"}, {"e1"});
  b.node("Relu", {"e1"}, {"e2"});
  b.node("Conv", {"e2", "w3"}, {"e3"});
  b.node("Sigmoid", {"e3"}, {"s"});
  b.node("Mul", {"c", "s"}, {"cs"});
  b.node("Conv", {"c", "w4"}, {"p1"});
  b.node("Sigmoid", {"p1"}, {"p"});
  b.node("Mul", {"cs", "p"}, {"cp"});
  b.node("Add", {"cp", "k"}, {"y"});
  return b.bytes();
}

Tensor run(const std::string& bytes, const kiln::SessionOptions& o, const Tensor& x,
           std::unique_ptr<kiln::Session>* keep = nullptr) {
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> out;
  out.emplace_back(kiln::DType::f32, s->outputs()[0].shape);
  s->run({x}, out);
  if (keep) *keep = std::move(s);
  return std::move(out[0]);
}

}  // namespace

TEST_CASE("bcast session: SE scale, BN+Relu, per-pixel and constant operands, no reference") {
  const std::string bytes = bcast_model();
  Tensor x(kiln::DType::f32, {2, 20, 9, 9});
  const std::vector<float> xv = randoms(size_t(x.numel()), 10, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  const Tensor want = run(bytes, ro, x);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.use_cache = false;
    o.max_isa = isa;
    o.threads = 2;
    std::unique_ptr<kiln::Session> s;
    const Tensor got = run(bytes, o, x, &s);
    const kiln::Graph& g = s->graph();
    int bcast = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const kiln::Label& l = s->selection().nodes[i].label;
      CAPTURE(g.nodes[i].op);
      CHECK(l.kind != kiln::LabelKind::ref);
      bcast += l.kind == kiln::LabelKind::bcast;
      CHECK(g.nodes[i].op != "Relu");  // fused into the BN and the conv
    }
    CHECK(bcast == 4);  // BN+Relu, two Muls, the Add
    double maxref = 0, maxdiff = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      maxref = std::max(maxref, std::fabs(double(want.data<float>()[i])));
      maxdiff = std::max(maxdiff, std::fabs(double(got.data<float>()[i] - want.data<float>()[i])));
    }
    CHECK(maxdiff <= 1e-5 * maxref);
  }
}
