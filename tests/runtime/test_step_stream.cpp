// StepStream: every tile of every step runs exactly once, no tile of a step starts before the
// step before it (or, given dependencies, the steps it depends on) has finished, a thread runs
// ahead into an independent step, participants may join late or never, and a throwing piece
// stops the run without hanging anyone.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/step_stream.h"

namespace {

struct Recorder {
  explicit Recorder(const std::vector<int64_t>& tiles) : tiles(tiles), finished(tiles.size()) {
    for (int64_t t : tiles) runs.emplace_back(size_t(t));
  }
  std::vector<int64_t> tiles;
  std::vector<std::vector<std::atomic<int>>> runs;  // per step and tile: times it ran
  std::vector<std::atomic<int64_t>> finished;       // per step: tiles finished
  std::atomic<int> order_violations{0};
  std::atomic<int> done_calls{0};

  void piece(size_t step, int64_t b, int64_t e) {
    // Every tile of the step before must have finished before any of this step starts.
    if (step > 0 && finished[step - 1].load() != tiles[step - 1]) ++order_violations;
    for (int64_t t = b; t < e; ++t) ++runs[step][size_t(t)];
    std::this_thread::sleep_for(std::chrono::microseconds(20 * (e - b) % 97));
    finished[step] += e - b;
  }
};

void check_all_once(const Recorder& r) {
  for (size_t s = 0; s < r.runs.size(); ++s)
    for (size_t t = 0; t < r.runs[s].size(); ++t) {
      INFO("step " << s << " tile " << t);
      CHECK(r.runs[s][t].load() == 1);
    }
  CHECK(r.order_violations.load() == 0);
}

}  // namespace

TEST_CASE("step stream: each tile once, steps in order, on 1-4 participants") {
  const std::vector<int64_t> tiles = {7, 1, 0, 64, 3, 2, 129, 1, 5};
  for (int threads : {1, 2, 3, 4}) {
    INFO("threads " << threads);
    kiln::StepStream stream;
    for (int round = 0; round < 3; ++round) {  // reset() makes the object reusable
      Recorder r(tiles);
      stream.reset(tiles, threads);
      std::vector<std::thread> others;
      for (int p = 1; p < threads; ++p)
        others.emplace_back([&, p] {
          stream.participate(
              p, [&](size_t s, int64_t b, int64_t e) { r.piece(s, b, e); },
              [&](size_t) { ++r.done_calls; });
        });
      stream.participate(
          0, [&](size_t s, int64_t b, int64_t e) { r.piece(s, b, e); },
          [&](size_t) { ++r.done_calls; });
      for (auto& t : others) t.join();
      check_all_once(r);
      // done() once per step that has tiles.
      CHECK(r.done_calls.load() == 8);
      CHECK_FALSE(stream.failed());
    }
  }
}

TEST_CASE("step stream: a participant that arrives late or never only takes what is left") {
  const std::vector<int64_t> tiles = {16, 16, 16};
  kiln::StepStream stream;
  stream.reset(tiles, 2);
  Recorder r(tiles);
  auto piece = [&](size_t s, int64_t b, int64_t e) { r.piece(s, b, e); };
  auto done = [](size_t) {};
  // Participant 1 never comes while 0 runs: 0 must finish every step alone.
  stream.participate(0, piece, done);
  check_all_once(r);
  // It arrives after the end (as when the caller runs the worker's task inline): no work left.
  std::atomic<int> extra{0};
  stream.participate(
      1, [&](size_t, int64_t, int64_t) { ++extra; }, done);
  CHECK(extra.load() == 0);
}

TEST_CASE("step stream: a throwing piece stops every participant and is rethrown") {
  const std::vector<int64_t> tiles = {8, 8, 8, 8};
  kiln::StepStream stream;
  stream.reset(tiles, 2);
  std::atomic<int> after{0};
  auto piece = [&](size_t s, int64_t b, int64_t) {
    if (s == 1 && b == 0) throw std::runtime_error("tile failed");
    if (s >= 2) ++after;
  };
  std::thread other([&] { stream.participate(1, piece, [](size_t) {}); });
  stream.participate(0, piece, [](size_t) {});
  other.join();
  CHECK(stream.failed());
  CHECK(after.load() == 0);  // nothing of the later steps ran
  CHECK_THROWS_WITH_AS(stream.rethrow(), "tile failed", std::runtime_error);
  // Reset clears the failure.
  stream.reset(tiles, 2);
  CHECK_FALSE(stream.failed());
  CHECK_NOTHROW(stream.rethrow());
}

TEST_CASE("step stream: a step waits only for the steps it depends on; others run ahead") {
  // Steps 0 and 1 are independent one-tile steps; 2 reads 0; 3 reads 1 and 2. Step 0's tile
  // waits for step 1's to start: it can only start if the thread without work in step 0 runs
  // ahead into step 1 instead of waiting for step 0 to finish.
  const std::vector<int64_t> tiles = {1, 1, 4, 4};
  const std::vector<std::vector<int>> deps = {{}, {}, {0}, {1, 2}};
  for (int round = 0; round < 5; ++round) {
    kiln::StepStream stream;
    stream.set_deps(&deps);
    stream.reset(tiles, 2);
    std::atomic<bool> one_started{false}, overlapped{false};
    std::vector<std::atomic<int64_t>> finished(tiles.size());
    std::atomic<int> violations{0};
    auto piece = [&](size_t s, int64_t b, int64_t e) {
      for (int d : deps[s])
        if (finished[size_t(d)].load() != tiles[size_t(d)]) ++violations;
      if (s == 1) one_started = true;
      if (s == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!one_started.load() && std::chrono::steady_clock::now() < until)
          std::this_thread::yield();
        overlapped = one_started.load();
      }
      finished[s] += e - b;
    };
    std::thread other([&] { stream.participate(1, piece, [](size_t) {}); });
    stream.participate(0, piece, [](size_t) {});
    other.join();
    CHECK(overlapped.load());
    CHECK(violations.load() == 0);
    for (size_t s = 0; s < tiles.size(); ++s) CHECK(finished[s].load() == tiles[s]);
  }
}

TEST_CASE("step stream: with dependencies, each tile once and no step before its inputs") {
  // A diamond per stage (two branches from the stage's input, joined by the next stage) and a
  // step reading a much earlier one: 1-4 participants, tiles of uneven time.
  const std::vector<int64_t> tiles = {5, 1, 3, 7, 1, 2, 9, 1, 4};
  const std::vector<std::vector<int>> deps = {{}, {0}, {0}, {1, 2}, {3}, {3}, {4, 5}, {0, 6}, {7}};
  for (int threads : {1, 2, 3, 4}) {
    INFO("threads " << threads);
    kiln::StepStream stream;
    stream.set_deps(&deps);
    for (int round = 0; round < 3; ++round) {
      stream.reset(tiles, threads);
      std::vector<std::vector<std::atomic<int>>> runs;
      for (int64_t t : tiles) runs.emplace_back(size_t(t));
      std::vector<std::atomic<int64_t>> finished(tiles.size());
      std::atomic<int> violations{0};
      auto piece = [&](size_t s, int64_t b, int64_t e) {
        for (int d : deps[s])
          if (finished[size_t(d)].load() != tiles[size_t(d)]) ++violations;
        for (int64_t t = b; t < e; ++t) ++runs[s][size_t(t)];
        std::this_thread::sleep_for(std::chrono::microseconds(30 * (s + 1) * (e - b) % 97));
        finished[s] += e - b;
      };
      std::vector<std::thread> others;
      for (int p = 1; p < threads; ++p)
        others.emplace_back([&, p] { stream.participate(p, piece, [](size_t) {}); });
      stream.participate(0, piece, [](size_t) {});
      for (auto& t : others) t.join();
      CHECK(violations.load() == 0);
      for (size_t s = 0; s < tiles.size(); ++s)
        for (size_t t = 0; t < runs[s].size(); ++t) {
          INFO("step " << s << " tile " << t);
          CHECK(runs[s][t].load() == 1);
        }
    }
  }
}
