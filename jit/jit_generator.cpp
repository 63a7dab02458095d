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
#include "jit/vec_math.h"

namespace kiln {
namespace {

using xreg::vreg;

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

void JitGenerator::preamble(Isa isa, int tail, const Xbyak::Reg32& tmp) {
  preamble();
  if (tail && isa == Isa::avx512) set_tail_opmask(tail, tmp);
}

void JitGenerator::postamble(Isa isa, int tail) {
  postamble();
  if (tail && isa != Isa::avx512) emit_tail_mask_table(tail_mask_, tail);
}

void JitGenerator::load_vec(Isa isa, int reg, const Xbyak::Address& a, bool masked, int mask,
                            bool reload) {
  using namespace Xbyak;
  if (!masked) return vmovups(vreg(isa, reg), a);
  if (isa == Isa::avx512) return vmovups(Zmm(reg) | util::k1 | T_z, a);
  if (reload) vmovups(Ymm(mask), ptr[util::rip + tail_mask_]);
  vmaskmovps(Ymm(reg), Ymm(mask), a);
}

void JitGenerator::store_vec(Isa isa, const Xbyak::Address& a, int reg, bool masked, int mask,
                             bool reload) {
  using namespace Xbyak;
  if (!masked) return vmovups(a, vreg(isa, reg));
  if (isa == Isa::avx512) return vmovups(a | util::k1, Zmm(reg));
  if (reload) vmovups(Ymm(mask), ptr[util::rip + tail_mask_]);
  vmaskmovps(a, Ymm(mask), Ymm(reg));
}

void JitGenerator::zero_vregs(Isa isa, int count) {
  for (int i = 0; i < count; ++i) {
    Xbyak::Xmm a = vreg(isa, i);
    vxorps(a, a, a);
  }
}

void JitGenerator::bcast_fmas(Isa isa, bool reg_bcast, int acc0, int w0, int n, int bc,
                              const Xbyak::RegExp& src) {
  if (reg_bcast) {
    vbroadcastss(vreg(isa, bc), ptr[src]);
    for (int j = 0; j < n; ++j) vfmadd231ps(vreg(isa, acc0 + j), vreg(isa, w0 + j), vreg(isa, bc));
  } else {
    for (int j = 0; j < n; ++j) vfmadd231ps(Xbyak::Zmm(acc0 + j), Xbyak::Zmm(w0 + j), ptr_b[src]);
  }
}

void JitGenerator::if_flag(size_t flags_off, int64_t flag, const std::function<void()>& body) {
  Xbyak::Label skip;
  test(byte[abi_param1 + flags_off], int(flag));
  jz(skip, T_NEAR);
  body();
  L(skip);
}

void JitGenerator::if_flag_else(size_t flags_off, int64_t flag, bool set_first,
                                const std::function<void()>& if_set,
                                const std::function<void()>& if_clear) {
  Xbyak::Label second, done;
  test(byte[abi_param1 + flags_off], int(flag));
  if (set_first)
    jz(second, T_NEAR);
  else
    jnz(second, T_NEAR);
  (set_first ? if_set : if_clear)();
  jmp(done, T_NEAR);
  L(second);
  (set_first ? if_clear : if_set)();
  L(done);
}

void JitGenerator::init_accumulators(bool k_split, size_t flags_off,
                                     const std::function<void()>& zero,
                                     const std::function<void()>& load) {
  if (!k_split) return zero();
  if_flag_else(flags_off, kFlagAccumulate, false, load, zero);
}

void JitGenerator::store_accumulators(bool k_split, size_t flags_off,
                                      const std::function<void(bool final)>& store) {
  if (!k_split) return store(true);
  if_flag_else(
      flags_off, kFlagFinal, true, [&] { store(true); }, [&] { store(false); });
}

void JitGenerator::loop_n(const Xbyak::Reg64& cnt, int64_t count,
                          const std::function<void()>& body) {
  Xbyak::Label loop;
  mov(cnt, count);
  L(loop);
  body();
  dec(cnt);
  jnz(loop, T_NEAR);
}

void JitGenerator::loop_arg(const Xbyak::Reg64& cnt, size_t count_off,
                            const std::function<void()>& body) {
  Xbyak::Label loop, done;
  mov(cnt, ptr[abi_param1 + count_off]);
  test(cnt, cnt);
  jz(done, T_NEAR);
  L(loop);
  body();
  dec(cnt);
  jnz(loop, T_NEAR);
  L(done);
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
