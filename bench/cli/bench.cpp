// `kiln bench`: load time and its breakdown, first-run and warm latency percentiles, arena and
// process memory, and optionally a per-step table (--layers) and a Chrome trace (--trace).
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <latch>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "cli.h"
#include "graph/dynamic.h"
#include "runtime/executor.h"
#include "runtime/npy.h"
#include "runtime/plan.h"
#include "runtime/selection.h"

namespace kiln::cli {
namespace {

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Per-step table: median over `runs` profiled runs of each plan step.
LayerProfile print_layers(const Session& s, const std::vector<Tensor>& ins,
                          std::vector<Tensor>& outs, int runs) {
  const Plan& plan = s.plan();
  const LayerProfile prof = profile_layers(s, ins, outs, runs);
  const std::vector<double>& med = prof.ms;
  const double total = prof.total_ms;
  // Tiles and how evenly the static split gives them to the threads: with T tiles on n
  // threads the slowest thread runs ceil(T/n), so at best T/n / ceil(T/n) of the cores work.
  const int threads = s.threads();
  auto balance = [&](int64_t t) {
    return t <= 0 ? 1.0 : double(t) / threads / double((t + threads - 1) / threads);
  };
  double weighted_balance = 0;
  std::printf("\n%4s  %-18s %-50s %-17s %9s %6s %8s %9s %6s %5s %s\n", "step", "op", "kernel",
              "layouts", "ms", "share", "GFLOP/s", "pred_ms", "tiles", "split", "time source");
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    const double macs = st.kernel->macs();
    const NodeChoice* c = st.node >= 0 ? &s.selection().nodes[size_t(st.node)] : nullptr;
    const int64_t tiles = st.kernel->tiles();
    weighted_balance += balance(tiles) * med[i] / total;
    std::printf("%4zu  %-18s %-50s %-17s %9.4f %5.1f%% %8.1f %9.4f %6lld %4.0f%% %s\n", i,
                step_op(s, st).c_str(), st.kernel->name().c_str(), step_layouts(plan, st).c_str(),
                med[i], 100.0 * med[i] / total,
                macs > 0 && med[i] > 0 ? 2.0 * macs / (med[i] * 1e6) : 0.0, step_pred_ms(s, st),
                (long long)tiles, 100.0 * balance(tiles), c ? choice_source(*c) : "-");
  }
  std::printf("total of step medians: %.3f ms; time-weighted tile split over %d threads: %.1f%%\n",
              total, threads, 100.0 * weighted_balance);
  if (const DynamicTail* t = s.tail())
    std::printf("run-time tail (%zu nodes from %s on, reference kernels): %.3f ms\n",
                t->graph.nodes.size(), t->first.c_str(), prof.tail_ms);
  std::printf("reference kernels: %.3f ms (%.1f%% of the steps' time)\n", prof.reference_ms,
              total > 0 ? 100.0 * prof.reference_ms / total : 0.0);
  return prof;
}

// Chrome trace (chrome://tracing, Perfetto): one complete event per piece of work, one lane
// (tid) per thread.
void write_trace(const Session& s, const std::vector<Tensor>& ins, std::vector<Tensor>& outs,
                 const std::string& path) {
  RunProfile prof;
  prof.record_events = true;
  run_into(s, ins, outs, &prof);
  std::ofstream f(path, std::ios::trunc);
  if (!f) fail(Code::io_error, "cannot create '" + path + "'");
  f << "{\"traceEvents\": [\n";
  bool first = true;
  for (const auto& e : prof.events) {
    const Step& st = s.plan().steps[size_t(e.step)];
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"ts\": %.3f, \"dur\": %.3f", e.begin_us,
                  e.end_us - e.begin_us);
    f << (first ? "" : ",\n") << "{\"name\": " << json_escape(st.kernel->name())
      << ", \"cat\": " << json_escape(step_op(s, st))
      << ", \"ph\": \"X\", \"pid\": 1, \"tid\": " << e.thread << ", " << buf
      << ", \"args\": {\"step\": " << e.step << "}}";
    first = false;
  }
  f << "\n]}\n";
  f.close();
  if (!f) fail(Code::io_error, "cannot write '" + path + "'");
  std::printf("wrote %s (%zu events)\n", path.c_str(), prof.events.size());
}

// The part of a load's plan time not in its named parts (memory plan, executor, cache I/O).
double other_load_ms(const LoadStats& ls) {
  return std::max(0.0, ls.plan_ms - ls.profile_ms - ls.solve_ms - ls.jit_ms - ls.pack_ms);
}

std::string breakdown_str(const LoadStats& ls) {
  char buf[160];
  std::snprintf(
      buf, sizeof buf,
      "parse %.1f, passes %.1f, profile %.1f, solve %.1f, jit %.1f, pack %.1f, other %.1f",
      ls.parse_ms, ls.passes_ms, ls.profile_ms, ls.solve_ms, ls.jit_ms, ls.pack_ms,
      other_load_ms(ls));
  return buf;
}

// Each part's median over several loads (the parts need not add up to the median total).
LoadStats median_stats(const std::vector<LoadStats>& v) {
  LoadStats m;
  for (double LoadStats::*f :
       {&LoadStats::parse_ms, &LoadStats::passes_ms, &LoadStats::plan_ms, &LoadStats::total_ms,
        &LoadStats::profile_ms, &LoadStats::solve_ms, &LoadStats::jit_ms, &LoadStats::pack_ms}) {
    std::vector<double> xs;
    for (const LoadStats& s : v) xs.push_back(s.*f);
    m.*f = percentile(xs, 50);
  }
  return m;
}

// One strategy's session and its measurements.
struct Bench {
  std::unique_ptr<Session> s;
  std::vector<std::unique_ptr<Session>> more;  // --sessions: request threads 1.. run these
  double load_ms = 0, first_ms = 0;
  std::vector<double> reloads;  // --loads: later loads in this process
  std::vector<LoadStats> reload_stats;
  std::vector<Tensor> ins, outs;
  std::vector<double> lat;  // every timed run of every request
  double wall_ms = 0;       // the timed runs' wall time (for the throughput)
};

// Latency figures of a sample of run times, ms.
struct Latency {
  double min = 0, max = 0, mean = 0, stddev = 0, p50 = 0, p90 = 0, p99 = 0;
};

Latency latency_of(const std::vector<double>& xs) {
  Latency l;
  if (xs.empty()) return l;
  l.min = *std::min_element(xs.begin(), xs.end());
  l.max = *std::max_element(xs.begin(), xs.end());
  for (double x : xs) l.mean += x;
  l.mean /= double(xs.size());
  double var = 0;
  for (double x : xs) var += (x - l.mean) * (x - l.mean);
  l.stddev = std::sqrt(var / double(xs.size()));  // of the sample itself (NumPy's std)
  l.p50 = percentile(xs, 50);
  l.p90 = percentile(xs, 90);
  l.p99 = percentile(xs, 99);
  return l;
}

Bench load_one(const Args& a, const std::string& strategy) {
  Bench b;
  auto t0 = Clock::now();
  b.s = Session::load_file(a.model, session_options(a, strategy));
  b.load_ms = ms_between(t0, Clock::now());
  // A process's first load also pays for its own start (heap growth, TBB's threads, page
  // faults in the library); later loads are what a server creating sessions sees, and how
  // ONNX Runtime's session creation is usually timed (the min/median of 3 in one process).
  for (int i = 0; i < a.loads; ++i) {
    auto r0 = Clock::now();
    auto s = Session::load_file(a.model, session_options(a, strategy));
    b.reloads.push_back(ms_between(r0, Clock::now()));
    b.reload_stats.push_back(s->load_stats());
  }
  if (a.sessions)
    for (int i = 1; i < a.concurrency; ++i)
      b.more.push_back(Session::load_file(a.model, session_options(a, strategy)));
  b.ins = a.inputs.empty() ? random_inputs(*b.s) : read_inputs(a, *b.s);
  b.outs = make_outputs(*b.s);
  // The first run pays for first-touching the arena and cold caches: reported on its own.
  auto f0 = Clock::now();
  run_into(*b.s, b.ins, b.outs);
  b.first_ms = ms_between(f0, Clock::now());
  for (int i = 0; i < a.warmup; ++i) run_into(*b.s, b.ins, b.outs);
  return b;
}

// Whether a request that began timing at `start` and has done `done` runs does another:
// --seconds if given, else --runs.
bool more_runs(const Args& a, Clock::time_point start, int done) {
  return a.seconds > 0 ? ms_between(start, Clock::now()) < a.seconds * 1e3 : done < a.runs;
}

// --concurrency N: N request threads, each with its own inputs and outputs, running one
// session (Session::run is thread-safe) or, with --sessions, a session each. Each does its
// warm-up, then all start their timed runs together; the wall time runs from that start to
// the last request's end.
void measure_concurrent(const Args& a, Bench& b) {
  const size_t n = size_t(a.concurrency);
  std::vector<std::vector<double>> lat(n);
  std::vector<std::exception_ptr> error(n);
  std::vector<Clock::time_point> end(n);
  std::latch ready(std::ptrdiff_t(n) + 1), go(1);
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      bool arrived = false;
      try {
        const Session& s = r == 0 || b.more.empty() ? *b.s : *b.more[r - 1];
        std::vector<Tensor> ins;
        for (const Tensor& t : b.ins) ins.push_back(t.clone());
        std::vector<Tensor> outs = make_outputs(s);
        // Warmed up together, so the session has made a run context (arena) per request
        // before the timing starts.
        for (int i = 0; i < 1 + a.warmup; ++i) run_into(s, ins, outs);
        ready.count_down();
        arrived = true;
        go.wait();
        std::vector<double>& mine = lat[r];
        for (int i = 0; more_runs(a, start, i); ++i) {
          const auto r0 = Clock::now();
          run_into(s, ins, outs);
          mine.push_back(ms_between(r0, Clock::now()));
        }
      } catch (...) {
        error[r] = std::current_exception();
        if (!arrived) ready.count_down();
      }
      end[r] = Clock::now();
    });
  ready.arrive_and_wait();
  start = Clock::now();
  go.count_down();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : error)
    if (e) std::rethrow_exception(e);
  b.wall_ms = ms_between(start, *std::max_element(end.begin(), end.end()));
  for (const auto& l : lat) b.lat.insert(b.lat.end(), l.begin(), l.end());
}

// Timed runs. Several strategies take turns run by run, so a noisy machine slows them alike
// and their latencies compare (one after the other, minutes apart, they did not). With
// --concurrency each strategy's requests run in turn.
void measure(const Args& a, std::vector<Bench>& all) {
  if (a.concurrency > 1) {
    for (Bench& b : all) measure_concurrent(a, b);
    return;
  }
  const auto start = Clock::now();
  for (int i = 0; more_runs(a, start, i); ++i)
    for (Bench& b : all) {
      auto r0 = Clock::now();
      run_into(*b.s, b.ins, b.outs);
      b.lat.push_back(ms_between(r0, Clock::now()));
      b.wall_ms += b.lat.back();  // its own runs only, not the other strategies'
    }
}

// Prints one strategy's results; returns its JSON object.
std::string report_one(const Args& a, Bench& b) {
  Session* s = b.s.get();
  const LoadStats& ls = s->load_stats();
  const Plan& plan = s->plan();
  const double load_ms = b.load_ms, first_ms = b.first_ms;
  std::vector<Tensor>& ins = b.ins;
  std::vector<Tensor>& outs = b.outs;
  std::vector<double>& lat = b.lat;
  const Latency l = latency_of(lat);
  const double rss = peak_rss_mb();
  const long long batch = std::max<long long>(s->batch(), 1);
  const double per_s = b.wall_ms > 0 ? double(lat.size()) * 1e3 / b.wall_ms : 0;

  std::printf("model: %s\n", a.model.c_str());
  std::printf("isa: %s%s  threads: %d  batch: %lld  runs: %zu  warmup: %d  concurrency: %d%s\n",
              isa_name(s->isa()), a.reference ? " (reference)" : "", s->threads(), batch,
              lat.size(), a.warmup, a.concurrency,
              a.concurrency > 1 ? (a.sessions ? " (a session each)" : " (one session)") : "");
  const Selection& sel = s->selection();
  std::printf(
      "strategy: %s  tune: %s  predicted_ms: %.3f%s  solve_ms: %.2f  cache: %lld hits, "
      "%lld misses%s  measured: %d\n",
      strategy_name(sel.strategy), tune_mode_name(sel.tune), sel.predicted_ms,
      sel.optimal ? " (proven optimal)" : "", sel.solve_ms, (long long)sel.cache_hits,
      (long long)sel.cache_misses, sel.plan_from_cache ? ", plan from cache" : "",
      sel.measurements);
  std::printf("%s  precision: %s\n", accuracy_summary(sel).c_str(), precision_name(sel.precision));
  const double other_ms = other_load_ms(ls);
  std::printf("load_ms: %.3f  (%s)\n", load_ms, breakdown_str(ls).c_str());
  double reload_min = 0, reload_p50 = 0;
  if (!b.reloads.empty()) {
    reload_min = *std::min_element(b.reloads.begin(), b.reloads.end());
    reload_p50 = percentile(b.reloads, 50);
    std::printf("reload_ms: min %.3f  median %.3f  (%zu more loads in this process; medians: %s)\n",
                reload_min, reload_p50, b.reloads.size(),
                breakdown_str(median_stats(b.reload_stats)).c_str());
  }
  std::printf("first_run_ms: %.3f\n", first_ms);
  std::optional<Check> check;
  if (!a.check.empty()) {
    // Output 0 of the last timed run, on the --input data.
    check = check_output(outs[0], read_npy(a.check), a.check);
    std::printf(
        "check: %s: max rel error %.3e  top-1 agrees %lld/%lld  reference top-1 in top-5 "
        "%lld/%lld\n",
        a.check.c_str(), check->max_rel_error, (long long)check->top1_agree, (long long)check->rows,
        (long long)check->top5_contains, (long long)check->rows);
  }
  std::printf(
      "latency_ms: min %.3f  max %.3f  mean %.3f  stddev %.3f  p50 %.3f  p90 %.3f  p99 %.3f\n",
      l.min, l.max, l.mean, l.stddev, l.p50, l.p90, l.p99);
  std::printf("throughput: %.2f inferences/s, %.2f images/s (%zu runs in %.3f s)\n", per_s,
              per_s * double(batch), lat.size(), b.wall_ms / 1e3);
  const int64_t run_bytes = plan.run_bytes(s->threads());
  std::printf(
      "memory: arena %.2f MiB per concurrent run (tensors %.2f MiB, kernel scratch %d x %.2f "
      "MiB; one buffer per tensor: %.2f MiB), peak RSS %.1f MiB\n",
      double(run_bytes) / 1048576.0, double(plan.arena_bytes) / 1048576.0, s->threads(),
      double(plan.scratch_bytes) / 1048576.0, double(plan.naive_bytes) / 1048576.0, rss);

  LayerProfile layers;
  if (a.layers) layers = print_layers(*s, ins, outs, std::max<int>(int(lat.size()), 1));
  if (!a.trace.empty()) write_trace(*s, ins, outs, a.trace);

  char buf[2048];
  std::snprintf(
      buf, sizeof buf,
      "  \"load_ms\": %.6f,\n  \"load_breakdown_ms\": {\"parse\": %.6f, \"passes\": "
      "%.6f, \"profile\": %.6f, \"solve\": %.6f, \"jit\": %.6f, \"pack\": %.6f, "
      "\"jit_pack\": %.6f, \"other\": %.6f, "
      "\"plan\": %.6f},\n  \"first_run_ms\": %.6f,\n  \"latency_ms\": {\"p50\": "
      "%.6f, \"p90\": %.6f, \"p99\": %.6f, \"min\": %.6f, \"max\": %.6f, \"mean\": %.6f, "
      "\"stddev\": %.6f},\n  \"wall_ms\": %.6f,\n  \"inferences_per_s\": %.6f,\n"
      "  \"images_per_s\": %.6f,\n"
      "  \"arena_bytes\": %lld,\n  \"tensor_bytes\": %lld,\n  \"scratch_bytes_per_thread\": "
      "%lld,\n  \"naive_bytes\": %lld,\n  \"peak_rss_mb\": %.3f,\n"
      "  \"predicted_ms\": %.6f,\n  \"solve_ms\": %.6f,\n  \"optimal\": %s,\n"
      "  \"cache_hits\": %lld,\n  \"cache_misses\": %lld,\n  \"plan_from_cache\": %s,\n"
      "  \"measurements\": %d,\n  \"reload_ms\": {\"n\": %zu, \"min\": %.6f, "
      "\"median\": %.6f}\n",
      load_ms, ls.parse_ms, ls.passes_ms, ls.profile_ms, ls.solve_ms, ls.jit_ms, ls.pack_ms,
      ls.jit_ms + ls.pack_ms, other_ms, ls.plan_ms, first_ms, l.p50, l.p90, l.p99, l.min, l.max,
      l.mean, l.stddev, b.wall_ms, per_s, per_s * double(batch), (long long)run_bytes,
      (long long)plan.arena_bytes, (long long)plan.scratch_bytes, (long long)plan.naive_bytes, rss,
      sel.predicted_ms, sel.solve_ms, sel.optimal ? "true" : "false", (long long)sel.cache_hits,
      (long long)sel.cache_misses, sel.plan_from_cache ? "true" : "false", sel.measurements,
      b.reloads.size(), reload_min, reload_p50);
  std::ostringstream f;
  f << "{\n  \"model\": " << json_escape(a.model) << ",\n  \"machine\": " << machine_json()
    << ",\n  \"strategy\": " << json_escape(strategy_name(sel.strategy))
    << ",\n  \"tune\": " << json_escape(tune_mode_name(sel.tune))
    << ",\n  \"accuracy\": " << json_escape(accuracy_name(sel.accuracy))
    << ",\n  \"precision\": " << json_escape(precision_name(sel.precision))
    << ",\n  \"guard_ms\": " << sel.guard_ms << ",\n  \"threads\": " << a.threads
    << ",\n  \"threads_used\": " << s->threads()
    << ",\n  \"isa\": " << json_escape(isa_name(s->isa()))
    << ",\n  \"reference\": " << (a.reference ? "true" : "false") << ",\n  \"batch\": " << batch
    << ",\n  \"runs\": " << lat.size() << ",\n  \"warmup\": " << a.warmup
    << ",\n  \"concurrency\": " << a.concurrency
    << ",\n  \"sessions\": " << (a.concurrency > 1 && a.sessions ? "true" : "false")
    << ",\n  \"inputs\": [";  // the --input files; none: random normal data
  for (size_t i = 0; i < a.inputs.size(); ++i) f << (i ? ", " : "") << json_escape(a.inputs[i]);
  f << "],\n";
  if (check)
    f << "  \"check\": {\"reference\": " << json_escape(a.check)
      << ", \"max_rel_error\": " << check->max_rel_error << ", \"rows\": " << check->rows
      << ", \"top1_agree\": " << check->top1_agree
      << ", \"top5_contains\": " << check->top5_contains << "},\n";
  f << buf;
  if (a.layers)
    f << ",\n  \"layers_total_ms\": " << layers.total_ms
      << ",\n  \"reference_ms\": " << layers.reference_ms
      << ",\n  \"layers\": " << layers_json(*s, layers) << "\n";
  f << "}";
  return f.str();
}

}  // namespace

int cmd_bench(const Args& a) {
  std::vector<std::string> strategies = a.strategies;
  if (strategies.empty()) strategies.push_back("");
  std::vector<Bench> all;
  for (const std::string& st : strategies) all.push_back(load_one(a, st));
  measure(a, all);
  std::vector<std::string> objects;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i) std::printf("\n");
    objects.push_back(report_one(a, all[i]));
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json, std::ios::trunc);
    if (!f) fail(Code::io_error, "cannot create '" + a.json + "'");
    if (objects.size() == 1) {
      f << objects[0] << "\n";
    } else {
      f << "[\n";
      for (size_t i = 0; i < objects.size(); ++i)
        f << objects[i] << (i + 1 < objects.size() ? ",\n" : "\n");
      f << "]\n";
    }
    f.close();
    if (!f) fail(Code::io_error, "cannot write '" + a.json + "'");
  }
  return 0;
}

}  // namespace kiln::cli
