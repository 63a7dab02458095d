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

Check check_output(const Tensor& out, const Tensor& ref, const std::string& ref_path) {
  if (out.dtype() != DType::f32 || ref.dtype() != DType::f32 || out.shape() != ref.shape())
    fail(Code::invalid_argument, "--check " + ref_path + ": reference " +
                                     std::string(dtype_name(ref.dtype())) + shape_str(ref.shape()) +
                                     " does not match output 0, " + dtype_name(out.dtype()) +
                                     shape_str(out.shape()));
  Check c;
  const float *o = out.data<float>(), *r = ref.data<float>();
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(r[i])));
    const double d = std::fabs(double(o[i]) - double(r[i]));
    max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
  }
  c.max_rel_error = max_ref > 0 ? max_diff / max_ref : max_diff;
  const int64_t classes = ref.shape().empty() ? 1 : std::max<int64_t>(ref.shape().back(), 1);
  c.rows = ref.numel() / classes;
  for (int64_t row = 0; row < c.rows; ++row) {
    const float *orow = o + row * classes, *rrow = r + row * classes;
    const int64_t want = std::max_element(rrow, rrow + classes) - rrow;
    c.top1_agree += std::max_element(orow, orow + classes) - orow == want;
    // The reference's top-1 is in the output's top 5 when fewer than 5 classes beat it.
    int64_t above = 0;
    for (int64_t j = 0; j < classes; ++j) above += orow[j] > orow[want];
    c.top5_contains += above < 5;
  }
  return c;
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
