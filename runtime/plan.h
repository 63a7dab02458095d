// The execution plan: the optimised graph lowered to a sequence of steps, each a compiled
// Kernel reading and writing plan tensors (a graph value stored in one layout). Layout
// conversions are explicit steps. Until the solver exists (tuning issue), a fixed rule picks
// each conv's family and layouts (see choose_conv_impl in plan.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

struct PlanOptions {
  Isa isa = Isa::scalar;   // scalar = reference kernels everywhere
  bool reference = false;  // force the reference path (for comparison)
};

struct PlanTensor {
  ValueId value = kNoValue;
  Layout layout = Layout::nchw;  // 4-D values only; other ranks are always plain
  int64_t bytes = 0;             // including blocked-layout channel padding
  int64_t offset = -1;           // in the run arena; -1 = constant, graph input or output
};

struct Step {
  std::unique_ptr<Kernel> kernel;
  std::vector<int> src;  // plan tensor per kernel input (-1 = omitted optional input)
  std::vector<int> dst;  // plan tensor per kernel output
  int node = -1;         // graph node index (-1 for inserted conversions)
  // Steps that must finish first: producers of src tensors, and every step touching arena
  // bytes this step's outputs reuse (the memory plan shares bytes between tensors whose
  // lifetimes do not overlap in step order, so concurrent branches must respect that order).
  std::vector<int> deps;
};

struct Plan {
  std::vector<PlanTensor> tensors;
  std::vector<Step> steps;
  std::vector<int> inputs, outputs;  // plan tensors of graph inputs / outputs (plain layout)
  int64_t arena_bytes = 0;  // peak of the liveness-based arena
  int64_t naive_bytes = 0;  // what one buffer per intermediate would need
  int reorders = 0, jit_steps = 0;
};

// Lowers the optimised, inferred graph. Weights are packed into the chosen kernels here.
Plan build_plan(const Graph& g, const PlanOptions& o);

}  // namespace kiln
