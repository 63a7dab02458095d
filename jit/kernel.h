// What the runtime sees of a compiled kernel: a name, a 1-D space of independent tiles, and
// a function computing a range of tiles. Kernels never schedule anything themselves (no TBB
// here): the runtime splits [0, tiles()) across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// Pointers to the node's inputs and outputs in their planned layouts, in the node's input /
// output order (including fused post-op inputs such as the residual).
struct KernelArgs {
  const float* const* src = nullptr;
  float* const* dst = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const std::string& name() const = 0;
  virtual int64_t tiles() const = 0;
  // Computes tiles [begin, end). Different ranges may run concurrently on different threads.
  virtual void run(const KernelArgs& args, int64_t begin, int64_t end) const = 0;
  void run_all(const KernelArgs& args) const { run(args, 0, tiles()); }
  // Work in multiply-adds (for GFLOP/s reports); 0 when not meaningful.
  virtual double macs() const { return 0; }
  // The memory the kernel reads on every run besides its operands: its packed weights. The
  // profiler evicts it from the caches before each timing when the model's weights cannot
  // stay cached between runs (runtime/profiler.h).
  struct Span {
    const void* p;
    size_t bytes;
  };
  virtual std::vector<Span> weights() const { return {}; }
};

}  // namespace kiln
