// Ops with no kernel of their own for some of their forms, rewritten into ops that have one:
// Max / Min / Mean / Sum of one or of three and more operands into chains of two-operand ops
// (the broadcast kernel), Clip with computed bounds into Max then Min, and a Split that the
// channel rewrites left (any axis, any rank) into one Slice per output (the block-copy
// kernel). Each computes what the original does (Mean: the sum, then one division by n).
#include "graph/infer.h"
#include "graph/passes.h"

namespace kiln {
namespace {

Node make(const Node& n, const std::string& op, std::vector<ValueId> inputs, int part) {
  Node x;
  x.name = n.name + "_" + op + std::to_string(part);
  x.op = op;
  x.inputs = std::move(inputs);
  return x;
}

// Every operand present (optional ones may be absent) is f32, and so is the first output.
bool all_f32(const Graph& g, const Node& n, bool optional = false) {
  for (ValueId v : n.inputs)
    if (v == kNoValue ? !optional : g.value(v).dtype != DType::f32) return false;
  return n.in(0) != kNoValue && !n.outputs.empty() && n.outputs[0] != kNoValue;
}

// Sum whose operands all have the output's shape runs as one elementwise kernel: kept.
bool same_shape_sum(const Graph& g, const Node& n) {
  const Shape& y = g.value(n.outputs[0]).shape;
  for (ValueId v : n.inputs)
    if (g.value(v).shape != y) return false;
  return true;
}

bool rewrite_variadic(Graph& g, std::vector<Node>& nodes, const Node& n) {
  const bool mean = n.op == "Mean";
  if ((n.op != "Max" && n.op != "Min" && n.op != "Sum" && !mean) || n.inputs.size() == 2 ||
      n.outputs.size() != 1 || !all_f32(g, n) || (n.op == "Sum" && same_shape_sum(g, n)))
    return false;
  const ValueId y = n.outputs[0];
  if (n.inputs.size() == 1) {  // the operand itself (removed with the other identities)
    emit_node(g, nodes, make(n, "Identity", {n.inputs[0]}, 0), "", y);
    return true;
  }
  const std::string op = n.op == "Max" || n.op == "Min" ? n.op : "Add";
  ValueId acc = n.inputs[0];
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    const bool last = k + 1 == n.inputs.size() && !mean;
    acc = emit_node(g, nodes, make(n, op, {acc, n.inputs[k]}, int(k)), n.name + "_acc",
                    last ? y : kNoValue);
  }
  if (mean) {
    Tensor count(DType::f32, {});
    *count.data<float>() = float(n.inputs.size());
    const ValueId c = g.add_const(unique_value_name(g, n.name + "_count"), count);
    emit_node(g, nodes, make(n, "Div", {acc, c}, 0), "", y);
  }
  return true;
}

// Clip(x, lo, hi) with a computed bound: Min(Max(x, lo), hi) (NaN propagates through both, as
// through Clip; lo > hi gives hi, as ONNX's Clip).
bool rewrite_clip(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Clip" || n.outputs.size() != 1 || !all_f32(g, n, true)) return false;
  const ValueId lo = n.in(1), hi = n.in(2);
  const bool computed =
      (lo != kNoValue && !g.value(lo).is_const()) || (hi != kNoValue && !g.value(hi).is_const());
  if (!computed) return false;  // constant bounds: the elementwise kernel's clip
  ValueId x = n.inputs[0];
  if (lo != kNoValue)
    x = emit_node(g, nodes, make(n, "Max", {x, lo}, 0), n.name + "_lo",
                  hi == kNoValue ? n.outputs[0] : kNoValue);
  if (hi != kNoValue) emit_node(g, nodes, make(n, "Min", {x, hi}, 0), "", n.outputs[0]);
  return true;
}

// Split into one Slice per output (sizes from the inferred output shapes).
bool rewrite_split(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Split" || n.in(0) == kNoValue || g.value(n.in(0)).dtype != DType::f32) return false;
  const int64_t rank = int64_t(g.value(n.in(0)).shape.size());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  int64_t at = 0;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k] == kNoValue) return false;
    const int64_t len = g.value(n.outputs[k]).shape[size_t(axis)];
    Node s = make(n, "Slice", {n.inputs[0]}, int(k));
    for (int64_t v : {at, at + len, axis})
      s.inputs.push_back(g.add_const(unique_value_name(g, s.name + "_arg"), ints_tensor({v})));
    emit_node(g, nodes, std::move(s), "", n.outputs[k]);
    at += len;
  }
  return true;
}

}  // namespace

int rewrite_to_binary(Graph& g) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  int rewritten = 0;
  for (Node& n : g.nodes) {
    if (rewrite_variadic(g, nodes, n) || rewrite_clip(g, nodes, n)) {
      ++rewritten;
      continue;
    }
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

int rewrite_splits(Graph& g) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  int rewritten = 0;
  for (Node& n : g.nodes) {
    if (rewrite_split(g, nodes, n)) {
      ++rewritten;
      continue;
    }
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace kiln
