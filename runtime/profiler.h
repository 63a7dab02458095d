// Measures kernels on the live machine the way they will run: in a task_arena with the
// session's thread count, tiles split with a static partitioner (as the executor does),
// inputs resident from a warm-up run, the median of repeated timings.
#pragma once

#include <tbb/task_arena.h>

#include <memory>
#include <vector>

#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

struct ProfileBudget {
  int min_reps = 3, max_reps = 9;
  double max_ms = 40.0;  // stop repeating once this much time went into one measurement
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
  ~Profiler();
  int threads() const { return threads_; }

  // Median milliseconds of `k` on scratch buffers: src_bytes[i] bytes per input slot
  // (0 = no buffer: nullptr, or the constant given in consts[i]), dst_bytes per output.
  // Throws what the kernel throws.
  double time_kernel(const Kernel& k, const std::vector<int64_t>& src_bytes,
                     const std::vector<const void*>& consts, const std::vector<int64_t>& dst_bytes);

  // Median milliseconds of converting a tensor of logical shape s between two layouts.
  double time_reorder(const Shape& s, Layout from, Layout to, Isa isa);

  // Runs all tiles of k like the executor does (for profiling and tests).
  void run(const Kernel& k, const KernelArgs& a);

  // Evict each kernel's weights (Kernel::weights) from the caches before every timed run.
  void set_cold_weights(bool cold) { cold_weights_ = cold; }
  bool cold_weights() const { return cold_weights_; }

 private:
  float* scratch(size_t slot, int64_t bytes);
  int threads_;
  ProfileBudget budget_;
  std::unique_ptr<tbb::task_arena> arena_;
  std::vector<std::shared_ptr<float>> bufs_;
  std::vector<int64_t> sizes_;
  bool cold_weights_ = false;
};

}  // namespace kiln
