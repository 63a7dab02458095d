#include "fma_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "jit/jit_generator.h"

namespace kiln::bench {
namespace {

// for (i = count; i; --i) { kUnroll x (kChains independent FMAs) }. kChains covers FMA
// latency (4) x 2 pipes several times over, so the loop is throughput-bound.
class FmaLoop : public JitGenerator {
 public:
  static constexpr int kUnroll = 8;
  FmaLoop(Isa isa, int chains)
      : JitGenerator(std::string("fma_peak__") + isa_name(isa)), isa_(isa), chains_(chains) {}

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

// Best GFLOP/s of one loop shape.
double measure_chains(Isa isa, int chains, int runs, double seconds) {
  FmaLoop gen(isa, chains);
  gen.create();
  auto fn = gen.fn<void (*)(int64_t)>();
  const double flops_per_iter = 2.0 * simd_width(isa) * chains * FmaLoop::kUnroll;
  using clock = std::chrono::steady_clock;
  // Calibrate the iteration count to ~`seconds`.
  int64_t iters = 1 << 8;
  for (;;) {
    auto t0 = clock::now();
    fn(iters);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (s > seconds / 4) {
      iters = std::max<int64_t>(1, int64_t(double(iters) * seconds / s));
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    auto t0 = clock::now();
    fn(iters);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, flops_per_iter * double(iters) / s / 1e9);
  }
  return best;
}

}  // namespace

double measure_fma_peak(Isa isa, int runs, double seconds) {
  // Several chain counts, all >= latency (4) x pipes (2): the best is the peak.
  double best = 0;
  const std::vector<int> chains =
      isa == Isa::avx512 ? std::vector<int>{16, 24, 30} : std::vector<int>{8, 12, 14};
  for (int c : chains) best = std::max(best, measure_chains(isa, c, runs, seconds));
  return best;
}

}  // namespace kiln::bench
