// Operator-level front end of the PBQP solver: operators with labels (input layouts, output
// layouts, cost) and tensors with a producer, consumers and a conversion cost per layout
// pair. build() turns this into a PBQP instance with the fan-out modelling described in
// solver/pbqp.h (a tensor read by several consumers becomes a node whose labels are the
// sets of layouts it is made available in), solve() maps the answer back.
//
// Cost semantics (what NetworkProblem::evaluate computes and solve() minimises):
//   sum of the chosen labels' costs
//   + for every tensor with produced layout P (the producer label's output layout, or the
//     input's fixed layout) and demanded layouts D (each consumer label's input layout for
//     that slot, plus any required output layout):  sum over L in D, L != P, of conv(P, L).
// A conversion to a layout is paid once per tensor, however many consumers read it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "solver/pbqp.h"

namespace kiln {

// One way to implement an operator. Layouts are caller-defined ids >= 0; slots that no
// tensor is attached to are ignored (they may hold anything, e.g. -1).
struct OpLabel {
  std::vector<int> in_layouts;   // layout read, per input slot
  std::vector<int> out_layouts;  // layout written, per output slot
  double cost = 0.0;             // +inf: illegal
};

// Cost of converting one tensor from layout `from` to layout `to` (never called with
// from == to): >= 0, or +inf if that conversion does not exist.
using ConversionCost = std::function<double(int from, int to)>;

struct TensorPlan {
  int produced_layout = -1;       // written by the producer (or the input's layout)
  std::vector<int> converted_to;  // layouts made from it by one conversion each, ascending
};

// Where each part of the network went in the PBQP instance.
struct NetworkMapping {
  std::vector<int> op_node;                   // PBQP node of each operator
  std::vector<std::vector<int>> op_label_of;  // per op: PBQP label -> the op's label index
  std::vector<int> tensor_node;               // PBQP node of a fan-out tensor, else -1
  std::vector<std::vector<std::vector<int>>> tensor_sets;  // per tensor: label -> layout set
  double constant = 0.0;  // conversions fixed by the problem (an input read as an output)
};

struct NetworkSolution {
  std::vector<int> op_labels;  // index into each operator's labels
  std::vector<TensorPlan> tensors;
  double total = pbqp_inf;  // evaluate(op_labels)
  bool feasible = false;
  bool optimal = false;  // proven minimum of the cost semantics above
  SolveStats stats;
  int pbqp_nodes = 0, pbqp_edges = 0;
};

class NetworkProblem {
 public:
  int add_op(std::string name, std::vector<OpLabel> labels);
  // A tensor written by output slot `output_slot` of operator `producer`.
  int add_tensor(std::string name, int producer, int output_slot, ConversionCost conv);
  // A network input that arrives in a fixed layout.
  int add_input(std::string name, int layout, ConversionCost conv);
  // Operator `op` reads `tensor` through its input slot `input_slot`.
  void add_consumer(int tensor, int op, int input_slot);
  // The tensor (a network output) must also be delivered in `layout`.
  void require_layout(int tensor, int layout);
  // The producer's label `producer_label` and the single consumer's `consumer_label` together
  // cost `saving` (> 0) less than their labels' costs: one fused kernel runs both (a depthwise
  // conv and the 1x1 reading its output, jit/dw/dw_pw_kernel.h). The tensor must have a
  // producer and exactly one consumer slot, and no required layout, when the problem is built.
  void add_pair_saving(int tensor, int producer_label, int consumer_label, double saving);

  int num_ops() const { return int(ops_.size()); }
  int num_tensors() const { return int(tensors_.size()); }
  int num_labels(int op) const { return int(ops_.at(size_t(op)).labels.size()); }

  // Cost of a choice of labels under the semantics above; fills the tensor plans if given.
  double evaluate(const std::vector<int>& op_labels,
                  std::vector<TensorPlan>* plans = nullptr) const;

  // The PBQP instance (throws kiln::Error naming the operator or tensor on bad input).
  Pbqp build(NetworkMapping* map) const;
  NetworkSolution solve(const SolveOptions& opts = {}) const;

 private:
  struct Op {
    std::string name;
    std::vector<OpLabel> labels;
  };
  struct Consumer {
    int op, slot;
  };
  struct Tensor {
    std::string name;
    int producer = -1, out_slot = -1;  // producer -1: a network input
    int input_layout = -1;
    ConversionCost conv;
    std::vector<Consumer> consumers;
    std::vector<int> required;  // layouts it must be delivered in
    struct Saving {
      int producer_label, consumer_label;
      double ms;
    };
    std::vector<Saving> savings;  // add_pair_saving
  };
  // The savings of t that the chosen producer / consumer labels earn.
  double saving(const Tensor& t, int producer_label, int consumer_label) const;
  double conv_cost(const Tensor& t, int from, int to) const;
  int produced_layout(const Tensor& t, const std::vector<int>& op_labels) const;
  void check_op(int op, const char* what) const;
  void check_tensor(int t, const char* what) const;
  void validate() const;

  std::vector<Op> ops_;
  std::vector<Tensor> tensors_;
  std::map<std::pair<int, int>, int> output_tensor_;  // (producer, slot) -> tensor
  std::map<std::pair<int, int>, int> input_tensor_;   // (op, slot) -> tensor read
};

}  // namespace kiln
