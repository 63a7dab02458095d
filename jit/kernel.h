// What the runtime sees of a compiled kernel: a name, a 1-D space of independent tiles, and
// a function computing a range of tiles. Kernels never schedule anything themselves (no TBB
// here): the runtime splits [0, tiles()) across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

// Pointers to the node's inputs and outputs in their planned layouts, in the node's input /
// output order (including fused post-op inputs such as the residual), and this call's scratch.
struct KernelArgs {
  const float* const* src = nullptr;
  float* const* dst = nullptr;
  // Kernel::scratch_bytes() bytes, 64-byte aligned, used by no other call running at the same
  // time; contents undefined on entry. The executor gives each thread its slice of the run's
  // arena (ggml's "the caller allocates the work buffer the plan asks for").
  void* scratch = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const std::string& name() const = 0;
  virtual int64_t tiles() const = 0;
  // Computes tiles [begin, end). Different ranges may run concurrently on different threads,
  // each with its own KernelArgs::scratch.
  virtual void run(const KernelArgs& args, int64_t begin, int64_t end) const = 0;
  // Runs every tile on the calling thread, with scratch of its own when args has none.
  void run_all(const KernelArgs& args) const;
  // Bytes of KernelArgs::scratch one call of run() needs (0: none).
  virtual int64_t scratch_bytes() const { return 0; }
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
  // A kernel reading weights that are computed every run (a Conv whose weights are not
  // constants) reads them packed, as its src[1]: `packer` packs them (its src[0] the weights,
  // src[1] the bias or null; dst[0] `bytes` bytes), run as a step of its own before this one —
  // once per run, whatever the threads. Null packer: the kernel needs none.
  struct RuntimePacking {
    std::unique_ptr<Kernel> packer;
    int64_t bytes = 0;
  };
  virtual RuntimePacking runtime_packing() const { return {}; }

 protected:
  // args.scratch as floats; an internal error naming the kernel when the caller gave none.
  float* scratch_floats(const KernelArgs& args) const;
};

// The packer of a kernel's run-time weights (Kernel::runtime_packing), for any family: tile t
// packs part t of the weights (src[0], the model's layout) into dst[0]; tile 0 also writes the
// bias part (src[1], or null: zeros). Parts must cover disjoint bytes.
class WeightPacker final : public Kernel {
 public:
  using Part = std::function<void(int64_t t, const float* weights, float* out)>;
  using Bias = std::function<void(const float* bias, float* out)>;
  WeightPacker(std::string name, int64_t tiles, Part part, Bias bias)
      : name_(std::move(name)), tiles_(tiles), part_(std::move(part)), bias_(std::move(bias)) {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_; }
  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    for (int64_t t = begin; t < end; ++t) {
      part_(t, args.src[0], args.dst[0]);
      if (t == 0) bias_(args.src[1], args.dst[0]);
    }
  }

 private:
  std::string name_;
  int64_t tiles_;
  Part part_;
  Bias bias_;
};

// What a kernel factory returns when it declines a problem: no kernel, and the reason in
// *why_not when the caller asked for one (the planner logs it; tests assert on it).
inline std::unique_ptr<Kernel> decline(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return nullptr;
}

// Scratch for callers that run kernels outside the executor (tests, benches, the profiler):
// `slices` 64-byte aligned slices of `bytes` each, one per concurrent caller.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(int64_t bytes, int slices = 1);
  void* slice(int i = 0) const { return bytes_ ? mem_.get() + int64_t(i) * bytes_ : nullptr; }
  // `args` with slice i as its scratch.
  KernelArgs with(KernelArgs args, int i = 0) const {
    args.scratch = slice(i);
    return args;
  }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> mem_;
  int64_t bytes_ = 0;  // per slice, a multiple of 64
};

}  // namespace kiln
