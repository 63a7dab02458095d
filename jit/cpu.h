// The live CPU's instruction sets and the cap that tests and users put on them, so both the
// AVX-512 and the AVX2 code paths can be forced and tested on one AVX-512 machine.
#pragma once

#include <string>

namespace kiln {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512" (as in kernel names)
// "avx2" / "avx512" / "scalar" (also "avx512_core", "none"); throws invalid_argument otherwise.
Isa parse_isa(const std::string& s);

// What this CPU supports: avx512 needs AVX512F+VL+BW+DQ (and OS support for zmm state),
// avx2 needs AVX2+FMA.
Isa detect_isa();

// The ISA kernels are generated for: min(detected, cap, KILN_MAX_ISA from the environment).
// cap < 0 means no cap from the options.
Isa effective_isa(int cap = -1);

// Vector width in floats for an ISA (16, 8, 1).
inline int simd_width(Isa isa) { return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 1; }

// "AuthenticAMD family 26 model 68 stepping 0 / AMD EPYC ..." — for logs and cache keys.
std::string cpu_description();

}  // namespace kiln
