#include "jit/jit_generator.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "graph/error.h"

namespace kiln {
namespace {

const Xbyak::Reg64 kSaved[] = {Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                               Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};

void register_kernel(const std::string& name, const void* code, size_t size) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (const char* dir = std::getenv("KILN_JIT_DUMP"); dir && *dir) {
    std::ofstream f(std::string(dir) + "/" + name + ".bin", std::ios::binary);
    f.write(static_cast<const char*>(code), std::streamsize(size));
  }
  if (const char* pm = std::getenv("KILN_PERF_MAP"); pm && *pm == '1') {
    std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fprintf(f, "%lx %zx %s\n", reinterpret_cast<unsigned long>(code), size, name.c_str());
      std::fclose(f);
    }
  }
}

}  // namespace

JitGenerator::JitGenerator(std::string name, size_t max_code_size)
    // DontSetProtectRWE: the buffer stays RW while we emit and becomes RX in create().
    : Xbyak::CodeGenerator(max_code_size, Xbyak::DontSetProtectRWE), name_(std::move(name)) {}

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
  try {
    generate();
    ready();
    setProtectModeRE();
  } catch (const Xbyak::Error& e) {
    fail(Code::internal, "generating kernel " + name_ + " failed: " + e.what());
  }
  created_ = true;
  register_kernel(name_, getCode(), getSize());
}

}  // namespace kiln
