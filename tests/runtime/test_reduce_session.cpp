// The reductions end to end, on every ISA path, against the reference path: Reduce* over the
// channels, the pixels and the last axis of a conv's output pick reduce labels; LogSoftmax,
// InstanceNormalization and GroupNormalization pick norm labels; Max / Min / Mean of two pick
// bcast labels. No node runs on a reference label.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::Tensor;
using kiln::test::OnnxBuilder;
using kiln::test::randoms;

// x [2, 19, 7, 9] -> conv 1x1 (24 channels) = c, then the ops under test writing `outputs`.
OnnxBuilder conv_model(const std::vector<std::string>& outputs, int64_t opset) {
  OnnxBuilder b(opset);
  b.input("x", {2, 19, 7, 9});
  for (const auto& o : outputs) b.output(o);
  b.init_f("w", {24, 19, 1, 1}, randoms(24 * 19, 1, -0.5f, 0.5f));
  b.node("Conv", {"x", "w"}, {"c"});
  return b;
}

// y0..y5: ReduceMax over channels (keepdims), ReduceSum over H, W, ReduceLogSumExp over W,
// ReduceL2 over channels (keepdims 0), ReduceMean over everything but N, ReduceMin (opset 13:
// axes attribute) over H.
std::string reduce_model(int64_t opset) {
  OnnxBuilder b = conv_model({"y0", "y1", "y2", "y3", "y4", "y5"}, opset);
  struct R {
    const char* op;
    std::vector<int64_t> axes;
    int64_t keepdims;
  };
  const R rs[] = {{"ReduceMax", {1}, 1}, {"ReduceSum", {2, 3}, 0},     {"ReduceLogSumExp", {-1}, 1},
                  {"ReduceL2", {1}, 0},  {"ReduceMean", {1, 2, 3}, 1}, {"ReduceMin", {2}, 1}};
  for (size_t i = 0; i < std::size(rs); ++i) {
    const std::string y = "y" + std::to_string(i);
    const bool attr = opset < (std::string(rs[i].op) == "ReduceSum" ? 13 : 18);
    std::vector<std::string> in{"c"};
    if (!attr) {
      b.init_i("axes" + std::to_string(i), {int64_t(rs[i].axes.size())}, rs[i].axes);
      in.push_back("axes" + std::to_string(i));
    }
    auto& n = b.node(rs[i].op, in, {y});
    if (attr) OnnxBuilder::attr_ints(n, "axes", rs[i].axes);
    OnnxBuilder::attr_i(n, "keepdims", rs[i].keepdims);
  }
  return b.bytes();
}

// y0 = LogSoftmax(c, axis 1), y1 = InstanceNormalization(c), y2 = GroupNormalization(c, 4
// groups, opset 18: per-group scale / bias), y3 = Max(c, per-channel constant), y4 = Min(c,
// Relu(c)), y5 = Mean(c, Relu(c)).
std::string norm_model() {
  OnnxBuilder b = conv_model({"y0", "y1", "y2", "y3", "y4", "y5"}, 18);
  OnnxBuilder::attr_i(b.node("LogSoftmax", {"c"}, {"y0"}), "axis", 1);
  b.init_f("s", {24}, randoms(24, 2, 0.5f, 1.5f));
  b.init_f("B", {24}, randoms(24, 3, -1.f, 1.f));
  OnnxBuilder::attr_f(b.node("InstanceNormalization", {"c", "s", "B"}, {"y1"}), "epsilon", 1e-3f);
  b.init_f("gs", {4}, randoms(4, 4, 0.5f, 1.5f));
  b.init_f("gB", {4}, randoms(4, 5, -1.f, 1.f));
  OnnxBuilder::attr_i(b.node("GroupNormalization", {"c", "gs", "gB"}, {"y2"}), "num_groups", 4);
  b.init_f("pc", {24, 1, 1}, randoms(24, 6, -0.5f, 0.5f));
  b.node("Max", {"c", "pc"}, {"y3"});
  b.node("Relu", {"c"}, {"r"});
  b.node("Min", {"c", "r"}, {"y4"});
  b.node("Mean", {"c", "r"}, {"y5"});
  return b.bytes();
}

std::vector<Tensor> run(const std::string& bytes, const kiln::SessionOptions& o, const Tensor& x,
                        std::unique_ptr<kiln::Session>* keep = nullptr) {
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> out;
  for (const auto& info : s->outputs()) out.emplace_back(kiln::DType::f32, info.shape);
  s->run({x}, out);
  if (keep) *keep = std::move(s);
  return out;
}

// The nodes on labels of each kind; no node runs on a reference label.
std::map<kiln::LabelKind, int> label_counts(const kiln::Session& s) {
  const kiln::Graph& g = s.graph();
  std::map<kiln::LabelKind, int> counts;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const kiln::Label& l = s.selection().nodes[i].label;
    CAPTURE(g.nodes[i].op);
    CHECK(l.kind != kiln::LabelKind::ref);
    ++counts[l.kind];
  }
  return counts;
}

// Runs `bytes` on the reference path and on every ISA path; outputs must match within `tol` of
// each output's largest magnitude (the JIT conv rounds differently from the reference one).
template <class F>
void compare(const std::string& bytes, double tol, F check) {
  Tensor x(kiln::DType::f32, {2, 19, 7, 9});
  const std::vector<float> xv = randoms(size_t(x.numel()), 10, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  const std::vector<Tensor> want = run(bytes, ro, x);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(std::string(kiln::isa_name(isa)));
    kiln::SessionOptions o;
    o.use_cache = false;
    o.max_isa = isa;
    o.threads = 2;
    std::unique_ptr<kiln::Session> s;
    const std::vector<Tensor> got = run(bytes, o, x, &s);
    check(label_counts(*s));
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      REQUIRE(got[k].shape() == want[k].shape());
      double maxref = 0, maxdiff = 0;
      for (int64_t i = 0; i < want[k].numel(); ++i) {
        const double w = want[k].data<float>()[i];
        maxref = std::max(maxref, std::fabs(w));
        maxdiff = std::max(maxdiff, std::fabs(double(got[k].data<float>()[i]) - w));
      }
      CHECK(maxdiff <= tol * maxref);
    }
  }
}

}  // namespace

TEST_CASE("reduce session: Reduce* over channels, pixels and rows run on reduce labels") {
  for (int64_t opset : {13, 18}) {
    CAPTURE(opset);
    compare(reduce_model(opset), 1e-5, [](const std::map<kiln::LabelKind, int>& c) {
      CHECK(c.count(kiln::LabelKind::reduce));
      CHECK(c.at(kiln::LabelKind::reduce) +
                (c.count(kiln::LabelKind::pool) ? c.at(kiln::LabelKind::pool) : 0) >=
            6);
    });
  }
}

TEST_CASE("reduce session: LogSoftmax, Instance/GroupNorm on norm labels, Max/Min/Mean on bcast") {
  compare(norm_model(), 1e-5, [](const std::map<kiln::LabelKind, int>& c) {
    CHECK(c.count(kiln::LabelKind::norm));
    CHECK(c.at(kiln::LabelKind::norm) == 3);
    CHECK(c.count(kiln::LabelKind::bcast));
    CHECK(c.at(kiln::LabelKind::bcast) == 3);
  });
}
