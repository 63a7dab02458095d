// The single-core FP32 FMA peak of this machine, measured with a JIT loop of independent
// vfmadd231ps chains (zmm for avx512, ymm for avx2), and a short probe of the same loop that
// tells whether the core is currently shared (e.g. with a busy hyperthread sibling).
#pragma once

#include <memory>

#include "jit/cpu.h"

namespace kiln::bench {

// CPU time of the calling thread (seconds): unlike wall time it does not advance while the
// thread is descheduled, so time slices lost to other processes do not count.
double thread_seconds();

// GFLOP/s (2 flops per lane per FMA) of the best of `runs` timed runs of ~`seconds` each
// (short runs, so that on a shared machine some of them run without being disturbed).
double measure_fma_peak(Isa isa, int runs = 200, double seconds = 0.002);

// A ~50 us run of the peak loop, timed in thread CPU time: its GFLOP/s relative to the
// measured peak shows whether the core is shared right now (a busy hyperthread sibling slows
// execution without descheduling the thread).
class FmaProbe {
 public:
  explicit FmaProbe(Isa isa);
  ~FmaProbe();
  double gflops() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Time (thread CPU seconds) to read a ~768 KB buffer that normally stays in this core's L2:
// it grows when another thread on the core (a hyperthread sibling) evicts our caches.
class L2Probe {
 public:
  L2Probe();
  ~L2Probe();
  double seconds() const;                        // one pass over the (previously touched) buffer
  double baseline() const { return baseline_; }  // best of many passes at creation

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  double baseline_ = 0;
};

// Single-core copy bandwidth in GB/s (STREAM "copy": bytes read + bytes written) between two
// buffers of `bytes` each, full-width vector loads and ordinary stores: the median of `reps`
// copies after a warm-up one (*best: the fastest).
double measure_copy_gbs(Isa isa, size_t bytes, int reps, double* best = nullptr);

}  // namespace kiln::bench
