#include "runtime/profiler.h"

#include <immintrin.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>

#include "jit/glue/glue.h"
#include "runtime/arenas.h"
#include "runtime/glue_kernels.h"
#include "runtime/parallel_tiles.h"

namespace kiln {
namespace {

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
  return model_weight_bytes <= host_cpu().cache.l2 * std::max(1, threads);
}

Profiler::Profiler(int threads, ProfileBudget b) : threads_(std::max(1, threads)), budget_(b) {
  if (threads_ > 1) arena_ = &shared_arena(threads_);
}

Profiler::~Profiler() = default;

// Slot buffers are kept and reused between measurements (grown when needed): fresh pages
// cost microseconds each on these VMs, and a real run reads warm, already-touched memory.
float* Profiler::scratch(size_t slot, int64_t bytes) {
  if (slot >= bufs_.size()) bufs_.resize(slot + 1), sizes_.resize(slot + 1, 0);
  if (sizes_[slot] < bytes) {
    const size_t n = size_t(round_up(bytes, 64));
    const auto t0 = Clock::now();
    bufs_[slot].reset();  // before allocating its successor: at most one copy lives
    sizes_[slot] = 0;
    // Pages populated in one call (cheaper than a fault per page), then filled with small
    // finite values: kernels' timing must not depend on denormals or NaNs. One random block
    // repeated: drawing every float was most of the time of profiling a huge batch.
    std::shared_ptr<void> mem = alloc_zeroed(n);
    float* f = static_cast<float*>(mem.get());
    constexpr size_t kBlock = 4096;
    std::mt19937 rng(unsigned(slot) * 7919u + 1u);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    const size_t floats = n / 4, first = std::min(kBlock, floats);
    for (size_t i = 0; i < first; ++i) f[i] = d(rng);
    for (size_t i = first; i < floats; i += kBlock)
      std::memcpy(f + i, f, std::min(kBlock, floats - i) * 4);
    bufs_[slot] = std::static_pointer_cast<float>(mem);
    sizes_[slot] = int64_t(n);
    // The rate fresh memory comes at on this machine (big buffers only: small ones are noise).
    if (n >= (size_t(16) << 20)) fill_ms_per_byte_ = ms_since(t0) / double(n);
  }
  return bufs_[slot].get();
}

// The buffers time_kernel uses, in slot order: each operand with bytes, then the kernel's
// scratch (a slice per thread).
std::vector<int64_t> Profiler::slot_bytes(const Kernel& k, const std::vector<int64_t>& src_bytes,
                                          const std::vector<int64_t>& dst_bytes) const {
  std::vector<int64_t> slots;
  for (const auto* list : {&src_bytes, &dst_bytes})
    for (int64_t b : *list)
      if (b > 0) slots.push_back(b);
  if (k.scratch_bytes() > 0) slots.push_back(scratch_slices_bytes(k));
  return slots;
}

double Profiler::scratch_cost_ms(const Kernel& k, const std::vector<int64_t>& src_bytes,
                                 const std::vector<int64_t>& dst_bytes) const {
  double grow = 0;
  const std::vector<int64_t> slots = slot_bytes(k, src_bytes, dst_bytes);
  for (size_t slot = 0; slot < slots.size(); ++slot) {
    const int64_t have = slot < sizes_.size() ? sizes_[slot] : 0;
    if (slots[slot] > have) grow += double(slots[slot]);
  }
  return grow * fill_ms_per_byte_;
}

void Profiler::run_chunks(const Kernel& k, const KernelArgs& a, const std::vector<Chunk>& chunks) {
  const int64_t tiles = k.tiles();
  if (chunks.empty() && (!arena_ || tiles <= 1)) return k.run(a, 0, tiles);
  // Chunks laid end to end form one tile space, spread as the executor spreads a step's
  // tiles (so the timing is the one the run will see); a piece maps back chunk by chunk.
  int64_t n = tiles;
  if (!chunks.empty()) {
    n = 0;
    for (const Chunk& c : chunks) n += c.end - c.begin;
  }
  // a.scratch holds one slice per thread, as in the executor.
  const int64_t slice = round_up(k.scratch_bytes(), 64);
  auto piece = [&](int64_t b, int64_t e) {
    KernelArgs ta = a;
    if (slice) ta.scratch = static_cast<char*>(a.scratch) + arena_slot(threads_) * slice;
    if (chunks.empty()) return k.run(ta, b, e);
    int64_t at = 0;
    for (const Chunk& c : chunks) {
      const int64_t len = c.end - c.begin, lo = std::max(b, at), hi = std::min(e, at + len);
      if (lo < hi) k.run(ta, c.begin + (lo - at), c.begin + (hi - at));
      at += len;
    }
  };
  if (!arena_) return piece(0, n);
  arena_->execute([&] { parallel_tiles(n, arena_->max_concurrency(), piece); });
}

// Each thread of the arena rewrites its equal share of every span (one line at a time). The
// threads first wait for each other, so that each takes one share; the wait is bounded
// (kSplitWaitMs), after which one thread may rewrite several shares.
void Profiler::write_split(const std::vector<Kernel::Span>& spans) {
  constexpr double kSplitWaitMs = 5.0;
  auto rewrite = [&](int share, int n) {
    for (const Kernel::Span& s : spans) {
      volatile char* p = static_cast<volatile char*>(const_cast<void*>(s.p));
      const size_t lo = s.bytes * size_t(share) / size_t(n) / 64 * 64,
                   hi = s.bytes * size_t(share + 1) / size_t(n) / 64 * 64;
      for (size_t off = lo; off < hi; off += 64) p[off] = p[off];
    }
  };
  if (!arena_) return rewrite(0, 1);
  const int n = arena_->max_concurrency();
  std::atomic<int> arrived{0};
  arena_->execute([&] {
    parallel_tiles(n, n, [&](int64_t b, int64_t e) {
      for (int64_t share = b; share < e; ++share) {
        arrived.fetch_add(1);
        const auto t0 = Clock::now();
        while (arrived.load() < n && ms_since(t0) < kSplitWaitMs) _mm_pause();
        rewrite(int(share), n);
      }
    });
  });
}

double Profiler::time_once(const Kernel& k, const KernelArgs& a, const std::vector<Chunk>& chunks,
                           const std::vector<Kernel::Span>& evict_first) {
  if (!evict_first.empty()) evict(evict_first);
  if (inputs_ == Inputs::split) write_split(inputs_spans_);
  if (inputs_ == Inputs::cold) evict(inputs_spans_);
  const auto t0 = Clock::now();
  run_chunks(k, a, chunks);
  return ms_since(t0);
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
  inputs_spans_.clear();
  for (size_t i = 0; i < src.size(); ++i)
    if (src_bytes[i] > 0) inputs_spans_.push_back({src[i], size_t(src_bytes[i])});
  if (k.scratch_bytes() > 0) a.scratch = scratch(slot++, scratch_slices_bytes(k));
  const std::vector<Kernel::Span> spans = cold_weights_ ? k.weights() : std::vector<Kernel::Span>();

  // Probe: a few tiles spread over the tile space (after one unmeasured probe: the first
  // call pays for waking the workers and first touches), growing fourfold until their time is
  // more than the call's fixed cost (1 ms). When the whole kernel would take longer than a
  // measurement may, time an even sample of chunks of its tiles instead and scale by tiles /
  // sampled (a huge batch: tens of seconds per run under the sanitizers).
  const int64_t tiles = k.tiles();
  std::vector<Chunk> sample;
  double scale = 1;
  last_sampled_ = false;
  auto spread = [tiles](int64_t parts, int64_t len) {
    std::vector<Chunk> c;
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t at = (tiles - len) * p / std::max<int64_t>(1, parts - 1);
      c.push_back({at, at + len});
    }
    return c;
  };
  if (tiles >= kMinSampledTiles * int64_t(threads_)) {
    time_once(k, a, spread(threads_, 1), {});
    for (int64_t m = threads_;; m *= 4) {
      const double t = time_once(k, a, spread(threads_, m / threads_), {});
      const double whole = t * double(tiles) / double(m);
      if (whole <= budget_.max_ms) break;
      if (t < 1.0 && m * 4 <= tiles / 8) continue;
      const int64_t want =
          std::clamp<int64_t>(int64_t(double(tiles) * budget_.sample_ms / whole), threads_, tiles);
      // Eight chunks (fewer when the sample is smaller) evenly placed: edges and middle alike.
      const int64_t parts = std::min<int64_t>(8, want), len = want / parts;
      sample = spread(parts, len);
      scale = double(tiles) / double(len * parts);
      last_sampled_ = true;
      ++sampled_;
      break;
    }
  }

  const double first = time_once(k, a, sample, {});  // warm-up: caches, page faults, scratch
  const auto start = Clock::now();
  auto median = [](std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // Repeats up to max_reps (at least min_reps, then until max_ms is spent), each after
  // evicting `evict_first`; a very slow kernel once, and none past the deadline (the warm-up
  // stands for it then).
  auto repeat = [&](const std::vector<Kernel::Span>& evict_first) {
    std::vector<double> t;
    const int reps = Clock::now() >= deadline_ ? 0 : first > budget_.max_ms ? 1 : budget_.max_reps;
    for (int r = 0; r < reps; ++r) {
      t.push_back(time_once(k, a, sample, evict_first));
      const double spent = ms_since(start);
      if (int(t.size()) >= budget_.min_reps && spent > budget_.max_ms) break;
      if (Clock::now() >= deadline_) break;
    }
    if (t.empty()) t.push_back(first);
    return median(t);
  };
  if (!last_sampled_) return repeat(spans);
  // A run reads its cold weights once, not once per sample: the sample's time with the
  // weights cached, scaled up, plus what evicting them costs it.
  const double warm = repeat({});
  if (spans.empty()) return warm * scale;
  return warm * scale + std::max(0.0, repeat(spans) - warm);
}

std::unique_ptr<Kernel> Profiler::reorder_kernel(const Shape& s, Layout from, Layout to, Isa isa) {
  std::string why;
  std::unique_ptr<Kernel> k;
  // (A uint8 side's time does not depend on the value's grid: timed with scale 1, zero 0.)
  const U8Quant unit;
  if (isa != Isa::scalar) k = create_reorder_kernel(s, from, to, isa, &why, &unit);
  if (!k) k = make_reorder_kernel(s, from, to, &unit);
  return k;
}

}  // namespace kiln
