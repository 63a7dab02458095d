// The PBQP solver against brute-force enumeration on thousands of small random instances.
#include <doctest/doctest.h>

#include <string>

#include "graph/error.h"
#include "solver/pbqp_gen.h"
#include "solver/pbqp_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

struct Tally {
  int instances = 0, infeasible = 0, needed_rn = 0;
};

// Solves `in` with `opts` and checks it against brute force. `exact`: the options allow an
// exact answer (B&B on, no budget), so the optimum and optimal=true are required.
void check_instance(const Inst& in, const SolveOptions& opts, bool exact, Tally& t,
                    const std::string& what) {
  CAPTURE(what);
  const Pbqp p = to_pbqp(in);
  const Solution sol = p.solve(opts);
  const double best = brute_min(in);
  ++t.instances;
  if (best == inf) ++t.infeasible;
  if (sol.stats.rn > 0) ++t.needed_rn;
  REQUIRE(sol.labels.size() == in.nodes.size());
  for (size_t x = 0; x < in.nodes.size(); ++x) {
    REQUIRE(sol.labels[x] >= 0);
    REQUIRE(sol.labels[x] < int(in.nodes[x].size()));
  }
  const double own = naive_eval(in, sol.labels);
  CHECK(close(own, sol.total));  // the assignment costs what is reported
  CHECK(sol.feasible == (sol.total < inf));
  if (exact) {
    CHECK(close(sol.total, best));
    CHECK(sol.optimal);
    CHECK(sol.feasible == (best < inf));
  } else {
    CHECK((close(sol.total, best) || sol.total > best));
    if (sol.optimal) CHECK(close(sol.total, best));
  }
}

}  // namespace

TEST_CASE("pbqp: exact solve equals brute force on random small instances") {
  std::mt19937_64 rng(20240601);
  const double inf_probs[] = {0.0, 0.1, 0.3, 0.7};
  SolveOptions exact;
  exact.time_budget_ms = inf;
  SolveOptions raw = exact;
  raw.normalise = false;
  Tally t_exact, t_raw;
  int seq = 0;
  for (int rep = 0; rep < 150; ++rep)
    for (Topo topo : all_topos)
      for (double ip : inf_probs) {
        RandomSpec s;
        s.inf_prob = ip;
        s.integer_costs = (rep % 3 == 0);
        Inst in = random_inst(rng, topo, s);
        const std::string what = "instance " + std::to_string(seq++) + " topo " +
                                 std::to_string(int(topo)) + " inf " + std::to_string(ip);
        check_instance(in, exact, true, t_exact, what);
        check_instance(in, raw, true, t_raw, what + " (not normalised)");
      }
  MESSAGE("exact: ", t_exact.instances, " instances, ", t_exact.infeasible, " infeasible, ",
          t_exact.needed_rn, " needed RN; not normalised: ", t_raw.needed_rn, " needed RN");
  CHECK(t_exact.instances == 150 * 9 * 4);
  // The sample must actually exercise the interesting paths.
  CHECK(t_exact.infeasible > 50);
  CHECK(t_exact.needed_rn > 50);
}

TEST_CASE("pbqp: exact solve equals brute force where RN is needed (cliques, dense graphs)") {
  std::mt19937_64 rng(31337);
  SolveOptions exact;
  exact.time_budget_ms = inf;
  SolveOptions raw = exact;
  raw.normalise = false;
  Tally t, t_raw;
  for (int rep = 0; rep < 2000; ++rep) {
    RandomSpec s;
    s.min_nodes = 4;
    s.min_labels = 2;
    s.inf_prob = (rep % 4) * 0.1;
    s.integer_costs = rep % 5 == 0;
    Inst in = random_inst(rng, (rep / 4) % 2 ? Topo::clique : Topo::dense, s);
    const std::string what = "rn instance " + std::to_string(rep);
    check_instance(in, exact, true, t, what);
    if (rep % 4 == 0) check_instance(in, raw, true, t_raw, what + " (not normalised)");
  }
  MESSAGE("cliques/dense: ", t.instances, " instances, ", t.infeasible, " infeasible, ",
          t.needed_rn, " needed RN");
  CHECK(t.needed_rn > 800);
}

TEST_CASE("pbqp: medium dense instances need deep branch-and-bound and stay exact") {
  std::mt19937_64 rng(77);
  SolveOptions exact;
  exact.time_budget_ms = inf;
  Tally t;
  for (int rep = 0; rep < 24; ++rep) {
    RandomSpec s;
    s.min_nodes = s.max_nodes = 10;
    s.min_labels = 2;
    s.max_labels = 3;
    s.inf_prob = rep % 2 ? 0.15 : 0.0;
    s.integer_costs = rep % 4 == 0;
    Inst in = random_inst(rng, rep % 3 ? Topo::dense : Topo::clique, s);
    check_instance(in, exact, true, t, "medium " + std::to_string(rep));
  }
  CHECK(t.needed_rn > t.instances / 2);
}

TEST_CASE("pbqp: heuristic mode gives a feasible assignment, never below the optimum") {
  std::mt19937_64 rng(4242);
  SolveOptions heur;
  heur.branch_and_bound = false;
  Tally t;
  int feasible_found = 0, feasible_exists = 0, suboptimal = 0, flagged = 0;
  for (int rep = 0; rep < 400; ++rep) {
    RandomSpec s;
    s.min_nodes = 4;
    s.inf_prob = rep % 2 ? 0.2 : 0.0;
    Inst in = random_inst(rng, rep % 2 ? Topo::clique : Topo::dense, s);
    check_instance(in, heur, false, t, "heuristic " + std::to_string(rep));
    const Solution sol = to_pbqp(in).solve(heur);
    const double best = brute_min(in);
    if (best < inf) ++feasible_exists, feasible_found += sol.feasible;
    if (!close(sol.total, best)) {
      ++suboptimal;
      CHECK_FALSE(sol.optimal);  // a suboptimal answer is never claimed optimal
    }
    if (!sol.optimal) ++flagged;
    // Without RN the reductions alone are exact, heuristic mode or not.
    if (sol.stats.rn == 0) CHECK(sol.optimal);
  }
  MESSAGE("heuristic: ", feasible_found, "/", feasible_exists, " feasible found, ", suboptimal,
          " suboptimal, ", flagged, " flagged not optimal");
  CHECK(feasible_found == feasible_exists);
  CHECK(flagged > 0);
}

TEST_CASE("pbqp: time budget exceeded falls back to the heuristic and says so") {
  std::mt19937_64 rng(9);
  RandomSpec s;
  s.min_nodes = s.max_nodes = 9;
  s.min_labels = s.max_labels = 4;
  Inst in = random_inst(rng, Topo::clique, s);
  const Pbqp p = to_pbqp(in);
  SolveOptions none;
  none.time_budget_ms = 0.0;
  const Solution quick = p.solve(none);
  CHECK(quick.stats.timed_out);
  CHECK_FALSE(quick.optimal);
  CHECK(quick.feasible);
  CHECK(close(naive_eval(in, quick.labels), quick.total));

  SolveOptions all;
  all.time_budget_ms = inf;
  const Solution full = p.solve(all);
  CHECK_FALSE(full.stats.timed_out);
  CHECK(full.optimal);
  CHECK(close(full.total, brute_min(in)));
  CHECK(full.total <= quick.total);
}

TEST_CASE("pbqp: time budget on network-like instances: never worse than heuristic mode") {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    NetworkGenOptions o;
    o.min_nodes = o.max_nodes = 150;
    o.extra_edges = 60;  // a large core: branch-and-bound cannot finish in 0 ms
    const Pbqp p = random_network_pbqp(seed, o);
    SolveOptions none;
    none.time_budget_ms = 0.0;
    const Solution s = p.solve(none);
    SolveOptions heur;
    heur.branch_and_bound = false;
    const Solution h = p.solve(heur);
    CHECK(s.stats.timed_out);
    CHECK_FALSE(s.optimal);
    CHECK(s.feasible);
    CHECK((s.total <= h.total || close(s.total, h.total)));
    CHECK(close(p.evaluate(s.labels), s.total));
  }
  // Without RN the budget does not matter: the reductions alone are exact.
  SolveOptions none;
  none.time_budget_ms = 0.0;
  const Solution s = random_network_pbqp(7).solve(none);
  CHECK(s.stats.rn == 0);
  CHECK(s.optimal);
}

TEST_CASE("pbqp: a node pinned to one label by +inf costs is a constant, not a branch point") {
  // A clique of 6 (every node of degree 5) with 3 nodes pinned: the other 3 form a triangle,
  // which RI / RII solve once normalisation has folded the pinned nodes' edges into their
  // neighbours (the bf16 guard's probes pin most of a network this way).
  Tally t;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    RandomSpec s;
    s.min_nodes = s.max_nodes = 6;
    s.min_labels = s.max_labels = 4;
    Inst in = random_inst(rng, Topo::clique, s);
    std::vector<int> pin(3);
    for (int x = 0; x < 3; ++x) {
      pin[size_t(x)] = int(rng() % 4);
      for (int i = 0; i < 4; ++i)
        if (i != pin[size_t(x)]) in.nodes[size_t(x)][size_t(i)] = inf;
    }
    check_instance(in, SolveOptions{}, /*exact=*/true, t, "pinned clique");
    const Solution sol = to_pbqp(in).solve();
    CHECK(sol.stats.rn == 0);
    for (int x = 0; x < 3; ++x) CHECK(sol.labels[size_t(x)] == pin[size_t(x)]);
  }
  CHECK(t.infeasible == 0);
}

TEST_CASE("pbqp: a cap on search nodes cuts the search short, the same way every time") {
  std::mt19937_64 rng(9);
  RandomSpec s;
  s.min_nodes = s.max_nodes = 9;
  s.min_labels = s.max_labels = 4;
  const Inst in = random_inst(rng, Topo::clique, s);
  const Pbqp p = to_pbqp(in);
  SolveOptions capped;
  capped.time_budget_ms = inf;
  capped.max_search_nodes = 3;
  const Solution a = p.solve(capped), b = p.solve(capped);
  CHECK(a.stats.timed_out);
  CHECK_FALSE(a.optimal);
  CHECK(a.feasible);
  CHECK(close(naive_eval(in, a.labels), a.total));
  CHECK(a.labels == b.labels);
  CHECK(a.stats.bnb_nodes == b.stats.bnb_nodes);

  SolveOptions all;
  all.time_budget_ms = inf;
  const Solution full = p.solve(all);
  CHECK(full.stats.bnb_nodes > 3);  // the cap did cut something
  CHECK(full.optimal);
  CHECK(close(full.total, brute_min(in)));
  capped.max_search_nodes = full.stats.bnb_nodes + 1;  // a cap the search never reaches
  const Solution c = p.solve(capped);
  CHECK(c.optimal);
  CHECK(c.labels == full.labels);
}

TEST_CASE("pbqp: infeasible instances are reported as such") {
  Pbqp p;
  int a = p.add_node({1.0, 2.0});
  int b = p.add_node({0.0, 0.0});
  p.add_edge(a, b, Matrix(2, 2, {inf, inf, inf, inf}));
  Solution s = p.solve();
  CHECK_FALSE(s.feasible);
  CHECK(s.total == inf);
  CHECK(s.optimal);  // proven: nothing is feasible
  CHECK(s.labels.size() == 2);

  // One legal pair among illegal ones: it must be found.
  Pbqp q;
  a = q.add_node({5.0, inf, 1.0});
  b = q.add_node({inf, 0.0, 3.0});
  q.add_edge(a, b, Matrix(3, 3, {inf, 7.0, inf, 0.0, 0.0, 0.0, inf, inf, inf}));
  s = q.solve();
  CHECK(s.feasible);
  CHECK(s.labels == std::vector<int>{0, 1});
  CHECK(s.total == 12.0);  // 5 + 0 + 7
}

TEST_CASE("pbqp: parallel edges are summed, edges readable in both directions") {
  Pbqp p;
  int a = p.add_node({0.0, 0.0});
  int b = p.add_node({0.0, 0.0, 0.0});
  p.add_edge(a, b, Matrix(2, 3, {1, 2, 3, 4, 5, 6}));
  p.add_edge(b, a, Matrix(3, 2, {10, 40, 20, 50, 30, 60}));  // the same pair, transposed
  Matrix ab, ba;
  REQUIRE(p.edge_costs(a, b, &ab));
  REQUIRE(p.edge_costs(b, a, &ba));
  CHECK(p.num_edges() == 1);
  CHECK(ab(0, 0) == 11);
  CHECK(ab(1, 2) == 66);
  CHECK(ba(2, 1) == 66);
  CHECK(ba(1, 0) == 22);
  CHECK(p.neighbours(a) == std::vector<int>{b});
  CHECK(p.evaluate({1, 0}) == 44);
  Solution s = p.solve();
  CHECK(s.labels == std::vector<int>{0, 0});
  CHECK(s.total == 11);
}

TEST_CASE("pbqp: invalid input is rejected with a message") {
  Pbqp p;
  CHECK_THROWS_AS(p.add_node({}), kiln::Error);
  CHECK_THROWS_AS(p.add_node({std::nan("")}), kiln::Error);
  CHECK_THROWS_AS(p.add_node({-inf}), kiln::Error);
  int a = p.add_node({1.0, 2.0});
  int b = p.add_node({1.0});
  CHECK_THROWS_AS(p.add_edge(a, a, Matrix(2, 2)), kiln::Error);
  CHECK_THROWS_AS(p.add_edge(a, b, Matrix(2, 2)), kiln::Error);
  CHECK_THROWS_AS(p.add_edge(a, 7, Matrix(2, 1)), kiln::Error);
  CHECK_THROWS_AS(p.evaluate({0}), kiln::Error);
  CHECK_THROWS_AS(p.evaluate({2, 0}), kiln::Error);
  CHECK_THROWS_AS(Matrix(2, 2, std::vector<double>{1.0}), kiln::Error);
  Pbqp empty;
  Solution s = empty.solve();
  CHECK(s.total == 0.0);
  CHECK(s.feasible);
  CHECK(s.optimal);
}
