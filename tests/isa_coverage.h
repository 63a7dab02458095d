// The ISA paths tests are meant to cover, and what this CPU lacks of them. Tests ask for their
// ISAs through these helpers, never through detect_isa() directly: an ISA the CPU lacks is
// recorded (and said on stderr), and the test binary then ends with kSkipExitCode after its
// report, which CTest shows as "Skipped" — a test whose path could not run never passes
// silently. Failures still fail (a failing binary exits with its failure code first).
#pragma once

#include <vector>

#include "jit/cpu.h"

namespace kiln::testing {

constexpr int kSkipExitCode = 77;  // tests/CMakeLists.txt: SKIP_RETURN_CODE

// Records that the running test wanted `what` and this CPU lacks it (doctest_main.cpp).
void record_missing(const char* what);

// Whether kernels of `isa` can run: the CPU has it and KILN_MAX_ISA does not cap it away (a
// capped run covers less, and says so the same way); records it when not.
inline bool has_isa(Isa isa) {
  if (int(effective_isa()) >= int(isa)) return true;
  record_missing(isa_name(isa));
  return false;
}

// Whether bf16 kernels (AVX512-BF16 on AVX-512) can run; records "avx512_bf16" when not.
inline bool has_bf16() {
  if (!has_isa(Isa::avx512)) return false;
  if (host_cpu().avx512_bf16) return true;
  record_missing("avx512_bf16");
  return false;
}

// Whether int8 kernels (AVX512-VNNI on AVX-512) can run; records "avx512_vnni" when not.
inline bool has_vnni() {
  if (!has_isa(Isa::avx512)) return false;
  if (host_cpu().avx512_vnni) return true;
  record_missing("avx512_vnni");
  return false;
}

// Every JIT path, best first (avx512, avx2), that the CPU has; the others are recorded.
inline std::vector<Isa> jit_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::avx512, Isa::avx2})
    if (has_isa(i)) v.push_back(i);
  return v;
}

}  // namespace kiln::testing
