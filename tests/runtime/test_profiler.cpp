// The profiler's cold-weight timing: every conv family and FC reports its packed weights, the
// profiler evicts them before each timed run without changing results, and the cold/warm
// guess follows the model's weight bytes against the caches.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "isa_coverage.h"
#include "jit/conv/conv_kernel.h"
#include "jit/gemm/fc_kernel.h"
#include "runtime/profiler.h"

namespace {

kiln::Tensor random_tensor(const kiln::Shape& s, unsigned seed) {
  kiln::Tensor t(kiln::DType::f32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

std::vector<kiln::Isa> isas() {
  return kiln::testing::jit_isas();
}

// Bytes of the spans, checking each lies in readable memory (the first and last byte).
size_t span_bytes(const kiln::Kernel& k) {
  size_t total = 0;
  for (const kiln::Kernel::Span& s : k.weights()) {
    REQUIRE(s.p != nullptr);
    REQUIRE(s.bytes > 0);
    volatile char a = static_cast<const char*>(s.p)[0],
                  b = static_cast<const char*>(s.p)[s.bytes - 1];
    (void)a, (void)b;
    total += s.bytes;
  }
  return total;
}

}  // namespace

TEST_CASE("profiler: every conv family and FC reports its packed weights; cold timing runs") {
  using kiln::ConvFamily;
  for (kiln::Isa isa : isas()) {
    CAPTURE(kiln::isa_name(isa));
    const kiln::Layout blocked =
        isa == kiln::Isa::avx512 ? kiln::Layout::nChw16c : kiln::Layout::nChw8c;
    struct Case {
      ConvFamily family;
      int64_t k;
      kiln::Layout layout;
    };
    for (Case c : {Case{ConvFamily::direct, 3, blocked}, Case{ConvFamily::gemm1x1, 1, blocked},
                   Case{ConvFamily::gemm1x1, 1, kiln::Layout::nhwc},
                   Case{ConvFamily::winograd2, 3, blocked}, Case{ConvFamily::winograd4, 3, blocked},
                   Case{ConvFamily::im2col, 3, kiln::Layout::nhwc}}) {
      CAPTURE(int(c.family));
      kiln::ConvProblem p;
      p.ic = 64, p.oc = 96, p.ih = p.iw = p.oh = p.ow = 14;
      p.kh = p.kw = c.k;
      p.pt = p.pl = p.pb = p.pr = c.k / 2;
      kiln::ConvImpl impl;
      impl.family = c.family;
      impl.src = impl.dst = c.layout;
      kiln::Tensor w = random_tensor({p.oc, p.ic, p.kh, p.kw}, 7);
      std::string why;
      auto k = kiln::create_conv_kernel(p, impl, isa, w, nullptr, &why);
      REQUIRE_MESSAGE(k, why);
      // At least the weights themselves (Winograd stores transformed, larger tiles).
      CHECK(span_bytes(*k) >= size_t(w.nbytes()));
      const int64_t in = int64_t(kiln::layout_elems(c.layout, {1, p.ic, p.ih, p.iw})) * 4,
                    out = int64_t(kiln::layout_elems(c.layout, {1, p.oc, p.oh, p.ow})) * 4;
      for (int threads : {1, 2}) {
        kiln::Profiler prof(threads);
        prof.set_cold_weights(true);
        const double ms = prof.time_kernel(*k, {in, 0}, {}, {out});
        CHECK(std::isfinite(ms));
        CHECK(ms > 0);
      }
    }
    kiln::FcProblem fp;
    fp.m = 1, fp.k = 512, fp.n = 100;
    kiln::Tensor fw = random_tensor({fp.k, fp.n}, 3);
    std::string why;
    auto fc = kiln::create_fc_kernel(fp, isa, fw, false, 1.f, nullptr, &why);
    REQUIRE_MESSAGE(fc, why);
    CHECK(span_bytes(*fc) >= size_t(fw.nbytes()));
  }
}

TEST_CASE("profiler: evicting the weights leaves the kernel's results unchanged") {
  kiln::ConvProblem p;
  p.ic = 32, p.oc = 48, p.ih = p.iw = p.oh = p.ow = 9;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  kiln::ConvImpl impl;
  impl.family = kiln::ConvFamily::im2col;
  impl.src = impl.dst = kiln::Layout::nhwc;
  kiln::Tensor w = random_tensor({p.oc, p.ic, 3, 3}, 11);
  std::string why;
  auto k = kiln::create_conv_kernel(p, impl, kiln::detect_isa(), w, nullptr, &why);
  REQUIRE_MESSAGE(k, why);
  kiln::Tensor x = random_tensor({1, p.ih, p.iw, p.ic}, 5);
  kiln::Tensor y0(kiln::DType::f32, {1, p.oh, p.ow, p.oc}), y1 = y0.clone();
  const float* src[1] = {x.data<float>()};
  float* d0[1] = {y0.data<float>()};
  float* d1[1] = {y1.data<float>()};
  k->run_all({src, d0});
  // What the profiler does before a timed run, then the same computation again.
  for (const kiln::Kernel::Span& s : k->weights())
    for (size_t off = 0; off < s.bytes; off += 64)
      __builtin_ia32_clflush(static_cast<const char*>(s.p) + off);
  k->run_all({src, d1});
  CHECK(std::memcmp(y0.raw(), y1.raw(), y0.nbytes()) == 0);
}

TEST_CASE("profiler: weights are cold once the model's weights outgrow the cores' caches") {
  CHECK(kiln::weights_stay_cached(64 << 10, 1));
  CHECK_FALSE(kiln::weights_stay_cached(int64_t(1) << 40, 1));
  CHECK_FALSE(kiln::weights_stay_cached(int64_t(1) << 40, 2));
  // More cores hold more: a size between one and two cores' caches flips.
  for (int64_t b = 1 << 20; b < (int64_t(1) << 34); b *= 2)
    if (!kiln::weights_stay_cached(b, 1)) {
      CHECK(kiln::weights_stay_cached(b, 64));
      break;
    }
}

namespace {

// A kernel that records which tiles ran and busy-waits `us` per tile (no data touched).
class CountingKernel : public kiln::Kernel {
 public:
  CountingKernel(int64_t tiles, double us) : tiles_(tiles), us_(us), runs_(size_t(tiles)) {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_; }
  void run(const kiln::KernelArgs&, int64_t b, int64_t e) const override {
    for (int64_t t = b; t < e; ++t) {
      REQUIRE(t >= 0);
      REQUIRE(t < tiles_);
      runs_[size_t(t)]++;
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::nanoseconds(int64_t(us_ * 1e3));
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }
  std::vector<int> counts() const {
    std::vector<int> c;
    for (const auto& r : runs_) c.push_back(r.load());
    return c;
  }

 private:
  std::string name_ = "counting";
  int64_t tiles_;
  double us_;
  mutable std::vector<std::atomic<int>> runs_;
};

}  // namespace

TEST_CASE("profiler: a kernel too big to run whole is timed on an even sample of its tiles") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    // 4000 tiles of 50 us: 200 ms per thread, beyond the 40 ms a measurement may take.
    constexpr int64_t kTiles = 4000;
    CountingKernel big(kTiles, 50);
    kiln::Profiler prof(threads);
    const double ms = prof.time_kernel(big, {}, {}, {});
    CHECK(prof.last_sampled());
    CHECK(prof.sampled() == 1);
    // Every tile waits 50 us, so the scaled-up sample can be no faster than the whole kernel
    // on `threads` perfectly shared threads.
    CHECK(ms >= 0.9 * kTiles * 0.050 / threads);
    const std::vector<int> c = big.counts();
    int64_t ran = 0, lo = kTiles, hi = -1;
    for (int64_t t = 0; t < kTiles; ++t)
      if (c[size_t(t)]) ++ran, lo = std::min(lo, t), hi = std::max(hi, t);
    CHECK(ran > 0);
    CHECK(ran < kTiles / 4);  // a sample, not the whole
    // Spread from the start to the end of the tile space, every sampled tile run alike.
    CHECK(lo == 0);
    CHECK(hi == kTiles - 1);

    // A small kernel runs whole: every tile at least once per timed run.
    CountingKernel small(kTiles, 0);
    kiln::Profiler p2(threads);
    CHECK(std::isfinite(p2.time_kernel(small, {}, {}, {})));
    CHECK_FALSE(p2.last_sampled());
    CHECK(p2.sampled() == 0);
    for (int x : small.counts()) CHECK(x >= 1 + 3);  // warm-up and at least min_reps
  }
}

TEST_CASE("profiler: past the deadline a measurement stops at its warm-up run") {
  CountingKernel k(8, 1000);  // too few tiles to sample: 8 ms per whole run at 1 thread
  kiln::Profiler prof(1);
  prof.set_deadline(kiln::Clock::now());
  CHECK(prof.time_kernel(k, {}, {}, {}) >= 8 * 0.9);
  for (int c : k.counts()) CHECK(c == 1);  // the warm-up only
  CountingKernel k2(8, 10);
  kiln::Profiler unbounded(1);
  unbounded.time_kernel(k2, {}, {}, {});
  for (int c : k2.counts()) CHECK(c >= 1 + 3);  // warm-up and at least min_reps
}
