// A graph node as the problem of the glue kernel that runs it (jit/glue/glue.h), for the ops
// whose problem is the node's input viewed as [outer, n, inner] or read from its constants:
// TopK, CumSum, Recurrence, computed Gather / GatherElements, ScatterND / ScatterElements,
// ArgMax / ArgMin / Hardmax.
// nullopt when the node is not that op or its kernel cannot take it (then the plan keeps the
// reference kernel). Used by runtime/labels.cpp for candidates, instances and problem keys.
#pragma once

#include <optional>

#include "graph/ir.h"
#include "jit/glue/glue.h"

namespace kiln {

std::optional<TopKProblem> topk_problem(const Graph& g, const Node& n);
std::optional<CumSumProblem> cumsum_problem(const Graph& g, const Node& n);
std::optional<RecurrenceProblem> recurrence_problem(const Graph& g, const Node& n);
std::optional<GatherProblem> gather_problem(const Graph& g, const Node& n);
std::optional<ScatterProblem> scatter_problem(const Graph& g, const Node& n);
std::optional<ArgReduceProblem> arg_problem(const Graph& g, const Node& n);

}  // namespace kiln
