// Static memory plan of a Plan: arena offsets from liveness and the step dependencies that
// make sharing bytes between tensors safe when steps run concurrently.
//
// Cost: placement O(T log T + P log T), where T = tensors and P = pairs of tensors whose
// lifetimes overlap (the "busy" lists the greedy placement has to look at; a chain has
// P = O(T)); dependencies O(A log A) for A = tensor accesses of all steps (plus the edges
// themselves). The former scans were O(T^2) and O(S * T) and gave a chain O(S^2) edges.
#include "runtime/memory_plan.h"

#include <algorithm>
#include <climits>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"

namespace kiln {
namespace {

constexpr int kNever = INT_MAX;  // first use of a tensor no step touches

[[noreturn]] void bad_plan(size_t t, const std::string& why) {
  fail(Code::internal, "memory plan: plan tensor " + std::to_string(t) + " " + why);
}

// Where every tensor's bytes live: its root (the tensor that owns bytes; itself unless it is a
// view) and its byte offset inside the root.
struct Roots {
  std::vector<int> root;
  std::vector<int64_t> at;
};

Roots resolve_views(const Plan& plan) {
  const size_t nt = plan.tensors.size();
  Roots r{std::vector<int>(nt, -1), std::vector<int64_t>(nt, 0)};
  std::vector<int> chain;
  for (size_t t = 0; t < nt; ++t) {
    // Walk up to the first tensor whose root is known (or a real root), then fill the chain.
    chain.clear();
    size_t u = t;
    while (r.root[u] < 0) {
      const PlanTensor& pt = plan.tensors[u];
      if (pt.parent < 0) {
        r.root[u] = int(u);
        break;
      }
      if (size_t(pt.parent) >= nt) bad_plan(u, "is a view of a tensor that does not exist");
      if (pt.parent_offset < 0 || pt.bytes < 0 ||
          pt.parent_offset + pt.bytes > plan.tensors[size_t(pt.parent)].bytes)
        bad_plan(u, "is a view outside the bytes of its parent " + std::to_string(pt.parent));
      if (chain.size() > nt) bad_plan(t, "is part of a cycle of views");
      chain.push_back(int(u));
      u = size_t(pt.parent);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const PlanTensor& pt = plan.tensors[size_t(*it)];
      r.root[size_t(*it)] = r.root[size_t(pt.parent)];
      r.at[size_t(*it)] = r.at[size_t(pt.parent)] + pt.parent_offset;
    }
  }
  return r;
}

// A max segment tree over arena roots sorted by first use; a root's value is its last use once
// it is placed (-1 before). "Placed roots alive during [f, l]" = placed roots with first <= l
// (a prefix of the order) and last >= f, found in O((k + 1) log T) for k answers.
class LiveIndex {
 public:
  explicit LiveIndex(size_t n) : size_(1) {
    while (size_ < n) size_ *= 2;
    max_.assign(2 * size_, -1);
  }
  void set(size_t i, int last) {
    size_t x = i + size_;
    max_[x] = last;
    for (x /= 2; x >= 1; x /= 2) max_[x] = std::max(max_[2 * x], max_[2 * x + 1]);
  }
  // Appends the index of every leaf in [0, prefix) whose value is >= f.
  void collect(size_t prefix, int f, std::vector<size_t>& out) const {
    collect(1, 0, size_, prefix, f, out);
  }

 private:
  void collect(size_t x, size_t lo, size_t hi, size_t prefix, int f,
               std::vector<size_t>& out) const {
    if (lo >= prefix || max_[x] < f) return;
    if (hi - lo == 1) return out.push_back(lo);
    const size_t mid = (lo + hi) / 2;
    collect(2 * x, lo, mid, prefix, f, out);
    collect(2 * x + 1, mid, hi, prefix, f, out);
  }
  size_t size_;
  std::vector<int> max_;
};

// Arena offsets from liveness: a root lives from the first step touching it or any of its
// views to the last one; roots whose lifetimes overlap never share bytes. Greedy by size
// (largest first, lowest fitting offset), which is near-optimal on CNN chains. Views take
// their root's offset plus their place in it; views of external roots stay external (-1).
void assign_offsets(Plan& plan, const Roots& r) {
  const size_t nt = plan.tensors.size();
  std::vector<int> first(nt, kNever), last(nt, -1);
  auto use = [&](int t, int step) {
    if (t < -1 || t >= int(nt))
      fail(Code::internal, "memory plan: step " + std::to_string(step) + " uses plan tensor " +
                               std::to_string(t) + " of " + std::to_string(nt));
    if (t < 0) return;
    const size_t root = size_t(r.root[size_t(t)]);
    first[root] = std::min(first[root], step);
    last[root] = std::max(last[root], step);
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int t : plan.steps[i].dst) use(t, int(i));
    for (int t : plan.steps[i].src) use(t, int(i));
  }
  // Graph outputs whose bytes are another tensor's (a view node's output) are copied to the
  // caller's buffers after the last step: their roots must outlive every step.
  for (int t : plan.outputs)
    if (t >= 0 && size_t(t) < nt) {
      const size_t root = size_t(r.root[size_t(t)]);
      last[root] = std::max(last[root], int(plan.steps.size()));
    }

  // A root's bytes stay its own one step longer where the next step does not read what its
  // last user wrote: that step may run beside the last user (the step stream runs ahead into
  // an independent step, step_stream.h), and sharing the bytes would order the two (GoogLeNet
  // at 2 threads: bench/NOTES.md, session 24). Chains (each step reading the one before) are
  // placed as before.
  std::vector<char> chained(plan.steps.size(), 0);  // step i reads a root step i - 1 wrote
  std::vector<int> writer(nt, -1);                  // the latest step writing each root
  for (size_t i = 1; i < plan.steps.size(); ++i) {
    for (int t : plan.steps[i - 1].dst)
      if (t >= 0) writer[size_t(r.root[size_t(t)])] = int(i) - 1;
    for (int t : plan.steps[i].src)
      if (t >= 0 && writer[size_t(r.root[size_t(t)])] == int(i) - 1) chained[i] = 1;
  }
  for (size_t t = 0; t < nt; ++t)
    if (last[t] >= 0 && size_t(last[t]) + 1 < plan.steps.size() && !chained[size_t(last[t]) + 1])
      ++last[t];
  // Roots to place, and the order of alive ones by first use for the LiveIndex.
  std::vector<int> order, by_first;
  int64_t naive = 0, peak = 0;
  for (size_t t = 0; t < nt; ++t) {
    if (r.root[t] != int(t)) continue;
    const PlanTensor& pt = plan.tensors[t];
    if (pt.offset == -2) {
      order.push_back(int(t));
      naive += round_up(pt.bytes, 64);
    }
    if ((pt.offset == -2 || pt.offset >= 0) && first[t] != kNever) by_first.push_back(int(t));
  }
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](int a, int b) { return first[size_t(a)] < first[size_t(b)]; });
  std::vector<size_t> pos(nt, 0);
  for (size_t i = 0; i < by_first.size(); ++i) pos[size_t(by_first[i])] = i;
  std::vector<std::pair<int64_t, int64_t>> block(by_first.size());  // placed [offset, end)
  std::vector<int> firsts(by_first.size());
  for (size_t i = 0; i < by_first.size(); ++i) firsts[i] = first[size_t(by_first[i])];
  LiveIndex live(by_first.size());
  // Roots already given an offset by the caller are obstacles from the start.
  for (size_t i = 0; i < by_first.size(); ++i) {
    const PlanTensor& pt = plan.tensors[size_t(by_first[i])];
    if (pt.offset >= 0) {
      block[i] = {pt.offset, pt.offset + round_up(pt.bytes, 64)};
      live.set(i, last[size_t(by_first[i])]);
      peak = std::max(peak, block[i].second);
    }
  }

  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return plan.tensors[size_t(a)].bytes > plan.tensors[size_t(b)].bytes;
  });
  std::vector<size_t> hits;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (int t : order) {
    PlanTensor& pt = plan.tensors[size_t(t)];
    const int f = first[size_t(t)], l = last[size_t(t)];
    if (f == kNever) {  // never touched by any step: needs no bytes of its own
      pt.offset = 0;
      continue;
    }
    const int64_t size = round_up(pt.bytes, 64);
    // Address ranges taken by placed roots alive at the same time, sorted by offset.
    const size_t prefix =
        size_t(std::upper_bound(firsts.begin(), firsts.end(), l) - firsts.begin());
    hits.clear();
    live.collect(prefix, f, hits);
    busy.clear();
    for (size_t h : hits) busy.push_back(block[h]);
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    pt.offset = off;
    block[pos[size_t(t)]] = {off, off + size};
    live.set(pos[size_t(t)], l);
    peak = std::max(peak, off + size);
  }
  for (size_t t = 0; t < nt; ++t) {
    if (r.root[t] == int(t)) continue;
    const int64_t root_off = plan.tensors[size_t(r.root[t])].offset;
    plan.tensors[t].offset = root_off >= 0 ? root_off + r.at[t] : -1;
  }
  plan.arena_bytes = peak;
  plan.naive_bytes = naive;
}

// Per byte range of one address space: the step that wrote it last and the steps that read
// it since. Disjoint segments keyed by start; bytes never touched have no segment.
class AccessMap {
 public:
  // Step s reads [b, e): it depends on the last writer.
  void read(int64_t b, int64_t e, int s, std::vector<int>& deps) {
    if (b >= e) return;
    split(b);
    split(e);
    auto it = segs_.lower_bound(b);
    for (int64_t at = b; at < e;) {
      if (it == segs_.end() || it->first > at) {  // untouched bytes: remember the reader
        const int64_t gap_end = it == segs_.end() ? e : std::min(e, it->first);
        it = std::next(segs_.emplace_hint(it, at, Seg{gap_end, -1, {s}}));
        at = gap_end;
        continue;
      }
      Seg& g = it->second;
      if (g.writer >= 0 && g.writer != s) deps.push_back(g.writer);
      if (g.readers.empty() || g.readers.back() != s) g.readers.push_back(s);
      at = g.end;
      ++it;
    }
  }
  // Step s writes [b, e): it depends on the last writer and every reader since.
  void write(int64_t b, int64_t e, int s, std::vector<int>& deps) {
    if (b >= e) return;
    split(b);
    split(e);
    auto it = segs_.lower_bound(b);
    while (it != segs_.end() && it->first < e) {
      const Seg& g = it->second;
      // Every reader since the last write depends on that writer (read() gave it the edge),
      // so the writer itself is needed only when nobody read the bytes since.
      if (g.readers.empty() && g.writer >= 0 && g.writer != s) deps.push_back(g.writer);
      for (int u : g.readers)
        if (u != s) deps.push_back(u);
      it = segs_.erase(it);
    }
    segs_.emplace_hint(it, b, Seg{e, s, {}});
  }

 private:
  struct Seg {
    int64_t end;
    int writer;
    std::vector<int> readers;
  };
  // Makes x a segment boundary if it falls inside a segment.
  void split(int64_t x) {
    auto it = segs_.upper_bound(x);
    if (it == segs_.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      Seg right = it->second;
      it->second.end = x;
      segs_.emplace_hint(std::next(it), x, std::move(right));
    }
  }
  std::map<int64_t, Seg> segs_;
};

// Step dependencies by tracking, per byte, its last writer and the readers since (as a
// dataflow runtime does), over one address space: the arena, then every external root that
// some step writes (a graph output, possibly through views) at its own virtual range after it.
//
// Why this is enough although a step does not get an edge to EVERY earlier step that touched
// the bytes it reads or writes: claim — after steps 0..i-1 are processed, every earlier step
// that read or wrote byte x is the last writer W(x), one of the readers since R(x), or an
// ancestor of W(x). Induction: a read adds itself to R(x); a write w gets edges to W(x) and
// all of R(x), so everything the claim covered before is now an ancestor of w = the new W(x).
// (The edge to W(x) is skipped when R(x) is not empty: each reader in R(x) already has an
// edge to W(x), made when it read x, so W(x) is an ancestor of w through it.)
// Hence a reader (edge to W(x)) comes after every earlier writer of its bytes (RAW: the
// producers of its inputs, including the producers of views of the input), and a writer (edges
// to W(x) and R(x)) after every earlier reader and writer of its bytes (WAR / WAW: the users
// of the tensors whose bytes it reuses). Dropped edges are implied transitively.
void add_dependencies(Plan& plan, const Roots& r) {
  const size_t nt = plan.tensors.size();
  // Only roots some step writes need tracking: constants and graph inputs are read-only.
  std::vector<char> written(nt, 0);
  for (const Step& s : plan.steps)
    for (int t : s.dst)
      if (t >= 0) written[size_t(r.root[size_t(t)])] = 1;
  std::vector<int64_t> base(nt, -1);  // start of each tracked root's range
  int64_t next = 0;
  for (size_t t = 0; t < nt; ++t)
    if (r.root[t] == int(t) && plan.tensors[t].offset >= 0)
      next = std::max(next, plan.tensors[t].offset + round_up(plan.tensors[t].bytes, 64)),
      base[t] = plan.tensors[t].offset;
  for (size_t t = 0; t < nt; ++t)
    if (r.root[t] == int(t) && base[t] < 0 && written[t])
      base[t] = next, next += round_up(plan.tensors[t].bytes, 64);
  // A root covers its 64-byte-rounded block (what the placement reserved); a view exactly
  // its bytes, so producers of neighbouring slices of one Concat stay independent.
  auto range = [&](int t) {
    const size_t root = size_t(r.root[size_t(t)]);
    const int64_t b = base[root] < 0 ? -1 : base[root] + r.at[size_t(t)];
    const int64_t n =
        root == size_t(t) ? round_up(plan.tensors[root].bytes, 64) : plan.tensors[size_t(t)].bytes;
    return std::pair<int64_t, int64_t>{b, b + n};
  };

  AccessMap bytes;
  std::vector<int> writer(nt, -1);  // last step writing each tensor (zero-byte ones too)
  std::vector<int> d;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    Step& s = plan.steps[i];
    d.clear();
    for (int t : s.src) {
      if (t < 0) continue;
      if (writer[size_t(t)] >= 0 && writer[size_t(t)] != int(i)) d.push_back(writer[size_t(t)]);
      auto [b, e] = range(t);
      if (b >= 0) bytes.read(b, e, int(i), d);
    }
    // A step without tiles (a view node's) writes nothing: its output aliases bytes others
    // wrote, and its readers depend on their writers.
    const bool writes = !s.kernel || s.kernel->tiles() > 0;
    for (int t : s.dst) {
      if (t < 0 || !writes) continue;
      auto [b, e] = range(t);
      if (b >= 0) bytes.write(b, e, int(i), d);
    }
    for (int t : s.dst)
      if (t >= 0) writer[size_t(t)] = int(i);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    s.deps = d;
  }
}

}  // namespace

void plan_memory(Plan* plan) {
  const Roots r = resolve_views(*plan);
  assign_offsets(*plan, r);
  add_dependencies(*plan, r);
  plan->scratch_bytes = 0;
  for (const Step& st : plan->steps)
    if (st.kernel)
      plan->scratch_bytes = std::max(plan->scratch_bytes, round_up(st.kernel->scratch_bytes(), 64));
}

int64_t Plan::run_bytes(int threads) const {
  return round_up(arena_bytes, 64) + int64_t(std::max(1, threads)) * scratch_bytes;
}

}  // namespace kiln
