// Each step of the solver on its own preserves the optimum: normalisation (per assignment),
// R0, RI, RII (optimum before == after, back-propagation recovers an optimal label), fixing
// a node for branch-and-bound, and the lower bounds used to prune.
#include <doctest/doctest.h>

#include <string>

#include "solver/pbqp_graph.h"
#include "solver/pbqp_test_util.h"

using namespace kiln;
using namespace kiln::test;
using kiln::pbqp::ReductionGraph;
using kiln::pbqp::Step;

namespace {

// The alive part of g as a test Inst (ids[k] = g's id of Inst node k).
Inst inst_of(const ReductionGraph& g, std::vector<int>* ids) {
  const Pbqp p = g.to_pbqp(ids);
  Inst in;
  for (int x = 0; x < p.num_nodes(); ++x) in.nodes.push_back(p.node_costs(x));
  for (const auto& e : p.edges()) {
    Inst::E ie{e.u, e.v, {}};
    ie.m.assign(size_t(e.m.rows()), std::vector<double>(size_t(e.m.cols())));
    for (int i = 0; i < e.m.rows(); ++i)
      for (int j = 0; j < e.m.cols(); ++j) ie.m[size_t(i)][size_t(j)] = e.m(i, j);
    in.edges.push_back(ie);
  }
  return in;
}

int degree_in(const Inst& in, int x) {
  std::vector<int> nb;
  for (const auto& e : in.edges) {
    int o = e.u == x ? e.v : e.v == x ? e.u : -1;
    if (o >= 0 && std::find(nb.begin(), nb.end(), o) == nb.end()) nb.push_back(o);
  }
  return int(nb.size());
}

// Applies one reduction of the wanted degree (if `in` has such a node) and checks that the
// reduced instance has the same optimum (plus the R0 constant) and that back-propagating
// the step from an optimal assignment of the rest gives an optimal assignment of `in`.
// Returns false if no node of that degree exists.
bool check_one_reduction(const Inst& in, int degree, bool normalise, const std::string& what) {
  CAPTURE(what);
  int x = -1;
  for (int k = 0; k < int(in.nodes.size()) && x < 0; ++k)
    if (degree_in(in, k) == degree) x = k;
  if (x < 0) return false;
  ReductionGraph g(to_pbqp(in));
  REQUIRE(g.degree(x) == degree);
  double r0_cost = 0.0;
  Step s = degree == 0   ? g.reduce_r0(x, &r0_cost)
           : degree == 1 ? g.reduce_ri(x)
                         : g.reduce_rii(x, normalise);
  CHECK_FALSE(g.alive(x));
  std::vector<int> ids;
  const Inst reduced = inst_of(g, &ids);
  REQUIRE(reduced.nodes.size() + 1 == in.nodes.size());
  std::vector<int> arg;
  const double before = brute_min(in);
  const double after = brute_min(reduced, -1, -1, &arg);
  CHECK(close(before, after + r0_cost));
  // Back-propagate: optimal labels of the rest, then x's label from the step.
  std::vector<int> full(in.nodes.size(), 0);
  for (size_t k = 0; k < ids.size(); ++k) full[size_t(ids[k])] = arg[k];
  full[size_t(x)] = pbqp::back_propagate(s, full);
  CHECK(close(naive_eval(in, full), before));
  return true;
}

}  // namespace

TEST_CASE("pbqp reductions: normalisation keeps the cost of every assignment") {
  std::mt19937_64 rng(5);
  int removed = 0, checked = 0;
  for (int rep = 0; rep < 600; ++rep) {
    RandomSpec s;
    s.max_nodes = 6;
    s.inf_prob = (rep % 3) * 0.15;
    s.integer_costs = rep % 2;
    Inst in = random_inst(rng, all_topos[rep % 9], s);
    // Plant decomposable edges (row vector + column vector) that must vanish.
    if (in.nodes.size() >= 2 && rep % 4 == 0) {
      const size_t a = in.nodes[0].size(), b = in.nodes[1].size();
      Inst::E e{0, 1, {}};
      e.m.assign(a, std::vector<double>(b));
      for (size_t i = 0; i < a; ++i)
        for (size_t j = 0; j < b; ++j) e.m[i][j] = double(i) * 2.0 + double(j) * 3.0;
      in.edges.push_back(e);
    }
    ReductionGraph g(to_pbqp(in));
    removed += g.normalise_all();
    std::vector<int> ids;
    const Inst norm = inst_of(g, &ids);
    REQUIRE(norm.nodes.size() == in.nodes.size());
    for_each_assignment(sizes_of(in), [&](const std::vector<int>& a) {
      CHECK(close(naive_eval(in, a), naive_eval(norm, a)));
      ++checked;
    });
    // Normalised edges have no negative relevant entry (the bounds rely on it).
    for (const auto& e : norm.edges)
      for (const auto& row : e.m)
        for (double c : row) CHECK(c >= 0.0);
  }
  MESSAGE("normalisation: ", checked, " assignments compared, ", removed, " edges removed");
  CHECK(removed > 100);
}

TEST_CASE("pbqp reductions: a decomposable edge is removed, the costs move to the nodes") {
  Pbqp p;
  p.add_node({1.0, 2.0});
  p.add_node({0.0, 0.0, 5.0});
  // m(i, j) = r(i) + c(j) with r = {10, 20}, c = {1, 2, 3}.
  p.add_edge(0, 1, Matrix(2, 3, {11, 12, 13, 21, 22, 23}));
  ReductionGraph g(p);
  CHECK(g.normalise_all() == 1);
  CHECK(g.degree(0) == 0);
  // Node 0: {1, 2} + {10, 20} + min c (=1) = {12, 23}; node 1: {0, 0, 5} + c - min c.
  CHECK(g.costs(0) == std::vector<double>{12.0, 23.0});
  CHECK(g.costs(1) == std::vector<double>{0.0, 1.0, 7.0});
}

TEST_CASE("pbqp reductions: R0, RI and RII each preserve the optimum") {
  std::mt19937_64 rng(11);
  int done[3] = {0, 0, 0};
  for (int rep = 0; rep < 1500; ++rep) {
    RandomSpec s;
    s.min_nodes = 2;
    s.max_nodes = 7;
    s.inf_prob = (rep % 4) * 0.1;
    s.integer_costs = rep % 3 == 0;
    Inst in = random_inst(rng, all_topos[rep % 9], s);
    for (int d = 0; d < 3; ++d) {
      const std::string what = "rep " + std::to_string(rep) + " degree " + std::to_string(d);
      if (check_one_reduction(in, d, rep % 2 == 0, what)) ++done[d];
    }
  }
  MESSAGE("single reductions checked: R0 ", done[0], ", RI ", done[1], ", RII ", done[2]);
  CHECK(done[0] > 100);
  CHECK(done[1] > 300);
  CHECK(done[2] > 300);
}

TEST_CASE("pbqp reductions: RII by hand") {
  // c_x = {0, 4}; E_xy = [[1, 5], [0, 0]]; E_xz = [[2, 0], [0, 9]]
  // D(j, k) = min(c_x(0) + E_xy(0, j) + E_xz(0, k), c_x(1) + E_xy(1, j) + E_xz(1, k)):
  //   D(0,0) = min(0+1+2, 4+0+0) = 3    D(0,1) = min(0+1+0, 4+0+9) = 1
  //   D(1,0) = min(0+5+2, 4+0+0) = 4    D(1,1) = min(0+5+0, 4+0+9) = 5
  Pbqp p;
  int x = p.add_node({0.0, 4.0});
  int y = p.add_node({0.0, 0.0});
  int z = p.add_node({0.0, 0.0});
  p.add_edge(x, y, Matrix(2, 2, {1, 5, 0, 0}));
  p.add_edge(z, x, Matrix(2, 2, {2, 0, 0, 9}));  // given as z-x: E_xz transposed
  ReductionGraph g(p);
  g.reduce_rii(x, /*normalise=*/false);
  CHECK(g.edge_cost(y, 0, z, 0) == 3.0);
  CHECK(g.edge_cost(y, 0, z, 1) == 1.0);
  CHECK(g.edge_cost(y, 1, z, 0) == 4.0);
  CHECK(g.edge_cost(z, 1, y, 1) == 5.0);
}

TEST_CASE("pbqp reductions: fixing a node and the lower bounds") {
  std::mt19937_64 rng(13);
  int checked = 0;
  for (int rep = 0; rep < 600; ++rep) {
    RandomSpec s;
    s.min_nodes = 3;
    s.max_nodes = 7;
    s.inf_prob = (rep % 3) * 0.1;
    Inst in = random_inst(rng, rep % 2 ? Topo::clique : Topo::dense, s);
    ReductionGraph g(to_pbqp(in));
    if (rep % 2) g.normalise_all();
    const double best = brute_min(in);
    CHECK((g.lower_bound() <= best || close(g.lower_bound(), best)));
    const int x = int(rep % in.nodes.size());
    const std::vector<double> lb = g.label_bounds(x);
    for (int i = 0; i < int(in.nodes[size_t(x)].size()); ++i) {
      const double restricted = brute_min(in, x, i);
      CHECK((lb[size_t(i)] <= restricted || close(lb[size_t(i)], restricted)));
      std::vector<int> map, ids;
      double fixed = 0.0;
      ReductionGraph child = g.fixed_copy(x, i, &map, &fixed);
      const Inst c = inst_of(child, &ids);
      REQUIRE(c.nodes.size() + 1 == in.nodes.size());
      CHECK(close(fixed + brute_min(c), restricted));
      for (int k = 0; k < child.num_nodes(); ++k) CHECK(map[size_t(k)] != x);
      ++checked;
    }
  }
  CHECK(checked > 1000);
}
