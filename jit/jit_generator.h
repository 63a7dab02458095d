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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "jit/call_flags.h"
#include "jit/code_pool.h"
#include "jit/cpu.h"

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
  // preamble() / postamble() of a kernel whose last channel vector has `tail` real lanes (0:
  // none): the AVX-512 opmask at entry, the AVX2 mask table at tail_mask_ after the ret.
  void preamble(Isa isa, int tail, const Xbyak::Reg32& tmp);
  void postamble(Isa isa, int tail);

  // Vector register `reg` from / to `a`: the full vector, or with `masked` only the tail lanes
  // (AVX-512: k1, the load zeroing the rest; AVX2: vmaskmovps with the lane mask in ymm `mask`,
  // first loaded from tail_mask_ when `reload`). Lanes past the tail are never touched.
  void load_vec(Isa isa, int reg, const Xbyak::Address& a, bool masked, int mask,
                bool reload = false);
  void store_vec(Isa isa, const Xbyak::Address& a, int reg, bool masked, int mask,
                 bool reload = false);
  void zero_vregs(Isa isa, int count);  // vector registers 0 .. count - 1
  // Vector registers acc0 + j += (w0 + j) * the float at `src`, j < n: broadcast once into
  // register `bc` (reg_bcast) or, AVX-512 only, embedded in every FMA.
  void bcast_fmas(Isa isa, bool reg_bcast, int acc0, int w0, int n, int bc,
                  const Xbyak::RegExp& src);

  // Branches on bit `flag` of the call's flags word at [abi_param1 + flags_off]. if_flag: body
  // only when set. if_flag_else: both arms; `set_first` lays the set arm out first.
  void if_flag(size_t flags_off, int64_t flag, const std::function<void()>& body);
  void if_flag_else(size_t flags_off, int64_t flag, bool set_first,
                    const std::function<void()>& if_set, const std::function<void()>& if_clear);
  // Accumulators of a K chunk: without a K split (`k_split` false) zero() / store(true);
  // else at run time load() unless the first chunk (kFlagAccumulate), and store(final) with
  // final = kFlagFinal (bias + post-ops on the last chunk only).
  void init_accumulators(bool k_split, size_t flags_off, const std::function<void()>& zero,
                         const std::function<void()>& load);
  void store_accumulators(bool k_split, size_t flags_off,
                          const std::function<void(bool final)>& store);

  // Runtime loops: body() `count` times, `cnt` counting down. loop_n: a JIT-time count >= 1.
  // loop_arg: the count read from [abi_param1 + count_off], the loop skipped when it is 0.
  void loop_n(const Xbyak::Reg64& cnt, int64_t count, const std::function<void()>& body);
  void loop_arg(const Xbyak::Reg64& cnt, size_t count_off, const std::function<void()>& body);

  Xbyak::Label tail_mask_;  // the AVX2 lane mask of postamble(isa, tail)

 private:
  std::string name_;
  bool created_ = false;
  CodeBlock code_;
};

}  // namespace kiln
