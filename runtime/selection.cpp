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
#include "runtime/separable.h"
#include "runtime/tuning_cache.h"
#include "solver/network.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The bf16 guard's probe plans need the probe's precisions, not the fastest plan: their solves
// stop branching after this many subproblems (a node bound, not time, so that every machine
// probes the same plan). DenseNet-169's took 100-18,000 (0.01-2 s) uncapped; bench/NOTES.md
// session 50.
constexpr int64_t kProbeSolveNodes = 100;

// The weight of the rounding error a label's transforms add (0: exact; conv_families.h).
double transform_error(const Label& l) {
  return l.kind == LabelKind::conv ? conv_family(l.conv.family).transform_error : 0;
}

// max|y - ref| / max|ref| (max|y - ref| when ref is all zeros).
double relative_error(const std::vector<float>& y, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < y.size() && i < ref.size(); ++i) {
    diff = std::max(diff, std::fabs(double(y[i]) - double(ref[i])));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

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

class Selector {
 public:
  Selector(const Graph& g, const SelectOptions& o) : g_(g), o_(o), prof_(o.threads) {
    tune_ = o.strategy == Strategy::heuristic ? TuneMode::none : o.tune;
    if (o.accuracy == Accuracy::strict && o.force_family &&
        conv_family(*o.force_family).transform_error > 0)
      fail(Code::invalid_argument, std::string("conv family '") +
                                       conv_family_name(*o.force_family) +
                                       "' adds rounding error: accuracy 'strict' excludes it");
    int64_t weight_bytes = 0;
    for (const Value& v : g.values)
      if (v.is_const()) weight_bytes += int64_t(v.constant->nbytes());
    bool cold = !weights_stay_cached(weight_bytes, o.threads);
    // KILN_COLD_WEIGHTS=0/1 overrides the guess (for experiments and odd cache hierarchies).
    if (const std::string e = env_value(EnvVar::cold_weights); e == "0" || e == "1")
      cold = e == "1";
    prof_.set_cold_weights(cold);
    // A kernel timed with cold weights is a different measurement: cached apart.
    problem_suffix_ = prof_.cold_weights() ? " weights:cold" : "";
  }

  Selection run() {
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
      if (o_.accuracy == Accuracy::guarded && bf16_nodes().empty()) guard();
    }
    if (o_.cache) {
      // A plan partly chosen by the cost model for lack of time is not kept: the next load
      // takes the times measured so far from the cache, measures more and solves again.
      if (sel_.over_budget == 0) o_.cache->put_plan(key, serialize());
      o_.cache->flush();
    }
    return std::move(sel_);
  }

 private:
  // Solves for the current costs and builds the chosen kernels; a label whose factory refuses
  // it (possible only with model costs, which never instantiate) is made illegal and the
  // choice redone.
  void solve_and_build() {
    const size_t nn = g_.nodes.size();
    for (int attempt = 0;; ++attempt) {
      auto t1 = Clock::now();
      const double profiled = sel_.profile_ms;  // conversions are timed lazily while solving
      std::vector<int> choice = choose();
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

  // --- depthwise conv + 1x1 pairs (jit/dw/dw_pw_kernel.h) --------------------------------

  // The depthwise -> 1x1 and 1x1 -> depthwise pairs of the graph whose nodes both have NHWC
  // f32 candidates.
  void find_separable() {
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

  // Times the chain kernel of every pair (tuning cache first; not with `--tune none`, not past
  // the budget): the solver then weighs it against the two kernels (network()).
  void measure_separable() {
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

  // Node i's f32 NHWC conv label (a depthwise one for a depthwise node).
  Label nhwc_label(int i) const {
    for (const Label& l : cands_[size_t(i)])
      if (nhwc_conv_label(l)) return l;
    fail(Code::internal, g_.nodes[size_t(i)].where() + ": no NHWC conv label");
  }

  // Conv nodes keep only the forced family's labels that really apply (checked by building
  // them), plus the reference fallback; nodes it does not apply to keep all candidates.
  void force_family() {
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

  // --- costs ----------------------------------------------------------------------------

  // Whether node i can be timed on scratch buffers: every non-constant operand is f32
  // (random integers could be out-of-range indices for a reference Gather and the like).
  bool measurable(int i) const {
    for (ValueId v : g_.nodes[size_t(i)].inputs)
      if (v != kNoValue && !g_.value(v).is_const() && g_.value(v).dtype != DType::f32) return false;
    return true;
  }

  // The profiling budget: wall-clock milliseconds one load may spend measuring.
  double budget_ms() const {
    return o_.profile_budget_ms > 0  ? o_.profile_budget_ms
           : tune_ == TuneMode::full ? kFullProfileBudgetMs
                                     : kFastProfileBudgetMs;
  }

  // True once the load's profiling deadline has passed (and notes that it cut profiling).
  bool out_of_time() {
    if (Clock::now() < deadline_) return false;
    sel_.budget_exhausted = true;
    return true;
  }

  void measure_nodes() {
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
      for (size_t k = 0; k < c.size(); ++k)
        h[k] = heuristic_ms(g_, int(i), c[k], o_.isa, o_.threads);
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

  // Whether timing k on operands of these sizes is predicted to fit what is left of the
  // budget: fresh scratch for its operands, and its runs (a kernel with enough tiles is timed
  // on a sample of them; one with too few runs whole). Notes it when not.
  bool fits(const Kernel& k, const std::vector<int64_t>& src_bytes,
            const std::vector<int64_t>& dst_bytes, double est_ms) {
    const ProfileBudget pb;
    const bool sampled = k.tiles() >= Profiler::kMinSampledTiles * prof_.threads();
    const double runs = sampled ? std::min(2 * est_ms, (2 + pb.min_reps) * pb.sample_ms) : est_ms;
    const double left = std::chrono::duration<double, std::milli>(deadline_ - Clock::now()).count();
    if (prof_.scratch_cost_ms(k, src_bytes, dst_bytes) + runs <= left) return true;
    sel_.budget_exhausted = true;
    return false;
  }

  // What timing node i's kernel under l reads and writes: bytes per input slot (0: none, or
  // the constant in consts) and per output.
  struct Operands {
    std::vector<int64_t> src_bytes, dst_bytes;
    std::vector<const void*> consts;
  };
  Operands operands(int i, const Label& l) const {
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

  // Median time of label l on node i (est_ms: the model's estimate); nullopt when it is not
  // measured because the load's profiling budget would not cover it.
  std::optional<double> measure(int i, const Label& l, double est_ms) {
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

  double reorder_ms(const Shape& s, Layout from, Layout to) {
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

  // --- choice ---------------------------------------------------------------------------

  // The network problem over the current costs. Per node only the cheapest label of each
  // (input layouts, output layouts) signature is offered: the others can never win.
  NetworkProblem network(std::vector<std::vector<int>>* offered) {
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
        if (!is4d(g_, v) || (!u8 && (layout_u8(Layout(from)) || layout_u8(Layout(to)))))
          return kInf;
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
          tensor_of[size_t(n.outputs[k])] = np.add_tensor(g_.value(n.outputs[k]).name, int(i),
                                                          int(k), conv(n.outputs[k], int(i)));
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

  std::vector<int> choose() {
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
      if (probe_solve_) so.max_search_nodes = kProbeSolveNodes;
      NetworkSolution s = np.solve(so);
      if (!s.feasible && admit_pruned()) return choose();
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
            k = cheapest(i, [&](const Label& l) {
              return l.kind != LabelKind::conv && l.in == Layout::nchw;
            });
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

  // --- accuracy guard ---------------------------------------------------------------------

  // Whether l rounds to bf16: a bf16 tensor in or out, or bf16 operands inside (fc).
  static bool rounds_bf16(const Label& l) {
    return layout_bf16(l.in) || layout_bf16(l.out) || l.precision == Precision::bf16;
  }

  // The error weight the guard gives l: its family's transform error; in the bf16 guard 1 for a
  // label that rounds to bf16 and 0 for every f32 one (Winograd's error is far below bf16's,
  // and that guard's reference is exact).
  double lossiness(const Label& l) const {
    return bf16_guard_ ? double(rounds_bf16(l)) : transform_error(l);
  }

  double guard_budget() const { return bf16_guard_ ? o_.bf16_accuracy_budget : o_.accuracy_budget; }

  // The nodes whose chosen label satisfies `pred`.
  template <class Pred>
  std::vector<size_t> nodes_where(Pred pred) const {
    std::vector<size_t> r;
    for (size_t i = 0; i < sel_.nodes.size(); ++i)
      if (pred(sel_.nodes[i].label)) r.push_back(i);
    return r;
  }
  std::vector<size_t> bf16_nodes() const { return nodes_where(rounds_bf16); }
  std::vector<size_t> lossy_nodes() const {
    return nodes_where([this](const Label& l) { return lossiness(l) > 0; });
  }

  // An exact stand-in for node i's lossy label: family f (else direct; grouped convs:
  // grouped) in the same layouts when offered, else its fastest measured label of that
  // family; built once per label.
  std::pair<Label, std::unique_ptr<Kernel>>& stand_in(size_t i, ConvFamily f) {
    const Label& cur = sel_.nodes[i].label;
    std::string why;
    for (ConvFamily fam : {f, ConvFamily::direct, ConvFamily::grouped}) {
      std::optional<Label> best;
      double best_ms = kInf;
      for (size_t k = 0; k < cands_[i].size(); ++k) {
        const Label& l = cands_[i][k];
        if (l.kind != LabelKind::conv || l.conv.family != fam) continue;
        const bool same = l.conv.src == cur.conv.src && l.conv.dst == cur.conv.dst;
        const double ms = same ? -1 : cost_[i][k];  // the same layouts first
        if (!best || ms < best_ms) best = l, best_ms = ms;
      }
      if (!best) continue;
      auto& slot = stand_ins_[{i, best->key()}];
      if (!slot.second) slot = {*best, instantiate(g_, int(i), *best, o_.isa, &why).kernel};
      if (slot.second) return slot;
    }
    fail(Code::internal, g_.nodes[i].where() + ": no exact conv applies: " + why);
  }

  // The probe's output with each of `nodes` on its exact stand-in of family f; the chosen
  // labels and kernels are put back afterwards. Empty when the model cannot be probed.
  std::vector<float> probe_with(const std::vector<size_t>& nodes, ConvFamily f) {
    std::vector<std::pair<Label, std::unique_ptr<Kernel>>*> swap;
    for (size_t i : nodes) swap.push_back(&stand_in(i, f));
    auto exchange = [&] {
      for (size_t k = 0; k < nodes.size(); ++k) {
        std::swap(sel_.nodes[nodes[k]].label, swap[k]->first);
        std::swap(sel_.kernels[nodes[k]], swap[k]->second);
      }
    };
    exchange();
    std::vector<float> y;
    try {
      y = o_.probe(sel_);
    } catch (...) {
      exchange();
      throw;
    }
    exchange();
    ++sel_.probes;
    return y;
  }

  // The current plan's probe output against ref, max|y - ref| / max|ref|: not finite (warned)
  // when the output is not.
  double probe_against(const std::vector<float>& ref, const char* guard_name) {
    const std::vector<float> y = o_.probe(sel_);
    ++sel_.probes;
    const double e = relative_error(y, ref);
    if (!std::isfinite(e))
      log_warn("{}: the probe's output is not finite; the plan is kept", guard_name);
    return e;
  }

  // The share probes the profiling budget still allows a guard that began at t0 with probes0
  // probes (its time so far per probe; two kept for the probes after demoting).
  double share_probes_left(Clock::time_point t0, int probes0) const {
    const double per_probe = ms_since(t0) / std::max(1, sel_.probes - probes0);
    double fit = std::floor((budget_ms() - ms_since(t0)) / per_probe) - 2;
    if (o_.guard_share_probes > 0) fit = std::min(fit, double(o_.guard_share_probes));
    return fit;
  }

  // The probe's output with `nodes` exact: on direct stand-ins (probe_with), in the bf16 guard
  // in f32 (probe_f32).
  std::vector<float> probe_exact(const std::vector<size_t>& nodes) {
    return bf16_guard_ ? probe_f32(nodes) : probe_with(nodes, ConvFamily::direct);
  }

  // The bf16 guard's probe: the network solved again with the labels that round to bf16
  // forbidden on `nodes` and on every node not rounding now (so that none turns bf16 instead),
  // and the other nodes that round now kept on their labels (alone among f32 layers, a node
  // would often be solved f32 too, and its error share read as none); with exact_ref bf16 and
  // Winograd are forbidden on every node. Then the costs go back and the plan is solved back
  // (the same plan: the solver is deterministic; its kernels wait in spares_).
  std::vector<float> probe_f32(const std::vector<size_t>& nodes, bool exact_ref = false) {
    std::vector<bool> f32(cost_.size(), true);
    if (!exact_ref) {
      for (size_t i : bf16_nodes()) f32[i] = false;
      for (size_t i : nodes) f32[i] = true;
    }
    std::vector<std::tuple<size_t, size_t, double>> saved;  // (node, label, cost)
    for (size_t i = 0; i < cost_.size(); ++i) {
      for (size_t c = 0; c < cands_[i].size(); ++c) {
        const Label& l = cands_[i][c];
        const bool forbid = f32[i] ? rounds_bf16(l) || (exact_ref && transform_error(l) > 0)
                                   : !(l == sel_.nodes[i].label);
        if (forbid && std::isfinite(cost_[i][c]))
          saved.emplace_back(i, c, cost_[i][c]), cost_[i][c] = kInf;
      }
      if (f32[i]) admit_exact(i, exact_ref);
    }
    auto restore = [&] {
      probe_solve_ = false;
      for (const auto& t : saved) cost_[std::get<0>(t)][std::get<1>(t)] = std::get<2>(t);
      solve_and_build();
    };
    std::vector<float> y;
    try {
      probe_solve_ = true;
      solve_and_build();
      probe_solve_ = false;
      y = o_.probe(sel_);
    } catch (...) {
      restore();
      throw;
    }
    ++sel_.probes;
    restore();
    return y;
  }

  // Accuracy strict or default, a plan that rounds to bf16: the probe runs the plan (y) and the
  // network in f32 on exact families (y_f), and while max|y - y_f| / max|y_f| exceeds
  // bf16_accuracy_budget the layers that round to bf16 get error shares and those saving least
  // time per unit of share go back to f32 (measure_shares and demote, as in guard(); a group's
  // share is the error with only it in bf16). On random-weight CNNs bf16's error comes mostly
  // from the first layers, whose rounding every later layer carries: ResNet-50 all in bf16 is
  // 0.10 from f32, with its first 17 convs in f32 0.02 (bench/NOTES.md, "bf16 guard"). Where a
  // probe would not fit the profiling budget the plan stays as solved, unverified.
  void guard_bf16() {
    bf16_guard_ = keep_spares_ = true;
    sel_.guard_bf16 = true;
    const auto t0 = Clock::now();
    auto done = [&] {
      bf16_guard_ = keep_spares_ = false;
      spares_.clear();
      shares_.clear();
      sel_.guard_ms = ms_since(t0);
    };
    const double budget = guard_budget();
    if (3 * sel_.predicted_ms > budget_ms() || peak_live_bytes(g_) > double(kMaxProbeBytes)) {
      log_info("bf16 guard: probing this plan would not fit the profiling budget: kept unprobed");
      return done();
    }
    const int probes0 = sel_.probes;
    auto over_time = [&] {
      if (ms_since(t0) <= budget_ms()) return false;
      log_info("bf16 guard: its probes took {:.0f} ms, past the profiling budget: plan kept",
               ms_since(t0));
      return true;
    };
    const std::vector<float> y_f = probe_f32({}, /*exact_ref=*/true);
    if (y_f.empty()) {
      log_info("bf16 guard: the model cannot be probed (an input is not f32)");
      return done();
    }
    for (std::vector<size_t> lossy = lossy_nodes(); !lossy.empty() && !over_time();
         lossy = lossy_nodes()) {
      const double e = probe_against(y_f, "bf16 guard");
      if (!std::isfinite(e)) break;
      sel_.probe_error = e;
      log_info("bf16 guard: {} layers round to bf16, {:.2e} from f32 (budget {:.1e})", lossy.size(),
               e, budget);
      if (e <= budget) break;
      const double fit = share_probes_left(t0, probes0);
      // (Measured again each round: bf16's errors add up less regularly than Winograd's, and a
      // share by difference may hide a layer that adds much.)
      shares_.clear();
      if (!measure_shares(lossy, y_f, 0.0, fit, over_time)) break;
      std::vector<double> share(lossy.size());
      double sum2 = 0;
      for (size_t k = 0; k < lossy.size(); ++k)
        share[k] = shares_.at(lossy[k]).second, sum2 += share[k] * share[k];
      for (double& x : share) x = sum2 > 0 ? x * e / std::sqrt(sum2) : kInf;
      demote(lossy, share, budget);
      solve_and_build();
    }
    if (lossy_nodes().empty()) sel_.probe_error = 0;
    done();
  }

  // Accuracy::guarded. The probe runs the plan (y), the plan with its lossy convs on direct
  // (y_d) and on im2col (y_i), two exact families that round differently. |y - y_d| holds the
  // lossy layers' error and direct's own on those layers, |y_d - y_i| about twice the latter,
  // so sqrt(|y - y_d|^2 - |y_d - y_i|^2) estimates what the lossy families add beyond exact
  // rounding. While that exceeds the budget, each lossy layer's share is measured once (by
  // bisection over groups of them: measure_shares), the layers saving least time per unit of
  // their share are demoted until the rest is predicted within the budget (shares add in
  // quadrature), and the network is solved and probed again. Measurements behind this:
  // bench/NOTES.md, "accuracy guard".
  void guard() {
    std::vector<size_t> lossy = lossy_nodes();
    if (lossy.empty()) return;
    // A probe runs the plan on a fresh input and arena: when one would not fit the profiling
    // budget (at least three are needed) or the memory bound (a fuzzed batch of 65,535 asked
    // for gigabytes at load), the guard keeps exact families only, unprobed.
    const double probe_bytes = peak_live_bytes(g_);
    if (3 * sel_.predicted_ms > budget_ms() || probe_bytes > double(kMaxProbeBytes)) {
      log_info(
          "accuracy guard: probing this plan would take {:.0f} ms and {:.0f} MiB: its {} "
          "lossy convs are demoted (exact families only)",
          3 * sel_.predicted_ms, probe_bytes / 1048576, lossy.size());
      demote(lossy, std::vector<double>(lossy.size(), kInf), 0.0, /*exact_only=*/true);
      solve_and_build();
      return;
    }
    const auto t0 = Clock::now();
    const int probes0 = sel_.probes;
    const double budget = guard_budget();
    // A probe runs the whole plan on fresh memory: at a huge batch one takes seconds
    // (bench/NOTES.md, "The accuracy guard inside the profiling budget"). Past the profiling
    // budget the guard stops probing and keeps exact families only: never an unverified lossy
    // conv, and at most about one probe beyond the budget.
    auto over_time = [&] {
      if (ms_since(t0) <= budget_ms()) return false;
      log_info(
          "accuracy guard: its probes took {:.0f} ms, past the profiling budget of {:.0f} ms: "
          "the {} lossy convs are demoted (exact families only)",
          ms_since(t0), budget_ms(), lossy.size());
      demote(lossy, std::vector<double>(lossy.size(), kInf), 0.0, /*exact_only=*/true);
      solve_and_build();
      lossy = lossy_nodes();
      return true;
    };
    std::vector<float> y_d = probe_with(lossy, ConvFamily::direct);
    if (!y_d.empty() && over_time()) lossy.clear();  // (demoted and solved already)
    std::vector<float> y_i =
        y_d.empty() || lossy.empty() ? std::vector<float>() : probe_with(lossy, ConvFamily::im2col);
    const double noise = relative_error(y_i, y_d);
    auto added = [&](double e) { return std::sqrt(std::max(0.0, e * e - noise * noise)); };
    while (!lossy.empty()) {
      if (!y_d.empty() && over_time()) break;
      std::vector<double> share(lossy.size(), kInf);
      if (!y_d.empty()) {
        const double e = probe_against(y_d, "accuracy guard");
        if (!std::isfinite(e)) break;
        sel_.probe_error = added(e);
        log_info(
            "accuracy guard: {} lossy convs differ by {:.2e} from exact ones, which differ by "
            "{:.2e} among themselves: {:.2e} added (budget {:.1e})",
            lossy.size(), e, noise, sel_.probe_error, budget);
        if (sel_.probe_error <= budget) break;
        const double fit = share_probes_left(t0, probes0);
        if (!measure_shares(lossy, y_d, noise, fit, over_time)) break;  // (demoted, solved)
        double sum2 = 0;
        for (size_t k = 0; k < lossy.size(); ++k) {
          const auto& [w0, s0] = shares_.at(lossy[k]);
          share[k] = s0 * lossiness(sel_.nodes[lossy[k]].label) / w0;
          sum2 += share[k] * share[k];
        }
        const double scale = sum2 > 0 ? sel_.probe_error / std::sqrt(sum2) : 1;
        for (double& x : share) x = sum2 > 0 ? x * scale : kInf;
      } else {
        log_info(
            "accuracy guard: the model cannot be probed (an input is not f32): exact "
            "families only");
      }
      demote(lossy, share, budget);
      solve_and_build();
      lossy = lossy_nodes();
      if (lossy.empty()) sel_.probe_error = 0;
    }
    stand_ins_.clear();
    shares_.clear();
    sel_.guard_ms = ms_since(t0);
  }

  // Measures the error share of each lossy node that has none yet (shares_). A group's share is
  // the plan with only that group lossy, against y_d: its members' transform error and direct's
  // own rounding on them (about noise^2 * members / lossy, taken off). The shares are found by
  // bisection (bench/NOTES.md, "The accuracy guard by bisection"): the group of every
  // unmeasured node (its share is the measured total when that is every lossy node, no probe),
  // then, largest share first, a group's first half is probed and its second half gets the rest
  // (shares add in quadrature; probed too when the first half holds most of it), until each
  // group is one node or too small to matter next to the budget, or `probes` are spent. Each
  // member of a group gets an equal part of its share (in quadrature): a few layers usually add
  // most of the error, and they are found in a few probes each instead of one per layer. The
  // guard scales a share by the family's transform_error weight when the node moves to a
  // milder family, and all of them to the measured total. False when over_time stopped it (and
  // demoted and solved already).
  bool measure_shares(const std::vector<size_t>& lossy, const std::vector<float>& y_d, double noise,
                      double probes, const std::function<bool()>& over_time) {
    std::vector<size_t> todo;  // positions in lossy without a measured share
    for (size_t k = 0; k < lossy.size(); ++k)
      if (!shares_.count(lossy[k])) todo.push_back(k);
    if (todo.empty()) return true;
    struct Group {
      size_t b, end;  // todo[b, end)
      double share;
    };
    // The share of todo[b, end): the probe's error with only those lossy, rounding taken off.
    auto measure = [&](size_t b, size_t end) {
      const double m = double(end - b);
      std::vector<bool> member(lossy.size(), false);
      for (size_t t = b; t < end; ++t) member[todo[t]] = true;
      std::vector<size_t> others;
      for (size_t k = 0; k < lossy.size(); ++k)
        if (!member[k]) others.push_back(lossy[k]);
      const double e = relative_error(probe_exact(others), y_d);
      return std::sqrt(std::max(0.0, e * e - noise * noise * m / double(lossy.size())));
    };
    // Smaller groups than this stay whole: all of them together move the total little.
    const double fine = guard_budget() / 1.2 / 4;
    auto larger = [](const Group& a, const Group& b) {
      return std::make_pair(a.share, b.b) < std::make_pair(b.share, a.b);
    };
    std::vector<Group> open, done;
    int spent = 0;
    if (todo.size() == lossy.size()) {
      open.push_back({0, todo.size(), sel_.probe_error});
    } else {
      if (over_time()) return false;
      open.push_back({0, todo.size(), measure(0, todo.size())});
      ++spent;
    }
    while (!open.empty()) {
      std::pop_heap(open.begin(), open.end(), larger);
      const Group grp = open.back();
      open.pop_back();
      if (grp.end - grp.b == 1 || grp.share <= fine || double(spent) >= probes) {
        done.push_back(grp);
        continue;
      }
      if (over_time()) return false;
      const size_t mid = grp.b + (grp.end - grp.b) / 2;
      const double first = measure(grp.b, mid);
      ++spent;
      // The rest by difference, unless the first half holds most of the share: then the
      // difference is ill-conditioned (errors add in quadrature only roughly) and is probed.
      // (0.8: rest < 0.6 of the share; halves of even shares, 0.71, are not probed twice.)
      double rest = std::sqrt(std::max(0.0, grp.share * grp.share - first * first));
      if (first > 0.8 * grp.share) {
        if (over_time()) return false;
        rest = measure(mid, grp.end);
        ++spent;
      }
      for (const Group& half : {Group{grp.b, mid, first}, Group{mid, grp.end, rest}}) {
        open.push_back(half);
        std::push_heap(open.begin(), open.end(), larger);
      }
    }
    for (const Group& grp : done) {
      const double m = double(grp.end - grp.b);
      for (size_t t = grp.b; t < grp.end; ++t) {
        const size_t i = lossy[todo[t]];
        shares_[i] = {lossiness(sel_.nodes[i].label), grp.share / std::sqrt(m)};
        log_debug("accuracy guard: {} ({}) adds {:.2e} (measured in a group of {})",
                  g_.nodes[i].where(), sel_.nodes[i].label.key(), grp.share / std::sqrt(m),
                  grp.end - grp.b);
      }
    }
    return true;
  }

  // Demotes the lossy nodes that save least time per unit of their error share (squared:
  // shares add in quadrature) until the rest sum within (budget / 1.2)^2; at least one. A
  // demoted node loses its label's family and every family adding as much error or more.
  // exact_only: every lossy family goes, not only the node's and worse ones.
  void demote(const std::vector<size_t>& lossy, const std::vector<double>& share, double budget,
              bool exact_only = false) {
    struct Item {
      size_t node;
      double err2, saves;  // squared error share; ms saved over the best exact label
    };
    std::vector<Item> items;
    double total = 0;
    for (size_t k = 0; k < lossy.size(); ++k) {
      const size_t i = lossy[k];
      double exact = kInf;
      for (size_t c = 0; c < cands_[i].size(); ++c)
        if (lossiness(cands_[i][c]) == 0) exact = std::min(exact, cost_[i][c]);
      // (Finite, so that the order below is one: an unmeasured exact label saves "a lot", a
      // share not measured weighs "a lot".)
      const double e2 = std::isfinite(share[k]) ? share[k] * share[k] : 1e9;
      items.push_back({i, e2, std::min(exact - sel_.nodes[i].ms, 1e9)});
      total += e2;
    }
    auto per_err = [](const Item& x) { return x.saves / std::max(x.err2, 1e-30); };
    std::sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
      return std::make_pair(per_err(a), a.node) < std::make_pair(per_err(b), b.node);
    });
    const double keep = budget * budget / 1.44;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k > 0 && total <= keep) break;
      total -= items[k].err2;
      const size_t i = items[k].node;
      const double w = exact_only ? 1e-300 : lossiness(sel_.nodes[i].label);
      for (size_t c = 0; c < cands_[i].size(); ++c)
        if (lossiness(cands_[i][c]) >= w) cost_[i][c] = kInf;
      admit_exact(i);
      ++sel_.demoted;
      log_debug("accuracy guard: {} leaves {}", g_.nodes[i].where(), sel_.nodes[i].label.key());
    }
  }

  // Gives node i an exact label (lossiness 0; no_transforms: no Winograd either) when it has
  // none with a time: exact convs the fast tuning did not measure (the model found them far
  // slower) are timed now, or take the model's estimate once the profiling budget is spent.
  void admit_exact(size_t i, bool no_transforms = false) {
    auto exact = [&](size_t c) {
      return lossiness(cands_[i][c]) == 0 && !(no_transforms && transform_error(cands_[i][c]) > 0);
    };
    for (size_t c = 0; c < cands_[i].size(); ++c)
      if (exact(c) && std::isfinite(cost_[i][c])) return;
    for (size_t c = 0; c < cands_[i].size(); ++c) {
      const Label& l = cands_[i][c];
      if (l.kind != LabelKind::conv || !exact(c)) continue;
      const double est = heuristic_ms(g_, int(i), l, o_.isa, o_.threads);
      std::optional<double> ms;
      if (tune_ != TuneMode::none) ms = measure(int(i), l, est);
      cost_[i][c] = ms ? *ms : est;
      if (std::isfinite(cost_[i][c])) return;
    }
  }

  // --- plan cache -------------------------------------------------------------------------

  std::string serialize() const {
    std::ostringstream s;
    s << "predicted " << sel_.predicted_ms << "\noptimal " << int(sel_.optimal) << "\n";
    for (size_t i = 0; i < sel_.nodes.size(); ++i)
      s << sel_.nodes[i].label.key() << " " << sel_.nodes[i].ms << " "
        << int(sel_.nodes[i].measured) << "\n";
    for (const SeparablePair& q : sel_.separable)
      s << (q.expand ? "expand " : "separable ") << q.dw << " " << q.pw << " " << q.ms << "\n";
    return s.str();
  }

  // A warm load: the solved plan is in the cache; build only the chosen kernels. Anything
  // that does not fit this graph (or no longer applies) falls back to a fresh selection.
  bool from_cached_plan(const std::string& key) {
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

  // Builds sel_.kernels[i] for sel_.nodes[i].label, for the given nodes, on the session's
  // threads: JIT code generation and weight packing dominate a warm load, and they are
  // independent per node. Returns why each one that did not apply failed.
  std::vector<std::string> build_kernels(const std::vector<size_t>& nodes) {
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

  // The fixed strategy's labels: one layout, one family: the families marked as the fixed
  // baseline in the family table (direct conv, depthwise where direct cannot) on the blocked
  // layout; other ops on the blocked layout where they can be.
  bool fixed_label(const Label& l) const {
    const Layout b = blocked_layout(o_.isa);
    return l.kind == LabelKind::conv
               ? conv_family(l.conv.family).fixed_baseline && l.conv.src == b && l.conv.dst == b
               : l.in == b;
  }

  // Fast tuning measures only the labels the cost model finds plausible, and those alone may
  // not chain (an int8 conv whose only plausible label reads uint8, after a view that cannot
  // give it). Then the labels it passed over come back at the model's estimates: a model that
  // loads without tuning loads with it. False when there were none. A label whose layouts a
  // measured label of its node already has adds no way to chain, only the model's guess beside
  // a measurement: it stays out (a scalar reference Transpose, its model estimate below its JIT
  // kernel's time measured while CI ran another test, was chosen).
  bool admit_pruned() {
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

  // No plan exists: when a node has no label left (even its reference kernel failed), that
  // node's own error is the model's problem; otherwise the layouts cannot be chained, a bug.
  [[noreturn]] void report_infeasible() {
    for (size_t i = 0; i < cost_.size(); ++i)
      if (std::none_of(cost_[i].begin(), cost_[i].end(),
                       [](double x) { return std::isfinite(x); }) &&
          !failure_[i].second.empty())
        fail(failure_[i].first, failure_[i].second);
    fail(Code::internal, "no feasible choice of kernels and layouts");
  }

  bool reject(const std::string& key, const std::string& why) {
    log_warn("tuning cache: ignoring the stored plan {} ({}); selecting again", key, why);
    for (auto& k : sel_.kernels) k.reset();
    return false;
  }

  // On a terminal a bar redrawn in place; otherwise (a log, CI) a line at the start and one
  // per 10%, so a long load does not look hung and the log stays short.
  void progress(int done, int total) {
    if (!o_.progress || total == 0) return;
    if (isatty(2)) {
      const int width = 30, filled = done * width / total;
      std::fprintf(stderr, "\rkiln: profiling [%.*s%*s] %d/%d", filled,
                   "##############################", width - filled, "", done, total);
    } else {
      const int tenth = done * 10 / total;
      if (done > 0 && tenth == progress_tenth_) return;
      progress_tenth_ = tenth;
      std::fprintf(stderr, "kiln: profiling %d%% (%d/%d measurements, %.1f s)\n",
                   done * 100 / total, done, total, ms_since(progress_start_) / 1e3);
    }
    std::fflush(stderr);
  }

  const Graph& g_;
  SelectOptions o_;
  TuneMode tune_;
  Profiler prof_;
  std::string problem_suffix_;
  Selection sel_;
  int64_t build_ns_ = 0, codegen_ns_ = 0;  // thread time building kernels, and its codegen part
  std::vector<SeparablePair> sep_;         // find_separable (ms: inf, not measured)
  std::vector<std::vector<Label>> cands_;
  std::vector<std::vector<double>> cost_;
  // Per node and label: the cost model's estimate of a label fast tuning left unmeasured as
  // implausible (NaN: measured, or none to give), see admit_pruned().
  std::vector<std::vector<double>> pruned_;
  std::map<std::pair<std::string, std::string>, double> reorder_memo_;
  std::vector<std::pair<Label, std::unique_ptr<Kernel>>> kept_;  // per node, see measure()
  // The guard's exact stand-ins by (node, label key), see stand_in().
  std::map<std::pair<size_t, std::string>, std::pair<Label, std::unique_ptr<Kernel>>> stand_ins_;
  std::map<size_t, std::pair<double, double>> shares_;  // guard: node -> (weight, error share)
  bool bf16_guard_ = false;                             // guard_bf16 runs: lossiness() is bf16's
  // While keep_spares_, kernels a new solution replaces wait here by (node, label key) for the
  // next (guard_bf16 solves back and forth).
  bool keep_spares_ = false;
  bool probe_solve_ = false;  // probe_f32 solves: any plan of the probe's precisions will do
  std::map<std::pair<size_t, std::string>, std::unique_ptr<Kernel>> spares_;
  std::vector<double> kept_ms_;
  std::vector<std::pair<Code, std::string>> failure_;      // per node: the last label's failure
  Clock::time_point deadline_ = Clock::time_point::max();  // end of this load's profiling
  Clock::time_point progress_start_;                       // progress(): when measuring began
  int progress_tenth_ = -1;  // progress(): the last tenth reported as a line
};

}  // namespace

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
  return Selector(g, o).run();
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
