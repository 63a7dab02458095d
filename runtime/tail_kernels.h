// The evaluator of a run-time tail (graph/dynamic.h): the reference kernels, except for fully
// connected layers (Gemm, or MatMul, of a computed [M, K] by a constant 2-D weight), which
// would take seconds there: Faster R-CNN's box head multiplies every proposal's 12,544 pooled
// features by a 12,544 x 1,024 weight. Those run on the FC family's JIT kernels, made on first
// use for the node and the number of rows rounded up to a bucket (the proposals left vary run
// by run), then kept; their tiles spread over the session's threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/kernel.h"

namespace kiln {

class TailKernels {
 public:
  // fc_nodes: the tail's Gemm / MatMul nodes whose weight (input 1) is a constant.
  TailKernels(Isa isa, int threads, std::set<std::string> fc_nodes);
  // An Evaluator (graph/passes.h). Thread-safe.
  void operator()(const Node& n, const std::vector<const Tensor*>& in,
                  const std::vector<Tensor*>& out) const;

  // Kernels kept at most (beyond it, the least recently used is dropped).
  static constexpr size_t kMaxKernels = 16;

 private:
  // The FC kernel for n at `rows` rows (made on first use), or null when n's form has none.
  std::shared_ptr<const Kernel> fc_kernel(const Node& n, const std::vector<const Tensor*>& in,
                                          int64_t rows) const;
  bool run_fc(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const;

  Isa isa_;
  int threads_;
  std::set<std::string> fc_nodes_;
  struct Entry {
    std::shared_ptr<const Kernel> kernel;  // null: the node's form has no FC kernel
    bool tried = false;
    uint64_t used = 0;
  };
  mutable std::mutex mu_;
  mutable std::map<std::pair<std::string, int64_t>, Entry> kernels_;
  mutable uint64_t clock_ = 0;
};

}  // namespace kiln
