// Static memory plan of a Plan: arena offsets from liveness and the step dependencies that
// make sharing bytes between tensors safe when steps run concurrently.
#include "runtime/memory_plan.h"

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

namespace kiln {
namespace {

// Arena offsets from liveness: a tensor lives from the step writing it to the last step
// reading it; tensors whose lifetimes overlap never share bytes. Greedy by size (largest
// first, lowest fitting offset), which is near-optimal on CNN chains.
void assign_offsets(Plan& plan) {
  const size_t nt = plan.tensors.size();
  std::vector<int> first(nt, INT32_MAX), last(nt, -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int t : plan.steps[i].dst)
      if (t >= 0)
        first[size_t(t)] = std::min(first[size_t(t)], int(i)),
        last[size_t(t)] = std::max(last[size_t(t)], int(i));
    for (int t : plan.steps[i].src)
      if (t >= 0) last[size_t(t)] = std::max(last[size_t(t)], int(i));
  }
  std::vector<int> order;
  for (size_t t = 0; t < nt; ++t)
    if (plan.tensors[t].offset == -2) {
      order.push_back(int(t));
      plan.naive_bytes += round_up(plan.tensors[t].bytes, 64);
    }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return plan.tensors[size_t(a)].bytes > plan.tensors[size_t(b)].bytes;
  });
  struct Placed {
    int64_t off, end;
    int first, last;
  };
  std::vector<Placed> placed;
  int64_t peak = 0;
  for (int t : order) {
    const int64_t size = round_up(plan.tensors[size_t(t)].bytes, 64);
    const int f = first[size_t(t)], l = std::max(last[size_t(t)], f);
    // Address ranges taken by tensors alive at the same time, sorted by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed)
      if (p.first <= l && f <= p.last) busy.push_back({p.off, p.end});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    plan.tensors[size_t(t)].offset = off;
    placed.push_back({off, off + size, f, l});
    peak = std::max(peak, off + size);
  }
  plan.arena_bytes = peak;
}

void add_dependencies(Plan& plan) {
  const size_t nt = plan.tensors.size();
  std::vector<int> writer(nt, -1);
  std::vector<std::vector<int>> users(nt);  // steps reading or writing each tensor
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int t : plan.steps[i].dst)
      if (t >= 0) writer[size_t(t)] = int(i), users[size_t(t)].push_back(int(i));
    for (int t : plan.steps[i].src)
      if (t >= 0) users[size_t(t)].push_back(int(i));
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    Step& s = plan.steps[i];
    std::vector<int> d;
    for (int t : s.src)
      if (t >= 0 && writer[size_t(t)] >= 0 && writer[size_t(t)] != int(i))
        d.push_back(writer[size_t(t)]);
    for (int t : s.dst) {
      if (t < 0 || plan.tensors[size_t(t)].offset < 0) continue;
      const PlanTensor& b = plan.tensors[size_t(t)];
      for (size_t a = 0; a < nt; ++a) {
        const PlanTensor& pa = plan.tensors[a];
        if (int(a) == t || pa.offset < 0) continue;
        if (pa.offset >= b.offset + round_up(b.bytes, 64) ||
            b.offset >= pa.offset + round_up(pa.bytes, 64))
          continue;  // disjoint bytes
        for (int u : users[a])
          if (u < int(i)) d.push_back(u);  // earlier users of the reused bytes
      }
    }
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    s.deps = std::move(d);
  }
}

}  // namespace

void plan_memory(Plan* plan) {
  assign_offsets(*plan);
  add_dependencies(*plan);
}

}  // namespace kiln
