// Base of every Xbyak kernel generator: a named kernel, Xbyak errors turned into kiln::Error,
// code emitted into plain heap memory and then published to the process's code pool
// (jit/code_pool.h: never writable and executable at once, no mprotect per kernel), an
// optional dump of each kernel's bytes (KILN_JIT_DUMP=dir) and an optional perf map entry
// (KILN_PERF_MAP=1 -> /tmp/perf-PID.map) so `perf report` names JIT code.
//
// Generated code must be position independent (it is copied after emission): jumps and
// rip-relative data are; absolute label addresses (putL, mov(reg, label)) are not allowed,
// nor align() beyond 64 bytes (the emit buffer and the pool's blocks are 64-byte aligned).
#pragma once

#include <xbyak/xbyak.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "jit/code_pool.h"

namespace kiln {

// Nanoseconds this thread has spent generating machine code (Xbyak and asmjit kernels), so
// a load can tell code generation from weight packing, which happen in the same factories.
uint64_t codegen_ns_this_thread();

// Adds the time from `start` to its destruction to this thread's code-generation count.
class CodegenTimer {
 public:
  explicit CodegenTimer(
      std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now())
      : start_(start) {}
  ~CodegenTimer();
  CodegenTimer(const CodegenTimer&) = delete;
  CodegenTimer& operator=(const CodegenTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

namespace detail {
// The buffer Xbyak emits into, taken from a process-wide list of buffers earlier generators
// released (jit_generator.cpp). A base class so it exists before Xbyak::CodeGenerator is
// constructed on it.
class EmitBuffer {
 protected:
  explicit EmitBuffer(size_t bytes);
  ~EmitBuffer();
  void release_emit_buffer();  // back to the list (after create() copied the code out)
  uint8_t* emit_ptr_ = nullptr;

 private:
  size_t cap_ = 0;
};
}  // namespace detail

class JitGenerator : private detail::EmitBuffer, public Xbyak::CodeGenerator {
 public:
  explicit JitGenerator(std::string name, size_t max_code_size = 256 * 1024);
  ~JitGenerator() override = default;
  JitGenerator(const JitGenerator&) = delete;
  JitGenerator& operator=(const JitGenerator&) = delete;

  // Emits the code (generate()), publishes it read+execute only, registers it. Call once, on
  // the constructing thread. Throws kiln::Error(internal) naming the kernel if Xbyak fails.
  void create();

  const std::string& name() const { return name_; }
  bool created() const { return created_; }
  template <class F>
  F fn() const {
    return reinterpret_cast<F>(const_cast<uint8_t*>(code_.addr()));
  }

 protected:
  virtual void generate() = 0;

  // System V ABI: the first integer argument, and the callee-saved registers a kernel may use
  // after preamble(). Kernels take one pointer to their argument struct.
  const Xbyak::Reg64 abi_param1 = rdi;
  void preamble();   // push rbx, rbp, r12..r15
  void postamble();  // vzeroupper, pop, ret

  // Masks for the last `lanes` channels of a vector (0 < lanes < simd width). AVX-512: opmask
  // k1 set at entry (tmp clobbered). AVX2: a table of 8 dwords placed after the code at
  // `table` (call after postamble()), for vmaskmov/vblendv loads of the mask register.
  void set_tail_opmask(int lanes, const Xbyak::Reg32& tmp);
  void emit_tail_mask_table(Xbyak::Label& table, int lanes);

 private:
  std::string name_;
  bool created_ = false;
  CodeBlock code_;
};

}  // namespace kiln
