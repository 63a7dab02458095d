// Small deterministic generator (xorshift) so tests need no <random> seeding conventions.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "graph/ir.h"

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

// An f32 tensor of values uniform in [lo, hi), drawn from `r` in element order.
inline Tensor uniform_tensor(Shape s, XorShift r, float lo, float hi) {
  Tensor t(DType::f32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = r.uniform(lo, hi);
  return t;
}

// n floats uniform in [lo, hi) from std::mt19937(seed) (the session tests' weights / inputs).
inline std::vector<float> randoms(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace kiln::test
