// The live CPU, detected once: its instruction sets (and the cap that tests and users put on
// them, so both the AVX-512 and the AVX2 code paths can be forced and tested on one AVX-512
// machine), its reduced-precision units, caches and cores. Every conf derives its cache
// budgets from host_cpu().cache, and the tuning cache keys its timings by summary().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512" (as in kernel names)
// "avx2" / "avx512" / "scalar" (also "avx512_core", "none"); throws invalid_argument otherwise.
Isa parse_isa(const std::string& s);

// Data cache sizes in bytes. l1d and l2 are one core's; l3 is the whole level as the CPU
// reports it (often shared by many cores: a budget, not a per-core share). The defaults are
// used where the CPU reports nothing (some hypervisors) and by tests that need confs to make
// the same choices on every machine.
struct CacheSizes {
  int64_t l1d = 48 << 10;
  int64_t l2 = 1 << 20;
  int64_t l3 = 32 << 20;
  // The share of L2 a kernel's weights may take and still stay cached across a sweep of its
  // output: half (the rest holds the activations). Every family sizes its weight groups by it.
  int64_t l2_weights() const { return l2 / 2; }
};

struct CpuInfo {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD"
  std::string brand;   // the CPUID brand string
  unsigned family = 0, model = 0, stepping = 0;
  Isa isa = Isa::scalar;  // avx512: AVX512F+VL+BW+DQ with OS zmm state; avx2: AVX2+FMA
  // Reduced-precision units. The AVX-512 ones are only set when isa is avx512.
  bool avx512_bf16 = false, avx512_vnni = false, avx512_fp16 = false, avx_vnni = false;
  bool f16c = false;  // vcvtps2ph / vcvtph2ps (float16 conversions; set with avx2 or avx512)
  // AMX: the CPU has the units and the OS enables tile state (XCR0 bits 17-18).
  bool amx_bf16 = false, amx_int8 = false;
  // Linux also requires a process to ask for tile data once (arch_prctl ARCH_REQ_XCOMP_PERM).
  // Kiln only reads whether it was granted: asking changes the host process's state, so it is
  // the embedding application's decision.
  bool amx_permitted = false;
  CacheSizes cache;
  bool cache_reported = false;  // false: the CPU reported no sizes, cache holds the defaults
  int cores = 1;                // logical CPUs this process may run on (its affinity mask)

  // Names of the reduced-precision units present ("avx512_bf16", "amx_int8", ...).
  std::vector<const char*> extra_features() const;
  // One line for logs, `kiln info` and the tuning cache's key: vendor, family/model/stepping,
  // brand, ISA features and cache sizes.
  std::string summary() const;
};

// Detected on first use (CPUID traps to the hypervisor in a VM, so it is read once).
const CpuInfo& host_cpu();

// What this CPU supports (host_cpu().isa).
Isa detect_isa();

// The ISA kernels are generated for: min(detected, cap, KILN_MAX_ISA from the environment).
// cap < 0 means no cap from the options.
Isa effective_isa(int cap = -1);

// Vector width in floats for an ISA (16, 8, 1).
inline int simd_width(Isa isa) {
  return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 1;
}

}  // namespace kiln
