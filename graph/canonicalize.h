// Rewrites opset-specific op variants into the single canonical form per op (graph/ops.h) and
// turns Constant nodes into constant values.
#pragma once

#include <optional>
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

}  // namespace kiln
