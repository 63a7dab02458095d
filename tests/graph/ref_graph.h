// Graph tests run whole graphs through the reference kernels (the oracle for every rewrite and
// pass): one evaluator for the passes' constant folding, one runner for a graph.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "graph/ir.h"
#include "graph/passes.h"
#include "runtime/ref/ref_kernels.h"

namespace kiln::test {

// Runs a node by its reference kernel (fails the test when there is none).
inline void eval_ref_node(const Node& n, const std::vector<const Tensor*>& in,
                          const std::vector<Tensor*>& out) {
  RefKernel k = find_ref_kernel(n.op);
  REQUIRE_MESSAGE(static_cast<bool>(k), "no reference kernel for " << n.op);
  k(n, in, out);
}

inline const Evaluator& ref_eval() {
  static const Evaluator e = eval_ref_node;
  return e;
}

// Runs g node by node on the reference kernels; `fill(i, t)` fills graph input i (shaped and
// typed already). Returns every value computed, by id (inputs included).
inline std::map<ValueId, Tensor> run_graph_ref(const Graph& g,
                                               const std::function<void(size_t, Tensor&)>& fill) {
  std::map<ValueId, Tensor> vals;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.value(g.inputs[i]);
    Tensor t(v.dtype, v.shape);
    fill(i, t);
    vals[g.inputs[i]] = std::move(t);
  }
  auto get = [&](ValueId v) -> const Tensor* {
    if (v == kNoValue) return nullptr;
    if (g.value(v).is_const()) return &*g.value(v).constant;
    return &vals.at(v);
  };
  for (const Node& n : g.nodes) {
    std::vector<const Tensor*> in;
    std::vector<Tensor*> out;
    for (ValueId v : n.inputs) in.push_back(get(v));
    for (ValueId v : n.outputs) {
      vals[v] = Tensor(g.value(v).dtype, g.value(v).shape);
      out.push_back(&vals[v]);
    }
    eval_ref_node(n, in, out);
  }
  return vals;
}

// g's first output (f32) through run_graph_ref, every input filled with sin(0.37 i) * amp.
inline std::vector<float> run_first_output(const Graph& g, float amp) {
  auto vals = run_graph_ref(g, [amp](size_t, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(0.37f * float(i)) * amp;
  });
  const Tensor& y = vals.at(g.outputs[0]);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

}  // namespace kiln::test
