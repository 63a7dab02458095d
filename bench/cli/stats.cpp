// Tensor summaries and graph figures for the `kiln` CLI.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "cli.h"

namespace kiln::cli {

Summary summarize(const Tensor& t) {
  Summary s;
  if (t.numel() == 0) return s;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  auto acc = [&](double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  };
  if (t.dtype() == DType::f32) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) acc(p[i]);
  } else {
    const int64_t* p = t.data<int64_t>();
    for (int64_t i = 0; i < t.numel(); ++i) acc(double(p[i]));
  }
  s.min = lo;
  s.max = hi;
  s.mean = sum / double(t.numel());
  return s;
}

namespace {

double numel_d(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= double(d);
  return n;
}

// MACs of one node from its inferred shapes; 0 for ops without a dot-product core.
double node_macs(const Graph& g, const Node& n) {
  if (n.outputs.empty() || n.outputs[0] == kNoValue) return 0;
  const Shape& out = g.value(n.outputs[0]).shape;
  if (n.op == "Conv") {
    // Weight [M, C/group, kH, kW]: every output element reads (C/group)*kH*kW weights.
    if (n.in(1) == kNoValue) return 0;
    const Shape& w = g.value(n.in(1)).shape;
    double k = 1;
    for (size_t i = 1; i < w.size(); ++i) k *= double(w[i]);
    return numel_d(out) * k;
  }
  if (n.op == "Gemm") {
    const Shape& a = g.value(n.in(0)).shape;
    if (a.size() != 2) return 0;
    return numel_d(out) * double(n.attr_i("transA", 0) ? a[0] : a[1]);
  }
  if (n.op == "MatMul") {
    const Shape& a = g.value(n.in(0)).shape;
    if (a.empty()) return 0;
    return numel_d(out) * double(a.back());
  }
  return 0;
}

}  // namespace

GraphStats graph_stats(const Graph& g) {
  GraphStats st;
  std::set<ValueId> seen;
  for (const Node& n : g.nodes) {
    st.op_counts[n.op]++;
    st.macs += node_macs(g, n);
    for (ValueId v : n.inputs) {
      if (v == kNoValue || !seen.insert(v).second) continue;
      const Value& val = g.value(v);
      if (val.is_const() && val.dtype == DType::f32) st.params += val.constant->numel();
    }
  }
  return st;
}

std::string indexed_path(const std::string& path, size_t index) {
  const std::string ext = ".npy";
  std::string suffix = "_";  // (not "_" + to_string: GCC 12 emits a false -Wrestrict there)
  suffix += std::to_string(index);
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + suffix + ext;
  return path + suffix;
}

}  // namespace kiln::cli
