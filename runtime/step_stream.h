// Runs a plan's steps in order on several threads without a fork/join per step.
//
// parallel_tiles (a task fork and join per step) pays a task hand-off and a join at every step
// boundary, tens of times per run (bench/NOTES.md, "Figures behind rules in the code"). Here each
// thread calls participate() once per run and walks the steps itself: it takes tiles of step i (its
// own share first, then the others', in shrinking chunks as parallel_tiles does), and once step i
// has no tiles left to take it moves on to step i + 1, spinning first until the steps i + 1
// depends on are done — the only wait at a boundary is for real work, and a thread with nothing
// left of a narrow step runs ahead into the next one where that does not read it (an Inception
// module's branches overlap, as in a flow graph, without a task per step).
//
// Nothing waits for a participant that has not arrived: any one of them can run every tile, so
// a worker that joins late (or never: the caller runs it inline at the end) only takes what is
// left. The step counters are reset for each run by the one thread that owns the run.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class StepStream {
 public:
  // tiles[i]: tile count of step i; threads: participants (their `me` is 0 .. threads - 1).
  // deps (set before reset; not owned, must outlive the stream): (*deps)[i] lists the earlier
  // steps step i must wait for (Plan::Step::deps: producers and steps touching bytes it
  // reuses); without it, each step waits for the one before.
  void set_deps(const std::vector<std::vector<int>>* deps) { deps_ = deps; }
  void reset(const std::vector<int64_t>& tiles, int threads) {
    const size_t n = tiles.size();
    if (!steps_ || n_steps_ != n || threads_ != threads) {
      steps_ = std::make_unique<Step[]>(n);
      shares_ = std::make_unique<Share[]>(n * size_t(threads));
    }
    threads_ = threads;
    n_steps_ = n;
    for (size_t i = 0; i < n; ++i) {
      const int m = int(std::clamp<int64_t>(tiles[i], 1, threads));
      steps_[i].shares = m;
      steps_[i].remaining.store(tiles[i], std::memory_order_relaxed);
      for (int k = 0; k < m; ++k) {
        Share& s = shares_[i * size_t(threads) + size_t(k)];
        s.next.store(tiles[i] * k / m, std::memory_order_relaxed);
        s.end = tiles[i] * (k + 1) / m;
      }
    }
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
  }

  // Runs tiles until every step is done (or one failed). piece(step, begin, end) runs tiles
  // [begin, end) of a step; done(step) is called once per step, by the thread that finished it.
  template <class Piece, class Done>
  void participate(int me, Piece&& piece, Done&& done) {
    for (size_t i = 0; i < n_steps_; ++i) {
      Step& st = steps_[i];
      // The steps this one reads (or whose bytes it reuses) may still be running on others.
      if (deps_ && i < deps_->size()) {
        for (int d : (*deps_)[i]) wait_done(size_t(d));
      } else if (i > 0) {
        wait_done(i - 1);
      }
      if (failed()) return;
      const int m = st.shares;
      for (int k = 0; k < m && !failed(); ++k) {
        Share& s = shares_[i * size_t(threads_) + size_t((me + k) % m)];
        int64_t b = s.next.load(std::memory_order_relaxed);
        while (b < s.end) {
          const int64_t take = std::max<int64_t>(1, (s.end - b) / 4);
          if (!s.next.compare_exchange_weak(b, b + take, std::memory_order_relaxed)) continue;
          if (!failed()) {
            try {
              piece(i, b, b + take);
            } catch (...) {
              fail(std::current_exception());
            }
          }
          // Release: the step's outputs are visible to whoever sees `remaining` reach zero.
          if (st.remaining.fetch_sub(take, std::memory_order_acq_rel) == take) done(i);
          b = s.next.load(std::memory_order_relaxed);
        }
      }
    }
  }

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Spins until every tile of step i has finished (or the run failed). Tiles others took may
  // still be running; nobody running a tile waits for anything, so this ends.
  void wait_done(size_t i) const {
    for (int spins = 0; steps_[i].remaining.load(std::memory_order_acquire) > 0 && !failed();) {
      _mm_pause();
      if (++spins > 2048) std::this_thread::yield();  // the other thread may be descheduled
    }
  }
  // The first exception a piece threw (after every participant returned).
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = e;
    failed_.store(true, std::memory_order_release);
  }

  struct alignas(64) Step {
    std::atomic<int64_t> remaining{0};  // tiles not yet finished
    int shares = 1;
  };
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  const std::vector<std::vector<int>>* deps_ = nullptr;
  std::unique_ptr<Step[]> steps_;
  std::unique_ptr<Share[]> shares_;
  size_t n_steps_ = 0;
  int threads_ = 0;
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::exception_ptr error_;
};

}  // namespace kiln
