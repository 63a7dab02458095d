// Measures kernels on the live machine the way they will run: in a task_arena with the
// session's thread count, tiles spread as the executor spreads them, inputs resident from a
// warm-up run, the median of repeated timings. A kernel too big to run whole in a
// measurement's time (a huge batch) is timed on an even sample of its tiles and scaled up,
// and no measurement goes on past the load's deadline: one measurement costs at most about
// max_ms, whatever the model.
#pragma once

#include <tbb/task_arena.h>

#include <memory>
#include <vector>

#include "graph/clock.h"
#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

struct ProfileBudget {
  int min_reps = 3, max_reps = 9;
  double max_ms = 40.0;  // stop repeating once this much time went into one measurement
  // A kernel whose whole run is predicted (from a probe of one tile per thread) above max_ms
  // is timed on a sample of its tiles that runs in about sample_ms.
  double sample_ms = 10.0;
};

// Whether a model's weights stay cached from one run to the next: when they add up to more
// than the caches of the cores running it, every run streams them from memory, and timing a
// kernel with its weights hot (as a repeated measurement would) favours the algorithms that
// read the most weight bytes: Winograd F(4x4,3x3) reads 4x the weights of a direct conv and
// looked 1.8x faster than it ran in ResNet-50 at 2 threads.
bool weights_stay_cached(int64_t model_weight_bytes, int threads);

class Profiler {
 public:
  explicit Profiler(int threads, ProfileBudget b = {});
  // Kernels with at least this many tiles per thread can be timed on a sample of them.
  static constexpr int kMinSampledTiles = 16;
  ~Profiler();
  int threads() const { return threads_; }

  // Median milliseconds of `k` on scratch buffers: src_bytes[i] bytes per input slot
  // (0 = no buffer: nullptr, or the constant given in consts[i]), dst_bytes per output.
  // Throws what the kernel throws. Past the deadline it stops repeating and returns what it
  // has (the warm-up run at least).
  double time_kernel(const Kernel& k, const std::vector<int64_t>& src_bytes,
                     const std::vector<const void*>& consts, const std::vector<int64_t>& dst_bytes);

  // The kernel converting a tensor of logical shape s between two layouts (the one the plan
  // would use), to time with time_kernel.
  static std::unique_ptr<Kernel> reorder_kernel(const Shape& s, Layout from, Layout to, Isa isa);

  // Evict each kernel's weights (Kernel::weights) from the caches before every timed run.
  void set_cold_weights(bool cold) { cold_weights_ = cold; }
  bool cold_weights() const { return cold_weights_; }

  // Where a timed run finds its inputs (the buffers of src_bytes): warm from the run before
  // (the load's measurements), written just before in equal shares by the threads (as a
  // producer step left them in a network: at two threads half in the other core's cache), or
  // in memory (evicted). For benchmarks (kiln_micro_bench threads --inputs).
  enum class Inputs { warm, split, cold };
  void set_inputs(Inputs i) { inputs_ = i; }

  void set_deadline(Clock::time_point t) { deadline_ = t; }
  // Predicted milliseconds time_kernel would spend getting scratch buffers of these sizes
  // (fresh pages cost 1.5-5 s per GiB on these VMs: a huge operand's allocation can cost more
  // than its sampled timing).
  double scratch_cost_ms(const Kernel& k, const std::vector<int64_t>& src_bytes,
                         const std::vector<int64_t>& dst_bytes) const;
  // Measurements of the last time_kernel call that ran a sample of the tiles (0 or 1), and
  // in all (for tests and the load's log).
  bool last_sampled() const { return last_sampled_; }
  int sampled() const { return sampled_; }

 private:
  struct Chunk {
    int64_t begin, end;
  };
  // Runs the tiles of the chunks (all of them when empty) like run().
  void run_chunks(const Kernel& k, const KernelArgs& a, const std::vector<Chunk>& chunks);
  double time_once(const Kernel& k, const KernelArgs& a, const std::vector<Chunk>& chunks,
                   const std::vector<Kernel::Span>& evict_first);
  void write_split(const std::vector<Kernel::Span>& spans);
  float* scratch(size_t slot, int64_t bytes);
  // The kernel's scratch, one 64-byte aligned slice per thread (as the executor lays it out).
  int64_t scratch_slices_bytes(const Kernel& k) const {
    return round_up(k.scratch_bytes(), 64) * threads_;
  }
  std::vector<int64_t> slot_bytes(const Kernel& k, const std::vector<int64_t>& src_bytes,
                                  const std::vector<int64_t>& dst_bytes) const;
  int threads_;
  ProfileBudget budget_;
  tbb::task_arena* arena_ = nullptr;  // shared_arena(threads_); none for one thread
  std::vector<std::shared_ptr<float>> bufs_;
  std::vector<int64_t> sizes_;
  // Milliseconds per byte of fresh scratch: measured on the first big allocation; until then
  // the slow end of what these VMs showed (5 s per GiB).
  double fill_ms_per_byte_ = 5000.0 / double(int64_t(1) << 30);
  bool cold_weights_ = false;
  Inputs inputs_ = Inputs::warm;
  std::vector<Kernel::Span> inputs_spans_;  // time_kernel's input buffers
  Clock::time_point deadline_ = Clock::time_point::max();
  bool last_sampled_ = false;
  int sampled_ = 0;
};

}  // namespace kiln
