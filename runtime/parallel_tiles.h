// How a step's tiles are spread over the session's threads (executor and profiler alike).
//
// Each thread owns an equal contiguous share (the locality of a static split: a thread keeps
// to its oc groups or rows) and works through it in shrinking chunks; a thread done with its
// own share takes chunks from the fronts of the others'. A static split alone left threads
// idle: a worker reaches each step later than the caller, and tiles of equal count are not
// of equal time. Here the early thread does more.
#pragma once

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "graph/error.h"

namespace kiln {

// The calling thread's slot among the `threads` slots of the task arena it runs tiles in: no
// other thread in that arena holds it at the same time, and a thread runs one piece of one
// step at a time, so it names the thread's slice of per-thread scratch. One thread: no arena,
// slot 0.
inline int arena_slot(int threads) {
  if (threads <= 1) return 0;
  const int slot = tbb::this_task_arena::current_thread_index();
  if (slot < 0 || slot >= threads)
    fail(Code::internal, "a kernel ran outside its task arena (slot " + std::to_string(slot) +
                             " of " + std::to_string(threads) + ")");
  return slot;
}

// piece(begin, end) runs tiles [begin, end); called concurrently from up to `threads` threads
// of the current task arena. Returns when every tile has run; rethrows what a piece threw.
template <class F>
void parallel_tiles(int64_t tiles, int threads, F&& piece) {
  if (threads <= 1 || tiles <= 1) {
    if (tiles > 0) piece(int64_t(0), tiles);
    return;
  }
  const int n = int(std::min<int64_t>(threads, tiles));
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  // Runs once per plan step: the usual few shares live on the stack.
  constexpr int kLocal = 8;
  Share local[kLocal];
  std::unique_ptr<Share[]> heap(n > kLocal ? new Share[size_t(n)] : nullptr);
  Share* sh = heap ? heap.get() : local;
  for (int i = 0; i < n; ++i) {
    sh[size_t(i)].next.store(tiles * i / n, std::memory_order_relaxed);
    sh[size_t(i)].end = tiles * (i + 1) / n;
  }
  auto work = [&](int me) {
    for (int k = 0; k < n; ++k) {
      Share& s = sh[size_t((me + k) % n)];
      // Guided: a quarter of what is left in the share, so calls start long and the last
      // ones are single tiles (a thread finishing early waits at most one short call).
      int64_t b = s.next.load(std::memory_order_relaxed);
      while (b < s.end) {
        const int64_t take = std::max<int64_t>(1, (s.end - b) / 4);
        if (s.next.compare_exchange_weak(b, b + take, std::memory_order_relaxed)) {
          piece(b, b + take);
          b = s.next.load(std::memory_order_relaxed);
        }
      }
    }
  };
  // One task per other share and this thread's own inline; any thread may run any share, so
  // a worker that starts late only finds less left. (Not parallel_for with a static
  // partitioner: in oneTBB 2021.8 its proxy tasks kept ~100 bytes per call, growing without
  // bound in a long-running host.)
  tbb::task_group tg;
  for (int i = 1; i < n; ++i) tg.run([&work, i] { work(i); });
  work(0);
  tg.wait();
}

}  // namespace kiln
