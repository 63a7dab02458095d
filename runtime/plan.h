// The execution plan: the optimised graph lowered to a sequence of steps, each a compiled
// Kernel reading and writing plan tensors (a graph value stored in one layout). Layout
// conversions are explicit steps. Which kernel and layouts each node uses was chosen before
// (runtime/selection.h).
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
  // Views: a producer writing straight into its slice of a Concat output, or the output of a
  // view node (Flatten, Reshape, ... under a `view` label: its input's bytes). When parent >= 0
  // this tensor occupies bytes [parent_offset, parent_offset + bytes) of plan tensor `parent`
  // and gets no bytes of its own; the parent stays alive as long as any view of it is used.
  int parent = -1;
  int64_t parent_offset = 0;
};

struct Step {
  std::unique_ptr<Kernel> kernel;
  std::vector<int> src;  // plan tensor per kernel input (-1 = omitted optional input)
  std::vector<int> dst;  // plan tensor per kernel output
  int node = -1;         // graph node index (-1 for inserted conversions)
  // A chain kernel's other nodes (runtime/separable.h), in chain order before `node`, which is
  // its last; src = their inputs, then node's, in that order. Empty: the step runs `node` alone.
  std::vector<int> fused_nodes;
  // Steps that must finish first: producers of src tensors, and every step touching arena
  // bytes this step's outputs reuse (the memory plan shares bytes between tensors whose
  // lifetimes do not overlap in step order, so concurrent branches must respect that order).
  std::vector<int> deps;
};

struct Plan {
  std::vector<PlanTensor> tensors;
  std::vector<Step> steps;
  std::vector<int> inputs, outputs;  // plan tensors of graph inputs / outputs (plain layout)
  int64_t arena_bytes = 0;           // peak of the liveness-based arena (tensors)
  // Per thread: the most scratch any step's kernel declares (a multiple of 64). A thread runs
  // one piece of one step at a time, so one slice per thread serves every step.
  int64_t scratch_bytes = 0;
  // What a run context allocates with `threads` threads: the tensors' arena, then one scratch
  // slice per thread.
  int64_t run_bytes(int threads) const;
  int64_t naive_bytes = 0;  // what one buffer per intermediate would need
  int reorders = 0, jit_steps = 0;
  int inplace_concats = 0;  // Concat nodes whose producers wrote their slices in place
  int views = 0;            // nodes whose output is a view of their input (steps without tiles)
};

struct Selection;

// Lowers the optimised, inferred graph with one chosen label per node (runtime/selection.h);
// takes the kernels the selection already built, builds the rest, inserts a layout conversion
// wherever a consumer reads a tensor in a layout nobody has produced yet (once per tensor and
// layout), and plans the memory.
Plan build_plan(const Graph& g, const PlanOptions& o, Selection& sel);

// Per plan tensor: whether a step reads it or it is a graph output.
std::vector<char> tensors_read(const Plan& p);

// Drops the data of every constant no step of `p` reads (the weights and biases the JIT
// kernels packed into their own buffers): copied payloads are freed, and the mapped model
// file is unmapped once nothing aliases it. The values stay constants of their shape with no
// data. Returns the bytes released.
int64_t release_unread_constants(Graph& g, const Plan& p);

}  // namespace kiln
