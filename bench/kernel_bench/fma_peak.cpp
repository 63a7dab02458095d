#include "fma_peak.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "jit/jit_generator.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// for (i = count; i; --i) { kUnroll x (chains independent FMAs) }, chains >= FMA latency (4)
// x 2 pipes, so the loop is throughput-bound.
class FmaLoop : public JitGenerator {
 public:
  static constexpr int kUnroll = 8;
  FmaLoop(Isa isa, int chains)
      : JitGenerator(std::string("fma_peak") + std::to_string(chains) + "__" + isa_name(isa)),
        isa_(isa),
        chains_(chains) {
    create();
  }
  double flops_per_iter() const { return 2.0 * simd_width(isa_) * chains_ * kUnroll; }
  // GFLOP/s of one run of `iters` iterations.
  double run(int64_t iters) const {
    auto t0 = Clock::now();
    fn<void (*)(int64_t)>()(iters);
    return flops_per_iter() * double(iters) / seconds_since(t0) / 1e9;
  }
  // Iterations lasting about `seconds`.
  int64_t calibrate(double seconds) const {
    int64_t iters = 1 << 8;
    for (;;) {
      auto t0 = Clock::now();
      fn<void (*)(int64_t)>()(iters);
      const double s = seconds_since(t0);
      if (s > seconds / 4) return std::max<int64_t>(1, int64_t(double(iters) * seconds / s));
      iters *= 4;
    }
  }

 protected:
  void generate() override {
    using namespace Xbyak;
    const int a = chains_, b = chains_ + 1;
    auto v = [&](int i) -> Xmm { return isa_ == Isa::avx512 ? Xmm(Zmm(i)) : Xmm(Ymm(i)); };
    for (int i = 0; i < chains_ + 2; ++i) vxorps(v(i), v(i), v(i));
    Label loop;
    L(loop);
    for (int u = 0; u < kUnroll; ++u)
      for (int i = 0; i < chains_; ++i) vfmadd231ps(v(i), v(a), v(b));
    dec(abi_param1);
    jnz(loop, T_NEAR);
    vzeroupper();
    ret();
  }

 private:
  Isa isa_;
  int chains_;
};

int default_chains(Isa isa) {
  return isa == Isa::avx512 ? 24 : 12;
}

}  // namespace

double measure_fma_peak(Isa isa, int runs, double seconds) {
  // Several chain counts, all >= latency x pipes: the best is the peak.
  double best = 0;
  const std::vector<int> chains =
      isa == Isa::avx512 ? std::vector<int>{16, 24, 30} : std::vector<int>{8, 12, 14};
  for (int c : chains) {
    FmaLoop loop(isa, c);
    const int64_t iters = loop.calibrate(seconds);
    for (int r = 0; r < runs; ++r) best = std::max(best, loop.run(iters));
  }
  return best;
}

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct FmaProbe::Impl {
  explicit Impl(Isa isa) : loop(isa, default_chains(isa)), iters(loop.calibrate(50e-6)) {}
  FmaLoop loop;
  int64_t iters;
};

FmaProbe::FmaProbe(Isa isa) : impl_(std::make_unique<Impl>(isa)) {}
FmaProbe::~FmaProbe() = default;
double FmaProbe::gflops() const {
  return impl_->loop.run(impl_->iters);
}

namespace {

// Sums n floats (n a multiple of 128) with 8 independent 256-bit accumulators (AVX2, so the
// probe runs on either path).
class ReadLoop : public JitGenerator {
 public:
  ReadLoop() : JitGenerator("l2_probe") { create(); }

 protected:
  void generate() override {
    using namespace Xbyak;
    for (int i = 0; i < 8; ++i) vxorps(Ymm(i), Ymm(i), Ymm(i));
    Label loop;
    L(loop);
    for (int i = 0; i < 16; ++i) vaddps(Ymm(i % 8), Ymm(i % 8), ptr[rdi + 32 * i]);
    add(rdi, 512);
    sub(rsi, 128);
    jnz(loop, T_NEAR);
    vzeroupper();
    ret();
  }
};

}  // namespace

struct L2Probe::Impl {
  ReadLoop loop;
  std::vector<float> buf = std::vector<float>(192 * 1024, 1.f);
};

L2Probe::L2Probe() : impl_(std::make_unique<Impl>()) {
  baseline_ = 1e9;
  for (int i = 0; i < 300; ++i) baseline_ = std::min(baseline_, seconds());
}
L2Probe::~L2Probe() = default;

double L2Probe::seconds() const {
  auto fn = impl_->loop.fn<void (*)(const float*, int64_t)>();
  const double t0 = thread_seconds();
  fn(impl_->buf.data(), int64_t(impl_->buf.size()));
  return thread_seconds() - t0;
}

namespace {

struct CopyArgs {
  const float* src;
  float* dst;
  int64_t blocks;  // 256-byte blocks
};

class CopyLoop : public JitGenerator {
 public:
  explicit CopyLoop(Isa isa)
      : JitGenerator(std::string("stream_copy__") + isa_name(isa)), isa_(isa) {
    create();
  }

 protected:
  void generate() override {
    using namespace Xbyak;
    const int w = isa_ == Isa::avx512 ? 64 : 32;
    auto v = [&](int i) -> Xmm { return isa_ == Isa::avx512 ? Xmm(Zmm(i)) : Xmm(Ymm(i)); };
    Label loop, done;
    mov(rsi, ptr[rdi + offsetof(CopyArgs, src)]);
    mov(rdx, ptr[rdi + offsetof(CopyArgs, dst)]);
    mov(rcx, ptr[rdi + offsetof(CopyArgs, blocks)]);
    test(rcx, rcx);
    jz(done, T_NEAR);
    L(loop);
    for (int i = 0; i < 256 / w; ++i) vmovups(v(i), ptr[rsi + i * w]);
    for (int i = 0; i < 256 / w; ++i) vmovups(ptr[rdx + i * w], v(i));
    add(rsi, 256);
    add(rdx, 256);
    dec(rcx);
    jnz(loop, T_NEAR);
    L(done);
    vzeroupper();
    ret();
  }

 private:
  Isa isa_;
};

}  // namespace

double measure_copy_gbs(Isa isa, size_t bytes, int reps, double* best) {
  CopyLoop k(isa);
  bytes = std::max<size_t>(bytes / 256, 1) * 256;
  std::vector<float> a(bytes / 4, 1.f), b(bytes / 4, 0.f);
  CopyArgs args{a.data(), b.data(), int64_t(bytes / 256)};
  auto fn = k.fn<void (*)(const CopyArgs*)>();
  fn(&args);
  std::vector<double> gbs;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto t0 = Clock::now();
    fn(&args);
    gbs.push_back(2.0 * double(bytes) / seconds_since(t0) * 1e-9);
  }
  std::sort(gbs.begin(), gbs.end());
  if (best) *best = gbs.back();
  return gbs[gbs.size() / 2];
}

}  // namespace kiln::bench
