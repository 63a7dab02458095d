// Single-core FP32 FMA peak (context for the depthwise GFLOP/s): a JIT loop of 12
// independent vfmadd231ps chains, enough to cover 2 pipes x 4-cycle latency.
#include <algorithm>
#include <chrono>

#include "jit/cpu.h"
#include "jit/jit_generator.h"

namespace kiln::bench {
namespace {

class FmaLoop : public JitGenerator {
 public:
  explicit FmaLoop(Isa isa) : JitGenerator(std::string("fma_peak__") + isa_name(isa)), isa_(isa) {}

 protected:
  void generate() override {
    using namespace Xbyak;
    Label loop;
    for (int i = 0; i < 14; ++i) {
      if (isa_ == Isa::avx512)
        vxorps(Zmm(i), Zmm(i), Zmm(i));
      else
        vxorps(Ymm(i), Ymm(i), Ymm(i));
    }
    L(loop);
    for (int i = 0; i < 12; ++i) {
      if (isa_ == Isa::avx512)
        vfmadd231ps(Zmm(i), Zmm(12), Zmm(13));
      else
        vfmadd231ps(Ymm(i), Ymm(12), Ymm(13));
    }
    dec(rdi);
    jnz(loop);
    vzeroupper();
    ret();
  }

 private:
  Isa isa_;
};

}  // namespace

// GFLOP/s of the fastest of `runs` runs of ~1 ms each.
double measure_fma_gflops(Isa isa, int runs) {
  FmaLoop k(isa);
  k.create();
  auto fn = k.fn<void (*)(int64_t)>();
  const int64_t iters = 200000;
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn(iters);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(iters) * 12 * simd_width(isa) * 2 / s * 1e-9);
  }
  return best;
}

}  // namespace kiln::bench
