// The accuracy guards of label selection (runtime/selector.h): the probe runs a plan next to an
// exact reference, and the layers adding most error per millisecond they save go back to exact
// f32 families until the plan is within its budget (guard(): Winograd's transform error;
// guard_bf16(): bf16's rounding).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "graph/clock.h"
#include "jit/conv/conv_families.h"
#include "runtime/labels.h"
#include "runtime/log.h"
#include "runtime/selector.h"

namespace kiln::selection_detail {

// The bf16 guard's probe plans need the probe's precisions, not the fastest plan: their solves
// stop branching after this many subproblems (a node bound, not time, so that every machine
// probes the same plan; bench/NOTES.md, session 50).
constexpr int64_t kProbeSolveNodes = 100;

bool Selector::rounds_bf16(const Label& l) {
  return layout_bf16(l.in) || layout_bf16(l.out) || l.precision == Precision::bf16;
}

double Selector::lossiness(const Label& l) const {
  return bf16_guard_ ? double(rounds_bf16(l)) : transform_error(l);
}

std::vector<size_t> Selector::lossy_nodes() const {
  return nodes_where([this](const Label& l) { return lossiness(l) > 0; });
}

std::pair<Label, std::unique_ptr<Kernel>>& Selector::stand_in(size_t i, ConvFamily f) {
  const Label& cur = sel_.nodes[i].label;
  std::string why;
  for (ConvFamily fam : {f, ConvFamily::direct, ConvFamily::grouped}) {
    std::optional<Label> best;
    double best_ms = kInf;
    for (size_t k = 0; k < cands_[i].size(); ++k) {
      const Label& l = cands_[i][k];
      if (l.kind != LabelKind::conv || l.conv.family != fam || rounds_bf16(l)) continue;
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

std::vector<float> Selector::probe_with(const std::vector<size_t>& nodes, ConvFamily f) {
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

double Selector::probe_against(const std::vector<float>& ref, const char* guard_name) {
  const std::vector<float> y = o_.probe(sel_);
  ++sel_.probes;
  const double e = relative_error(y, ref);
  if (!std::isfinite(e))
    log_warn("{}: the probe's output is not finite; the plan is kept", guard_name);
  return e;
}

double Selector::share_probes_left(Clock::time_point t0, int probes0) const {
  const double per_probe = ms_since(t0) / std::max(1, sel_.probes - probes0);
  double fit = std::floor((budget_ms() - ms_since(t0)) / per_probe) - 2;
  if (o_.guard_share_probes > 0) fit = std::min(fit, double(o_.guard_share_probes));
  return fit;
}

std::vector<float> Selector::probe_exact(const std::vector<size_t>& nodes) {
  return bf16_guard_ ? probe_f32(nodes) : probe_with(nodes, ConvFamily::direct);
}

std::vector<float> Selector::probe_f32(const std::vector<size_t>& nodes, bool exact_ref) {
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
    for (const auto& t : saved) cost_[std::get<0>(t)][std::get<1>(t)] = std::get<2>(t);
    solve_and_build();
  };
  std::vector<float> y;
  try {
    solve_and_build(kProbeSolveNodes);
    y = o_.probe(sel_);
  } catch (...) {
    restore();
    throw;
  }
  ++sel_.probes;
  restore();
  return y;
}

void Selector::guard_bf16() {
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

void Selector::guard() {
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

bool Selector::measure_shares(const std::vector<size_t>& lossy, const std::vector<float>& y_d,
                              double noise, double probes, const std::function<bool()>& over_time) {
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

void Selector::demote(const std::vector<size_t>& lossy, const std::vector<double>& share,
                      double budget, bool exact_only) {
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

void Selector::admit_exact(size_t i, bool no_transforms) {
  auto exact = [&](size_t c) {
    const Label& l = cands_[i][c];
    return lossiness(l) == 0 && !rounds_bf16(l) && !(no_transforms && transform_error(l) > 0);
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

}  // namespace kiln::selection_detail
