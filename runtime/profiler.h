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

 private:
  float* scratch(size_t slot, int64_t bytes);
  int threads_;
  ProfileBudget budget_;
  std::unique_ptr<tbb::task_arena> arena_;
  std::vector<std::shared_ptr<float>> bufs_;
  std::vector<int64_t> sizes_;
};

}  // namespace kiln
