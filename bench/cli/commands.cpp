// The `kiln` subcommands: info, run, bench. They use kiln::Session directly.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "cli.h"
#include "runtime/npy.h"
#include "runtime/plan.h"
#include "runtime/session.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

SessionOptions session_options(const Args& a) {
  SessionOptions o;
  o.threads = a.threads;
  o.batch = a.batch;
  o.log_level = a.log_level;
  o.max_isa = a.max_isa;
  o.reference = a.reference;
  return o;
}

std::vector<Tensor> make_outputs(const Session& s) {
  std::vector<Tensor> outs;
  for (const IoInfo& io : s.outputs()) outs.emplace_back(io.dtype, io.shape);
  return outs;
}

void print_io(const char* title, const std::vector<IoInfo>& list) {
  std::printf("%s:\n", title);
  for (const IoInfo& io : list)
    std::printf("  %-24s %-8s %s\n", io.name.c_str(), dtype_name(io.dtype),
                shape_str(io.shape).c_str());
}

}  // namespace

int cmd_info(const Args& a) {
  auto s = Session::load_file(a.model, session_options(a));
  const Graph& g = s->graph();
  const LoadStats& ls = s->load_stats();
  std::printf("model: %s\n", a.model.c_str());
  if (!g.name.empty()) std::printf("graph: %s (opset %lld)\n", g.name.c_str(), (long long)g.opset);
  std::printf("load: %.1f ms (parse %.1f, passes %.1f, plan %.1f)\n", ls.total_ms, ls.parse_ms,
              ls.passes_ms, ls.plan_ms);
  std::printf("isa: %s  threads: %d%s\n", isa_name(s->isa()), s->threads(),
              a.reference ? "  (reference kernels)" : "");
  print_io("inputs", s->inputs());
  print_io("outputs", s->outputs());

  GraphStats st = graph_stats(g);
  std::vector<std::pair<std::string, int>> ops(st.op_counts.begin(), st.op_counts.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  std::printf("nodes: %zu (after optimisation)\n", g.nodes.size());
  for (const auto& [op, n] : ops) std::printf("  %-24s %d\n", op.c_str(), n);
  std::printf("parameters: %lld (%.2f MB as float32)\n", (long long)st.params,
              double(st.params) * 4 / 1e6);
  std::printf("GFLOPs: %.6g (2 x %.0f MACs of Conv/Gemm/MatMul)\n", 2 * st.macs / 1e9, st.macs);
  return 0;
}

int cmd_run(const Args& a) {
  auto s = Session::load_file(a.model, session_options(a));
  const auto& want = s->inputs();
  if (a.inputs.size() != want.size())
    fail(Code::invalid_argument, "the model has " + std::to_string(want.size()) + " input(s), " +
                                     std::to_string(a.inputs.size()) + " --input given");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < want.size(); ++i) {
    Tensor t = read_npy(a.inputs[i]);
    if (t.dtype() != want[i].dtype || t.shape() != want[i].shape)
      fail(Code::shape_mismatch,
           "'" + a.inputs[i] + "' is " + dtype_name(t.dtype()) + shape_str(t.shape()) +
               " but input '" + want[i].name + "' needs " + dtype_name(want[i].dtype) +
               shape_str(want[i].shape) + (a.batch ? "" : " (try --batch to change the batch)"));
    ins.push_back(std::move(t));
  }
  std::vector<Tensor> outs = make_outputs(*s);
  auto t0 = Clock::now();
  s->run(ins, outs);
  double run_ms = ms_between(t0, Clock::now());
  spdlog::info("run took {:.2f} ms", run_ms);

  for (size_t i = 0; i < outs.size(); ++i) {
    Summary sm = summarize(outs[i]);
    std::printf("output %zu '%s': %s %s  min %.6g  max %.6g  mean %.6g\n", i,
                s->outputs()[i].name.c_str(), dtype_name(outs[i].dtype()),
                shape_str(outs[i].shape()).c_str(), sm.min, sm.max, sm.mean);
  }
  if (!a.output.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string path = outs.size() == 1 ? a.output : indexed_path(a.output, i);
      write_npy(path, outs[i]);
      std::printf("wrote %s\n", path.c_str());
    }
  }
  return 0;
}

// Per-step table: median over `runs` profiled runs of each plan step.
void print_layers(const Session& s, const std::vector<Tensor>& ins, std::vector<Tensor>& outs,
                  int runs) {
  const Plan& plan = s.plan();
  std::vector<std::vector<double>> samples(plan.steps.size());
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    s.run_profiled(ins, outs, ms);
    for (size_t i = 0; i < ms.size(); ++i) samples[i].push_back(ms[i]);
  }
  std::vector<double> med(plan.steps.size());
  double total = 0;
  for (size_t i = 0; i < med.size(); ++i) total += med[i] = percentile(samples[i], 50);
  std::printf("\n%4s  %-18s %-48s %-18s %9s %6s %8s\n", "step", "op", "kernel", "layouts", "ms",
              "share", "GFLOP/s");
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    const std::string op = st.node >= 0 ? s.graph().nodes[size_t(st.node)].op : "(convert)";
    std::string lay;
    auto layout_of = [&](int t) { return t < 0 ? "-" : layout_name(plan.tensors[size_t(t)].layout); };
    lay = std::string(st.src.empty() ? "-" : layout_of(st.src[0])) + ">" +
          (st.dst.empty() ? "-" : layout_of(st.dst[0]));
    const double macs = st.kernel->macs();
    std::printf("%4zu  %-18s %-48s %-18s %9.4f %5.1f%% %8.1f\n", i, op.c_str(),
                st.kernel->name().c_str(), lay.c_str(), med[i], 100.0 * med[i] / total,
                macs > 0 && med[i] > 0 ? 2.0 * macs / (med[i] * 1e6) : 0.0);
  }
  std::printf("total of step medians: %.3f ms\n", total);
}

int cmd_bench(const Args& a) {
  auto t0 = Clock::now();
  auto s = Session::load_file(a.model, session_options(a));
  double load_ms = ms_between(t0, Clock::now());

  // Random normal inputs (fixed seed: runs are comparable); int64 inputs stay zero.
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Tensor> ins;
  for (const IoInfo& io : s->inputs()) {
    Tensor t(io.dtype, io.shape);
    if (io.dtype == DType::f32) {
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
    }
    ins.push_back(std::move(t));
  }
  std::vector<Tensor> outs = make_outputs(*s);
  for (int i = 0; i < a.warmup; ++i) s->run(ins, outs);
  std::vector<double> lat;
  lat.reserve(size_t(a.runs));
  for (int i = 0; i < a.runs; ++i) {
    auto r0 = Clock::now();
    s->run(ins, outs);
    lat.push_back(ms_between(r0, Clock::now()));
  }
  double mean = 0;
  for (double x : lat) mean += x;
  mean /= double(lat.size());
  const double p50 = percentile(lat, 50), p90 = percentile(lat, 90), p99 = percentile(lat, 99);
  const double mn = *std::min_element(lat.begin(), lat.end());

  std::printf("model: %s\n", a.model.c_str());
  std::printf("isa: %s%s  threads: %d  batch: %lld  runs: %d  warmup: %d\n", isa_name(s->isa()),
              a.reference ? " (reference)" : "", s->threads(), (long long)a.batch, a.runs,
              a.warmup);
  std::printf("load_ms: %.3f\n", load_ms);
  std::printf("latency_ms: min %.3f  mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f\n", mn, mean, p50, p90,
              p99);

  if (a.layers) print_layers(*s, ins, outs, a.runs);

  if (!a.json.empty()) {
    std::ofstream f(a.json, std::ios::trunc);
    if (!f) fail(Code::io_error, "cannot create '" + a.json + "'");
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "  \"load_ms\": %.6f,\n  \"latency_ms\": {\"p50\": %.6f, \"p90\": %.6f, "
                  "\"p99\": %.6f, \"min\": %.6f, \"mean\": %.6f}\n",
                  load_ms, p50, p90, p99, mn, mean);
    f << "{\n  \"model\": " << json_escape(a.model) << ",\n  \"threads\": " << a.threads
      << ",\n  \"threads_used\": " << s->threads()
      << ",\n  \"isa\": " << json_escape(isa_name(s->isa()))
      << ",\n  \"reference\": " << (a.reference ? "true" : "false") << ",\n  \"batch\": " << a.batch
      << ",\n  \"runs\": " << a.runs << ",\n  \"warmup\": " << a.warmup << ",\n"
      << buf << "}\n";
    f.close();
    if (!f) fail(Code::io_error, "cannot write '" + a.json + "'");
  }
  return 0;
}

}  // namespace kiln::cli
