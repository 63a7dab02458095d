#include "jit/kernel.h"

#include <cstdlib>

#include "graph/error.h"
#include "jit/layout.h"

namespace kiln {

void Kernel::run_all(const KernelArgs& args) const {
  if (args.scratch || scratch_bytes() == 0) return run(args, 0, tiles());
  const ScratchBuffer s(scratch_bytes());
  run(s.with(args), 0, tiles());
}

float* Kernel::scratch_floats(const KernelArgs& args) const {
  if (!args.scratch)
    fail(Code::internal, "kernel " + name() + " was run without the " +
                             std::to_string(scratch_bytes()) + " bytes of scratch it declares");
  return static_cast<float*>(args.scratch);
}

ScratchBuffer::ScratchBuffer(int64_t bytes, int slices) {
  if (bytes <= 0 || slices <= 0) return;
  bytes_ = round_up(bytes, 64);
  const size_t total = size_t(bytes_) * size_t(slices);
  mem_.reset(static_cast<char*>(std::aligned_alloc(64, total)));
  if (!mem_)
    fail(Code::out_of_memory, "cannot allocate " + std::to_string(total) + " bytes of scratch");
}

void ScratchBuffer::Free::operator()(char* p) const {
  std::free(p);
}

}  // namespace kiln
