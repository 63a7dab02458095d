#include "runtime/node_problems.h"

#include "graph/recurrent.h"

namespace kiln {
namespace {

// Shape s viewed as [outer, n, inner]: the dims before `axis`, [axis, end), from `end` on.
void axis_split(const Shape& s, int64_t axis, int64_t end, int64_t* outer, int64_t* n,
                int64_t* inner) {
  *outer = *n = *inner = 1;
  for (int64_t d = 0; d < int64_t(s.size()); ++d)
    *(d < axis ? outer : d < end ? n : inner) *= s[size_t(d)];
}

}  // namespace

// TopK (f32; axis set by inference, K the output's extent) viewed as [outer, n, inner].
std::optional<TopKProblem> topk_problem(const Graph& g, const Node& n) {
  if (n.op != "TopK" || n.outputs.empty() || n.in(0) == kNoValue ||
      g.value(n.in(0)).dtype != DType::f32)
    return std::nullopt;
  const bool values = n.outputs[0] != kNoValue;
  const bool indices = n.outputs.size() > 1 && n.outputs[1] != kNoValue;
  if (!values && !indices) return std::nullopt;
  const Shape& s = g.value(n.in(0)).shape;
  const int64_t axis = n.attr_i("axis", -1);
  if (axis < 0 || axis >= int64_t(s.size())) return std::nullopt;
  TopKProblem p;
  axis_split(s, axis, axis + 1, &p.outer, &p.n, &p.inner);
  p.k = g.value(values ? n.outputs[0] : n.outputs[1]).shape[size_t(axis)];
  p.largest = n.attr_i("largest", 1) != 0;
  p.indices = indices;
  if (p.k < 1 || p.k > p.n || p.outer < 1 || p.inner < 1) return std::nullopt;
  return p;
}

// CumSum (f32 or int64; axis set by inference) viewed as [outer, n, inner].
std::optional<CumSumProblem> cumsum_problem(const Graph& g, const Node& n) {
  if (n.op != "CumSum" || n.outputs.size() != 1 || n.in(0) == kNoValue) return std::nullopt;
  const Value& x = g.value(n.in(0));
  if (x.dtype != DType::f32 && x.dtype != DType::i64) return std::nullopt;
  const int64_t axis = n.attr_i("axis", 0);
  if (axis < 0 || axis >= int64_t(x.shape.size())) return std::nullopt;
  CumSumProblem p;
  axis_split(x.shape, axis, axis + 1, &p.outer, &p.n, &p.inner);
  p.exclusive = n.attr_i("exclusive", 0) != 0;
  p.reverse = n.attr_i("reverse", 0) != 0;
  p.int64 = x.dtype == DType::i64;
  if (p.outer < 1 || p.n < 1 || p.inner < 1) return std::nullopt;
  return p;
}

// A Recurrence (graph/recurrent.h) whose R^T, Rb and P are constants.
std::optional<RecurrenceProblem> recurrence_problem(const Graph& g, const Node& n) {
  if (n.op != "Recurrence" || n.in(0) == kNoValue || n.in(1) == kNoValue) return std::nullopt;
  auto constant = [&](size_t i) { return const_tensor(g, n.in(i)); };
  RecurrenceProblem p;
  p.spec = recurrence_spec(n);
  const Shape& xw = g.value(n.in(0)).shape;
  p.steps = xw[0];
  p.batch = xw[1];
  p.rt = constant(1);
  p.rb = constant(2);
  p.p = constant(6);
  if (!p.rt || (n.in(2) != kNoValue && !p.rb) || (n.in(6) != kNoValue && !p.p)) return std::nullopt;
  p.lens = n.in(3) != kNoValue;
  p.h0 = n.in(4) != kNoValue;
  p.c0 = n.in(5) != kNoValue;
  auto out = [&](size_t i) { return i < n.outputs.size() && n.outputs[i] != kNoValue; };
  p.y_h = out(1);
  p.y_c = out(2);
  return p;
}

// Gather whose indices are computed (constant ones are block copies) or GatherElements, of f32
// or int64 data.
std::optional<GatherProblem> gather_problem(const Graph& g, const Node& n) {
  if ((n.op != "Gather" && n.op != "GatherElements") || n.outputs.size() != 1 ||
      n.outputs[0] == kNoValue || n.in(0) == kNoValue || n.in(1) == kNoValue)
    return std::nullopt;
  const Value &x = g.value(n.in(0)), &idx = g.value(n.in(1));
  if ((x.dtype != DType::f32 && x.dtype != DType::i64) || idx.dtype != DType::i64 ||
      x.shape.empty() || shape_numel(g.value(n.outputs[0]).shape) == 0)
    return std::nullopt;
  if (n.op == "Gather" && idx.is_const()) return std::nullopt;  // block copies
  GatherProblem p;
  p.esize = int64_t(dtype_size(x.dtype));
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += int64_t(x.shape.size());
  if (axis < 0 || axis >= int64_t(x.shape.size())) return std::nullopt;
  p.axis = axis;
  if (n.op == "GatherElements") {
    p.elements = true;
    p.data = x.shape;
    p.index = idx.shape;
  } else {
    axis_split(x.shape, axis, axis + 1, &p.outer, &p.dim, &p.inner);
    p.n = shape_numel(idx.shape);
  }
  return p;
}

// ScatterND / ScatterElements of f32 or int64 data (a computed one: constants fold at load).
std::optional<ScatterProblem> scatter_problem(const Graph& g, const Node& n) {
  if ((n.op != "ScatterND" && n.op != "ScatterElements") || n.inputs.size() != 3 ||
      n.outputs.size() != 1 || n.outputs[0] == kNoValue)
    return std::nullopt;
  for (ValueId v : n.inputs)
    if (v == kNoValue) return std::nullopt;
  const Value &x = g.value(n.in(0)), &idx = g.value(n.in(1)), &upd = g.value(n.in(2));
  if ((x.dtype != DType::f32 && x.dtype != DType::i64) || idx.dtype != DType::i64 ||
      upd.dtype != x.dtype || x.shape.empty() || idx.shape.empty())
    return std::nullopt;
  ScatterProblem p;
  p.esize = int64_t(dtype_size(x.dtype));
  p.data = x.shape;
  p.index = idx.shape;
  const std::optional<Reduction> red = parse_reduction(n.attr_s("reduction", "none"));
  if (!red) return std::nullopt;
  p.reduction = *red;
  if (n.op == "ScatterElements") {
    p.elements = true;
    const int64_t rank = int64_t(x.shape.size());
    int64_t axis = n.attr_i("axis", 0);
    if (axis < -rank || axis >= rank) return std::nullopt;
    p.axis = axis < 0 ? axis + rank : axis;
    if (upd.shape != idx.shape) return std::nullopt;
  }
  if (!create_scatter_kernel(p, nullptr)) return std::nullopt;  // (its shape checks)
  return p;
}

// ArgMax / ArgMin / Hardmax of an f32 tensor of any rank, viewed as [outer, n, inner].
std::optional<ArgReduceProblem> arg_problem(const Graph& g, const Node& n) {
  const bool hardmax = n.op == "Hardmax";
  if ((n.op != "ArgMax" && n.op != "ArgMin" && !hardmax) || n.outputs.size() != 1 ||
      n.in(0) == kNoValue || g.value(n.in(0)).dtype != DType::f32)
    return std::nullopt;
  const Shape& s = g.value(n.in(0)).shape;
  const int64_t rank = int64_t(s.size());
  int64_t axis = n.attr_i("axis", hardmax ? -1 : 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const int64_t end = hardmax && n.attr_i("coerce_2d", 0) ? rank : axis + 1;  // opset < 13
  ArgReduceProblem p;
  axis_split(s, axis, end, &p.outer, &p.n, &p.inner);
  p.max = n.op != "ArgMin";
  p.last = !hardmax && n.attr_i("select_last_index", 0) != 0;
  p.hardmax = hardmax;
  if (p.n < 1) return std::nullopt;
  return p;
}

}  // namespace kiln
