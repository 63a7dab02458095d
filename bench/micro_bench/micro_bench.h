// kiln_micro_bench: tuning aids below the level of a whole conv kernel, each a mode:
//   im2col-sweep  conf variations (register tiles x tile sizes x K chunks) of one im2col conv,
//                 and the packing alone
//   wino-gemm     the Winograd GEMM microkernel of one group alone (data in L1/L2), with the
//                 conf's K chunk against none
//   glue          the JIT glue kernels (reorders, pooling, eltwise, concat) on ResNet-50-sized
//                 tensors next to the plain C++ kernels they replace
//   fresh-memory  the cost of writing fresh pages (4 KiB, huge) against reused buffers, and of
//                 reading a model file mapped against read into a reused buffer
//   threads       conv kernels at one thread and at N threads
//   separable     the separable kernel (depthwise + 1x1) against its parts
// Whole conv kernels (every family, layout and blocking) are kiln_kernel_bench's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jit/cpu.h"

namespace kiln::bench {

// The JIT ISAs this CPU has, or the one `--isa` names ("" or "both": all of them).
std::vector<Isa> bench_isas(const std::string& isa);

// The median of `reps` timings of f, in milliseconds.
double median_ms(int reps, const std::function<void()>& f);

// Arguments after the mode; each mode parses its own ("--key value" pairs).
struct ModeArgs {
  std::vector<std::string> args;
  // The value of --key, or `def` when absent.
  std::string get(const std::string& key, const std::string& def) const;
};

int im2col_sweep(const ModeArgs& a);
int wino_gemm(const ModeArgs& a);
int glue_bench(const ModeArgs& a);
int fresh_memory(const ModeArgs& a);
int conv_threads(const ModeArgs& a);
int separable_bench(const ModeArgs& a);

}  // namespace kiln::bench
