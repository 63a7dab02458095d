// The PBQP solver: reductions to a core of degree >= 3 nodes, then branch-and-bound on that
// core (each branch fixes one node and reduces again), back-propagation in reverse order.
//
// Exactness: normalisation, RI and RII leave the minimum over all assignments unchanged and
// R0 moves its node's minimum into a constant, so a subproblem's optimum is that constant
// plus the optimum of its core. A core or a branch is cut only when a lower bound already
// reaches the best total found, so the search returns the optimum. Bounds: a relaxation
// (drop the weakest edges until R0/RI/RII solve the core; edges are >= 0 after
// normalisation, so this can only lower the optimum) for a core, and "neighbours at their
// best given this label, everything else at its independent minimum" to order and cut the
// labels of the branching node.
//
// Incumbents: the relaxation's assignment costed on the real core at every search node, and
// one greedy dive (heuristic mode, LLVM-style RN) on the first core. When the time budget
// (or the cap on search nodes) runs out the search keeps the best of these, so it is never
// worse than heuristic mode.
#include <algorithm>
#include <numeric>

#include "graph/clock.h"
#include "solver/pbqp.h"
#include "solver/pbqp_graph.h"

namespace kiln {

namespace {

using pbqp::ReductionGraph;
using pbqp::Step;

// ub - acc without inf - inf.
double remaining(double ub, double acc) {
  return ub == pbqp_inf ? pbqp_inf : ub - acc;
}

struct Result {
  bool found = false;
  double value = pbqp_inf;  // objective of the returned labels, in the subproblem's costs
};

class Search {
 public:
  Search(const SolveOptions& opts, SolveStats& stats)
      : opts_(opts),
        stats_(stats),
        start_(Clock::now()),
        retries_left_(opts.max_feasibility_retries) {}

  bool incomplete() const { return incomplete_; }
  double elapsed_ms() const { return ms_since(start_); }

  // Finds an assignment of g with objective < ub (the best one when searching exactly), or
  // any assignment when need_any. `labels` (indexed by g's node ids) is set when found.
  Result run(ReductionGraph g, double ub, bool need_any, std::vector<int>& labels) {
    if (opts_.normalise) stats_.edges_removed += g.normalise_all();
    std::vector<Step> log;
    double acc = 0.0;  // R0 constants
    reduce(g, log, acc);
    std::vector<int> core = g.alive_nodes();
    if (root_) stats_.core_nodes = int(core.size()), root_ = false;
    labels.assign(size_t(g.num_nodes()), 0);
    double value = acc;
    if (!core.empty()) {
      if (!need_any && !(acc + g.lower_bound() < ub)) return {};
      Result r = branch(g, remaining(ub, acc), need_any, labels);
      if (!r.found) return {};
      value = acc + r.value;
    } else if (!need_any && !(value < ub)) {
      return {};
    }
    for (auto it = log.rbegin(); it != log.rend(); ++it)
      labels[size_t(it->x)] = pbqp::back_propagate(*it, labels);
    return {true, value};
  }

 private:
  bool out_of_time() {
    if (!stats_.timed_out &&
        (elapsed_ms() >= opts_.time_budget_ms ||
         (opts_.max_search_nodes >= 0 && stats_.bnb_nodes >= opts_.max_search_nodes)))
      stats_.timed_out = true;
    return stats_.timed_out;
  }

  void reduce(ReductionGraph& g, std::vector<Step>& log, double& acc, bool count = true) {
    std::vector<int> work;
    for (int x = g.num_nodes() - 1; x >= 0; --x)
      if (g.alive(x) && g.degree(x) <= 2) work.push_back(x);
    while (!work.empty()) {
      const int x = work.back();
      work.pop_back();
      if (!g.alive(x) || g.degree(x) > 2) continue;
      const std::vector<int> nb = g.neighbours(x);
      if (nb.empty()) {
        double c = 0.0;
        log.push_back(g.reduce_r0(x, &c));
        acc += c;
        stats_.r0 += count;
        continue;
      }
      if (nb.size() == 1) {
        log.push_back(g.reduce_ri(x));
        stats_.ri += count;
      } else {
        log.push_back(g.reduce_rii(x, opts_.normalise));
        stats_.rii += count;
      }
      for (int y : nb)
        if (g.degree(y) <= 2) work.push_back(y);
    }
  }

  // Max degree (fixing it removes the most edges); then fewer labels; then lowest id.
  static int pick_node(const ReductionGraph& g) {
    int best = -1;
    for (int x : g.alive_nodes()) {
      if (best < 0 || g.degree(x) > g.degree(best) ||
          (g.degree(x) == g.degree(best) && g.costs(x).size() < g.costs(best).size()))
        best = x;
    }
    return best;
  }

  // Lower bound and incumbent for a core: drop the weakest edge at a minimum-degree node
  // whenever reductions get stuck (edges are normalised to >= 0 first, so dropping one can
  // only lower the optimum) until R0/RI/RII solve the rest. The relaxed optimum is a lower
  // bound; its assignment, costed on the real core, is a feasible candidate.
  struct Relaxed {
    double lb = pbqp_inf, value = pbqp_inf;
    std::vector<int> labels;
  };
  Relaxed relax(const ReductionGraph& core) {
    ReductionGraph r = core;
    std::vector<Step> log;
    Relaxed out;
    out.lb = 0.0;
    while (true) {
      reduce(r, log, out.lb, /*count=*/false);
      int x = -1;
      for (int y : r.alive_nodes())
        if (x < 0 || r.degree(y) < r.degree(x)) x = y;
      if (x < 0) break;
      r.drop_weakest_edge(x);
    }
    out.labels.assign(size_t(core.num_nodes()), 0);
    for (auto it = log.rbegin(); it != log.rend(); ++it)
      out.labels[size_t(it->x)] = pbqp::back_propagate(*it, out.labels);
    out.value = core.objective(out.labels);
    return out;
  }

  // RN on a core (every node degree >= 3): try the labels of one node in order of their
  // lower bound. Exact mode starts from the relaxation's incumbent and explores every label
  // whose bound beats the best total found; heuristic mode (the option, LLVM-style) keeps
  // the first feasible label.
  Result branch(const ReductionGraph& g, double ub, bool need_any, std::vector<int>& labels) {
    ++stats_.rn;
    Result best;
    const bool heuristic = !opts_.branch_and_bound || greedy_;
    if (!heuristic) {
      Relaxed rel = relax(g);
      if (rel.value < ub || need_any) {
        best = {true, rel.value};
        labels = std::move(rel.labels);
      }
      if (first_core_) {
        // One greedy (heuristic-mode) dive on the first core: a good early incumbent, and
        // a result that is never worse than heuristic mode if the time budget runs out.
        first_core_ = false;
        greedy_ = true;
        const bool incomplete = incomplete_;
        std::vector<int> greedy_labels(size_t(g.num_nodes()), 0);
        Result r = branch(g, pbqp_inf, /*need_any=*/true, greedy_labels);
        greedy_ = false;
        incomplete_ = incomplete;  // the dive's shortcuts say nothing about the search
        if (r.value < (best.found ? best.value : ub) || (need_any && !best.found))
          best = r, labels = std::move(greedy_labels);
      }
      // Pruned, or the incumbent is proven optimal for this core.
      if (!(rel.lb < (best.found ? best.value : ub))) return best;
    }
    const int x = pick_node(g);
    const std::vector<double> lb = g.label_bounds(x);
    std::vector<int> order(lb.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return lb[size_t(a)] < lb[size_t(b)]; });
    std::vector<int> map, child_labels;
    for (size_t k = 0; k < order.size(); ++k) {
      const int i = order[k];
      const bool must = need_any && !best.found;
      const double bound = best.found ? best.value : ub;
      if (!must && !(lb[size_t(i)] < bound)) break;  // sorted: no later label can win
      if (!heuristic && out_of_time()) {
        // Keep the incumbent. Without one (need_any always has one) an ancestor holds a
        // better total than anything the relaxation found here.
        incomplete_ = true;
        break;
      }
      if (heuristic && k > 0) {
        // Only look further for a feasible assignment, within the retry budget.
        if ((best.found && best.value < pbqp_inf) || retries_left_ <= 0) {
          incomplete_ = true;
          break;
        }
        --retries_left_;
      }
      double fixed = 0.0;
      ReductionGraph child = g.fixed_copy(x, i, &map, &fixed);
      ++stats_.bnb_nodes;
      Result r = run(std::move(child), remaining(bound, fixed), must, child_labels);
      if (!r.found) continue;
      best = {true, fixed + r.value};
      labels[size_t(x)] = i;
      for (size_t c = 0; c < map.size(); ++c) labels[size_t(map[c])] = child_labels[c];
    }
    return best;
  }

  const SolveOptions& opts_;
  SolveStats& stats_;
  Clock::time_point start_;
  int64_t retries_left_;
  bool incomplete_ = false;
  bool root_ = true;
  bool first_core_ = true;  // the greedy dive has not been made yet
  bool greedy_ = false;     // inside the greedy dive: branch heuristically
};

}  // namespace

Solution Pbqp::solve(const SolveOptions& opts) const {
  Solution sol;
  Search search(opts, sol.stats);
  std::vector<int> labels;
  search.run(ReductionGraph(*this), pbqp_inf, /*need_any=*/true, labels);
  sol.labels = std::move(labels);
  // Report the instance's own evaluation, not the reduced arithmetic's.
  sol.total = evaluate(sol.labels);
  sol.feasible = sol.total < pbqp_inf;
  sol.optimal = !search.incomplete();
  sol.stats.time_ms = search.elapsed_ms();
  return sol;
}

}  // namespace kiln
