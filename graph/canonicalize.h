// Rewrites opset-specific op variants into the single canonical form per op (graph/ops.h) and
// turns Constant nodes into constant values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln {

void canonicalize(Graph& g);
// One node as canonicalize keeps it, appended to `out`: nothing for a Constant (its value
// becomes a constant of g), else its canonical form (a 1-D conv / pool: its 2-D form between an
// Unsqueeze and a Squeeze).
void canonicalize_into(Graph& g, Node n, std::vector<Node>& out);

// The tensor a Constant node's value attribute holds (value, value_float(s), value_int(s), in
// that order of preference); nothing if it has none of them.
std::optional<Tensor> constant_value(const Node& n);

// Appends node `op`(in) to `out`, named after the node n it replaces (n.name + "_" + part),
// writing `y` (a new value when kNoValue); returns its output.
ValueId append_node(Graph& g, const Node& n, const char* op, std::vector<ValueId> in, ValueId y,
                    const char* part, std::vector<Node>& out);

// Opsets < 7 broadcast an elementwise op's second input B from an `axis` of the first, A
// (`broadcast` = 1; PRelu's slope from axis 1): canonicalize leaves that axis in this attribute
// (reserved: the importer refuses it in models), and shape inference, once A's rank is known,
// replaces the node by align_legacy_broadcast's: an Unsqueeze giving B trailing 1s (numpy
// broadcasting then aligns it at the axis), then the node.
constexpr const char* kLegacyAxisAttr = "kiln_legacy_axis";
std::vector<Node> align_legacy_broadcast(Graph& g, Node n);

// A constant named after node n (n.name + "_" + part).
ValueId const_for(Graph& g, const Node& n, const char* part, Tensor t);

// The nodes and constants that replace node n, appended to `out` and named after n (expansions
// at import and at inference: graph/function_ops.h, graph/spectral.h).
struct Emitter {
  Graph& g;
  const Node& n;
  std::vector<Node>& out;
  // Node `op`(in) (append_node).
  ValueId operator()(const char* op, std::vector<ValueId> in, const char* part,
                     ValueId y = kNoValue) {
    return append_node(g, n, op, std::move(in), y, part, out);
  }
  ValueId scalar(const char* part, int64_t v) {  // an int64 scalar constant
    Tensor t(DType::i64, {});
    *t.data<int64_t>() = v;
    return const_for(g, n, part, std::move(t));
  }
  ValueId ints(const char* part, const std::vector<int64_t>& v) {  // a 1-D int64 constant
    return const_for(g, n, part, ints_tensor(v));
  }
  ValueId reshape(ValueId x, const Shape& to, const char* part, ValueId y = kNoValue) {
    return (*this)("Reshape", {x, ints((std::string(part) + "_shape").c_str(), to)}, part, y);
  }
  ValueId transpose(ValueId x, std::vector<int64_t> perm, const char* part, ValueId y = kNoValue) {
    const ValueId r = (*this)("Transpose", {x}, part, y);
    out.back().attrs["perm"] = attr_ints(std::move(perm));
    return r;
  }
};

}  // namespace kiln
