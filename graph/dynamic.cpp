#include "graph/dynamic.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/ops.h"

namespace kiln {
namespace {

// Tail nodes are inferred only at run time, so an op Kiln does not know must be refused here,
// at load, with the node named (an If's branches included, whichever runs).
void check_supported(const Node& n) {
  const OpInfo* op = find_op(n.op);
  if (!op || op->internal) n.fail(Code::unsupported, "operator " + n.op + " is not supported");
  for (const auto& [name, a] : n.attrs)
    if (a.g)
      for (const Subgraph::Op& m : a.g->ops) check_supported(m.node);
}

}  // namespace

std::optional<DynamicTail> split_dynamic_tail(Graph& g, const Evaluator& fold) {
  std::vector<Node> nodes;
  InferOptions o;
  o.fold = &fold;
  o.tail = &nodes;
  infer_shapes(g, o);
  if (nodes.empty()) return std::nullopt;
  for (const Node& n : nodes) check_supported(n);

  DynamicTail t;
  t.first = nodes.front().where();
  t.graph.name = g.name;
  t.graph.opset = g.opset;
  t.graph.declared_outputs = g.declared_outputs;
  std::set<ValueId> made;
  for (const Node& n : nodes)
    for (ValueId v : n.outputs)
      if (v != kNoValue) made.insert(v);
  // The tail's own copy of every value it refers to; those computed outside it become its
  // inputs, bound below.
  std::map<ValueId, ValueId> copied;
  std::vector<ValueId> read_from_g;
  auto copy = [&](ValueId v) {
    if (v == kNoValue) return kNoValue;
    const auto it = copied.find(v);
    if (it != copied.end()) return it->second;
    const Value& src = g.value(v);
    const ValueId id = t.graph.add_value(src.name, src.dtype);
    Value& dst = t.graph.value(id);
    dst.shape = src.shape;
    dst.shape_known = src.shape_known;
    dst.constant = src.constant;
    copied[v] = id;
    if (!made.count(v) && !src.is_const()) {
      t.graph.inputs.push_back(id);
      read_from_g.push_back(v);
    }
    return id;
  };
  for (Node& n : nodes) {
    for (ValueId& v : n.inputs) v = copy(v);
    for (ValueId& v : n.outputs) v = copy(v);
    t.graph.nodes.push_back(std::move(n));
  }

  // The planned part's outputs: the model's outputs it computes, then what the tail reads.
  const std::vector<ValueId> model_outputs = std::move(g.outputs);
  g.outputs.clear();
  for (ValueId v : model_outputs) {
    if (made.count(v)) {
      t.outputs.push_back({DynamicTail::Ref::tail, t.graph.outputs.size()});
      t.graph.outputs.push_back(copied.at(v));
    } else {
      t.outputs.push_back({DynamicTail::Ref::planned, g.outputs.size()});
      g.outputs.push_back(v);
    }
  }
  for (ValueId v : read_from_g) {
    const auto input = std::find(g.inputs.begin(), g.inputs.end(), v);
    if (input != g.inputs.end()) {
      t.reads.push_back({DynamicTail::Ref::model_input, size_t(input - g.inputs.begin())});
      continue;
    }
    auto out = std::find(g.outputs.begin(), g.outputs.end(), v);
    if (out == g.outputs.end()) out = g.outputs.insert(g.outputs.end(), v);
    t.reads.push_back({DynamicTail::Ref::planned, size_t(out - g.outputs.begin())});
  }
  return t;
}

std::vector<Tensor> run_tail(const DynamicTail& tail, const std::vector<Tensor>& inputs,
                             const Evaluator& eval) {
  Graph g = tail.graph;
  if (inputs.size() != g.inputs.size())
    fail(Code::internal, "the run-time tail reads " + std::to_string(g.inputs.size()) +
                             " tensors, given " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value& v = g.value(g.inputs[i]);
    if (inputs[i].dtype() != v.dtype || inputs[i].shape() != v.shape)
      fail(Code::internal, "the run-time tail's input '" + v.name + "' is " +
                               shape_str(inputs[i].shape()) + ", expected " + shape_str(v.shape));
    v.constant = inputs[i];
  }
  g.inputs.clear();
  g.runtime_shapes = true;
  InferOptions o;
  o.fold = &eval;
  o.unlimited = true;
  o.release = true;
  infer_shapes(g, o);  // every input is constant now: every node is computed
  if (!g.nodes.empty()) g.nodes.front().fail(Code::internal, "was left uncomputed in the tail");
  std::vector<Tensor> out;
  for (ValueId v : g.outputs) {
    if (!g.value(v).is_const())
      fail(Code::internal, "the tail's output '" + g.value(v).name + "' was not computed");
    out.push_back(*g.value(v).constant);
  }
  return out;
}

}  // namespace kiln
