// Shape inference entry point: the table-driven checks common to every op, then the op's own
// InferFn (see graph/ops.h for the table and the canonical forms).
#pragma once

#include <functional>

#include "graph/ir.h"

namespace kiln {

// Validates `node` and sets dtype/shape (shape_known) on each of its declared outputs.
// Checks, in order: the op is supported (else Code::unsupported "operator Foo is not
// supported"); the declared input/output counts are within the table's bounds; the required
// inputs (the first min_inputs) and the first output are present; every present input has a
// known shape; then runs the op's InferFn, which validates attributes, dtypes and shapes and
// may rewrite attributes into their explicit form (Conv/MaxPool/AveragePool).
// Must be called in topological order. Every error names the node and its op.
void infer_node(Graph& g, Node& node);

// For graph rewrites: appends `node`, shape-inferred, to `nodes`, writing a new value named
// after `base`, or into `out` when given; returns the value written.
ValueId emit_node(Graph& g, std::vector<Node>& nodes, Node node, const std::string& base,
                  ValueId out = kNoValue);
// Rebuilds g.nodes in order: a node that rewrite(nodes, node) takes (it appends the node's
// replacement with emit_node and returns true) is replaced, the others are kept. Returns how
// many were replaced.
int rewrite_nodes(Graph& g, const std::function<bool(std::vector<Node>&, const Node&)>& rewrite);

}  // namespace kiln
