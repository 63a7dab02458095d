// Single-core copy bandwidth (STREAM "copy": read one buffer, write another; bytes counted
// = read + write, as STREAM does) with a JIT loop of full-width vector loads and ordinary
// (write-allocate) stores — the same kind of stores the depthwise kernels issue.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/jit_generator.h"

namespace kiln::bench {
namespace {

struct CopyArgs {
  const float* src;
  float* dst;
  int64_t blocks;  // 256-byte blocks
};

class CopyKernel : public JitGenerator {
 public:
  explicit CopyKernel(Isa isa)
      : JitGenerator(std::string("stream_copy__") + isa_name(isa)), isa_(isa) {}

 protected:
  void generate() override {
    using namespace Xbyak;
    const int w = isa_ == Isa::avx512 ? 64 : 32;
    Label loop, done;
    mov(rsi, ptr[rdi + offsetof(CopyArgs, src)]);
    mov(rdx, ptr[rdi + offsetof(CopyArgs, dst)]);
    mov(rcx, ptr[rdi + offsetof(CopyArgs, blocks)]);
    test(rcx, rcx);
    jz(done, T_NEAR);
    L(loop);
    for (int i = 0; i < 256 / w; ++i) {
      if (isa_ == Isa::avx512)
        vmovups(Zmm(i), ptr[rsi + i * w]);
      else
        vmovups(Ymm(i), ptr[rsi + i * w]);
    }
    for (int i = 0; i < 256 / w; ++i) {
      if (isa_ == Isa::avx512)
        vmovups(ptr[rdx + i * w], Zmm(i));
      else
        vmovups(ptr[rdx + i * w], Ymm(i));
    }
    add(rsi, 256);
    add(rdx, 256);
    dec(rcx);
    jnz(loop);
    L(done);
    vzeroupper();
    ret();
  }

 private:
  Isa isa_;
};

}  // namespace

// GB/s (read + write bytes) of copying `bytes` from one buffer to another: median of `reps`
// timed copies after one warm-up copy. `best` receives the fastest copy's GB/s.
double measure_copy_gbs(Isa isa, size_t bytes, int reps, double* best) {
  CopyKernel k(isa);
  k.create();
  bytes = bytes / 256 * 256;
  Tensor a(DType::f32, {int64_t(bytes / 4)}), b(DType::f32, {int64_t(bytes / 4)});
  std::fill(a.data<float>(), a.data<float>() + bytes / 4, 1.f);
  CopyArgs args{a.data<float>(), b.data<float>(), int64_t(bytes / 256)};
  auto fn = k.fn<void (*)(const CopyArgs*)>();
  fn(&args);
  std::vector<double> gbs;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn(&args);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbs.push_back(2.0 * double(bytes) / s * 1e-9);
  }
  std::sort(gbs.begin(), gbs.end());
  if (best) *best = gbs.back();
  return gbs[gbs.size() / 2];
}

}  // namespace kiln::bench
