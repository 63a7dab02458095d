// The static memory plan on synthetic plans (plan_memory never touches kernels, so steps have
// none): hand-computed small cases, random DAGs of thousands of steps against a brute-force
// checker written here, in-place views (also through the executor), bad plans, and timings
// that fail on a quadratic regression.
//
// The checker's model: a tensor's bytes are its root's (a tensor with parent < 0) plus its
// offset inside the root; a root owns its 64-byte-rounded block, a view exactly its bytes.
// (a) two tensors of different roots whose root lifetimes (first .. last step touching the
// root or any of its views) overlap never share arena bytes; (b) for every pair of steps
// j < i that conflict (j writes bytes i reads or writes, or j reads bytes i writes, or j
// writes a tensor i reads), j is an ancestor of i through Step::deps, and every dep is such a
// conflict (no needless serialisation). (c) the arena is no larger than the former policy
// (greedy by size, largest first, lowest fitting offset, re-implemented naively here) and
// no smaller than the most bytes alive at one step.
#include <doctest/doctest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"

using kiln::Plan;
using kiln::PlanTensor;
using kiln::Step;

namespace {

int64_t up64(int64_t x) {
  return (x + 63) / 64 * 64;
}

struct Builder {
  Plan p;
  int tensor(int64_t bytes, int64_t offset) {
    PlanTensor t;
    t.bytes = bytes;
    t.offset = offset;
    p.tensors.push_back(t);
    return int(p.tensors.size()) - 1;
  }
  int arena(int64_t bytes) { return tensor(bytes, -2); }
  int external(int64_t bytes) { return tensor(bytes, -1); }
  int view(int parent, int64_t at, int64_t bytes) {
    int t = tensor(bytes, -2);
    p.tensors[size_t(t)].parent = parent;
    p.tensors[size_t(t)].parent_offset = at;
    return t;
  }
  int step(std::vector<int> src, std::vector<int> dst) {
    Step s;
    s.src = std::move(src);
    s.dst = std::move(dst);
    p.steps.push_back(std::move(s));
    return int(p.steps.size()) - 1;
  }
};

struct Timing {
  double wall, cpu;  // seconds; the bound is on CPU time, which a loaded machine distorts least
};

double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

Timing time_plan(Plan& p) {
  auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu();
  kiln::plan_memory(&p);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          thread_cpu() - c0};
}

// ---- brute-force checker --------------------------------------------------------------------

struct Access {
  int space;  // -1: the arena; else the external root
  int64_t b, e;
  bool write;
  int tensor;
};

struct Checked {
  int64_t max_live = 0;  // most root bytes alive at one step (a lower bound for the arena)
  int64_t greedy = 0;    // the greedy policy's arena size, placed naively
  int failures = 0;
  std::string first;
};

void note(Checked& c, const std::string& what) {
  if (c.failures++ == 0) c.first = what;
}

// `external[t]`: the tensor's offset was -1 before planning.
Checked check_plan(const Plan& p, const std::vector<bool>& external) {
  Checked c;
  const size_t nt = p.tensors.size(), ns = p.steps.size();
  std::vector<int> root(nt);
  std::vector<int64_t> at(nt, 0);
  for (size_t t = 0; t < nt; ++t) {
    size_t u = t;
    while (p.tensors[u].parent >= 0)
      at[t] += p.tensors[u].parent_offset, u = size_t(p.tensors[u].parent);
    root[t] = int(u);
  }
  std::vector<int> first(nt, INT32_MAX), last(nt, -1);
  for (size_t i = 0; i < ns; ++i)
    for (const auto* list : {&p.steps[i].src, &p.steps[i].dst})
      for (int t : *list)
        if (t >= 0) {
          first[size_t(root[size_t(t)])] = std::min(first[size_t(root[size_t(t)])], int(i));
          last[size_t(root[size_t(t)])] = std::max(last[size_t(root[size_t(t)])], int(i));
        }
  auto in_arena = [&](size_t t) { return !external[size_t(root[t])]; };
  auto len = [&](size_t t) {
    return root[t] == int(t) ? up64(p.tensors[t].bytes) : p.tensors[t].bytes;
  };

  // Offsets: views at root + place, external ones -1; touched roots aligned inside the arena.
  for (size_t t = 0; t < nt; ++t) {
    const int64_t r_off = p.tensors[size_t(root[t])].offset;
    if (!in_arena(t)) {
      if (p.tensors[t].offset != -1)
        note(c, "external tensor " + std::to_string(t) + " got an offset");
      continue;
    }
    if (root[t] != int(t) && p.tensors[t].offset != r_off + at[t])
      note(c, "view " + std::to_string(t) + " is not at its root's offset + parent_offset");
    if (root[t] == int(t) && first[t] != INT32_MAX &&
        (r_off < 0 || r_off % 64 || r_off + up64(p.tensors[t].bytes) > p.arena_bytes))
      note(c, "root " + std::to_string(t) + " misplaced: offset " + std::to_string(r_off));
  }
  // (a) tensors of different roots alive together never share bytes.
  for (size_t t = 0; t < nt; ++t) {
    const size_t rt = size_t(root[t]);
    if (!in_arena(t) || first[rt] == INT32_MAX) continue;
    for (size_t u = t + 1; u < nt; ++u) {
      const size_t ru = size_t(root[u]);
      if (ru == rt || !in_arena(u) || first[ru] == INT32_MAX) continue;
      if (last[rt] < first[ru] || last[ru] < first[rt]) continue;
      const int64_t tb = p.tensors[t].offset, ub = p.tensors[u].offset;
      if (tb < ub + len(u) && ub < tb + len(t) && len(t) > 0 && len(u) > 0)
        note(c, "tensors " + std::to_string(t) + " and " + std::to_string(u) +
                    " are alive together and share bytes");
    }
  }
  // (b) conflicts are ordered through deps; every dep is a conflict.
  std::vector<std::vector<Access>> acc(ns);
  for (size_t i = 0; i < ns; ++i)
    for (int w = 0; w < 2; ++w)
      for (int t : w ? p.steps[i].dst : p.steps[i].src) {
        if (t < 0) continue;
        const size_t ts = size_t(t);
        const bool ext = !in_arena(ts);
        const int64_t b = ext ? at[ts] : p.tensors[ts].offset;
        acc[i].push_back({ext ? root[ts] : -1, b, b + len(ts), w == 1, t});
      }
  auto conflict = [&](size_t j, size_t i) {
    for (const Access& x : acc[j])
      for (const Access& y : acc[i]) {
        if (x.write && !y.write && x.tensor == y.tensor) return true;  // its producer
        if (!x.write && !y.write) continue;
        if (x.space == y.space && x.b < y.e && y.b < x.e) return true;
      }
    return false;
  };
  const size_t words = (ns + 63) / 64;
  std::vector<uint64_t> reach(ns * words, 0);  // reach[i]: the ancestors of step i
  for (size_t i = 0; i < ns; ++i) {
    uint64_t* ri = &reach[i * words];
    for (int d : p.steps[i].deps) {
      if (d < 0 || size_t(d) >= i) {
        note(c, "step " + std::to_string(i) + " depends on step " + std::to_string(d));
        continue;
      }
      if (!conflict(size_t(d), i))
        note(c, "step " + std::to_string(i) + " needlessly depends on " + std::to_string(d));
      ri[size_t(d) / 64] |= uint64_t(1) << (d % 64);
      const uint64_t* rd = &reach[size_t(d) * words];
      for (size_t w = 0; w < words; ++w) ri[w] |= rd[w];
    }
    for (size_t j = 0; j < i; ++j)
      if (!(ri[j / 64] >> (j % 64) & 1) && conflict(j, i))
        note(c, "step " + std::to_string(i) + " is not ordered after conflicting step " +
                    std::to_string(j));
  }
  // (c) bounds: the bytes alive at each step, and the greedy placement done naively.
  std::vector<size_t> roots;
  for (size_t t = 0; t < nt; ++t)
    if (root[t] == int(t) && !external[t] && first[t] != INT32_MAX) roots.push_back(t);
  for (size_t i = 0; i < ns; ++i) {
    int64_t live = 0;
    for (size_t t : roots)
      if (first[t] <= int(i) && int(i) <= last[t]) live += up64(p.tensors[t].bytes);
    c.max_live = std::max(c.max_live, live);
  }
  // The greedy placement's lifetimes: a root is kept one step longer where that step reads
  // no root the root's last step wrote (it may run beside it: runtime/memory_plan.cpp).
  std::vector<int> kept = last;
  for (size_t t : roots) {
    const int l = last[t];
    if (l < 0 || size_t(l) + 1 >= ns) continue;
    bool reads = false;
    for (int u : p.steps[size_t(l) + 1].src)
      for (int w : p.steps[size_t(l)].dst)
        if (u >= 0 && w >= 0 && root[size_t(u)] == root[size_t(w)]) reads = true;
    if (!reads) kept[t] = l + 1;
  }
  std::stable_sort(roots.begin(), roots.end(),
                   [&](size_t a, size_t b) { return p.tensors[a].bytes > p.tensors[b].bytes; });
  struct Placed {
    int64_t off, end;
    int first, last;
  };
  std::vector<Placed> placed;
  for (size_t t : roots) {
    const int64_t size = up64(p.tensors[t].bytes);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& q : placed)
      if (q.first <= kept[t] && first[t] <= q.last) busy.push_back({q.off, q.end});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    placed.push_back({off, off + size, first[t], kept[t]});
    c.greedy = std::max(c.greedy, off + size);
  }
  return c;
}

std::vector<bool> externals(const Plan& p) {
  std::vector<bool> e;
  for (const PlanTensor& t : p.tensors) e.push_back(t.offset == -1 && t.parent < 0);
  return e;
}

// ---- random plans ---------------------------------------------------------------------------

// A random DAG in step order: each step reads 1..3 tensors, mostly from the last `window`
// written (so many branches are alive and independent at once), sometimes from anywhere
// earlier (long skip connections); writes one tensor, sometimes two, sometimes an external
// graph output that later steps may read. Long reads go back at most `far` tensors (0: any).
// With `views`, some steps are Concat groups: producers
// writing views of one parent (arena or external; sometimes a view of a view), optionally a
// step writing the whole parent, and readers of the parent or of single views.
Plan random_plan(uint32_t seed, int steps, int window, int far, bool views) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
  auto size = [&]() -> int64_t {
    switch (pick(8)) {
      case 0:
        return 0;
      case 1:
        return 64 * (1 + pick(64));
      default:
        return 1 + pick(4000);
    }
  };
  Builder b;
  std::vector<int> ready = {b.external(1024), b.external(300)};  // graph inputs
  auto src = [&]() {
    std::vector<int> s;
    for (int k = 1 + pick(3); k > 0; --k) {
      const int n = int(ready.size());
      const int back = pick(10) == 0 ? (far ? std::min(n, far) : n) : std::min(n, window);
      s.push_back(ready[size_t(n - 1 - pick(back))]);
    }
    if (pick(20) == 0) s.push_back(-1);  // an omitted optional input
    return s;
  };
  while (int(b.p.steps.size()) < steps) {
    if (views && pick(12) == 0) {
      const int parts = 2 + pick(3);
      std::vector<int64_t> sizes;
      int64_t total = 0;
      for (int k = 0; k < parts; ++k)
        sizes.push_back(pick(2) ? 64 * (1 + pick(8)) : pick(700)), total += sizes.back();
      const int parent = pick(5) == 0 ? b.external(total) : b.arena(total);
      std::vector<int> leaves;
      int64_t at = 0;
      for (int k = 0; k < parts; ++k) {
        const int v = b.view(parent, at, sizes[size_t(k)]);
        if (k == 0 && sizes[0] >= 2 && pick(3) == 0) {  // a view of a view, in two halves
          leaves.push_back(b.view(v, 0, sizes[0] / 2));
          leaves.push_back(b.view(v, sizes[0] / 2, sizes[0] - sizes[0] / 2));
        } else {
          leaves.push_back(v);
        }
        at += sizes[size_t(k)];
      }
      for (int v : leaves) b.step(src(), {v});
      if (pick(3) == 0) b.step(src(), {parent});  // a Concat step copying the other inputs
      ready.push_back(parent);
      if (pick(2)) ready.push_back(leaves[0]);
      continue;
    }
    std::vector<int> dst = {pick(30) == 0 ? b.external(size()) : b.arena(size())};
    if (pick(10) == 0) dst.push_back(b.arena(size()));
    b.step(src(), dst);
    for (int t : dst) ready.push_back(t);
  }
  return std::move(b.p);
}

// ---- executor: a kernel that computes dst[0][k] = scale * src[0][k] ---------------------------

class ScaleKernel : public kiln::Kernel {
 public:
  ScaleKernel(int64_t n, float scale) : n_(n), scale_(scale) {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return n_; }
  void run(const kiln::KernelArgs& a, int64_t b, int64_t e) const override {
    for (int64_t k = b; k < e; ++k) a.dst[0][k] = scale_ * a.src[0][k];
  }

 private:
  int64_t n_;
  float scale_;
  std::string name_ = "scale";
};

// Declares `bytes` of scratch; per tile it checks that no other call uses its scratch at the
// same time, fills it with the tile's id and reads it back, and writes dst[0][tile] = 1 when
// all was well (0 otherwise).
class ScratchKernel : public kiln::Kernel {
 public:
  ScratchKernel(int64_t tiles, int64_t bytes) : n_(tiles), bytes_(bytes) {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return n_; }
  int64_t scratch_bytes() const override { return bytes_; }
  void run(const kiln::KernelArgs& a, int64_t b, int64_t e) const override {
    float* s = scratch_floats(a);
    const bool aligned = reinterpret_cast<uintptr_t>(s) % 64 == 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!in_use_.insert(s).second) shared_ = true;
    }
    for (int64_t t = b; t < e; ++t) {
      std::fill(s, s + bytes_ / 4, float(t));
      std::this_thread::yield();  // give a thread sharing the slice a chance to show it
      const bool kept = std::all_of(s, s + bytes_ / 4, [&](float v) { return v == float(t); });
      a.dst[0][t] = aligned && kept ? 1.f : 0.f;
    }
    std::lock_guard<std::mutex> lock(mu_);
    in_use_.erase(s);
  }
  bool shared() const { return shared_; }

 private:
  int64_t n_, bytes_;
  std::string name_ = "scratch";
  mutable std::mutex mu_;
  mutable std::set<const float*> in_use_;
  mutable bool shared_ = false;
};

}  // namespace

TEST_CASE("memory plan: a small chain, hand-computed") {
  // x -> A (100 B) -> B (200 B) -> C (64 B) -> y. Lifetimes A [0,1], B [1,2], C [2,3].
  // Largest first: B at 0; A is alive with B -> after B's 256 rounded bytes; C is alive with
  // B only (A's last use is step 1) -> 256 too.
  Builder b;
  const int x = b.external(16), A = b.arena(100), B = b.arena(200), C = b.arena(64),
            y = b.external(16);
  b.step({x}, {A});
  b.step({A}, {B});
  b.step({B}, {C});
  b.step({C}, {y});
  kiln::plan_memory(&b.p);
  CHECK(b.p.tensors[size_t(B)].offset == 0);
  CHECK(b.p.tensors[size_t(A)].offset == 256);
  CHECK(b.p.tensors[size_t(C)].offset == 256);
  CHECK(b.p.tensors[size_t(x)].offset == -1);
  CHECK(b.p.tensors[size_t(y)].offset == -1);
  CHECK(b.p.arena_bytes == 384);
  CHECK(b.p.naive_bytes == 128 + 256 + 64);
  // Step 2 writes C over A's bytes: A's writer (0) and reader (1) must come first; 0 is
  // implied by 1, which reads A.
  CHECK(b.p.steps[0].deps.empty());
  CHECK(b.p.steps[1].deps == std::vector<int>{0});
  CHECK(b.p.steps[2].deps == std::vector<int>{1});
  CHECK(b.p.steps[3].deps == std::vector<int>{2});
  Checked c = check_plan(b.p, {true, false, false, false, true});
  CHECK_MESSAGE(c.failures == 0, c.first);
}

TEST_CASE("memory plan: two branches sharing nothing run independently") {
  // x -> A -> C, x -> B -> D, (C, D) -> y: A/B and C/D pairs are independent steps.
  Builder b;
  const int x = b.external(64), y = b.external(64);
  const int A = b.arena(1000), B = b.arena(1000), C = b.arena(1000), D = b.arena(1000);
  b.step({x}, {A});
  b.step({x}, {B});
  b.step({A}, {C});
  b.step({B}, {D});
  b.step({C, D}, {y});
  const auto ext = externals(b.p);
  kiln::plan_memory(&b.p);
  CHECK(b.p.steps[0].deps.empty());
  CHECK(b.p.steps[1].deps.empty());
  // 1024 B each, lifetimes A [0,2], B [1,3], C [2,4], D [3,4]: A, B, C are alive at step 2.
  // D could take A's bytes, but then step 3 would wait for step 2 (A's last reader), which it
  // does not read: step 3 reads nothing step 2 wrote, so A keeps its bytes through step 3 and
  // the two branches' last steps stay independent (the step stream overlaps them).
  CHECK(b.p.arena_bytes == 4 * 1024);
  CHECK(b.p.steps[2].deps == std::vector<int>{0});
  CHECK(b.p.steps[3].deps == std::vector<int>{1});
  Checked c = check_plan(b.p, ext);
  CHECK_MESSAGE(c.failures == 0, c.first);
  CHECK(b.p.steps[4].deps == std::vector<int>{2, 3});
}

TEST_CASE("memory plan: views of a Concat output") {
  SUBCASE("in the arena: producers write their slices independently") {
    Builder b;
    const int x = b.external(64), y = b.external(64);
    const int pre = b.arena(4096);  // dead before the concat: its bytes may be reused
    const int P = b.arena(192);
    const int v0 = b.view(P, 0, 64), v1 = b.view(P, 64, 64), v2 = b.view(P, 128, 64);
    b.step({x}, {pre});
    b.step({pre}, {v0});
    b.step({x}, {v1});
    b.step({x}, {v2});
    b.step({P}, {y});
    const auto ext = externals(b.p);
    kiln::plan_memory(&b.p);
    const int64_t base = b.p.tensors[size_t(P)].offset;
    CHECK(b.p.tensors[size_t(v0)].offset == base);
    CHECK(b.p.tensors[size_t(v1)].offset == base + 64);
    CHECK(b.p.tensors[size_t(v2)].offset == base + 128);
    // P lives from step 1 (first view write) to 4; pre [0,1] overlaps it: separate bytes.
    CHECK(b.p.arena_bytes == 4096 + 192);
    CHECK(b.p.naive_bytes == 4096 + 192);  // views own no bytes
    CHECK(b.p.steps[2].deps.empty());
    CHECK(b.p.steps[3].deps.empty());
    CHECK(b.p.steps[4].deps == std::vector<int>{1, 2, 3});
    Checked c = check_plan(b.p, ext);
    CHECK_MESSAGE(c.failures == 0, c.first);
  }
  SUBCASE("of an external graph output: views are external too") {
    Builder b;
    const int x = b.external(64), P = b.external(128);
    const int v0 = b.view(P, 0, 64), v1 = b.view(P, 64, 64);
    const int z = b.arena(64);
    b.step({x}, {v0});
    b.step({x}, {v1});
    b.step({v1}, {z});  // a later reader of one slice
    b.step({z}, {v0});  // rewrites slice 0: after step 0 (WAW), not after step 1
    const auto ext = externals(b.p);
    kiln::plan_memory(&b.p);
    CHECK(b.p.tensors[size_t(v0)].offset == -1);
    CHECK(b.p.tensors[size_t(v1)].offset == -1);
    CHECK(b.p.arena_bytes == 64);
    CHECK(b.p.steps[1].deps.empty());
    CHECK(b.p.steps[2].deps == std::vector<int>{1});
    CHECK(b.p.steps[3].deps == std::vector<int>{0, 2});
    Checked c = check_plan(b.p, ext);
    CHECK_MESSAGE(c.failures == 0, c.first);
  }
}

TEST_CASE("memory plan: random DAGs against the brute-force checker") {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    for (bool views : {false, true}) {
      CAPTURE(seed);
      CAPTURE(views);
      const int window = seed % 2 ? 8 : 64;
      Plan p = random_plan(seed, 2500, window, 0, views);
      const auto ext = externals(p);
      kiln::plan_memory(&p);
      Checked c = check_plan(p, ext);
      CHECK_MESSAGE(c.failures == 0, c.failures << " failures, first: " << c.first);
      CHECK(p.arena_bytes >= c.max_live);
      CHECK(p.arena_bytes <= c.greedy);
      MESSAGE("seed " << seed << " views " << views << ": arena " << p.arena_bytes
                      << " (naive greedy " << c.greedy << ", max alive " << c.max_live << ")");
    }
  }
}

TEST_CASE("memory plan: bad plans are refused with an error") {
  auto refused = [](Plan& p) {
    try {
      kiln::plan_memory(&p);
    } catch (const kiln::Error& e) {
      return e.code() == kiln::Code::internal;
    }
    return false;
  };
  SUBCASE("a view beyond its parent") {
    Builder b;
    const int P = b.arena(128);
    b.step({}, {b.view(P, 64, 65)});
    CHECK(refused(b.p));
  }
  SUBCASE("a cycle of views") {
    Builder b;
    const int a = b.arena(64), c = b.view(a, 0, 64);
    b.p.tensors[size_t(a)].parent = c;
    b.step({}, {c});
    CHECK(refused(b.p));
  }
  SUBCASE("a step using a tensor that does not exist") {
    Builder b;
    b.arena(64);
    b.step({1}, {0});
    CHECK(refused(b.p));
  }
}

TEST_CASE("memory plan: large plans are planned in near-linear time") {
  SUBCASE("a 50,000-step chain") {
    const int n = 50000;
    Builder b;
    int prev = b.external(4000);
    for (int i = 0; i < n; ++i) {
      const int t = i + 1 == n ? b.external(4000) : b.arena(4000);
      b.step({prev}, {t});
      prev = t;
    }
    const Timing t = time_plan(b.p);
    MESSAGE("50,000-step chain: " << t.wall * 1e3 << " ms wall, " << t.cpu * 1e3 << " ms CPU");
    CHECK_MESSAGE(t.cpu < 5, "took " << t.cpu << " s of CPU");
    CHECK(b.p.arena_bytes == 2 * 4032);  // two buffers, alternating
    bool chained = true;
    for (int i = 1; i < n; ++i) chained &= b.p.steps[size_t(i)].deps == std::vector<int>{i - 1};
    CHECK(chained);
  }
  SUBCASE("a wide random DAG of 50,000 steps with views") {
    Plan p = random_plan(99, 50000, 64, 256, true);
    const Timing t = time_plan(p);
    MESSAGE("50,000-step random DAG (window 64, far 256): "
            << t.wall * 1e3 << " ms wall, " << t.cpu * 1e3 << " ms CPU, arena " << p.arena_bytes);
    CHECK_MESSAGE(t.cpu < 5, "took " << t.cpu << " s of CPU");
    bool backwards = true;
    for (size_t i = 0; i < p.steps.size(); ++i)
      for (int d : p.steps[i].deps) backwards &= d >= 0 && size_t(d) < i;
    CHECK(backwards);
  }
}

TEST_CASE("executor: producers write straight into slices of an output (views)") {
  // y = concat(2x, 3x) written by two steps into views of the graph output, plus z = a copy
  // of y's second slice read back through the view (an output that is itself a view), and
  // w = concat through an arena parent read by a third step.
  kiln::Graph g;
  const kiln::ValueId xv = g.add_value("x"), yv = g.add_value("y"), zv = g.add_value("z"),
                      wv = g.add_value("w"), tv = g.add_value("tmp");
  g.inputs = {xv};
  g.outputs = {yv, zv, wv};
  Builder b;
  const int x = b.external(16), y = b.external(32), w = b.external(32);
  const int y0 = b.view(y, 0, 16), y1 = b.view(y, 16, 16);
  const int P = b.arena(32), p0 = b.view(P, 0, 16), p1 = b.view(P, 16, 16);
  for (int t : {x, y0, y1}) b.p.tensors[size_t(t)].value = t == x ? xv : yv;
  b.p.tensors[size_t(y)].value = yv;
  b.p.tensors[size_t(w)].value = wv;
  for (int t : {P, p0, p1}) b.p.tensors[size_t(t)].value = tv;
  auto add = [&](int src, int dst, float scale) {
    b.p.steps[size_t(b.step({src}, {dst}))].kernel = std::make_unique<ScaleKernel>(4, scale);
  };
  add(x, y0, 2);
  add(x, y1, 3);
  add(x, p0, -1);
  add(x, p1, 10);
  b.p.steps[size_t(b.step({P}, {w}))].kernel = std::make_unique<ScaleKernel>(8, 1);
  b.p.inputs = {x};
  b.p.outputs = {y, y1, w};
  b.p.tensors[size_t(y1)].value = zv;
  kiln::plan_memory(&b.p);
  for (int threads : {1, 2})
    for (auto sched :
         {kiln::Schedule::automatic, kiln::Schedule::graph, kiln::Schedule::in_order}) {
      CAPTURE(threads);
      CAPTURE(int(sched));
      kiln::Executor ex(g, b.p, threads, sched);
      if (threads > 1 && sched != kiln::Schedule::automatic)
        CHECK(ex.uses_graph() == (sched == kiln::Schedule::graph));
      kiln::Tensor in(kiln::DType::f32, {4});
      for (int k = 0; k < 4; ++k) in.data<float>()[k] = float(k + 1);
      std::vector<kiln::Tensor> out = {kiln::Tensor(kiln::DType::f32, {8}),
                                       kiln::Tensor(kiln::DType::f32, {4}),
                                       kiln::Tensor(kiln::DType::f32, {8})};
      ex.run({in}, out);
      const float want_y[8] = {2, 4, 6, 8, 3, 6, 9, 12};
      const float want_w[8] = {-1, -2, -3, -4, 10, 20, 30, 40};
      for (int k = 0; k < 8; ++k) CHECK(out[0].data<float>()[k] == want_y[k]);
      for (int k = 0; k < 4; ++k) CHECK(out[1].data<float>()[k] == want_y[4 + k]);
      for (int k = 0; k < 8; ++k) CHECK(out[2].data<float>()[k] == want_w[k]);
    }
}

TEST_CASE("executor: plan order unless the flow graph is asked for; both give the same results") {
  // x -> A -> y0 and x -> B -> y1: two independent steps of `tiles` tiles each; and a chain
  // x -> C -> D -> y0 of 1-tile steps.
  auto branches = [](int64_t tiles) {
    Builder b;
    const int x = b.external(4 * tiles), y0 = b.external(4 * tiles), y1 = b.external(4 * tiles);
    b.p.steps[size_t(b.step({x}, {y0}))].kernel = std::make_unique<ScaleKernel>(tiles, 2);
    b.p.steps[size_t(b.step({x}, {y1}))].kernel = std::make_unique<ScaleKernel>(tiles, 3);
    b.p.inputs = {x};
    b.p.outputs = {y0, y1};
    kiln::plan_memory(&b.p);
    return std::move(b.p);
  };
  kiln::Graph g;
  for (int i = 0; i < 3; ++i) g.add_value("v" + std::to_string(i));
  kiln::Plan narrow = branches(1), wide = branches(8);
  for (kiln::Plan* p : {&narrow, &wide}) {
    p->tensors[size_t(p->inputs[0])].value = 0;
    p->tensors[size_t(p->outputs[0])].value = 1;
    p->tensors[size_t(p->outputs[1])].value = 2;
  }
  CHECK(narrow.steps[1].deps.empty());  // the two steps may overlap (the stream runs ahead)
  CHECK_FALSE(kiln::Executor(g, narrow, 2).uses_graph());
  CHECK_FALSE(kiln::Executor(g, wide, 2).uses_graph());
  CHECK(kiln::Executor(g, narrow, 2, kiln::Schedule::graph).uses_graph());
  CHECK_FALSE(kiln::Executor(g, narrow, 1, kiln::Schedule::graph).uses_graph());  // one thread

  Builder c;
  const int x = c.external(4), m = c.arena(4), y = c.external(4);
  c.p.steps[size_t(c.step({x}, {m}))].kernel = std::make_unique<ScaleKernel>(1, 2);
  c.p.steps[size_t(c.step({m}, {y}))].kernel = std::make_unique<ScaleKernel>(1, 5);
  c.p.inputs = {x};
  c.p.outputs = {y};
  kiln::plan_memory(&c.p);
  c.p.tensors[size_t(x)].value = 0;
  c.p.tensors[size_t(y)].value = 1;
  CHECK_FALSE(kiln::Executor(g, c.p, 2).uses_graph());  // a chain has nothing to overlap
  // Both ways give the same result.
  for (auto sched : {kiln::Schedule::graph, kiln::Schedule::in_order}) {
    kiln::Executor ex(g, narrow, 2, sched);
    kiln::Tensor in(kiln::DType::f32, {1});
    in.data<float>()[0] = 1.5f;
    std::vector<kiln::Tensor> out = {kiln::Tensor(kiln::DType::f32, {1}),
                                     kiln::Tensor(kiln::DType::f32, {1})};
    ex.run({in}, out);
    CHECK(out[0].data<float>()[0] == 3.f);
    CHECK(out[1].data<float>()[0] == 4.5f);
  }
}

TEST_CASE("executor: each thread runs kernels in its own slice of the planned scratch") {
  // Two independent steps (they may run at once on the flow graph) declaring 1000 and 3000
  // bytes, then a third; a slice per thread of the largest, after the tensors.
  Builder b;
  const int x = b.external(4), m = b.arena(4 * 64), y0 = b.external(4 * 64),
            y1 = b.external(4 * 64);
  ScratchKernel* k[3];
  auto add = [&](int src, int dst, int64_t tiles, int64_t bytes) {
    auto kern = std::make_unique<ScratchKernel>(tiles, bytes);
    k[b.p.steps.size()] = kern.get();
    b.p.steps[size_t(b.step({src}, {dst}))].kernel = std::move(kern);
  };
  add(x, m, 64, 1000);
  add(x, y0, 64, 3000);
  add(m, y1, 64, 40);
  b.p.inputs = {x};
  b.p.outputs = {y0, y1};
  kiln::plan_memory(&b.p);
  CHECK(b.p.scratch_bytes == 3008);
  CHECK(b.p.run_bytes(2) == b.p.arena_bytes + 2 * 3008);
  CHECK(b.p.run_bytes(1) == b.p.arena_bytes + 3008);
  kiln::Graph g;
  for (int i = 0; i < 4; ++i) g.add_value("v" + std::to_string(i));
  b.p.tensors[size_t(x)].value = 0;
  b.p.tensors[size_t(m)].value = 1;
  b.p.tensors[size_t(y0)].value = 2;
  b.p.tensors[size_t(y1)].value = 3;
  for (int threads : {1, 2})
    for (auto sched : {kiln::Schedule::graph, kiln::Schedule::in_order}) {
      CAPTURE(threads);
      CAPTURE(int(sched));
      kiln::Executor ex(g, b.p, threads, sched);
      // Two callers at once on one executor, each run several times.
      auto caller = [&](std::vector<kiln::Tensor>* out) {
        kiln::Tensor in(kiln::DType::f32, {1});
        for (int r = 0; r < 20; ++r) ex.run({in}, *out);
      };
      std::vector<kiln::Tensor> o1 = {kiln::Tensor(kiln::DType::f32, {64}),
                                      kiln::Tensor(kiln::DType::f32, {64})};
      std::vector<kiln::Tensor> o2 = {kiln::Tensor(kiln::DType::f32, {64}),
                                      kiln::Tensor(kiln::DType::f32, {64})};
      std::thread other(caller, &o2);
      caller(&o1);
      other.join();
      for (const auto* out : {&o1, &o2})
        for (const kiln::Tensor& t : *out)
          for (int64_t i = 0; i < 64; ++i) CHECK(t.data<float>()[i] == 1.f);
      for (ScratchKernel* kk : k) CHECK_FALSE(kk->shared());
    }
  // A kernel run without the scratch it declares says so.
  std::vector<float> dst(64);
  float* outs[] = {dst.data()};
  CHECK_THROWS_WITH(k[0]->run(kiln::KernelArgs{nullptr, outs}, 0, 1),
                    doctest::Contains("without the 1000 bytes of scratch"));
}
