#include "jit/cpu.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xbyak/xbyak_util.h>

#include <algorithm>
#include <cstring>

#include "graph/enum_name.h"
#include "graph/env.h"
#include "graph/error.h"

namespace kiln {

const char* isa_name(Isa isa) {
  static const char* const kNames[] = {"scalar", "avx2", "avx512"};
  return enum_name(isa, kNames);
}

Isa parse_isa(const std::string& s) {
  if (s == "avx512" || s == "avx512_core") return Isa::avx512;
  if (s == "avx2") return Isa::avx2;
  if (s == "scalar" || s == "none") return Isa::scalar;
  fail(Code::invalid_argument, "unknown ISA '" + s + "' (expected avx512, avx2 or scalar)");
}

namespace {

void read_identity(CpuInfo& c) {
  // CPUID leaves 0, 1 and 0x80000002..4 (brand string).
  unsigned int r[4];
  Xbyak::util::Cpu::getCpuid(0, r);
  char vendor[13] = {};
  std::memcpy(vendor, &r[1], 4);
  std::memcpy(vendor + 4, &r[3], 4);
  std::memcpy(vendor + 8, &r[2], 4);
  c.vendor = vendor;
  Xbyak::util::Cpu::getCpuid(1, r);
  c.family = (r[0] >> 8) & 0xf;
  c.model = (r[0] >> 4) & 0xf;
  c.stepping = r[0] & 0xf;
  if (c.family == 0xf) c.family += (r[0] >> 20) & 0xff;
  if (c.family >= 6) c.model += ((r[0] >> 16) & 0xf) << 4;
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    Xbyak::util::Cpu::getCpuid(0x80000002u + i, r);
    std::memcpy(brand + 16 * i, r, 16);
  }
  c.brand = brand;
  c.brand.erase(0, c.brand.find_first_not_of(' '));
  c.brand.erase(c.brand.find_last_not_of(' ') + 1);
}

void read_features(CpuInfo& c) {
  Xbyak::util::Cpu cpu;
  using C = Xbyak::util::Cpu;
  // Xbyak checks XGETBV for OS-enabled zmm/ymm state before setting the AVX bits.
  if (cpu.has(C::tAVX512F) && cpu.has(C::tAVX512VL) && cpu.has(C::tAVX512BW) &&
      cpu.has(C::tAVX512DQ))
    c.isa = Isa::avx512;
  else if (cpu.has(C::tAVX2) && cpu.has(C::tFMA))
    c.isa = Isa::avx2;
  const bool z = c.isa == Isa::avx512;
  c.avx512_bf16 = z && cpu.has(C::tAVX512_BF16);
  c.avx512_vnni = z && cpu.has(C::tAVX512_VNNI);
  c.avx512_fp16 = z && cpu.has(C::tAVX512_FP16);
  c.avx_vnni = c.isa >= Isa::avx2 && cpu.has(C::tAVX_VNNI);
  c.f16c = c.isa >= Isa::avx2 && cpu.has(C::tF16C);
  // Xbyak reports the AMX CPUID bits without asking the OS: tile config and data state are
  // XCR0 bits 17 and 18.
  const bool tiles_os = cpu.has(C::tOSXSAVE) && ((cpu.getXfeature() >> 17) & 3) == 3;
  c.amx_bf16 = tiles_os && cpu.has(C::tAMX_TILE) && cpu.has(C::tAMX_BF16);
  c.amx_int8 = tiles_os && cpu.has(C::tAMX_TILE) && cpu.has(C::tAMX_INT8);
  if (c.amx_bf16 || c.amx_int8) {
    constexpr int kArchGetXcompPerm = 0x1022;
    constexpr int kXfeatureTileData = 18;
    unsigned long perm = 0;
    c.amx_permitted = ::syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) == 0 &&
                      ((perm >> kXfeatureTileData) & 1);
  }
}

// glibc's sysconf reads the cache leaves of either vendor's CPUID (4, 0x8000001D, or AMD's
// legacy 0x80000005/6 where a hypervisor hides the others).
void read_caches(CpuInfo& c) {
  const long l1 = ::sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE),
             l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  c.cache_reported = l1 > 0 && l2 > 0;
  if (!c.cache_reported) return;
  c.cache.l1d = l1;
  c.cache.l2 = l2;
  c.cache.l3 = std::max(0L, l3);
}

void read_cores(CpuInfo& c) {
  cpu_set_t set;
  CPU_ZERO(&set);
  c.cores = ::sched_getaffinity(0, sizeof(set), &set) == 0
                ? std::max(1, CPU_COUNT(&set))
                : std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
}

}  // namespace

std::vector<const char*> CpuInfo::extra_features() const {
  const std::pair<bool, const char*> extras[] = {
      {avx512_bf16, "avx512_bf16"}, {avx512_vnni, "avx512_vnni"}, {avx512_fp16, "avx512_fp16"},
      {avx_vnni, "avx_vnni"},       {amx_bf16, "amx_bf16"},       {amx_int8, "amx_int8"}};
  std::vector<const char*> names;
  for (const auto& [on, name] : extras)
    if (on) names.push_back(name);
  return names;
}

std::string CpuInfo::summary() const {
  std::string s = vendor + " family " + std::to_string(family) + " model " + std::to_string(model) +
                  " stepping " + std::to_string(stepping) + " / " + brand + " / " + isa_name(isa);
  for (const char* name : extra_features()) s += std::string(" ") + name;
  auto kib = [](int64_t b) { return std::to_string(b >> 10) + "K"; };
  s += " / L1d " + kib(cache.l1d) + " L2 " + kib(cache.l2) + " L3 " + kib(cache.l3);
  if (!cache_reported) s += " (assumed)";
  return s;
}

const CpuInfo& host_cpu() {
  static const CpuInfo info = [] {
    CpuInfo c;
    read_identity(c);
    read_features(c);
    read_caches(c);
    read_cores(c);
    return c;
  }();
  return info;
}

Isa detect_isa() {
  return host_cpu().isa;
}

Isa effective_isa(int cap) {
  Isa isa = detect_isa();
  if (cap >= 0) isa = std::min(isa, Isa(std::min(cap, int(Isa::avx512))));
  if (const std::string cap_env = env_value(EnvVar::max_isa); !cap_env.empty())
    isa = std::min(isa, parse_isa(cap_env));
  return isa;
}

}  // namespace kiln
