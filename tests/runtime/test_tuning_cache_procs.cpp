// Tuning cache under real process faults: a writer killed with SIGKILL at random moments,
// several processes and threads writing at once, a flush that runs out of space (a file size
// limit, and a real full tmpfs when mount namespaces are available). Children are forked; they
// report through exit codes and pipes, never through doctest.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "runtime/tuning_cache.h"
#include "tests/runtime/tuning_cache_test_util.h"

using namespace kiln;
using namespace kiln::cache_test;

namespace {

// Forks; the child runs `body` and exits with its return value (or 99 on an exception).
template <class F>
pid_t spawn(F&& body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
    }
    ::_exit(rc);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string gen_key(int g) {
  return "gen" + std::to_string(g);
}
double gen_value(int g, int i) {
  return g * 1000.0 + i * 0.25;
}
std::string gen_plan(int g) {
  return std::string(64 << 10, char('a' + g % 26)) + gen_key(g);
}
constexpr int kPerGen = 400;

}  // namespace

TEST_CASE("tuning cache: writer killed with SIGKILL at random moments") {
  TempDir d("sigkill");
  LogCapture log;
  const CacheContext ctx = test_context();
  std::mt19937_64 rng(20240601);
  int next_gen = 0, confirmed_max = -1, mid_write = 0;
  std::vector<int> confirmed;
  for (int round = 0; round < 14; ++round) {
    CAPTURE(round);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const int first = next_gen;
    pid_t pid = spawn([&] {
      ::close(fds[0]);
      TuningCache c(d.path, ctx);
      for (int g = first;; ++g) {
        for (int i = 0; i < kPerGen; ++i)
          c.put_time(gen_key(g), std::to_string(i), gen_value(g, i));
        c.put_plan(gen_key(g), gen_plan(g));
        if (!c.flush()) return 3;
        int32_t v = g;  // after the rename: this generation is on disk
        if (::write(fds[1], &v, sizeof v) != sizeof v) return 4;
      }
    });
    ::close(fds[1]);
    // Wait for the child's first flush (so every round makes progress however loaded the
    // machine is), then kill it at a random moment of the following puts and flushes.
    int32_t v;
    int last = first - 1;
    auto take = [&](int32_t got) {
      CHECK(got == last + 1);
      last = got;
      confirmed.push_back(got);
    };
    if (::read(fds[0], &v, sizeof v) == sizeof v) take(v);
    if (round % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 100000));
    } else {
      // Odd rounds aim at the write itself: kill soon after a temp file appears.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (count_files(d.path, ".tmp.") == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    }
    ::kill(pid, SIGKILL);
    CHECK(wait_exit_code(pid) == 128 + SIGKILL);  // not a failed flush (3) or a crash
    while (::read(fds[0], &v, sizeof v) == sizeof v) take(v);
    CHECK(last >= first);
    ::close(fds[0]);
    confirmed_max = std::max(confirmed_max, last);
    mid_write += count_files(d.path, ".tmp.") > 0;

    // Every confirmed generation is there, exactly; the one in flight is all or nothing.
    TuningCache v2(d.path, ctx);
    CHECK(v2.stats().rejected == 0);
    for (int g : confirmed) {
      CAPTURE(g);
      for (int i = 0; i < kPerGen; i += 37)
        REQUIRE(v2.time(gen_key(g), std::to_string(i)) == gen_value(g, i));
      REQUIRE(v2.plan(gen_key(g)) == gen_plan(g));
    }
    const int g = last + 1;
    int n = 0;
    for (int i = 0; i < kPerGen; ++i) {
      auto t = v2.time(gen_key(g), std::to_string(i));
      if (t) CHECK(*t == gen_value(g, i));
      n += t.has_value();
    }
    CHECK((n == 0 || n == kPerGen));
    if (n == kPerGen) CHECK(v2.plan(gen_key(g)) == gen_plan(g));
    next_gen = last + 2;  // never reuse a generation that may be half-put
  }
  MESSAGE("SIGKILL rounds: 14, generations flushed: ", confirmed.size(),
          ", kills that left a temp file (killed mid-write): ", mid_write);
  CHECK(confirmed_max >= 0);
  CHECK(mid_write > 0);  // some kill did land between creating and renaming a temp file
  // The next flush removes the stale temp files of killed writers.
  TuningCache c(d.path, ctx);
  c.put_time("after", "kills", 1.0);
  CHECK(c.flush());
  CHECK(count_files(d.path, ".tmp.") == 0);
  CHECK(TuningCache(d.path, ctx).stats().rejected == 0);
}

TEST_CASE("tuning cache: several processes tuning at once lose nothing") {
  TempDir d("procs");
  LogCapture log;
  const CacheContext ctx = test_context();
  constexpr int kProcs = 3, kRounds = 15, kKeys = 40;
  auto value = [](int p, int r, int i) { return p * 1e6 + r * 1e3 + i + 0.5; };
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p)
    pids.push_back(spawn([&, p] {
      TuningCache c(d.path, ctx);
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kKeys; ++i)
          c.put_time("proc" + std::to_string(p), std::to_string(r) + "/" + std::to_string(i),
                     value(p, r, i));
        c.put_time("shared", "key", double(p));  // the same key from everyone
        c.put_plan("plan" + std::to_string(p), "round " + std::to_string(r));
        if (!c.flush()) return 2;
        // A reader racing the other writers sees a whole file with our flushed entries.
        TuningCache reader(d.path, ctx);
        if (reader.stats().rejected != 0) return 3;
        if (reader.time("proc" + std::to_string(p), std::to_string(r) + "/0") != value(p, r, 0))
          return 4;
      }
      return 0;
    }));
  for (pid_t pid : pids) CHECK(wait_exit_code(pid) == 0);
  TuningCache c(d.path, ctx);
  CHECK(c.stats().rejected == 0);
  CHECK(c.stats().loaded == kProcs * kRounds * kKeys + 1 + kProcs);
  int missing = 0;
  for (int p = 0; p < kProcs; ++p) {
    for (int r = 0; r < kRounds; ++r)
      for (int i = 0; i < kKeys; ++i)
        missing += c.time("proc" + std::to_string(p),
                          std::to_string(r) + "/" + std::to_string(i)) != value(p, r, i);
    CHECK(c.plan("plan" + std::to_string(p)) == "round " + std::to_string(kRounds - 1));
  }
  CHECK(missing == 0);
  auto shared = c.time("shared", "key");
  REQUIRE(shared);
  CHECK((*shared == 0.0 || *shared == 1.0 || *shared == 2.0));
  CHECK(count_files(d.path, ".tmp.") == 0);
}

TEST_CASE("tuning cache: threads sharing one object and objects in one process") {
  TempDir d("threads");
  const CacheContext ctx = test_context();
  TuningCache shared(d.path, ctx);
  constexpr int kThreads = 4, kKeys = 200;
  std::vector<std::thread> ts;
  std::atomic<int> failed_flushes{0};
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      // Threads 0 and 1 share an object; 2 and 3 have their own (two flocks in one process).
      std::unique_ptr<TuningCache> own;
      if (t >= 2) own = std::make_unique<TuningCache>(d.path, ctx);
      TuningCache& c = t >= 2 ? *own : shared;
      for (int i = 0; i < kKeys; ++i) {
        c.put_time("t" + std::to_string(t), std::to_string(i), t + i / 1024.0);
        (void)c.time("t" + std::to_string(t), std::to_string(i / 2));
        if (i % 25 == 0 && !c.flush()) ++failed_flushes;
      }
      if (!c.flush()) ++failed_flushes;
    });
  for (auto& t : ts) t.join();
  CHECK(failed_flushes == 0);
  TuningCache c(d.path, ctx);
  int missing = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kKeys; ++i)
      missing += c.time("t" + std::to_string(t), std::to_string(i)) != t + i / 1024.0;
  CHECK(missing == 0);
  CHECK(c.stats().rejected == 0);
}

TEST_CASE("tuning cache: flush waits for another writer's lock") {
  TempDir d("lockwait");
  TuningCache c(d.path, test_context());
  c.put_time("p", "l", 1.0);
  int fd = ::open((c.path() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  std::thread release([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::close(fd);
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(c.flush());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  release.join();
  CHECK(ms >= 250);
  CHECK(TuningCache(d.path, test_context()).time("p", "l") == 1.0);
}

TEST_CASE("tuning cache: write failure (file size limit, EFBIG) leaves the old file") {
  TempDir d("efbig");
  LogCapture log;
  const CacheContext ctx = test_context();
  {
    TuningCache c(d.path, ctx);
    c.put_time("old", "entry", 1.0);
    REQUIRE(c.flush());
  }
  const std::string path = TuningCache(d.path, ctx).path();
  const std::string before = read_bytes(path);
  pid_t pid = spawn([&] {
    // The write gets part of the data out, then fails, as on a disk that fills up mid-write.
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{rlim_t(before.size() + 4096), rlim_t(before.size() + 4096)};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
    TuningCache c(d.path, ctx);
    for (int i = 0; i < 2000; ++i) c.put_time("new", std::to_string(i), i);
    if (c.flush()) return 2;
    if (c.time("new", "1999") != 1999.0) return 3;  // still in memory
    if (count_files(d.path, ".tmp.") != 0) return 4;
    return 0;
  });
  CHECK(wait_exit_code(pid) == 0);
  CHECK(read_bytes(path) == before);
  TuningCache c(d.path, ctx);
  CHECK(c.stats().rejected == 0);
  CHECK(c.time("old", "entry") == 1.0);
}

TEST_CASE("tuning cache: full disk (ENOSPC on a 64 KiB tmpfs) leaves the old file") {
  TempDir d("enospc");
  const CacheContext ctx = test_context();
  pid_t pid = spawn([&] {
    // A private mount namespace, so the tmpfs is gone when the child exits.
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", d.path.c_str(), "tmpfs", 0, "size=64k") != 0) return 77;
    LogCapture log;
    std::string before;
    {
      TuningCache c(d.path, ctx);
      c.put_time("old", "entry", 1.0);
      if (!c.flush()) return 2;
      before = read_bytes(c.path());
    }
    TuningCache c(d.path, ctx);
    for (int i = 0; i < 4000; ++i) c.put_time("new", std::to_string(i) + std::string(60, 'k'), i);
    if (c.flush()) return 3;
    if (log.text().find("No space left on device") == std::string::npos) return 4;
    if (c.time("new", "0" + std::string(60, 'k')) != 0.0) return 5;
    if (read_bytes(c.path()) != before) return 6;
    if (count_files(d.path, ".tmp.") != 0) return 7;
    TuningCache after(d.path, ctx);
    if (after.stats().rejected != 0 || after.time("old", "entry") != 1.0) return 8;
    return 0;
  });
  int rc = wait_exit_code(pid);
  if (rc == 77)
    MESSAGE("no mount namespace / tmpfs mount here (needs CAP_SYS_ADMIN): ENOSPC case skipped");
  else
    CHECK(rc == 0);
}
