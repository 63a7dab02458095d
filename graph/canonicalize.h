// Rewrites opset-specific op variants into the single canonical form per op (graph/ops.h) and
// turns Constant nodes into constant values.
#pragma once

#include <optional>

#include "graph/ir.h"

namespace kiln {

void canonicalize(Graph& g);

// The tensor a Constant node's value attribute holds (value, value_float(s), value_int(s), in
// that order of preference); nothing if it has none of them.
std::optional<Tensor> constant_value(const Node& n);

}  // namespace kiln
