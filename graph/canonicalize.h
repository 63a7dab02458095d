// Rewrites opset-specific op variants into the single canonical form per op (graph/ops.h) and
// turns Constant nodes into constant values.
#pragma once

#include "graph/ir.h"

namespace kiln {

void canonicalize(Graph& g);

}  // namespace kiln
