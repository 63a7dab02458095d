// Runs a Plan: one reusable arena per run context (allocated once, so pages are touched once),
// kernels' tiles spread over the session's task_arena, steps in plan order (step_stream.h: each
// thread walks the steps, no fork/join per step) or through a tbb::flow::graph when asked for
// (Schedule; there each step's tiles go through parallel_tiles.h). Concurrent
// runs each take their own context from a pool, so they share nothing mutable.
#pragma once

#include <tbb/task_arena.h>

#include <memory>
#include <mutex>
#include <vector>

#include "graph/ir.h"
#include "runtime/plan.h"

namespace kiln {

// Per-run timing, filled only when asked for (zero cost otherwise).
struct RunProfile {
  std::vector<double> step_ms;  // wall time of each plan step
  struct Event {                // one contiguous piece of work on one thread
    int step, thread;
    double begin_us, end_us;  // since the start of the run
  };
  std::vector<Event> events;  // only when record_events: two clock reads per piece
  bool record_events = false;
  double tail_ms = 0;  // the run-time tail (graph/dynamic.h), set by Session::run
};

// How steps are ordered on several threads (each step's tiles always spread over all of them):
// through a tbb::flow::graph, so independent branches run side by side, or in plan order, each
// step waiting only for the steps it depends on (step_stream.h). automatic is plan order.
enum class Schedule { automatic, graph, in_order };

// Arenas up to this size are allocated (and their pages populated) at load; bigger ones by the
// first run.
constexpr int64_t kArenaAtLoadBytes = int64_t(256) << 20;

class Executor {
 public:
  Executor(const Graph& g, const Plan& p, int threads, Schedule schedule = Schedule::automatic);
  bool uses_graph() const { return use_graph_; }
  ~Executor();
  // inputs/outputs already checked against the model's shapes and dtypes. With a profile,
  // every step and every thread's share of it is timed; without one nothing is.
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
           RunProfile* profile = nullptr);

 private:
  struct Context;
  std::unique_ptr<Context> acquire();
  void gather_args(Context& c) const;
  void run_piece(Context& c, size_t step, int64_t begin, int64_t end) const;
  void run_step(Context& c, size_t step) const;
  void run_stream(Context& c) const;  // steps in plan order on threads_ > 1 (step_stream.h)
  void release(std::unique_ptr<Context> c);

  const Graph& g_;
  const Plan& p_;
  int threads_;
  tbb::task_arena* arena_ = nullptr;  // shared_arena(threads_); none for one thread
  bool use_graph_ = false;            // run through the flow graph (else steps in plan order)
  std::vector<std::vector<int>> step_deps_;  // plan order: each step's deps, for the stream
  // Per step: tile count and where its operand pointers start in a context's src / dst.
  std::vector<int64_t> tiles_;
  std::vector<size_t> src_off_, dst_off_;
  size_t src_total_ = 0, dst_total_ = 0;
  int64_t scratch_at_ = 0;  // where the threads' scratch slices start in a context's arena
  // Views of external tensors (a slice of a graph output written in place): root tensor and
  // byte offset, resolved once here; only the root's pointer is known per run.
  struct ExternalView {
    size_t view, root;
    int64_t at;
  };
  std::vector<ExternalView> external_views_;
  // Per plan tensor: the constant's data (resolved once here: an unaligned constant makes its
  // aligned copy on first read), else null.
  std::vector<float*> const_ptr_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Context>> free_;
};

}  // namespace kiln
