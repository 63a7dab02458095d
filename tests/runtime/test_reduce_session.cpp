// The reductions end to end, on every ISA path, against the reference path: Reduce* over the
// channels, the pixels and the last axis of a conv's output pick reduce labels; LogSoftmax,
// InstanceNormalization and GroupNormalization pick norm labels; Max / Min / Mean of two pick
// bcast labels. No node runs on a reference label.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "glue_session_util.h"
#include "graph/onnx_builder.h"
#include "jit/layout.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

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

// Runs `bytes` (input [2, 19, 7, 9]) on the reference and every ISA path; check(counts) sees
// the JIT session's label kinds.
template <class F>
void compare(const std::string& bytes, double tol, F check) {
  kiln::test::compare_with_reference(bytes, {2, 19, 7, 9}, tol,
                                     [&](const kiln::Session& s) { check(label_counts(s)); });
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

// Reductions over H, W or both of a blocked tensor (the layout's N, C blocks, H, W, lanes order):
// each node's reduce label on the ISA's blocked layout, run on blocked operands (pad lanes
// filled with finite garbage) against a plain NCHW reduction; over C, or without keepdims, the
// blocked label is refused.
TEST_CASE("reduce: blocked layouts reduce H, W or both in place") {
  OnnxBuilder b = conv_model({"y0", "y1", "y2", "y3", "y4", "y5"}, 18);
  struct R {
    const char* op;
    std::vector<int64_t> axes;
    int64_t keepdims;
    bool blocked;  // offered on the blocked layout
  };
  const R rs[] = {{"ReduceMean", {3}, 1, true},   {"ReduceMax", {2}, 1, true},
                  {"ReduceSum", {2, 3}, 1, true}, {"ReduceL2", {-1, -2}, 1, true},
                  {"ReduceMean", {1}, 1, false},  {"ReduceMean", {2, 3}, 0, false}};
  for (size_t i = 0; i < std::size(rs); ++i) {
    b.init_i("axes" + std::to_string(i), {int64_t(rs[i].axes.size())}, rs[i].axes);
    OnnxBuilder::attr_i(
        b.node(rs[i].op, {"c", "axes" + std::to_string(i)}, {"y" + std::to_string(i)}), "keepdims",
        rs[i].keepdims);
  }
  const std::string bytes = b.bytes();
  kiln::SessionOptions o;
  o.use_cache = false;
  o.tune = kiln::TuneMode::none;
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  const kiln::Graph& g = s->graph();
  int checked = 0;
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    const kiln::Layout l = kiln::blocked_layout(isa);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const kiln::Node& n = g.nodes[i];
      const auto it = std::find_if(std::begin(rs), std::end(rs), [&](const R& r) {
        return g.value(n.outputs[0]).name == "y" + std::to_string(&r - rs);
      });
      if (it == std::end(rs)) continue;
      CAPTURE(kiln::isa_name(isa));
      CAPTURE(g.value(n.outputs[0]).name);
      kiln::Label lab;
      lab.kind = kiln::LabelKind::reduce;
      lab.in = lab.out = l;
      std::string why;
      kiln::Instance inst = kiln::instantiate(g, int(i), lab, isa, &why);
      CHECK((inst.kernel != nullptr) == it->blocked);
      if (!inst.kernel) continue;
      const kiln::Shape xs = g.value(n.inputs[0]).shape, ys = g.value(n.outputs[0]).shape;
      const std::vector<float> x = randoms(size_t(kiln::shape_numel(xs)), 40 + i, -2.f, 2.f);
      std::vector<float> xb(size_t(kiln::layout_elems(l, xs)));
      kiln::convert_layout(x.data(), kiln::Layout::nchw, xb.data(), l, xs);
      for (float& v : xb)  // (the zeroed pad lanes: the data has no exact zeros) finite garbage
        if (v == 0.f) v = 0.25f;
      std::vector<float> yb(size_t(kiln::layout_elems(l, ys))), y(size_t(kiln::shape_numel(ys)));
      const float* src[] = {xb.data(), nullptr};
      float* dst[] = {yb.data()};
      inst.kernel->run(kiln::KernelArgs{src, dst}, 0, inst.kernel->tiles());
      kiln::convert_layout(yb.data(), l, y.data(), kiln::Layout::nchw, ys);
      // The plain reduction over the dims ys keeps at 1.
      for (int64_t nn = 0; nn < ys[0]; ++nn)
        for (int64_t c = 0; c < ys[1]; ++c)
          for (int64_t h = 0; h < ys[2]; ++h)
            for (int64_t w = 0; w < ys[3]; ++w) {
              double acc = std::string(it->op) == "ReduceMax" ? -1e30 : 0;
              int64_t cnt = 0;
              for (int64_t hh = 0; hh < xs[2]; ++hh)
                for (int64_t ww = 0; ww < xs[3]; ++ww) {
                  if ((ys[2] != 1 || xs[2] == 1) && hh != h) continue;
                  if ((ys[3] != 1 || xs[3] == 1) && ww != w) continue;
                  const double v = x[size_t(((nn * xs[1] + c) * xs[2] + hh) * xs[3] + ww)];
                  const std::string op = it->op;
                  acc = op == "ReduceMax"  ? std::max(acc, v)
                        : op == "ReduceL2" ? acc + v * v
                                           : acc + v;
                  ++cnt;
                }
              const std::string op = it->op;
              const double want = op == "ReduceMean" ? acc / double(cnt)
                                  : op == "ReduceL2" ? std::sqrt(acc)
                                                     : acc;
              const double got = y[size_t(((nn * ys[1] + c) * ys[2] + h) * ys[3] + w)];
              CHECK(std::fabs(got - want) <= 1e-4 * (1 + std::fabs(want)));
            }
      ++checked;
    }
  }
  CHECK(checked >= 4);
}
