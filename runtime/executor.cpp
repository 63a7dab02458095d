#include "runtime/executor.h"

#include <tbb/flow_graph.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "graph/env.h"
#include "runtime/arenas.h"
#include "runtime/parallel_tiles.h"
#include "runtime/step_stream.h"

namespace kiln {

using Clock = std::chrono::steady_clock;

// Everything one run needs that must not be shared with a concurrent run: the arena, the
// pointer table and (with several threads) a flow graph over the plan's steps, built once.
struct Executor::Context {
  std::shared_ptr<void> arena;
  std::vector<float*> ptr;  // per plan tensor, refreshed per run
  RunProfile* prof = nullptr;
  Clock::time_point origin;
  // Pieces' events per arena slot (no lock between threads), merged into prof at the end.
  std::vector<std::vector<RunProfile::Event>> slot_events;
  std::unique_ptr<tbb::flow::graph> graph;
  std::unique_ptr<tbb::flow::broadcast_node<tbb::flow::continue_msg>> start;
  std::vector<std::unique_ptr<tbb::flow::continue_node<tbb::flow::continue_msg>>> nodes;
  // Every step's operand pointers, flattened at the executor's src_off_ / dst_off_.
  std::vector<const float*> src;
  std::vector<float*> dst;
  // Steps in plan order on several threads: the shared tile counters and (profiling) when each
  // step ended.
  StepStream stream;
  std::vector<Clock::time_point> step_end;
};

Executor::Executor(const Graph& g, const Plan& p, int threads, Schedule schedule)
    : g_(g), p_(p), threads_(threads) {
  if (threads_ > 1) arena_ = &shared_arena(threads_);
  scratch_at_ = round_up(p_.arena_bytes, 64);
  for (const Step& st : p_.steps) {
    tiles_.push_back(st.kernel->tiles());
    src_off_.push_back(src_total_);
    dst_off_.push_back(dst_total_);
    src_total_ += st.src.size();
    dst_total_ += st.dst.size();
  }
  // Plan order unless the graph is asked for: the step stream overlaps independent branches
  // too (a thread done with its part of a narrow step runs ahead into the next one that does
  // not read it), without the graph's task hand-off and join per step — the graph was slower
  // on every model with branches (bench/NOTES.md, "Figures behind rules in the code").
  // KILN_FLOW=1 / 0 forces.
  use_graph_ = schedule == Schedule::graph;
  if (const std::string f = env_value(EnvVar::flow); !f.empty()) use_graph_ = f[0] == '1';
  use_graph_ = use_graph_ && arena_;  // one thread: steps in order, no arena
  if (arena_ && !use_graph_)
    for (const Step& st : p_.steps) step_deps_.push_back(st.deps);
  // Only the constants a step reads: raw() copies a constant still in the mapped file, and
  // the packed weights (read by no step) may still be there (the accuracy guard runs plans
  // before the session releases them; the cost is in bench/NOTES.md, "accuracy guard").
  const std::vector<char> read = tensors_read(p_);
  const_ptr_.assign(p_.tensors.size(), nullptr);
  for (size_t t = 0; t < p_.tensors.size(); ++t)
    if (read[t] && p_.tensors[t].offset < 0 && g_.value(p_.tensors[t].value).is_const())
      const_ptr_[t] =
          static_cast<float*>(const_cast<void*>(g_.value(p_.tensors[t].value).constant->raw()));
  for (size_t t = 0; t < p_.tensors.size(); ++t) {
    if (p_.tensors[t].parent < 0 || p_.tensors[t].offset >= 0) continue;
    size_t root = t;
    int64_t at = 0;
    for (; p_.tensors[root].parent >= 0; root = size_t(p_.tensors[root].parent))
      at += p_.tensors[root].parent_offset;
    external_views_.push_back({t, root, at});
  }
  // The first run's context (arena pages populated, flow graph built) is made at load: the
  // memory is planned once, and the first run does not pay for it. Not for a huge arena (a
  // huge batch): populating costs 1.5-5 s per GiB on these VMs, which would make the load's
  // time unbounded; the first run touches those pages anyway.
  if (p_.run_bytes(threads_) <= kArenaAtLoadBytes) release(acquire());
}

Executor::~Executor() = default;

// Every step's operand pointers into c.src / c.dst, once per run (they change with the run's
// inputs and outputs); all schedules read them from there.
void Executor::gather_args(Context& c) const {
  c.src.resize(src_total_);
  c.dst.resize(dst_total_);
  for (size_t si = 0; si < p_.steps.size(); ++si) {
    const Step& s = p_.steps[si];
    for (size_t i = 0; i < s.src.size(); ++i)
      c.src[src_off_[si] + i] = s.src[i] < 0 ? nullptr : c.ptr[size_t(s.src[i])];
    for (size_t i = 0; i < s.dst.size(); ++i)
      c.dst[dst_off_[si] + i] = s.dst[i] < 0 ? nullptr : c.ptr[size_t(s.dst[i])];
  }
}

// Tiles [b, e) of step si; with a profile, also the piece's event.
void Executor::run_piece(Context& c, size_t si, int64_t b, int64_t e) const {
  KernelArgs args{c.src.data() + src_off_[si], c.dst.data() + dst_off_[si]};
  // The thread's scratch slice, after the tensors (Plan::run_bytes).
  if (p_.scratch_bytes)
    args.scratch =
        static_cast<char*>(c.arena.get()) + scratch_at_ + arena_slot(threads_) * p_.scratch_bytes;
  const Kernel& k = *p_.steps[si].kernel;
  // Step times need no per-piece record: clock reads and a shared list per piece slowed
  // 2-thread runs of small steps by a quarter (bench/NOTES.md, session 52).
  if (!c.prof || !c.prof->record_events) return k.run(args, b, e);
  const auto p0 = Clock::now();
  k.run(args, b, e);
  const auto p1 = Clock::now();
  auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - c.origin).count();
  };
  const int slot = arena_slot(threads_);
  c.slot_events[size_t(slot)].push_back({int(si), slot, us(p0), us(p1)});
}

void Executor::run_step(Context& c, size_t si) const {
  const auto t0 = c.prof ? Clock::now() : Clock::time_point();
  parallel_tiles(tiles_[si], threads_, [&](int64_t b, int64_t e) { run_piece(c, si, b, e); });
  if (c.prof)
    c.prof->step_ms[si] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void Executor::run_stream(Context& c) const {
  const size_t n = p_.steps.size();
  if (c.prof) c.step_end.assign(n, Clock::time_point());
  c.stream.reset(tiles_, threads_);
  auto piece = [&](size_t si, int64_t b, int64_t e) { run_piece(c, si, b, e); };
  auto done = [&](size_t si) {
    if (c.prof) c.step_end[si] = Clock::now();
  };
  arena_->execute([&] {
    tbb::task_group tg;
    for (int p = 1; p < threads_; ++p) tg.run([&, p] { c.stream.participate(p, piece, done); });
    c.stream.participate(0, piece, done);
    tg.wait();
  });
  c.stream.rethrow();
  if (c.prof) {
    // A step lasts from the latest end of the ones before (the run's start for the first) to
    // its own (none when it ended earlier, beside a step before it); a step without tiles takes
    // none.
    Clock::time_point last = c.origin;
    for (size_t si = 0; si < n; ++si) {
      if (c.step_end[si] == Clock::time_point()) continue;
      c.prof->step_ms[si] =
          std::max(0.0, std::chrono::duration<double, std::milli>(c.step_end[si] - last).count());
      last = std::max(last, c.step_end[si]);
    }
  }
}

std::unique_ptr<Executor::Context> Executor::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      auto c = std::move(free_.back());
      free_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<Context>();
  // From 2 MiB on huge pages, pre-faulted (alloc_zeroed): fewer TLB misses as the kernels
  // sweep activations, and the first run does not pay the page faults.
  c->arena = alloc_zeroed(size_t(std::max<int64_t>(p_.run_bytes(threads_), 64)));
  c->ptr.assign(p_.tensors.size(), nullptr);
  if (arena_ && !use_graph_) c->stream.set_deps(&step_deps_);
  if (use_graph_) {
    // The graph attaches to the arena it is built in, so build it inside ours.
    Context* cp = c.get();
    arena_->execute([&] {
      namespace flow = tbb::flow;
      cp->graph = std::make_unique<flow::graph>();
      cp->start = std::make_unique<flow::broadcast_node<flow::continue_msg>>(*cp->graph);
      for (size_t i = 0; i < p_.steps.size(); ++i)
        cp->nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
            *cp->graph, [this, cp, i](const flow::continue_msg&) { run_step(*cp, i); }));
      for (size_t i = 0; i < p_.steps.size(); ++i) {
        if (p_.steps[i].deps.empty()) flow::make_edge(*cp->start, *cp->nodes[i]);
        for (int d : p_.steps[i].deps) flow::make_edge(*cp->nodes[size_t(d)], *cp->nodes[i]);
      }
    });
  }
  return c;
}

void Executor::release(std::unique_ptr<Context> c) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(c));
}

void Executor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                   RunProfile* profile) {
  auto ctx = acquire();
  struct Guard {
    Executor* e;
    std::unique_ptr<Context>& c;
    ~Guard() { e->release(std::move(c)); }
  } guard{this, ctx};
  Context& c = *ctx;
  if (profile) {
    profile->step_ms.assign(p_.steps.size(), 0.0);
    profile->events.clear();
  }
  c.prof = profile;
  if (profile && profile->record_events) {
    c.slot_events.resize(size_t(std::max(threads_, 1)));
    for (auto& v : c.slot_events) v.clear();
  }
  c.origin = Clock::now();

  char* base = static_cast<char*>(c.arena.get());
  std::vector<float*>& ptr = c.ptr;
  for (size_t t = 0; t < p_.tensors.size(); ++t) {
    const PlanTensor& pt = p_.tensors[t];
    ptr[t] = pt.offset >= 0 ? reinterpret_cast<float*>(base + pt.offset) : const_ptr_[t];
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    ptr[size_t(p_.inputs[i])] = static_cast<float*>(const_cast<void*>(inputs[i].raw()));
  // Outputs computed by a step are written straight into the caller's buffers; outputs that
  // are constants, graph inputs or listed twice are copied at the end.
  std::vector<size_t> copies;
  for (size_t i = 0; i < outputs.size(); ++i) {
    float*& slot = ptr[size_t(p_.outputs[i])];
    if (slot == nullptr && p_.tensors[size_t(p_.outputs[i])].parent < 0)
      slot = static_cast<float*>(outputs[i].raw());
    else
      copies.push_back(i);
  }
  // Views of external tensors point into their root, whose pointer is known only now.
  for (const ExternalView& v : external_views_)
    if (ptr[v.root])
      ptr[v.view] = reinterpret_cast<float*>(reinterpret_cast<char*>(ptr[v.root]) + v.at);

  gather_args(c);
  if (arena_ && !use_graph_) {
    run_stream(c);
  } else if (use_graph_) {
    // Independent branches (Inception-style modules, parallel convs into a concat) run
    // concurrently; each step's tiles are split with parallel_tiles in the same arena.
    arena_->execute([&] {
      c.start->try_put(tbb::flow::continue_msg());
      try {
        c.graph->wait_for_all();
      } catch (...) {
        c.graph->reset();  // a failed step cancels the graph; make it reusable
        throw;
      }
    });
  } else {
    for (size_t si = 0; si < p_.steps.size(); ++si) run_step(c, si);
  }
  if (profile && profile->record_events)
    for (const auto& v : c.slot_events)
      profile->events.insert(profile->events.end(), v.begin(), v.end());
  for (size_t i : copies) {
    const float* from = ptr[size_t(p_.outputs[i])];
    if (from != outputs[i].raw()) std::memcpy(outputs[i].raw(), from, outputs[i].nbytes());
  }
}

}  // namespace kiln
