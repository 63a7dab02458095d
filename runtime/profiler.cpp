#include "runtime/profiler.h"

#include <immintrin.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "jit/glue/glue.h"
#include "runtime/glue_kernels.h"
#include "runtime/parallel_tiles.h"

namespace kiln {
namespace {
using Clock = std::chrono::steady_clock;

// Writes back and invalidates every cache line of the spans, then waits for that to finish.
void evict(const std::vector<Kernel::Span>& spans) {
  for (const Kernel::Span& s : spans) {
    const char* p = static_cast<const char*>(s.p);
    for (size_t off = 0; off < s.bytes; off += 64) _mm_clflush(p + off);
  }
  _mm_mfence();
}
}  // namespace

bool weights_stay_cached(int64_t model_weight_bytes, int threads) {
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 <= 0) l2 = 1 << 20;
  return model_weight_bytes <= int64_t(l2) * std::max(1, threads);
}

Profiler::Profiler(int threads, ProfileBudget b) : threads_(std::max(1, threads)), budget_(b) {
  if (threads_ > 1) arena_ = std::make_unique<tbb::task_arena>(threads_);
}

Profiler::~Profiler() = default;

// Slot buffers are kept and reused between measurements (grown when needed): fresh pages
// cost microseconds each on these VMs, and a real run reads warm, already-touched memory.
float* Profiler::scratch(size_t slot, int64_t bytes) {
  if (slot >= bufs_.size()) bufs_.resize(slot + 1), sizes_.resize(slot + 1, 0);
  if (sizes_[slot] < bytes) {
    const size_t n = size_t(round_up(bytes, 64));
    void* mem = std::aligned_alloc(64, n);
    if (!mem)
      fail(Code::out_of_memory, "profiler: cannot allocate " + std::to_string(n) + " bytes");
    // Small finite values: kernels' timing must not depend on denormals or NaNs. One random
    // block repeated: drawing every float was most of the time of profiling a huge batch.
    float* f = static_cast<float*>(mem);
    constexpr size_t kBlock = 4096;
    std::mt19937 rng(unsigned(slot) * 7919u + 1u);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    const size_t floats = n / 4, first = std::min(kBlock, floats);
    for (size_t i = 0; i < first; ++i) f[i] = d(rng);
    for (size_t i = first; i < floats; i += kBlock)
      std::memcpy(f + i, f, std::min(kBlock, floats - i) * 4);
    bufs_[slot] = std::shared_ptr<float>(f, [](float* q) { std::free(q); });
    sizes_[slot] = int64_t(n);
  }
  return bufs_[slot].get();
}

void Profiler::run(const Kernel& k, const KernelArgs& a) {
  const int64_t tiles = k.tiles();
  if (!arena_ || tiles <= 1) return k.run(a, 0, tiles);
  // Spread as the executor spreads them, so the timing is the one the run will see.
  arena_->execute([&] {
    parallel_tiles(tiles, arena_->max_concurrency(), [&](int64_t b, int64_t e) { k.run(a, b, e); });
  });
}

double Profiler::time_kernel(const Kernel& k, const std::vector<int64_t>& src_bytes,
                             const std::vector<const void*>& consts,
                             const std::vector<int64_t>& dst_bytes) {
  std::vector<const float*> src(src_bytes.size(), nullptr);
  std::vector<float*> dst(dst_bytes.size(), nullptr);
  size_t slot = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src_bytes[i] > 0)
      src[i] = scratch(slot++, src_bytes[i]);
    else if (i < consts.size())
      src[i] = static_cast<const float*>(consts[i]);
  }
  for (size_t i = 0; i < dst.size(); ++i)
    if (dst_bytes[i] > 0) dst[i] = scratch(slot++, dst_bytes[i]);
  KernelArgs a{src.data(), dst.data()};
  auto t0 = Clock::now();
  run(k, a);  // warm-up: caches, page faults, lazily grown per-thread scratch
  double first = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::vector<double> t;
  const auto start = Clock::now();
  // A very slow kernel is measured once more, not max_reps times.
  const int reps = first > budget_.max_ms ? 1 : budget_.max_reps;
  const std::vector<Kernel::Span> spans = cold_weights_ ? k.weights() : std::vector<Kernel::Span>();
  for (int r = 0; r < reps; ++r) {
    if (!spans.empty()) evict(spans);
    auto b = Clock::now();
    run(k, a);
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - b).count());
    const double spent = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (int(t.size()) >= budget_.min_reps && spent > budget_.max_ms) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double Profiler::time_reorder(const Shape& s, Layout from, Layout to, Isa isa) {
  std::string why;
  std::unique_ptr<Kernel> k;
  if (isa != Isa::scalar) k = create_reorder_kernel(s, from, to, isa, &why);
  if (!k) k = make_reorder_kernel(s, from, to);
  return time_kernel(*k, {layout_elems(from, s) * 4}, {}, {layout_elems(to, s) * 4});
}

}  // namespace kiln
