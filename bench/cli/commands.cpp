// The `kiln` subcommands: info, run, bench. They use kiln::Session directly.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "cli.h"
#include "runtime/io_dtypes.h"
#include "runtime/log.h"
#include "runtime/npy.h"
#include "runtime/selection.h"
#include "runtime/session.h"

namespace kiln::cli {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

SessionOptions session_options(const Args& a, const std::string& strategy) {
  SessionOptions o;
  o.threads = a.threads;
  o.batch = a.batch;
  try {
    o.input_shapes = parse_input_shapes(a.shapes);
  } catch (const Error& e) {
    throw UsageError(std::string("--shape: ") + e.what());
  }
  o.log_level = a.log_level;
  o.max_isa = a.max_isa;
  o.reference = a.reference;
  const std::string st = !strategy.empty() ? strategy : a.strategies.empty() ? "" : a.strategies[0];
  Strategy sv = Strategy::global;
  if (!st.empty() && !parse_strategy(st, &sv))
    throw UsageError("--strategy expects global, local, fixed or heuristic, got '" + st + "'");
  o.strategy = sv;
  TuneMode tm = TuneMode::fast;
  if (!a.tune.empty() && !parse_tune_mode(a.tune, &tm))
    throw UsageError("--tune expects none, fast or full, got '" + a.tune + "'");
  o.tune = tm;
  if (!a.accuracy.empty() && !parse_accuracy(a.accuracy, &o.accuracy))
    throw UsageError("--accuracy expects strict, default or fast, got '" + a.accuracy + "'");
  if (!a.precision.empty() && !parse_precision(a.precision, &o.precision))
    throw UsageError("--precision expects f32 or bf16, got '" + a.precision + "'");
  o.cache_dir = a.cache_dir;
  o.use_cache = !a.no_cache;
  o.progress = true;  // a bar on a terminal, else a line per 10% (long loads do not look hung)
  o.force_family = a.family;
  o.profile_budget_ms = a.profile_budget_ms;
  return o;
}

namespace {

void print_io(const char* title, const std::vector<IoInfo>& list) {
  std::printf("%s:\n", title);
  for (const IoInfo& io : list)
    std::printf("  %-24s %-8s %s\n", io.name.c_str(), dtype_name(io.dtype),
                shape_str(io.shape).c_str());
}

}  // namespace

int cmd_info(const Args& a) {
  // The figures are the graph's: measuring kernels (seconds on a big model) would change none.
  SessionOptions o = session_options(a);
  if (a.tune.empty()) o.tune = TuneMode::none;
  auto s = Session::load_file(a.model, o);
  const Graph& g = s->graph();
  const LoadStats& ls = s->load_stats();
  std::printf("model: %s\n", a.model.c_str());
  if (!g.name.empty()) std::printf("graph: %s (opset %lld)\n", g.name.c_str(), (long long)g.opset);
  std::printf("load: %.1f ms (parse %.1f, passes %.1f, plan %.1f)\n", ls.total_ms, ls.parse_ms,
              ls.passes_ms, ls.plan_ms);
  std::printf("isa: %s  threads: %d%s\n", isa_name(s->isa()), s->threads(),
              a.reference ? "  (reference kernels)" : "");
  std::printf("cpu: %s\n", host_cpu().summary().c_str());
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

std::vector<Tensor> read_inputs(const Args& a, const Session& s, bool any_batch) {
  const auto& want = s.inputs();
  if (a.inputs.size() != want.size())
    fail(Code::invalid_argument, "the model has " + std::to_string(want.size()) + " input(s), " +
                                     std::to_string(a.inputs.size()) + " --input given");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < want.size(); ++i) {
    Tensor t = read_npy(a.inputs[i]);
    // An int32 file for an int64 input widens exactly (numpy's default int on some systems).
    if (t.dtype() == DType::i32 && want[i].dtype == DType::i64) t = to_held(t);
    const Shape& got = t.shape();
    const bool batch_only = any_batch && !got.empty() && got.size() == want[i].shape.size() &&
                            std::equal(got.begin() + 1, got.end(), want[i].shape.begin() + 1);
    if (t.dtype() != want[i].dtype || (got != want[i].shape && !batch_only))
      fail(Code::shape_mismatch,
           "'" + a.inputs[i] + "' is " + dtype_name(t.dtype()) + shape_str(got) + " but input '" +
               want[i].name + "' needs " + dtype_name(want[i].dtype) + shape_str(want[i].shape) +
               (any_batch ? " (dim 0, the batch, may differ; other dims: --shape)"
                          : " (try --batch or --shape to change the shape)"));
    ins.push_back(std::move(t));
  }
  return ins;
}

int cmd_run(const Args& a) {
  auto s = Session::load_file(a.model, session_options(a));
  std::vector<Tensor> ins = read_inputs(a, *s, true);
  int64_t batch = s->batch();
  for (const Tensor& t : ins)
    if (!t.shape().empty()) {
      batch = t.shape()[0];
      break;
    }
  // Another batch is planned here, so that the run below is timed alone.
  std::shared_ptr<const Session> rs = s->at_batch(batch);
  std::vector<Tensor> outs = make_outputs(*rs);
  auto t0 = Clock::now();
  run_into(*rs, ins, outs);
  double run_ms = ms_between(t0, Clock::now());
  log_info("run took {:.2f} ms", run_ms);

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

}  // namespace kiln::cli
