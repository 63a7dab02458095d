#include "jit/jit_generator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "graph/error.h"

namespace kiln {
namespace {

const Xbyak::Reg64 kSaved[] = {Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                               Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};

thread_local uint64_t tl_codegen_ns = 0;

}  // namespace

uint64_t codegen_ns_this_thread() {
  return tl_codegen_ns;
}

CodegenTimer::~CodegenTimer() {
  tl_codegen_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start_)
                                .count());
}

namespace detail {

// 64-byte aligned like the pool's blocks, so align(<= 64) in the code survives the copy.
static uint8_t* new_emit_buffer(size_t bytes) {
  return static_cast<uint8_t*>(::operator new[](bytes, std::align_val_t(64)));
}

// Emit buffers freed by finished generators, reused by the next ones (a fresh 256 KiB buffer
// per kernel would page-fault on every generation). Kernels are generated on several threads
// at once, so the list is shared and locked; it holds at most one buffer per generator that
// ran concurrently, and lives for the process.
class FreeBuffers {
 public:
  // A free buffer of at least `bytes`, or a new one; *cap is set to its size.
  uint8_t* take(size_t bytes, size_t* cap) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].second >= bytes) {
          auto [p, n] = free_[i];
          free_.erase(free_.begin() + std::ptrdiff_t(i));
          *cap = n;
          return p;
        }
    }
    *cap = bytes;
    return new_emit_buffer(bytes);
  }
  void give(uint8_t* p, size_t cap) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace_back(p, cap);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<uint8_t*, size_t>> free_;
};

FreeBuffers& free_buffers() {
  static FreeBuffers* f = new FreeBuffers;  // never destroyed: generators may outlive statics
  return *f;
}

EmitBuffer::EmitBuffer(size_t bytes) {
  emit_ptr_ = free_buffers().take(bytes, &cap_);
}

void EmitBuffer::release_emit_buffer() {
  if (emit_ptr_) free_buffers().give(emit_ptr_, cap_);
  emit_ptr_ = nullptr;
}

EmitBuffer::~EmitBuffer() {
  release_emit_buffer();
}

}  // namespace detail

// USER_BUF: Xbyak emits into our heap buffer and never maps or protects anything itself.
JitGenerator::JitGenerator(std::string name, size_t max_code_size)
    : detail::EmitBuffer(max_code_size),
      Xbyak::CodeGenerator(max_code_size, emit_ptr_),
      name_(std::move(name)) {}

void JitGenerator::preamble() {
  for (const auto& r : kSaved) push(r);
}

void JitGenerator::postamble() {
  for (int i = 5; i >= 0; --i) pop(kSaved[i]);
  vzeroupper();
  ret();
}

void JitGenerator::set_tail_opmask(int lanes, const Xbyak::Reg32& tmp) {
  mov(tmp, (1u << lanes) - 1);
  kmovw(Xbyak::util::k1, tmp);
}

void JitGenerator::emit_tail_mask_table(Xbyak::Label& table, int lanes) {
  align(32);
  L(table);
  for (int i = 0; i < 8; ++i) dd(i < lanes ? 0xffffffffu : 0u);
}

void JitGenerator::create() {
  if (created_) fail(Code::internal, "kernel " + name_ + " created twice");
  CodegenTimer timer;
  try {
    generate();
    ready();
  } catch (const Xbyak::Error& e) {
    release_emit_buffer();
    fail(Code::internal, "generating kernel " + name_ + " failed: " + e.what());
  }
  code_ = CodeBlock::reserve(getSize());
  code_.write(getCode(), getSize());
  release_emit_buffer();
  created_ = true;
  announce_code(name_, code_.addr(), code_.size());
}

}  // namespace kiln
