// Helpers shared by the glue-kernel tests: the ISAs to test, buffers that end on a guard page
// (a kernel touching one float past the end crashes the test instead of passing), seeded
// random fill, running a kernel's tiles in two halves (as two threads would), and running a row
// kernel in a layout.
#pragma once

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <random>
#include <thread>
#include <vector>

#include "isa_coverage.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln::test {

inline std::vector<Isa> glue_isas() {
  return testing::jit_isas();
}

// n floats between two PROT_NONE pages, alternately (per allocation) flush against the page
// after the buffer or the one before it, so a kernel touching one float past either end
// crashes the test instead of passing. End-flush buffers are only 4-byte aligned in general,
// which also exercises unaligned vector accesses.
class GuardedBuf {
 public:
  explicit GuardedBuf(size_t n) : n_(n) {
    static int count = 0;
    const bool at_end = count++ % 2 == 0;
    page_ = size_t(sysconf(_SC_PAGESIZE));
    const size_t bytes = (n * 4 + page_ - 1) / page_ * page_;
    map_bytes_ = bytes + 2 * page_;
    void* m = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = static_cast<uint8_t*>(m);
    mprotect(base_, page_, PROT_NONE);
    mprotect(base_ + page_ + bytes, page_, PROT_NONE);
    data_ = reinterpret_cast<float*>(at_end ? base_ + page_ + bytes - n * 4 : base_ + page_);
  }
  ~GuardedBuf() { munmap(base_, map_bytes_); }
  GuardedBuf(const GuardedBuf&) = delete;
  GuardedBuf& operator=(const GuardedBuf&) = delete;
  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return n_; }
  float& operator[](size_t i) { return data_[i]; }
  void fill(float v) {
    for (size_t i = 0; i < n_; ++i) data_[i] = v;
  }
  void random(uint32_t seed, float lo = -4.f, float hi = 4.f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    for (size_t i = 0; i < n_; ++i) data_[i] = d(rng);
  }

 private:
  size_t n_, page_ = 0, map_bytes_ = 0;
  uint8_t* base_ = nullptr;
  float* data_ = nullptr;
};

// Runs all tiles in two halves on two threads, as the runtime would (tiles must be
// independent and run() must not touch shared mutable state).
inline void run_split(const Kernel& k, const std::vector<const float*>& src,
                      const std::vector<float*>& dst) {
  KernelArgs a;
  a.src = src.data();
  a.dst = dst.data();
  const int64_t t = k.tiles(), h = t / 2;
  std::thread second([&] { k.run(a, h, t); });
  k.run(a, 0, h);
  second.join();
}

// Runs every tile in two halves on two threads, each with its own scratch (Kernel::
// scratch_bytes); what either half throws is rethrown after both finished.
inline void run_two(const Kernel& k, const std::vector<const float*>& src,
                    std::vector<float*> dst) {
  ScratchBuffer scratch(k.scratch_bytes(), 2);
  KernelArgs a;
  a.src = src.data();
  a.dst = dst.data();
  const int64_t t = k.tiles(), h = t / 2;
  std::exception_ptr err[2];
  auto half = [&](int i, int64_t b, int64_t e) {
    try {
      k.run(scratch.with(a, i), b, e);
    } catch (...) {
      err[i] = std::current_exception();
    }
  };
  std::thread second(half, 1, h, t);
  half(0, 0, h);
  second.join();
  for (const std::exception_ptr& e : err)
    if (e) std::rethrow_exception(e);
}
inline void run_two(const Kernel& k, const std::vector<const float*>& src, float* dst) {
  run_two(k, src, std::vector<float*>{dst});
}

// Pad lanes (channels c.. of the last block) that are not 0 in a blocked buffer of block B
// holding [outer, c, inner] (outer images of c channels by inner pixels).
inline int nonzero_pad_lanes(const float* dst, int64_t B, int64_t outer, int64_t c, int64_t inner) {
  const int64_t blocks = (c + B - 1) / B;
  int bad = 0;
  for (int64_t n = 0; n < outer; ++n)
    for (int64_t ch = c; ch < blocks * B; ++ch)
      for (int64_t p = 0; p < inner; ++p)
        bad += dst[((n * blocks + ch / B) * inner + p) * B + ch % B] != 0.f;
  return bad;
}

// Runs the row kernel `k` (LayerNorm, Softmax) on x, the nchw tensor [outer, c, inner, 1], laid
// out in `l`; returns the output converted back to nchw, after checking that blocked pad lanes
// come out 0.
inline std::vector<float> run_in_layout(const Kernel& k, const std::vector<float>& x, Layout l,
                                        int64_t outer, int64_t c, int64_t inner) {
  const Shape nchw = {outer, c, inner, 1};
  GuardedBuf src{size_t(layout_elems(l, nchw))}, dst{size_t(layout_elems(l, nchw))};
  convert_layout(x.data(), Layout::nchw, src.data(), l, nchw);
  dst.fill(123.f);
  run_split(k, {src.data()}, {dst.data()});
  std::vector<float> got(x.size());
  convert_layout(dst.data(), l, got.data(), Layout::nchw, nchw);
  if (layout_block(l) > 1)
    CHECK(nonzero_pad_lanes(dst.data(), layout_block(l), outer, c, inner) == 0);
  return got;
}

}  // namespace kiln::test
