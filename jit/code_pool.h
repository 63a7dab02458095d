// Executable memory for every JIT kernel (Xbyak and asmjit), shared by the process.
//
// Why a pool: mapping each kernel on its own cost three TLB-shootdown IPIs per kernel (mprotect
// to RX, and mprotect + munmap when it dies), which with two threads in the process, on a VM,
// was most of a warm load's JIT time.
//
// W^X without mprotect: code lives in a memfd whose only mapping is read+execute. Bytes are
// written with pwrite() on the descriptor, never through a writable mapping, so no address in
// the process is ever writable and executable (the same as writing a shared library and
// mapping it). Ranges of dead kernels are reused; the memory is kept for the process.
//
// Where memfd or an executable shared mapping is refused (hardened kernels, noexec policies),
// and under KILN_PERF_MAP=1 (perf names JIT code only in anonymous mappings), each block falls
// back to its own mapping: written RW, then mprotect'ed RX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln {

class CodeBlock {
 public:
  CodeBlock() = default;
  CodeBlock(CodeBlock&& o) noexcept { *this = std::move(o); }
  CodeBlock& operator=(CodeBlock&& o) noexcept;
  CodeBlock(const CodeBlock&) = delete;
  CodeBlock& operator=(const CodeBlock&) = delete;
  ~CodeBlock();

  // Room for `bytes` of code; its final address is known (for code that must be relocated
  // to it) before anything is written. Throws kiln::Error (out_of_memory) on failure.
  static CodeBlock reserve(size_t bytes);
  // Writes the code (exactly `bytes` <= reserved) and makes it executable. Call once.
  void write(const void* code, size_t bytes);

  const uint8_t* addr() const { return addr_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return addr_ != nullptr; }

  struct Chunk;  // implementation detail (code_pool.cpp)

 private:
  void release();
  std::shared_ptr<Chunk> chunk_;  // pooled (memfd) block; null for a private mapping
  uint8_t* addr_ = nullptr;
  size_t size_ = 0, reserved_ = 0;
  bool written_ = false;
};

// Whether blocks come from the shared pool (false: private mappings; see above).
bool code_pool_active();

// Makes a published kernel visible to tools, for every generator (Xbyak and asmjit):
// KILN_JIT_DUMP=DIR writes its bytes to DIR/NAME.bin (for objdump), KILN_PERF_MAP=1 appends a
// /tmp/perf-PID.map line so that `perf report` names the code.
void announce_code(const std::string& name, const void* code, size_t size);

}  // namespace kiln
