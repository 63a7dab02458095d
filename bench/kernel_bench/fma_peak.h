// The single-core FP32 FMA peak of this machine, measured with a JIT loop of independent
// vfmadd231ps chains (zmm for avx512, ymm for avx2).
#pragma once

#include "jit/cpu.h"

namespace kiln::bench {

// GFLOP/s (2 flops per lane per FMA) of the best of `runs` timed runs of ~`seconds` each
// (short runs, so that on a shared machine some of them run without being preempted).
double measure_fma_peak(Isa isa, int runs = 200, double seconds = 0.002);

}  // namespace kiln::bench
