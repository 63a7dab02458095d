// Small deterministic generator (xorshift) so tests need no <random> seeding conventions.
#pragma once

#include <cstdint>

namespace kiln::test {

// `offset` keeps each suite's own streams (so their seeds still pick the same cases).
struct XorShift {
  uint64_t s;
  XorShift(uint64_t seed, uint64_t offset) : s(seed * 0x9E3779B97F4A7C15ull + offset) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  int64_t pick(int64_t lo, int64_t hi) {  // lo..hi inclusive
    return lo + int64_t(next() % uint64_t(hi - lo + 1));
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * float(next() >> 40) / float(1 << 24);
  }
};

}  // namespace kiln::test
