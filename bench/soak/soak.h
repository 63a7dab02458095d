// The soak test a user runs before deploying Kiln: many threads run several sessions at once
// while other threads keep loading and releasing sessions of the same model, and every output
// must be bitwise identical to the first; the process's resident memory and open file
// descriptors must not grow over the run. Only the public C API (kiln.h) is used, so this is
// exactly what an application sees. Shared by the CTest suite (small, under TSan in CI:
// tests/api/test_soak.cpp) and the full-size benchmark (bench/soak/main.cpp, bench/soak.sh).
#pragma once

#include <dirent.h>
#include <kiln/kiln.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace kiln_soak {

struct Config {
  std::string model;            // ONNX file
  int run_threads = 4;          // threads calling kiln_session_run at once
  int runs = 50;                // runs per run thread, per round
  int sessions = 2;             // long-lived sessions; every run thread uses all of them
  int load_threads = 1;         // threads loading and releasing sessions meanwhile
  int loads = 4;                // loads per load thread, per round (file and memory alternately)
  int rounds = 3;               // rounds; growth is judged over the second half of them
  int intra_threads = 1;        // kiln_options.threads of every session
  std::string cache_dir;        // tuning cache ("" = a fresh private folder, removed after)
  int64_t rss_slack_kb = 2048;  // allowed growth of resident memory over the second half
};

struct Report {
  long runs = 0, loads = 0;
  long failures = 0;              // calls that returned an error
  long mismatches = 0;            // outputs that differ in any bit from the reference
  std::vector<long> rss_kb, fds;  // after the warm-up, then after each round
  double seconds = 0;
  std::string first_error;
  // Judged over the second half of the rounds: the first ones fill caches that stay resident
  // once filled (freed thread stacks glibc keeps for new threads, malloc's raised mmap
  // threshold): up to ~3 MiB here at 2 intra-op threads, then flat; a leak keeps growing.
  bool rss_grew(int64_t slack_kb) const {
    return rss_kb.size() > 2 && rss_kb.back() - rss_kb[rss_kb.size() / 2] > slack_kb;
  }
  bool fds_grew() const { return fds.size() > 1 && fds.back() != fds.front(); }
  bool ok(int64_t slack_kb) const {
    return failures == 0 && mismatches == 0 && !rss_grew(slack_kb) && !fds_grew() && runs > 0;
  }
  std::string summary() const {
    std::ostringstream s;
    s << runs << " runs, " << loads << " loads in " << seconds << " s; " << failures
      << " failures, " << mismatches << " mismatches; RSS (KiB) ";
    for (long r : rss_kb) s << r << " ";
    s << "; open fds ";
    for (long f : fds) s << f << " ";
    if (!first_error.empty()) s << "; first error: " << first_error;
    return s.str();
  }
};

// Resident memory once the allocator has given back what it holds free (glibc keeps freed
// memory in one arena per thread group: without the trim the readings wander by tens of MiB
// with which threads happened to free what).
inline long resident_kb() {
  malloc_trim(0);
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

inline long open_fds() {
  long n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

namespace detail {

struct Shared {
  std::mutex mu;
  std::string first_error;
  std::atomic<long> runs{0}, loads{0}, failures{0}, mismatches{0};
  void fail(kiln_status* st, const char* what) {
    ++failures;
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty())
      first_error = std::string(what) + ": " + (st ? kiln_status_message(st) : "failed");
  }
};

// Inputs and the reference outputs of one model, and the buffers of one caller.
struct Io {
  std::vector<std::vector<char>> in, out;
  std::vector<const void*> in_ptr;
  std::vector<void*> out_ptr;
  std::vector<size_t> in_bytes, out_bytes;
};

inline bool make_io(kiln_session* s, Io* io) {
  size_t ni = 0, no = 0;
  if (kiln_status* st = kiln_session_input_count(s, &ni)) return kiln_status_release(st), false;
  if (kiln_status* st = kiln_session_output_count(s, &no)) return kiln_status_release(st), false;
  for (size_t i = 0; i < ni; ++i) {
    size_t b = 0;
    kiln_dtype t = KILN_DTYPE_F32;
    kiln_status_release(kiln_session_input_byte_size(s, i, &b));
    kiln_status_release(kiln_session_input_dtype(s, i, &t));
    std::vector<char> v(b);
    // Deterministic values in [-1, 1) (int64 inputs: small non-negative indices).
    uint32_t x = 12345u + uint32_t(i);
    for (size_t k = 0; k + (t == KILN_DTYPE_F32 ? 4 : 8) <= b;) {
      x = x * 1664525u + 1013904223u;
      if (t == KILN_DTYPE_F32) {
        const float f = float(x >> 8) / float(1 << 23) - 1.f;
        std::memcpy(v.data() + k, &f, 4), k += 4;
      } else {
        const int64_t z = int64_t(x >> 30);
        std::memcpy(v.data() + k, &z, 8), k += 8;
      }
    }
    io->in.push_back(std::move(v));
    io->in_bytes.push_back(b);
  }
  for (size_t i = 0; i < no; ++i) {
    size_t b = 0;
    kiln_status_release(kiln_session_output_byte_size(s, i, &b));
    io->out.emplace_back(b);
    io->out_bytes.push_back(b);
  }
  for (auto& v : io->in) io->in_ptr.push_back(v.data());
  for (auto& v : io->out) io->out_ptr.push_back(v.data());
  return true;
}

// Runs s on io's inputs into io's outputs (filled with a pattern first); false on error.
inline kiln_status* run(kiln_session* s, Io& io) {
  for (auto& o : io.out) std::fill(o.begin(), o.end(), '\x5a');
  return kiln_session_run(s, io.in_ptr.data(), io.in_bytes.data(), io.in.size(), io.out_ptr.data(),
                          io.out_bytes.data(), io.out.size());
}

}  // namespace detail

// Runs the soak; never throws for Kiln's errors (they are counted in the report).
inline Report soak(const Config& c) {
  using namespace detail;
  Report rep;
  const auto t0 = std::chrono::steady_clock::now();
  std::string cache = c.cache_dir;
  const bool own_cache = cache.empty();
  if (own_cache) {
    char tmpl[] = "/tmp/kiln-soak-XXXXXX";
    if (!mkdtemp(tmpl)) {
      rep.first_error = "cannot create a temporary cache folder";
      rep.failures = 1;
      return rep;
    }
    cache = tmpl;
  }
  kiln_options o;
  kiln_status_release(kiln_options_init(&o));
  o.threads = c.intra_threads;
  o.cache_dir = cache.c_str();
  std::ifstream f(c.model, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Shared sh;

  // The first load measures and stores the plan in the cache; every later load takes it, so
  // every session runs the same kernels and must give the same bits.
  kiln_session* first = nullptr;
  if (kiln_status* st = kiln_session_create_from_file(c.model.c_str(), &o, &first)) {
    sh.fail(st, "first load");
    kiln_status_release(st);
  }
  Io ref;
  if (first && make_io(first, &ref)) {
    if (kiln_status* st = run(first, ref)) sh.fail(st, "first run"), kiln_status_release(st);
  }
  std::vector<kiln_session*> live;
  for (int i = 0; first && i < c.sessions; ++i) {
    kiln_session* s = nullptr;
    if (kiln_status* st = kiln_session_create_from_file(c.model.c_str(), &o, &s)) {
      sh.fail(st, "session load"), kiln_status_release(st);
      continue;
    }
    live.push_back(s);
  }

  auto run_thread = [&](int t, int runs) {
    Io io;
    if (live.empty() || !make_io(live[0], &io)) return;
    for (int r = 0; r < runs; ++r) {
      kiln_session* s = live[size_t(r + t) % live.size()];
      if (kiln_status* st = run(s, io)) {
        sh.fail(st, "run"), kiln_status_release(st);
        continue;
      }
      ++sh.runs;
      if (io.out != ref.out) ++sh.mismatches;
    }
  };
  auto load_thread = [&](int t, int loads) {
    for (int l = 0; l < loads; ++l) {
      kiln_session* s = nullptr;
      kiln_status* st = (l + t) % 2 == 0
                            ? kiln_session_create_from_file(c.model.c_str(), &o, &s)
                            : kiln_session_create_from_memory(bytes.data(), bytes.size(), &o, &s);
      if (st) {
        sh.fail(st, "load"), kiln_status_release(st);
        continue;
      }
      ++sh.loads;
      Io io;
      if (make_io(s, &io)) {
        if (kiln_status* e = run(s, io)) {
          sh.fail(e, "run after load"), kiln_status_release(e);
        } else {
          ++sh.runs;
          if (io.out != ref.out) ++sh.mismatches;
        }
      }
      kiln_session_release(s);
    }
  };
  auto round = [&](int runs, int loads) {
    std::vector<std::thread> pool;
    for (int t = 0; t < c.run_threads; ++t) pool.emplace_back(run_thread, t, runs);
    for (int t = 0; t < c.load_threads; ++t) pool.emplace_back(load_thread, t, loads);
    for (auto& th : pool) th.join();
  };

  if (first && !live.empty()) {
    // Warm-up: thread pools, allocator arenas, the JIT code pool and every session's run
    // contexts exist before the first reading.
    round(std::max(1, c.runs / 4), std::max(1, c.loads / 2));
    rep.rss_kb.push_back(resident_kb());
    rep.fds.push_back(open_fds());
    for (int r = 0; r < c.rounds; ++r) {
      round(c.runs, c.loads);
      rep.rss_kb.push_back(resident_kb());
      rep.fds.push_back(open_fds());
    }
  }
  for (kiln_session* s : live) kiln_session_release(s);
  kiln_session_release(first);
  if (own_cache) {
    // The private cache folder: its files, then itself.
    if (DIR* d = opendir(cache.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') unlink((cache + "/" + e->d_name).c_str());
      closedir(d);
    }
    rmdir(cache.c_str());
  }
  rep.runs = sh.runs;
  rep.loads = sh.loads;
  rep.failures = sh.failures;
  rep.mismatches = sh.mismatches;
  rep.first_error = sh.first_error;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace kiln_soak
