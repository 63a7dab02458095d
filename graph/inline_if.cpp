// If nodes whose condition is known at load. Exporters emit them around shape checks (PyTorch's
// squeeze of a dim it cannot prove is 1, e.g. inside F.local_response_norm): once the shapes
// are static the condition folds to a constant, and the branch taken is spliced into the graph
// in the If's place (infer_shapes, graph/passes.cpp), so no control flow is left to run.
#include <map>
#include <string>
#include <vector>

#include "graph/canonicalize.h"
#include "graph/infer_util.h"
#include "graph/passes.h"

namespace kiln {

namespace infer_detail {

void infer_if(Graph& g, Node& n) {
  for (const char* b : {"then_branch", "else_branch"}) {
    const auto it = n.attrs.find(b);
    if (it == n.attrs.end() || it->second.kind != Attribute::Kind::graph)
      n.fail(Code::invalid_model, std::string("attribute '") + b + "' (a graph) is required");
    const size_t outs = it->second.g->outputs.size();
    if (outs != n.outputs.size())
      n.fail(Code::invalid_model, std::string(b) + " has " + std::to_string(outs) +
                                      " outputs, the node " + std::to_string(n.outputs.size()));
  }
  const Value& c = input(g, n, 0);
  if (!c.is_const())
    n.fail(Code::unsupported, "its condition " + input_desc(g, n, 0) +
                                  " is computed at run time; Kiln runs an If only when its "
                                  "condition is known at load (from constants and shapes)");
  if (c.constant->numel() != 1)
    n.fail(Code::invalid_model, "its condition " + input_desc(g, n, 0) + " has " +
                                    std::to_string(c.constant->numel()) + " elements, not 1");
}

}  // namespace infer_detail

bool condition_true(const Tensor& c) {
  switch (c.dtype()) {
    case DType::f32:
      return c.data<float>()[0] != 0.f;
    case DType::i64:
      return c.data<int64_t>()[0] != 0;
    default:
      return c.data<uint8_t>()[0] != 0;
  }
}

Node identity_node(std::string name, ValueId x, ValueId y) {
  Node id;
  id.name = std::move(name);
  id.op = "Identity";
  id.inputs = {x};
  id.outputs = {y};
  return id;
}

std::map<std::string, ValueId> outer_values(const Node& n) {
  const std::vector<std::string> reads = branch_reads(n);
  if (n.inputs.size() < reads.size())
    n.fail(Code::internal, "lacks the inputs its subgraphs read from the graph");
  std::map<std::string, ValueId> v;
  const size_t first = n.inputs.size() - reads.size();
  for (size_t j = 0; j < reads.size(); ++j) v[reads[j]] = n.inputs[first + j];
  return v;
}

std::vector<ValueId> inline_subgraph(Graph& g, const Subgraph& b,
                                     std::map<std::string, ValueId> local,
                                     const std::string& prefix, std::vector<Node>& out) {
  auto resolve = [&](const std::string& name, const Node& user) {
    if (name.empty()) return kNoValue;
    const auto it = local.find(name);
    if (it == local.end())
      user.fail(Code::invalid_model, "reads '" + name + "', which nothing defines");
    return it->second;
  };
  for (const auto& [name, t] : b.consts)
    local[name] = g.add_const(unique_value_name(g, prefix + name), t);
  for (const Subgraph::Op& op : b.ops) {
    Node m = op.node;
    if (!prefix.empty()) m.name = prefix + m.name;
    for (const std::string& in : op.inputs) m.inputs.push_back(resolve(in, m));
    for (const std::string& name : branch_reads(m)) m.inputs.push_back(resolve(name, m));
    for (const std::string& o : op.outputs) {
      const ValueId v = o.empty() ? kNoValue : g.add_value(unique_value_name(g, prefix + o));
      if (v != kNoValue) local[o] = v;
      m.outputs.push_back(v);
    }
    canonicalize_into(g, std::move(m), out);
  }
  Node user;  // for the message of an output nothing defines
  user.name = prefix.empty() ? "subgraph" : prefix;
  user.op = "output";
  std::vector<ValueId> outs;
  for (const std::string& name : b.outputs) outs.push_back(resolve(name, user));
  return outs;
}

std::vector<Node> inline_if(Graph& g, const Node& n) {
  const bool taken = condition_true(*g.value(n.inputs[0]).constant);
  const Subgraph& b = *n.attrs.at(taken ? "then_branch" : "else_branch").g;
  std::vector<Node> out;
  const std::vector<ValueId> results = inline_subgraph(g, b, outer_values(n), "", out);
  // The If's outputs are the branch's (an Identity each: remove_identities drops them).
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k] == kNoValue) continue;
    out.push_back(identity_node(n.name + "_output_" + std::to_string(k), results[k], n.outputs[k]));
  }
  return out;
}

}  // namespace kiln
