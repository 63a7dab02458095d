// ONNX Loop, run by unrolling: Kiln plans straight-line graphs, so each iteration's body is
// inlined into the graph as it is reached (infer_shapes, graph/passes.cpp) and the condition its
// body computes decides, once folded, whether another follows. A loop whose trip count and
// condition are known at load (a fixed number of refinement steps) becomes planned nodes; one
// that depends on the data (PyTorch's `for i in range(boxes.size(0))` pasting Mask R-CNN's masks,
// a while loop on computed values) runs in the run-time tail (graph/dynamic.h), unrolled each run
// with every value known.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/infer_util.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"

namespace kiln {

namespace {

const Subgraph& body_of(const Node& n) {
  const auto it = n.attrs.find("body");
  if (it == n.attrs.end() || it->second.kind != Attribute::Kind::graph)
    n.fail(Code::invalid_model, "attribute 'body' (a graph) is required");
  return *it->second.g;
}

// Loop-carried values (N) and scan outputs (K) of a Loop node, checked against its body.
struct LoopArity {
  size_t carried = 0, scans = 0;
};

LoopArity loop_arity(const Node& n) {
  const Subgraph& b = body_of(n);
  if (b.inputs.size() < 2)
    n.fail(Code::invalid_model, "its body has " + std::to_string(b.inputs.size()) +
                                    " inputs; a Loop body takes the iteration number, the "
                                    "condition and the loop-carried values");
  LoopArity a;
  a.carried = b.inputs.size() - 2;
  const size_t given = n.inputs.size() - branch_reads(n).size();
  if (given != 2 + a.carried)
    n.fail(Code::invalid_model,
           "has " + std::to_string(given) + " inputs; its body takes " + std::to_string(a.carried) +
               " loop-carried values, so it needs " + std::to_string(2 + a.carried));
  if (b.outputs.size() < 1 + a.carried)
    n.fail(Code::invalid_model, "its body has " + std::to_string(b.outputs.size()) +
                                    " outputs, fewer than the condition and " +
                                    std::to_string(a.carried) + " loop-carried values");
  a.scans = b.outputs.size() - 1 - a.carried;
  if (n.outputs.size() != a.carried + a.scans)
    n.fail(Code::invalid_model, "has " + std::to_string(n.outputs.size()) +
                                    " outputs; its body makes " + std::to_string(a.carried) +
                                    " loop-carried values and " + std::to_string(a.scans) +
                                    " scan outputs");
  return a;
}

Tensor scalar_of(DType dtype, int64_t v) {
  Tensor t(dtype, {});
  if (dtype == DType::i64)
    t.data<int64_t>()[0] = v;
  else
    t.data<uint8_t>()[0] = uint8_t(v != 0);
  return t;
}

// The nodes all the loops of a graph (or of one run of its tail), nested ones included, may make
// together: a while loop whose condition never turns false is an error, not a hang.
constexpr int64_t kMaxUnrolledNodes = kMaxNodes;

}  // namespace

namespace infer_detail {

void infer_loop(Graph& g, Node& n) {
  loop_arity(n);
  const char* what[2] = {"trip count", "condition"};
  const DType want[2] = {DType::i64, DType::boolean};
  for (size_t i = 0; i < 2; ++i) {
    if (n.in(i) == kNoValue) continue;
    const Value& v = input(g, n, i);
    if (v.dtype != want[i])
      n.fail(Code::invalid_model, std::string("its ") + what[i] + " " + input_desc(g, n, i) +
                                      " is " + dtype_name(v.dtype) + ", not " +
                                      dtype_name(want[i]));
    if (!v.is_const())
      n.fail(Code::unsupported, std::string("its ") + what[i] + " " + input_desc(g, n, i) +
                                    " is computed at run time; Kiln runs such a Loop only as "
                                    "part of a model's run-time tail");
    if (v.constant->numel() != 1)
      n.fail(Code::invalid_model, std::string("its ") + what[i] + " " + input_desc(g, n, i) +
                                      " has " + std::to_string(v.constant->numel()) +
                                      " elements, not 1");
  }
}

}  // namespace infer_detail

bool loop_at_load(const Graph& g, const Node& n) {
  for (size_t i = 0; i < 2; ++i)
    if (n.in(i) != kNoValue && !g.value(n.in(i)).is_const()) return false;
  const Subgraph& b = body_of(n);
  if (b.inputs.size() < 2 || b.outputs.empty()) return true;  // infer_loop names the error
  // Names whose value is the same at load in every iteration or follows only the iteration
  // number: constants (the body's, or the enclosing graphs' read by name), the iteration number,
  // the condition, and what is computed from those alone.
  std::set<std::string> defined(b.inputs.begin(), b.inputs.end()), fixed{b.inputs[0], b.inputs[1]};
  for (const auto& [name, t] : b.consts) defined.insert(name), fixed.insert(name);
  for (const Subgraph::Op& op : b.ops)
    for (const std::string& o : op.outputs) defined.insert(o);
  auto is_fixed = [&](const std::string& name) {
    if (name.empty() || fixed.count(name)) return true;
    if (defined.count(name)) return false;
    const ValueId v = g.find(name);
    return v != kNoValue && g.value(v).is_const();
  };
  for (const Subgraph::Op& op : b.ops) {
    bool all = true;
    for (const std::string& in : op.inputs) all &= is_fixed(in);
    for (const std::string& in : branch_reads(op.node)) all &= is_fixed(in);
    if (all)
      for (const std::string& o : op.outputs) fixed.insert(o);
  }
  return is_fixed(b.outputs[0]);
}

void unroll_loop(Graph& g, const Node& n, const std::function<void(Node&)>& step,
                 const std::function<size_t()>& not_folded) {
  const LoopArity a = loop_arity(n);
  const Subgraph& b = body_of(n);
  const int64_t trip =
      n.in(0) == kNoValue ? INT64_MAX : g.value(n.in(0)).constant->data<int64_t>()[0];
  bool cond = n.in(1) == kNoValue || condition_true(*g.value(n.in(1)).constant);
  std::vector<ValueId> carried(n.inputs.begin() + 2, n.inputs.begin() + 2 + int64_t(a.carried));
  std::vector<std::vector<ValueId>> scans(a.scans);
  // Values made by the iteration before: released when the next one is done, if nothing kept
  // reads them.
  ValueId prev_first = kNoValue, prev_end = kNoValue;
  bool prev_folded = false;
  int64_t iterations = 0;
  for (; iterations < trip && cond; ++iterations) {
    g.unrolled_nodes += int64_t(b.ops.size()) + 2;
    if (g.unrolled_nodes > kMaxUnrolledNodes)
      n.fail(Code::unsupported, "ran " + std::to_string(iterations) +
                                    " iterations without stopping; Kiln unrolls at most " +
                                    std::to_string(kMaxUnrolledNodes) + " nodes of loop bodies");
    const std::string prefix = n.name + "#" + std::to_string(iterations) + "/";
    const ValueId first = ValueId(g.values.size());
    const size_t before = not_folded();
    std::map<std::string, ValueId> local = outer_values(n);
    local[b.inputs[0]] =
        g.add_const(unique_value_name(g, prefix + b.inputs[0]), scalar_of(DType::i64, iterations));
    local[b.inputs[1]] =
        g.add_const(unique_value_name(g, prefix + b.inputs[1]), scalar_of(DType::boolean, cond));
    for (size_t k = 0; k < a.carried; ++k) local[b.inputs[2 + k]] = carried[k];
    std::vector<Node> nodes;
    const std::vector<ValueId> outs = inline_subgraph(g, b, std::move(local), prefix, nodes);
    for (Node& m : nodes) step(m);
    const Value& c = g.value(outs[0]);
    if (!c.is_const())
      n.fail(Code::unsupported, "the condition its body computes ('" + b.outputs[0] +
                                    "') is known only at run time; Kiln runs such a Loop only "
                                    "as part of a model's run-time tail");
    if (c.constant->numel() != 1)
      n.fail(Code::invalid_model, "the condition its body computes ('" + b.outputs[0] + "') has " +
                                      std::to_string(c.constant->numel()) + " elements, not 1");
    cond = condition_true(*c.constant);
    for (size_t k = 0; k < a.carried; ++k) carried[k] = outs[1 + k];
    for (size_t k = 0; k < a.scans; ++k) scans[k].push_back(outs[1 + a.carried + k]);
    const ValueId end = ValueId(g.values.size());
    const bool folded = not_folded() == before;
    if (prev_folded && folded) {
      std::set<ValueId> keep(carried.begin(), carried.end());
      for (const auto& s : scans) keep.insert(s.begin(), s.end());
      for (ValueId v = prev_first; v < prev_end; ++v)
        if (!keep.count(v)) g.value(v).constant.reset();
    }
    prev_first = first, prev_end = end, prev_folded = folded;
  }
  for (size_t k = 0; k < a.carried; ++k) {
    if (n.outputs[k] == kNoValue) continue;
    Node id = identity_node(n.name + "_output_" + std::to_string(k), carried[k], n.outputs[k]);
    step(id);
  }
  for (size_t k = 0; k < a.scans; ++k) {
    const ValueId y = n.outputs[a.carried + k];
    if (y == kNoValue) continue;
    const std::string base = n.name + "_scan_" + std::to_string(k);
    if (iterations == 0) {
      // Nothing to stack: [0, dims...] with the dims the body declares, or [0] when it does
      // not give them all.
      const DeclaredType& d = b.declared[1 + a.carried + k];
      if (!d.dtype)
        n.fail(Code::unsupported,
               "ran no iteration, and its body does not declare the element "
               "type of scan output '" +
                   b.outputs[1 + a.carried + k] + "'");
      Shape s{0};
      if (d.dims && std::all_of(d.dims->begin(), d.dims->end(), [](int64_t v) { return v >= 0; }))
        s.insert(s.end(), d.dims->begin(), d.dims->end());
      Node c = identity_node(base, g.add_const(unique_value_name(g, base), Tensor(*d.dtype, s)), y);
      step(c);
      continue;
    }
    Node cat;
    cat.name = base + "_concat";
    cat.op = "Concat";
    cat.attrs["axis"] = attr_i(0);
    const ValueId axes = g.add_const(unique_value_name(g, base + "_axes"), ints_tensor({0}));
    for (size_t i = 0; i < scans[k].size(); ++i) {
      Node u;
      u.name = base + "_unsqueeze_" + std::to_string(i);
      u.op = "Unsqueeze";
      u.inputs = {scans[k][i], axes};
      const ValueId e = g.add_value(unique_value_name(g, u.name), g.value(scans[k][i]).dtype);
      u.outputs = {e};
      step(u);
      cat.inputs.push_back(e);
    }
    cat.outputs = {y};
    step(cat);
  }
}

}  // namespace kiln
