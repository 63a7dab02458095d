#include "jit/cpu.h"

#include <xbyak/xbyak_util.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "graph/env.h"
#include "graph/error.h"

namespace kiln {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

Isa parse_isa(const std::string& s) {
  if (s == "avx512" || s == "avx512_core") return Isa::avx512;
  if (s == "avx2") return Isa::avx2;
  if (s == "scalar" || s == "none") return Isa::scalar;
  fail(Code::invalid_argument, "unknown ISA '" + s + "' (expected avx512, avx2 or scalar)");
}

Isa detect_isa() {
  static const Isa isa = [] {
    Xbyak::util::Cpu cpu;
    using C = Xbyak::util::Cpu;
    // Xbyak checks XGETBV for OS-enabled zmm/ymm state before setting these bits.
    if (cpu.has(C::tAVX512F) && cpu.has(C::tAVX512VL) && cpu.has(C::tAVX512BW) &&
        cpu.has(C::tAVX512DQ))
      return Isa::avx512;
    if (cpu.has(C::tAVX2) && cpu.has(C::tFMA)) return Isa::avx2;
    return Isa::scalar;
  }();
  return isa;
}

Isa effective_isa(int cap) {
  Isa isa = detect_isa();
  if (cap >= 0) isa = std::min(isa, Isa(std::min(cap, int(Isa::avx512))));
  if (const std::string cap_env = env_value(EnvVar::max_isa); !cap_env.empty())
    isa = std::min(isa, parse_isa(cap_env));
  return isa;
}

static std::string read_cpu_description() {
  // CPUID leaves 0, 1 and 0x80000002..4 (brand string).
  unsigned int r[4];
  Xbyak::util::Cpu::getCpuid(0, r);
  char vendor[13] = {};
  std::memcpy(vendor, &r[1], 4);
  std::memcpy(vendor + 4, &r[3], 4);
  std::memcpy(vendor + 8, &r[2], 4);
  Xbyak::util::Cpu::getCpuid(1, r);
  unsigned fam = (r[0] >> 8) & 0xf, model = (r[0] >> 4) & 0xf, stepping = r[0] & 0xf;
  if (fam == 0xf) fam += (r[0] >> 20) & 0xff;
  if (fam >= 6) model += ((r[0] >> 16) & 0xf) << 4;
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    Xbyak::util::Cpu::getCpuid(0x80000002u + i, r);
    std::memcpy(brand + 16 * i, r, 16);
  }
  std::string b(brand);
  b.erase(0, b.find_first_not_of(' '));
  return std::string(vendor) + " family " + std::to_string(fam) + " model " +
         std::to_string(model) + " stepping " + std::to_string(stepping) + " / " + b;
}

// Every load asks (the tuning cache's context); CPUID traps to the hypervisor in a VM, so it is
// read once.
std::string cpu_description() {
  static const std::string desc = read_cpu_description();
  return desc;
}

}  // namespace kiln
