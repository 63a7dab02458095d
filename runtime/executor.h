// Runs a Plan: one reusable arena per run context (allocated once, so pages are touched once),
// kernels' tiles spread with tbb::parallel_for inside the session's task_arena. Concurrent
// runs each take their own context from a pool, so they share nothing mutable.
#pragma once

#include <memory>
#include <mutex>
#include <tbb/task_arena.h>
#include <vector>

#include "graph/ir.h"
#include "runtime/plan.h"


namespace kiln {

class Executor {
 public:
  Executor(const Graph& g, const Plan& p, int threads);
  ~Executor();
  // inputs/outputs already checked against the model's shapes and dtypes. With step_ms, each
  // step's wall time is stored there (one entry per plan step); without it nothing is timed.
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
           std::vector<double>* step_ms = nullptr);

 private:
  struct Context;
  std::unique_ptr<Context> acquire();
  void run_step(Context& c, size_t step) const;
  void release(std::unique_ptr<Context> c);

  const Graph& g_;
  const Plan& p_;
  int threads_;
  std::unique_ptr<tbb::task_arena> arena_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Context>> free_;
};

}  // namespace kiln
