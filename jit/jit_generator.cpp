#include "jit/jit_generator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <new>

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
static void delete_emit_buffer(uint8_t* p) {
  if (p) ::operator delete[](p, std::align_val_t(64));
}

struct EmitBuffer::Lease {
  uint8_t* buf = nullptr;
  size_t cap = 0;
  bool busy = false;
  ~Lease() { delete_emit_buffer(buf); }
};

EmitBuffer::EmitBuffer(size_t bytes) {
  thread_local Lease tl;
  if (!tl.busy) {
    if (tl.cap < bytes) {
      delete_emit_buffer(tl.buf);
      tl.buf = nullptr;
      tl.cap = 0;
      tl.buf = new_emit_buffer(bytes);
      tl.cap = bytes;
    }
    tl.busy = true;
    lease_ = &tl;
    emit_ptr_ = tl.buf;
  } else {
    own_ = new_emit_buffer(bytes);
    emit_ptr_ = own_;
  }
}

void EmitBuffer::release_emit_buffer() {
  if (lease_) lease_->busy = false;
  lease_ = nullptr;
  delete_emit_buffer(own_);
  own_ = nullptr;
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
