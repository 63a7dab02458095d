#include "runtime/selection.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "graph/clock.h"
#include "graph/enum_name.h"
#include "graph/env.h"
#include "graph/integer_ops.h"
#include "jit/conv/conv_families.h"
#include "jit/dw/dw_pw_kernel.h"
#include "jit/jit_generator.h"
#include "runtime/arenas.h"
#include "runtime/int8_conv.h"
#include "runtime/log.h"
#include "runtime/profiler.h"
#include "runtime/selector.h"
#include "runtime/separable.h"
#include "runtime/tuning_cache.h"
#include "solver/network.h"

namespace kiln {
namespace {

using selection_detail::kInf;

// The plan-cache key: everything the choice depends on besides the cache context (CPU, ISA,
// threads, build) — strategy, tuning mode, accuracy mode and the optimised graph's structure
// and problems. (Kernel times are shared by every accuracy mode: they do not depend on it.)
// Weight values do not change the choice, so the multi-hundred-MB weights are never hashed.
std::string model_key(const Graph& g, const SelectOptions& o) {
  uint64_t h = fnv1a64(
      std::string(strategy_name(o.strategy)) + "/" + tune_mode_name(o.tune) + "/" +
      std::to_string(o.force_family ? int(*o.force_family) : -1) + "/" + accuracy_name(o.accuracy) +
      (o.precision == Precision::f32 ? "" : std::string("/") + precision_name(o.precision)));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    h = fnv1a64(node_problem(g, int(i)), h);
    for (ValueId v : g.nodes[i].inputs) h = fnv1a64(std::to_string(v) + ",", h);
    for (ValueId v : g.nodes[i].outputs) h = fnv1a64(std::to_string(v) + ";", h);
  }
  for (ValueId v : g.outputs) h = fnv1a64("o" + std::to_string(v), h);
  char buf[40];
  std::snprintf(buf, sizeof buf, "plan-%zu-%016llx", g.nodes.size(), (unsigned long long)h);
  return buf;
}

// Per node: input slot layouts (as ints, -1 for slots that are not network tensors) and
// output layouts — the OpLabel shape the network problem wants.
OpLabel op_label(const Graph& g, int i, const Label& l, double cost) {
  const Node& n = g.nodes[size_t(i)];
  OpLabel ol;
  std::vector<Layout> in = input_layouts(g, i, l), out = output_layouts(g, i, l);
  for (size_t k = 0; k < in.size(); ++k) {
    ValueId v = n.inputs[k];
    ol.in_layouts.push_back(v == kNoValue || g.value(v).is_const() ? -1 : int(in[k]));
  }
  for (Layout x : out) ol.out_layouts.push_back(int(x));
  ol.cost = cost;
  return ol;
}

// A label's (input layouts, output layouts): labels that share it are interchangeable in the
// network problem, so only the cheapest of them is offered.
using LayoutSignature = std::pair<std::vector<int>, std::vector<int>>;
LayoutSignature layout_signature(const OpLabel& ol) {
  return {ol.in_layouts, ol.out_layouts};
}

}  // namespace

namespace selection_detail {

double transform_error(const Label& l) {
  return l.kind == LabelKind::conv ? conv_family(l.conv.family).transform_error : 0;
}

double relative_error(const std::vector<float>& y, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < y.size() && i < ref.size(); ++i) {
    diff = std::max(diff, std::fabs(double(y[i]) - double(ref[i])));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

Selector::Selector(const Graph& g, const SelectOptions& o) : g_(g), o_(o), prof_(o.threads) {
  tune_ = o.strategy == Strategy::heuristic ? TuneMode::none : o.tune;
  if (o.accuracy == Accuracy::strict && o.force_family &&
      conv_family(*o.force_family).transform_error > 0)
    fail(Code::invalid_argument, std::string("conv family '") + conv_family_name(*o.force_family) +
                                     "' adds rounding error: accuracy 'strict' excludes it");
  int64_t weight_bytes = 0;
  for (const Value& v : g.values)
    if (v.is_const()) weight_bytes += int64_t(v.constant->nbytes());
  bool cold = !weights_stay_cached(weight_bytes, o.threads);
  // KILN_COLD_WEIGHTS=0/1 overrides the guess (for experiments and odd cache hierarchies).
  if (const std::string e = env_value(EnvVar::cold_weights); e == "0" || e == "1") cold = e == "1";
  prof_.set_cold_weights(cold);
  // A kernel timed with cold weights is a different measurement: cached apart.
  problem_suffix_ = prof_.cold_weights() ? " weights:cold" : "";
}

Selection Selector::run() {
  const size_t nn = g_.nodes.size();
  sel_.strategy = o_.strategy;
  sel_.tune = tune_;
  sel_.accuracy = o_.accuracy;
  sel_.precision = o_.precision;
  sel_.nodes.resize(nn);
  sel_.kernels.resize(nn);
  cands_.resize(nn);
  kept_.resize(nn);
  failure_.assign(nn, {Code::internal, std::string()});
  kept_ms_.assign(nn, kInf);
  for (size_t i = 0; i < nn; ++i) {
    cands_[i] = candidate_labels(g_, int(i), o_.isa, o_.reference, o_.precision);
    // (A conv from ConvInteger sums integers: exact whatever the option, graph/integer_ops.h.)
    const bool integers = g_.nodes[i].attr_i(kExactAttr, 0) == 1;
    if (o_.accuracy == Accuracy::strict || integers)
      cands_[i].erase(std::remove_if(cands_[i].begin(), cands_[i].end(),
                                     [&](const Label& l) {
                                       return transform_error(l) > 0 ||
                                              (integers && l.kind == LabelKind::conv &&
                                               !conv_family(l.conv.family).integer_exact);
                                     }),
                      cands_[i].end());
  }
  if (o_.force_family) force_family();
  find_separable();
  const std::string key = model_key(g_, o_);
  if (o_.cache && from_cached_plan(key)) return std::move(sel_);

  auto t0 = Clock::now();
  measure_nodes();
  measure_separable();
  sel_.profile_ms = ms_since(t0);
  solve_and_build();
  // A forced family is a test's or a benchmark's explicit choice: the guard leaves it. A plan
  // that rounds to bf16 is guarded for bf16's error (guard_bf16) and keeps its Winograd layers:
  // bf16 rounds every operand to 8 significant bits, far coarser than Winograd's transforms,
  // and against exact stand-ins the probe's output differs wherever a bf16 rounding flips,
  // which the Winograd guard would take for Winograd's error and demote every Winograd layer
  // (bench/NOTES.md, "The accuracy guard in bf16 plans").
  if (o_.accuracy != Accuracy::fast && o_.probe && !o_.force_family) {
    if (!bf16_nodes().empty()) guard_bf16();
    if (o_.accuracy == Accuracy::guarded && bf16_nodes().empty()) {
      // A plan with no bf16 layer (the bf16 guard sent them all back, or none was faster) stays
      // f32: a layer the Winograd guard moves off Winograd would otherwise fall to its bf16
      // label, which no probe checks (bench/NOTES.md, session 50).
      for (size_t i = 0; i < cost_.size(); ++i)
        for (size_t c = 0; c < cands_[i].size(); ++c)
          if (rounds_bf16(cands_[i][c])) cost_[i][c] = kInf;
      guard();
    }
  }
  if (o_.cache) {
    // A plan partly chosen by the cost model for lack of time is not kept: the next load
    // takes the times measured so far from the cache, measures more and solves again.
    if (sel_.over_budget == 0) o_.cache->put_plan(key, serialize());
    o_.cache->flush();
  }
  return std::move(sel_);
}

void Selector::solve_and_build(int64_t max_search_nodes) {
  const size_t nn = g_.nodes.size();
  for (int attempt = 0;; ++attempt) {
    auto t1 = Clock::now();
    const double profiled = sel_.profile_ms;  // conversions are timed lazily while solving
    std::vector<int> choice = choose(max_search_nodes);
    sel_.solve_ms += ms_since(t1) - (sel_.profile_ms - profiled);
    auto t2 = Clock::now();
    bool ok = true;
    std::vector<size_t> build;
    for (size_t i = 0; i < nn; ++i) {
      const Label& l = cands_[i][size_t(choice[i])];
      const double ms = cost_[i][size_t(choice[i])];
      if (sel_.kernels[i] && sel_.nodes[i].label == l) continue;
      if (keep_spares_ && sel_.kernels[i])
        spares_[{i, sel_.nodes[i].label.key()}] = std::move(sel_.kernels[i]);
      sel_.nodes[i].label = l;
      sel_.nodes[i].ms = ms;
      if (kept_[i].second && kept_[i].first == l) {
        sel_.kernels[i] = std::move(kept_[i].second);
        continue;
      }
      if (auto it = spares_.find({i, l.key()}); it != spares_.end()) {
        sel_.kernels[i] = std::move(it->second);
        spares_.erase(it);
        continue;
      }
      build.push_back(i);
    }
    std::vector<std::string> why = build_kernels(build);
    for (size_t i : build) {
      if (sel_.kernels[i]) continue;
      log_debug("{}: {} does not apply: {}", g_.nodes[i].where(), sel_.nodes[i].label.key(),
                why[i]);
      cost_[i][size_t(choice[i])] = kInf;
      ok = false;
    }
    sel_.jit_ms += ms_since(t2);
    if (ok) break;
    if (attempt > 32) fail(Code::internal, "label selection did not converge");
  }
  // The pairs chain kernels run: both chosen NHWC, and the chain measured faster. A 1x1 runs
  // in one chain: where it is in two such pairs (the project of one depthwise conv and the
  // expand of the next, as in Xception or MobileNetV4), the pair saving more keeps it (the
  // solver, whose savings add up, counted both: the other's goes back on the prediction).
  sel_.separable.clear();
  std::vector<std::pair<double, size_t>> by_saving;  // (-saving, index in sep_)
  for (size_t i = 0; i < sep_.size(); ++i) {
    const SeparablePair& q = sep_[i];
    const NodeChoice &a = sel_.nodes[size_t(q.dw)], &b = sel_.nodes[size_t(q.pw)];
    if (nhwc_conv_label(a.label, ConvFamily::depthwise) && nhwc_conv_label(b.label) &&
        q.ms < a.ms + b.ms)
      by_saving.push_back({q.ms - a.ms - b.ms, i});
  }
  std::sort(by_saving.begin(), by_saving.end());
  std::set<int> in_chain;
  std::vector<size_t> keep;
  for (const auto& [neg_saving, i] : by_saving) {
    if (in_chain.insert(sep_[i].pw).second)
      keep.push_back(i);
    else
      sel_.predicted_ms -= neg_saving;
  }
  std::sort(keep.begin(), keep.end());
  for (size_t i : keep) sel_.separable.push_back(sep_[i]);
}

void Selector::find_separable() {
  sep_.clear();
  if (o_.reference || o_.isa == Isa::scalar) return;
  const std::vector<int> producers = g_.producers();
  const std::vector<std::vector<int>> consumers = g_.consumers();
  auto has = [&](int i, std::optional<ConvFamily> f) {
    return std::any_of(cands_[size_t(i)].begin(), cands_[size_t(i)].end(),
                       [&](const Label& l) { return nhwc_conv_label(l, f); });
  };
  for (size_t b = 0; b < g_.nodes.size(); ++b) {
    const int a = separable_dw_node(g_, int(b), producers, consumers);
    if (a >= 0 && has(a, ConvFamily::depthwise) && has(int(b), ConvFamily::gemm1x1))
      sep_.push_back({a, int(b), kInf, false});
    const int e = expand_pw_node(g_, int(b), producers, consumers);
    if (e >= 0 && has(int(b), ConvFamily::depthwise) && has(e, ConvFamily::gemm1x1))
      sep_.push_back({int(b), e, kInf, true});
  }
}

void Selector::measure_separable() {
  if (tune_ == TuneMode::none) return;
  for (SeparablePair& q : sep_) {
    const std::string problem = separable_problem(g_, q.dw, q.pw, q.expand) + problem_suffix_;
    const std::string lk = q.expand ? kExpandLabelKey : kSeparableLabelKey;
    if (auto c = o_.cache ? o_.cache->time(problem, lk) : std::nullopt) {
      q.ms = *c;
      ++sel_.cache_hits;
      continue;
    }
    if (out_of_time()) continue;
    const Node &dn = g_.nodes[size_t(q.dw)], &pn = g_.nodes[size_t(q.pw)];
    const int dwi = int(dn.inputs.size()), pwi = int(pn.inputs.size());
    std::string why;
    auto k = chain_kernel(g_, q.expand ? q.pw : -1, q.dw, q.expand ? -1 : q.pw, pwi, dwi, pwi,
                          o_.isa, &why);
    if (!k) {
      log_debug("{} + {}: no chain kernel: {}", dn.where(), pn.name, why);
      continue;
    }
    const int f = q.first(), s = q.second();
    Operands a = operands(f, nhwc_label(f)), b = operands(s, nhwc_label(s));
    b.src_bytes[0] = 0;  // the middle tensor: never written
    a.src_bytes.insert(a.src_bytes.end(), b.src_bytes.begin(), b.src_bytes.end());
    a.consts.insert(a.consts.end(), b.consts.begin(), b.consts.end());
    if (!fits(*k, a.src_bytes, b.dst_bytes, kept_ms_[size_t(s)])) continue;
    if (o_.cache) ++sel_.cache_misses;
    ++sel_.measurements;
    try {
      q.ms = prof_.time_kernel(*k, a.src_bytes, a.consts, b.dst_bytes);
    } catch (const Error& e) {
      log_debug("{}: {} failed while profiling: {}", pn.where(), k->name(), e.what());
      continue;
    }
    if (o_.cache) o_.cache->put_time(problem, lk, q.ms);
  }
}

Label Selector::nhwc_label(int i) const {
  for (const Label& l : cands_[size_t(i)])
    if (nhwc_conv_label(l)) return l;
  fail(Code::internal, g_.nodes[size_t(i)].where() + ": no NHWC conv label");
}

void Selector::force_family() {
  for (size_t i = 0; i < cands_.size(); ++i) {
    std::vector<Label> keep;
    for (const Label& l : cands_[i]) {
      if (l.kind != LabelKind::conv || l.conv.family != *o_.force_family) continue;
      std::string why;
      if (instantiate(g_, int(i), l, o_.isa, &why).kernel) keep.push_back(l);
    }
    if (keep.empty()) continue;
    keep.push_back(cands_[i].back());  // the reference label
    cands_[i] = std::move(keep);
  }
}

bool Selector::measurable(int i) const {
  for (ValueId v : g_.nodes[size_t(i)].inputs)
    if (v != kNoValue && !g_.value(v).is_const() && g_.value(v).dtype != DType::f32) return false;
  return true;
}

double Selector::budget_ms() const {
  return o_.profile_budget_ms > 0  ? o_.profile_budget_ms
         : tune_ == TuneMode::full ? kFullProfileBudgetMs
                                   : kFastProfileBudgetMs;
}

bool Selector::out_of_time() {
  if (Clock::now() < deadline_) return false;
  sel_.budget_exhausted = true;
  return true;
}

void Selector::measure_nodes() {
  const size_t nn = g_.nodes.size();
  cost_.assign(nn, {});
  pruned_.assign(nn, {});
  std::vector<std::vector<char>> todo(nn);
  std::vector<char> profiled(nn, 0);
  std::vector<std::string> problem(nn);
  std::map<std::string, double> problem_est;   // estimated ms to measure a problem's labels
  std::vector<std::vector<double>> model(nn);  // the cost model's estimates
  const ProfileBudget pb;
  int total = 0;
  for (size_t i = 0; i < nn; ++i) {
    const auto& c = cands_[i];
    std::vector<double>& h = model[i];
    h.resize(c.size());
    for (size_t k = 0; k < c.size(); ++k) h[k] = heuristic_ms(g_, int(i), c[k], o_.isa, o_.threads);
    cost_[i] = h;
    sel_.nodes[i].candidates = int(c.size());
    todo[i].assign(c.size(), 0);
    // A view costs exactly nothing (no work) and its NCHW label replaces the reference one:
    // nothing to measure.
    if (tune_ == TuneMode::none || !measurable(int(i)) || c.front().kind == LabelKind::view)
      continue;
    // Operands beyond this are not allocated just to time the node (a 65535-image batch
    // wanted 8 GB of scratch): the cost model decides.
    int64_t operand_bytes = 0;
    for (ValueId v : g_.nodes[i].inputs)
      if (v != kNoValue && !g_.value(v).is_const())
        operand_bytes += value_bytes(g_.value(v), Layout::nchw);
    for (ValueId v : g_.nodes[i].outputs)
      if (v != kNoValue) operand_bytes += value_bytes(g_.value(v), Layout::nchw);
    if (operand_bytes > (int64_t(1) << 29)) {
      ++sel_.unprofiled;
      continue;
    }
    // fast: measure the labels the model finds plausible (within 3x of its best; the
    // reference label only when nothing else exists). A node with one label has no choice
    // to inform: its time would only refine the predicted total, and timing a scalar
    // reference op on a big tensor (a 65535-image Transpose: 1 s, 33 s under the fuzzers'
    // sanitizers) is what a fast load must not spend. full measures it anyway.
    if (tune_ == TuneMode::fast && c.size() == 1) continue;
    const double best = *std::min_element(h.begin(), h.end());
    profiled[i] = 1;
    problem[i] = node_problem(g_, int(i));
    const std::string key = problem[i] + problem_suffix_;
    double est = 0;
    for (size_t k = 0; k < c.size(); ++k) {
      const bool ref_fallback = c[k].kind == LabelKind::ref && c.size() > 1;
      // (The fixed strategy's own labels are always measured: pruned, they would be
      // unavailable and fixed would quietly take another family.)
      if (tune_ == TuneMode::full ? !ref_fallback || c.size() == 1
                                  : (!ref_fallback && h[k] <= 3 * best) || c.size() == 1 ||
                                        (o_.strategy == Strategy::fixed && fixed_label(c[k]))) {
        todo[i][k] = 1, ++total;
        // A time in the tuning cache costs nothing to measure.
        if (o_.cache && o_.cache->time(key, c[k].key())) continue;
        // What Profiler::time_kernel spends: a warm-up run, then 3-9 runs up to max_ms (one
        // run when the warm-up alone took longer); a kernel beyond max_ms is sampled.
        est += h[k] > pb.max_ms ? (2 + pb.min_reps) * pb.sample_ms
                                : h[k] + std::max(3 * h[k], std::min(9 * h[k], pb.max_ms));
      }
    }
    if (std::none_of(todo[i].begin(), todo[i].end(), [](char t) { return t != 0; })) {
      // Only reference labels, none worth timing: the cost model decides, as for a node
      // with one label (not for lack of time: the plan may still be kept).
      profiled[i] = 0;
      ++sel_.unprofiled;
      continue;
    }
    problem_est[problem[i]] = est;  // identical problems are measured once
  }
  // The budget, planned: when the estimates exceed it, the problems costliest to measure
  // keep the cost model's estimates from the start (their choice matters least: such
  // layers are dominated by arithmetic every family does at a similar rate). The deadline
  // below is what bounds the load when the estimates are wrong.
  double est_total = 0;
  for (const auto& [p, ms] : problem_est) est_total += ms;
  const double budget = budget_ms();
  std::set<std::string> skip;
  if (est_total > budget) {
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [p, ms] : problem_est) order.push_back({ms, p});
    std::sort(order.rbegin(), order.rend());
    for (const auto& [ms, p] : order) {
      if (est_total <= budget) break;
      est_total -= ms;
      skip.insert(p);
    }
  }
  deadline_ = Clock::now() + std::chrono::microseconds(int64_t(budget * 1e3));
  prof_.set_deadline(deadline_);
  int done = 0;
  progress_start_ = Clock::now();
  progress(0, total);
  // Identical problems are measured once: (time, whether it came from the tuning cache).
  std::map<std::pair<std::string, std::string>, std::pair<double, bool>> memo;
  for (size_t i = 0; i < nn; ++i) {
    if (!profiled[i]) continue;
    const std::string key = problem[i] + problem_suffix_;
    // A problem planned out still takes the times the tuning cache holds (free).
    const bool planned_out = skip.count(problem[i]) != 0;
    bool all_cached = true, any = false;
    pruned_[i].assign(cands_[i].size(), std::nan(""));
    for (size_t k = 0; k < cands_[i].size(); ++k) {
      // Not measured: the model's guess would be unfair next to measured times.
      cost_[i][k] = kInf;
      if (!todo[i][k]) {
        pruned_[i][k] = model[i][k];
        continue;
      }
      const std::string lk = cands_[i][k].key();
      std::optional<double> ms;
      bool hit = false;
      if (auto m = memo.find({key, lk}); m != memo.end()) {
        ms = m->second.first;
        hit = m->second.second;
      } else if (auto c = o_.cache ? o_.cache->time(key, lk) : std::nullopt) {
        ms = *c;
        hit = true;
        ++sel_.cache_hits;
      } else if (!planned_out && !out_of_time()) {
        if (o_.cache) ++sel_.cache_misses;
        ms = measure(int(i), cands_[i][k], model[i][k]);
        if (o_.cache && ms && std::isfinite(*ms)) o_.cache->put_time(key, lk, *ms);
      }
      if (!ms) continue;  // beyond the budget
      memo[{key, lk}] = {*ms, hit};
      all_cached &= hit;
      any = true;
      cost_[i][k] = *ms;
      progress(++done, total);
    }
    if (!any) {
      // Nothing measured and nothing cached (beyond the budget): the cost model decides.
      cost_[i] = model[i];
      ++sel_.unprofiled, ++sel_.over_budget;
      sel_.nodes[i].over_budget = true;
      continue;
    }
    sel_.nodes[i].measured = true;
    sel_.nodes[i].cached = all_cached;
    // Nothing measured applies (e.g. every JIT family refused): the reference label.
    auto& c = cost_[i];
    if (std::none_of(c.begin(), c.end(), [](double x) { return std::isfinite(x); }) &&
        cands_[i].back().kind == LabelKind::ref) {
      std::optional<double> r;
      if (!out_of_time()) r = measure(int(i), cands_[i].back(), model[i].back());
      c.back() = r ? *r : model[i].back();
    }
  }
  if (o_.progress && total > 0 && isatty(2)) std::fprintf(stderr, "\n");  // ends the bar
  sel_.profile_budget_ms = budget;
  sel_.sampled = prof_.sampled();
  if (sel_.over_budget)
    log_warn(
        "profiling budget of {:.0f} ms reached: the cost model chose the kernels of {} of {} "
        "nodes (measured times stay in the tuning cache, so the next load measures more; "
        "options.profile_budget_ms or --profile-budget changes the budget)",
        budget, sel_.over_budget, nn);
}

bool Selector::fits(const Kernel& k, const std::vector<int64_t>& src_bytes,
                    const std::vector<int64_t>& dst_bytes, double est_ms) {
  const ProfileBudget pb;
  const bool sampled = k.tiles() >= Profiler::kMinSampledTiles * prof_.threads();
  const double runs = sampled ? std::min(2 * est_ms, (2 + pb.min_reps) * pb.sample_ms) : est_ms;
  const double left = std::chrono::duration<double, std::milli>(deadline_ - Clock::now()).count();
  if (prof_.scratch_cost_ms(k, src_bytes, dst_bytes) + runs <= left) return true;
  sel_.budget_exhausted = true;
  return false;
}

Selector::Operands Selector::operands(int i, const Label& l) const {
  const Node& n = g_.nodes[size_t(i)];
  std::vector<Layout> in = input_layouts(g_, i, l), out = output_layouts(g_, i, l);
  Operands o{std::vector<int64_t>(n.inputs.size(), 0), std::vector<int64_t>(n.outputs.size(), 0),
             std::vector<const void*>(n.inputs.size(), nullptr)};
  const bool conv_or_fc = packs_weights(g_, i, l);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    ValueId v = n.inputs[k];
    if (v == kNoValue) continue;
    const Value& val = g_.value(v);
    // Constants are passed as they are, except 4-D ones a non-NCHW label reads in its
    // layout (the plan converts those); conv/FC weights are the kernel's own.
    if (val.is_const() && (conv_or_fc || !is4d(g_, v) || in[k] == Layout::nchw)) {
      // (Not the weights and bias: the kernel packed its own, and raw() would make an
      // aligned copy of a weight still in the mapped file.)
      if (!(conv_or_fc && (k == 1 || k == 2))) o.consts[k] = val.constant->raw();
      continue;
    }
    o.src_bytes[k] = value_bytes(val, in[k]);
  }
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) o.dst_bytes[k] = value_bytes(g_.value(n.outputs[k]), out[k]);
  return o;
}

std::optional<double> Selector::measure(int i, const Label& l, double est_ms) {
  std::string why;
  Instance inst = instantiate(g_, i, l, o_.isa, &why);
  if (!inst.kernel) {
    log_debug("{}: {} does not apply: {}", g_.nodes[size_t(i)].where(), l.key(), why);
    failure_[size_t(i)] = {Code::unsupported, g_.nodes[size_t(i)].where() + ": " + why};
    return kInf;
  }
  const Node& n = g_.nodes[size_t(i)];
  Operands ops = operands(i, l);
  std::vector<int64_t>& sb = ops.src_bytes;
  std::vector<int64_t>& db = ops.dst_bytes;
  std::vector<const void*>& consts = ops.consts;
  // Weights packed every run (jit/kernel.h RuntimePacking): the kernel reads the packed
  // buffer as slot 1, and the packing step is timed with it.
  Kernel::RuntimePacking rp = inst.kernel->runtime_packing();
  std::vector<int64_t> pack_sb;
  std::vector<const void*> pack_consts;
  if (rp.packer) {
    pack_sb = {sb[1], sb.size() > 2 ? sb[2] : 0};
    pack_consts = {consts[1], consts.size() > 2 ? consts[2] : nullptr};
    sb[1] = rp.bytes;
    consts[1] = nullptr;
    if (sb.size() > 2) sb[2] = 0, consts[2] = nullptr;
  }
  if (!fits(*inst.kernel, sb, db, est_ms)) return std::nullopt;
  ++sel_.measurements;
  try {
    double ms = prof_.time_kernel(*inst.kernel, sb, consts, db);
    if (rp.packer) ms += prof_.time_kernel(*rp.packer, pack_sb, pack_consts, {rp.bytes});
    // Keep the node's fastest measured kernel: it is usually the one chosen, and building
    // it again would JIT and pack its weights a second time (VGG's FC: 400 MB).
    if (ms < kept_ms_[size_t(i)]) {
      kept_ms_[size_t(i)] = ms;
      kept_[size_t(i)] = {l, std::move(inst.kernel)};
    }
    return ms;
  } catch (const Error& e) {
    log_debug("{}: {} failed while profiling: {}", n.where(), l.key(), e.what());
    failure_[size_t(i)] = {e.code(), e.what()};
    return kInf;
  } catch (const std::exception& e) {
    log_debug("{}: {} failed while profiling: {}", n.where(), l.key(), e.what());
    failure_[size_t(i)] = {Code::internal, n.where() + ": " + e.what()};
    return kInf;
  }
}

double Selector::reorder_ms(const Shape& s, Layout from, Layout to) {
  if (layout_via_nChw16c(from, to))
    return reorder_ms(s, from, Layout::nChw16c) + reorder_ms(s, Layout::nChw16c, to);
  // (Tensors beyond 64 MB are not allocated just to time their conversion: a copy that
  // size is memory-bound, which the model predicts well.)
  if (tune_ == TuneMode::none || shape_numel(s) * 4 > (int64_t(1) << 26))
    return heuristic_reorder_ms(s, from, to, o_.threads);
  const std::string problem = "reorder:" + shape_str(s);
  const std::string lk = std::string(layout_name(from)) + ">" + layout_name(to);
  auto m = reorder_memo_.find({problem, lk});
  if (m != reorder_memo_.end()) return m->second;
  double ms;
  if (auto c = o_.cache ? o_.cache->time(problem, lk) : std::nullopt) {
    ms = *c;
    ++sel_.cache_hits;
  } else {
    std::unique_ptr<Kernel> k = Profiler::reorder_kernel(s, from, to, o_.isa);
    const int64_t src = layout_bytes(from, s), dst = layout_bytes(to, s);
    const double est = heuristic_reorder_ms(s, from, to, o_.threads);
    // Beyond the budget: the model (not remembered: a later load may measure it).
    if (out_of_time() || !fits(*k, {src}, {dst}, est)) return est;
    if (o_.cache) ++sel_.cache_misses;
    ++sel_.measurements;
    auto t0 = Clock::now();
    ms = prof_.time_kernel(*k, {src}, {}, {dst});
    sel_.profile_ms += ms_since(t0);
    if (o_.cache) o_.cache->put_time(problem, lk, ms);
  }
  reorder_memo_[{problem, lk}] = ms;
  return ms;
}

NetworkProblem Selector::network(std::vector<std::vector<int>>* offered) {
  NetworkProblem np;
  const size_t nn = g_.nodes.size();
  offered->assign(nn, {});
  for (size_t i = 0; i < nn; ++i) {
    std::map<LayoutSignature, int> best;
    std::vector<OpLabel> labels;
    for (size_t k = 0; k < cands_[i].size(); ++k) {
      OpLabel ol = op_label(g_, int(i), cands_[i][k], cost_[i][k]);
      const LayoutSignature sig = layout_signature(ol);
      auto it = best.find(sig);
      if (it == best.end()) {
        best[sig] = int(labels.size());
        labels.push_back(ol);
        (*offered)[i].push_back(int(k));
      } else {
        // The fixed strategy keeps its own label of a signature even when another family
        // is cheaper (pruned, fixed would quietly run that family instead).
        const Label& kept = cands_[i][size_t((*offered)[i][size_t(it->second)])];
        const bool mine = fixed_label(cands_[i][k]) && std::isfinite(ol.cost);
        const bool better = o_.strategy == Strategy::fixed && mine != fixed_label(kept)
                                ? mine
                                : ol.cost < labels[size_t(it->second)].cost;
        if (better) {
          labels[size_t(it->second)] = ol;
          (*offered)[i][size_t(it->second)] = int(k);
        }
      }
    }
    np.add_op(g_.nodes[i].name, std::move(labels));
  }
  std::vector<int> tensor_of(g_.values.size(), -1);
  // (A uint8 layout only for a value on a uint8 grid: its producer's output, u8_output.)
  auto conv = [this](ValueId v, int producer = -1) -> ConversionCost {
    const bool u8 = producer >= 0 && u8_output(g_.nodes[size_t(producer)]);
    return [this, v, u8](int from, int to) {
      if (!is4d(g_, v) || (!u8 && (layout_u8(Layout(from)) || layout_u8(Layout(to))))) return kInf;
      return reorder_ms(g_.value(v).shape, Layout(from), Layout(to));
    };
  };
  for (ValueId v : g_.inputs)
    tensor_of[size_t(v)] = np.add_input(g_.value(v).name, int(Layout::nchw), conv(v));
  for (size_t i = 0; i < nn; ++i) {
    const Node& n = g_.nodes[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ValueId v = n.inputs[k];
      if (v == kNoValue || g_.value(v).is_const()) continue;
      if (tensor_of[size_t(v)] < 0)
        fail(Code::internal, "value '" + g_.value(v).name + "' is used before it is computed");
      np.add_consumer(tensor_of[size_t(v)], int(i), int(k));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k] != kNoValue)
        tensor_of[size_t(n.outputs[k])] =
            np.add_tensor(g_.value(n.outputs[k]).name, int(i), int(k), conv(n.outputs[k], int(i)));
  }
  for (ValueId v : g_.outputs)
    if (tensor_of[size_t(v)] >= 0) np.require_layout(tensor_of[size_t(v)], int(Layout::nchw));
  // A pair on its NHWC labels costs the chain kernel's time (a depthwise conv in two pairs:
  // both savings, the chain of all three).
  for (const SeparablePair& q : sep_) {
    auto offered_nhwc = [&](int i) {
      const std::vector<int>& o = (*offered)[size_t(i)];
      const auto f = i == q.dw ? std::optional(ConvFamily::depthwise) : std::nullopt;
      for (size_t k = 0; k < o.size(); ++k)
        if (nhwc_conv_label(cands_[size_t(i)][size_t(o[k])], f)) return int(k);
      return -1;
    };
    const int f = q.first(), s = q.second(), ka = offered_nhwc(f), kb = offered_nhwc(s);
    if (ka < 0 || kb < 0) continue;
    const double a = cost_[size_t(f)][size_t((*offered)[size_t(f)][size_t(ka)])],
                 b = cost_[size_t(s)][size_t((*offered)[size_t(s)][size_t(kb)])],
                 saving = a + b - q.ms;
    log_debug("{} + {}: fused {:.4f} ms, apart on NHWC {:.4f} + {:.4f} ms",
              g_.nodes[size_t(f)].where(), g_.nodes[size_t(s)].name, q.ms, a, b);
    if (saving > 0 && std::isfinite(saving))
      np.add_pair_saving(tensor_of[size_t(g_.nodes[size_t(s)].inputs[0])], ka, kb, saving);
  }
  return np;
}

std::vector<int> Selector::choose(int64_t max_search_nodes) {
  std::vector<std::vector<int>> offered;
  NetworkProblem np = network(&offered);
  const size_t nn = g_.nodes.size();
  std::vector<int> pick(nn, 0);  // index into offered[i]
  auto cheapest = [&](size_t i, auto&& pred) {
    int b = -1;
    for (size_t k = 0; k < offered[i].size(); ++k) {
      const size_t c = size_t(offered[i][k]);
      if (!std::isfinite(cost_[i][c]) || !pred(cands_[i][c])) continue;
      if (b < 0 || cost_[i][c] < cost_[i][size_t(offered[i][size_t(b)])]) b = int(k);
    }
    return b;
  };
  sel_.optimal = false;
  if (o_.strategy == Strategy::global || o_.strategy == Strategy::heuristic) {
    SolveOptions so;
    so.time_budget_ms = o_.solve_budget_ms;
    so.max_search_nodes = max_search_nodes;
    NetworkSolution s = np.solve(so);
    if (!s.feasible && admit_pruned()) return choose(max_search_nodes);
    if (!s.feasible) report_infeasible();
    pick = s.op_labels;
    sel_.optimal = s.optimal;
    sel_.pbqp_nodes = s.pbqp_nodes;
    sel_.pbqp_edges = s.pbqp_edges;
  } else {
    for (size_t i = 0; i < nn; ++i) {
      int k = -1;
      if (o_.strategy == Strategy::fixed) {
        k = cheapest(i, [&](const Label& l) { return fixed_label(l); });
        if (k < 0)
          k = cheapest(
              i, [&](const Label& l) { return l.kind != LabelKind::conv && l.in == Layout::nchw; });
      }
      if (k < 0) k = cheapest(i, [](const Label&) { return true; });
      if (k < 0) g_.nodes[i].fail(Code::unsupported, "no kernel applies to this node");
      pick[i] = k;
    }
  }
  sel_.predicted_ms = np.evaluate(pick);
  std::vector<int> choice(nn);
  for (size_t i = 0; i < nn; ++i) choice[i] = offered[i][size_t(pick[i])];
  return choice;
}

std::string Selector::serialize() const {
  std::ostringstream s;
  s << "predicted " << sel_.predicted_ms << "\noptimal " << int(sel_.optimal) << "\n";
  for (size_t i = 0; i < sel_.nodes.size(); ++i)
    s << sel_.nodes[i].label.key() << " " << sel_.nodes[i].ms << " " << int(sel_.nodes[i].measured)
      << "\n";
  for (const SeparablePair& q : sel_.separable)
    s << (q.expand ? "expand " : "separable ") << q.dw << " " << q.pw << " " << q.ms << "\n";
  return s.str();
}

bool Selector::from_cached_plan(const std::string& key) {
  auto text = o_.cache->plan(key);
  if (!text) return false;
  auto t0 = Clock::now();
  std::istringstream s(*text);
  std::string word;
  double predicted = 0;
  int optimal = 0;
  if (!(s >> word >> predicted) || word != "predicted" || !(s >> word >> optimal) ||
      word != "optimal")
    return reject(key, "bad header");
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    std::string lk;
    double ms = 0;
    int measured = 0;
    if (!(s >> lk >> ms >> measured)) return reject(key, "too few nodes");
    auto l = Label::parse(lk);
    if (!l) return reject(key, "bad label '" + lk + "'");
    if (std::find(cands_[i].begin(), cands_[i].end(), *l) == cands_[i].end())
      return reject(key, g_.nodes[i].where() + ": label " + lk + " is not a candidate");
    sel_.nodes[i] = {*l, ms, measured != 0, measured != 0, int(cands_[i].size())};
  }
  while (s >> word) {
    SeparablePair q;
    q.expand = word == "expand";
    if ((word != "separable" && !q.expand) || !(s >> q.dw >> q.pw >> q.ms))
      return reject(key, "too many nodes");
    const bool known = std::any_of(sep_.begin(), sep_.end(), [&](const SeparablePair& p) {
      return p.dw == q.dw && p.pw == q.pw && p.expand == q.expand;
    });
    if (!known)
      return reject(key, word + " pair " + std::to_string(q.dw) + " / " + std::to_string(q.pw) +
                             " is not one of this graph");
    sel_.separable.push_back(q);
  }
  std::vector<size_t> all(g_.nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<std::string> why = build_kernels(all);
  for (size_t i = 0; i < why.size(); ++i)
    if (!sel_.kernels[i])
      return reject(key, g_.nodes[i].where() + ": " + sel_.nodes[i].label.key() + ": " + why[i]);
  sel_.predicted_ms = predicted;
  sel_.optimal = optimal != 0;
  sel_.plan_from_cache = true;
  sel_.jit_ms = ms_since(t0);
  return true;
}

std::vector<std::string> Selector::build_kernels(const std::vector<size_t>& nodes) {
  std::vector<std::string> why(sel_.nodes.size());
  std::atomic<int64_t> total_ns{0}, codegen_ns{0};
  const int log_level = LogScope::current();  // the session's, also on TBB's threads
  auto one = [&](size_t i) {
    LogScope scope(log_level);
    const auto t0 = Clock::now();
    const uint64_t c0 = codegen_ns_this_thread();
    Instance inst = instantiate(g_, int(i), sel_.nodes[i].label, o_.isa, &why[i]);
    sel_.kernels[i] = std::move(inst.kernel);
    codegen_ns += int64_t(codegen_ns_this_thread() - c0);
    total_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  };
  if (o_.threads <= 1 || nodes.size() < 2) {
    for (size_t i : nodes) one(i);
  } else {
    shared_arena(o_.threads).execute([&] {
      tbb::parallel_for(size_t(0), nodes.size(), [&](size_t k) { one(nodes[k]); });
    });
  }
  build_ns_ += total_ns.load();
  codegen_ns_ += codegen_ns.load();
  sel_.codegen_share = build_ns_ > 0 ? double(codegen_ns_) / double(build_ns_) : 0;
  return why;
}

bool Selector::fixed_label(const Label& l) const {
  const Layout b = blocked_layout(o_.isa);
  return l.kind == LabelKind::conv
             ? conv_family(l.conv.family).fixed_baseline && l.conv.src == b && l.conv.dst == b
             : l.in == b;
}

bool Selector::admit_pruned() {
  bool any = false;
  for (size_t i = 0; i < pruned_.size(); ++i) {
    auto signature = [&](size_t k) {
      return layout_signature(op_label(g_, int(i), cands_[i][k], 0));
    };
    std::set<LayoutSignature> measured;
    for (size_t k = 0; k < pruned_[i].size(); ++k)
      if (std::isfinite(cost_[i][k])) measured.insert(signature(k));
    for (size_t k = 0; k < pruned_[i].size(); ++k)
      if (!std::isnan(pruned_[i][k]) && !std::isfinite(cost_[i][k])) {
        if (!measured.count(signature(k))) cost_[i][k] = pruned_[i][k], any = true;
        pruned_[i][k] = std::nan("");
      }
  }
  if (any)
    log_info(
        "no plan chains the measured labels: the unmeasured ones join at the model's "
        "estimates");
  return any;
}

[[noreturn]] void Selector::report_infeasible() {
  for (size_t i = 0; i < cost_.size(); ++i)
    if (std::none_of(cost_[i].begin(), cost_[i].end(), [](double x) { return std::isfinite(x); }) &&
        !failure_[i].second.empty())
      fail(failure_[i].first, failure_[i].second);
  fail(Code::internal, "no feasible choice of kernels and layouts");
}

bool Selector::reject(const std::string& key, const std::string& why) {
  log_warn("tuning cache: ignoring the stored plan {} ({}); selecting again", key, why);
  for (auto& k : sel_.kernels) k.reset();
  return false;
}

void Selector::progress(int done, int total) {
  if (!o_.progress || total == 0) return;
  if (isatty(2)) {
    const int width = 30, filled = done * width / total;
    std::fprintf(stderr, "\rkiln: profiling [%.*s%*s] %d/%d", filled,
                 "##############################", width - filled, "", done, total);
  } else {
    const int tenth = done * 10 / total;
    if (done > 0 && tenth == progress_tenth_) return;
    progress_tenth_ = tenth;
    std::fprintf(stderr, "kiln: profiling %d%% (%d/%d measurements, %.1f s)\n", done * 100 / total,
                 done, total, ms_since(progress_start_) / 1e3);
  }
  std::fflush(stderr);
}

}  // namespace selection_detail

double peak_live_bytes(const Graph& g) {
  const int n = int(g.nodes.size());
  std::vector<int> first(g.values.size(), -1), last(g.values.size(), -1);
  for (int i = 0; i < n; ++i) {
    for (ValueId v : g.nodes[size_t(i)].inputs)
      if (v != kNoValue) last[size_t(v)] = i;
    for (ValueId v : g.nodes[size_t(i)].outputs)
      if (v != kNoValue && first[size_t(v)] < 0) first[size_t(v)] = i;
  }
  for (ValueId v : g.inputs) first[size_t(v)] = -1;
  for (ValueId v : g.outputs) last[size_t(v)] = n;
  std::vector<double> delta(size_t(n) + 3, 0);  // change of the live bytes before node i - 1
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    if (val.is_const() || !val.shape_known) continue;
    const double bytes = double(shape_numel(val.shape)) * double(dtype_size(val.dtype));
    delta[size_t(first[v] + 1)] += bytes;                     // written (or an input)
    delta[size_t(std::max(last[v], first[v]) + 2)] -= bytes;  // after its last reader
  }
  double live = 0, peak = 0;
  for (double d : delta) peak = std::max(peak, live += d);
  return peak;
}

const char* strategy_name(Strategy s) {
  static const char* const kNames[] = {"global", "local", "fixed", "heuristic"};
  return enum_name(s, kNames);
}

const char* tune_mode_name(TuneMode m) {
  return m == TuneMode::none ? "none" : m == TuneMode::fast ? "fast" : "full";
}

const char* accuracy_name(Accuracy a) {
  static const char* const kNames[] = {"strict", "default", "fast"};
  return enum_name(a, kNames);
}

bool parse_accuracy(const std::string& s, Accuracy* out) {
  for (Accuracy x : {Accuracy::strict, Accuracy::guarded, Accuracy::fast})
    if (s == accuracy_name(x)) return *out = x, true;
  return false;
}

bool parse_strategy(const std::string& s, Strategy* out) {
  for (Strategy x : {Strategy::global, Strategy::local, Strategy::fixed, Strategy::heuristic})
    if (s == strategy_name(x)) return *out = x, true;
  return false;
}

bool parse_tune_mode(const std::string& s, TuneMode* out) {
  for (TuneMode x : {TuneMode::none, TuneMode::fast, TuneMode::full})
    if (s == tune_mode_name(x)) return *out = x, true;
  return false;
}

Selection select_labels(const Graph& g, const SelectOptions& o) {
  return selection_detail::Selector(g, o).run();
}

std::string accuracy_summary(const Selection& s) {
  std::string r = std::string("accuracy: ") + accuracy_name(s.accuracy);
  if (s.probes == 0 && s.demoted == 0) return r;
  char buf[160];
  char added[32] = "error not measured";  // (stopped at, or not started within, the budget)
  if (s.probe_error >= 0)
    std::snprintf(added, sizeof added, s.guard_bf16 ? "%.2e from f32" : "%.2e added",
                  s.probe_error);
  std::snprintf(buf, sizeof buf, " (%s: %d probes, %s, %d %s, %.0f ms)",
                s.guard_bf16 ? "bf16 guard" : "guard", s.probes, added, s.demoted,
                s.guard_bf16 ? "layers back in f32" : "convs demoted", s.guard_ms);
  return r + buf;
}

}  // namespace kiln
