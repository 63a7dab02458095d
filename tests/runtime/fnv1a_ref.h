// FNV-1a 64 written from the published definition (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3), independent of runtime/tuning_cache.cpp: the cache tests and the cache
// fuzzer write and check files with it. No doctest here (the fuzzer includes it too).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln::test {

// The seeded form continues from `h` instead of the basis.
inline uint64_t ref_fnv1a64(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

inline std::string ref_hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace kiln::test
