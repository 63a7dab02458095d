// Models whose output sizes depend on the data: a detector's NonMaxSuppression, a score
// threshold's NonZero, an If on a computed condition. Kiln plans every shape at load, so such a
// model is split in two: the planned part (everything whose shape is known at load: the network)
// and the tail (the first data-dependent node and every node that reads what it computes:
// box selection and decoding), which each run computes node by node on the reference kernels,
// its shapes inferred from the values at hand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/passes.h"

namespace kiln {

struct DynamicTail {
  // Where a tensor comes from or goes to.
  struct Ref {
    enum Kind { model_input, planned, tail } kind;
    size_t index;  // into the model's inputs, the planned graph's outputs or graph.outputs
  };
  // The tail's nodes in run order. graph.inputs are the values it reads from outside (each
  // bound by `reads`), graph.outputs the model's outputs it computes.
  Graph graph;
  std::vector<Ref> reads;    // per graph.inputs
  std::vector<Ref> outputs;  // per model output, in the model's order: planned or tail
  // The name of the first node whose output size depends on the data (for messages).
  std::string first;
};

// Shape inference and constant folding of g (infer_shapes with `fold`) that moves the tail out
// of g instead of failing on it. g keeps the planned part: its outputs become the model outputs
// computed there (in the model's order) followed by every value the tail reads that g computes.
// nullopt (g just inferred and folded) when no output size depends on the data. unsupported
// when a tail node's op is not supported (its shapes are checked at run time).
std::optional<DynamicTail> split_dynamic_tail(Graph& g, const Evaluator& fold);

// One run of the tail: inputs[i] holds tail.graph.inputs[i]'s value (only read). Returns the
// values of tail.graph.outputs (fresh tensors). Errors name the node (e.g. a Reshape that does
// not fit the number of boxes left).
std::vector<Tensor> run_tail(const DynamicTail& tail, const std::vector<Tensor>& inputs,
                             const Evaluator& eval);

}  // namespace kiln
