// Test helpers for the PBQP solver: a plain description of an instance (independent of
// kiln::Pbqp), naive evaluation and brute-force enumeration, and random small instances.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "solver/pbqp.h"

namespace kiln::test {

inline constexpr double inf = std::numeric_limits<double>::infinity();

// The instance as the test built it: every add_edge call kept separately (parallel edges are
// NOT merged here, so evaluation does not depend on the solver's own summing).
struct Inst {
  struct E {
    int u, v;
    std::vector<std::vector<double>> m;  // [labels(u)][labels(v)]
  };
  std::vector<std::vector<double>> nodes;
  std::vector<E> edges;
};

inline Pbqp to_pbqp(const Inst& in) {
  Pbqp p;
  for (const auto& c : in.nodes) p.add_node(c);
  for (const auto& e : in.edges) {
    const int r = int(e.m.size()), c = int(e.m[0].size());
    Matrix m(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) m(i, j) = e.m[size_t(i)][size_t(j)];
    p.add_edge(e.u, e.v, m);
  }
  return p;
}

inline double naive_eval(const Inst& in, const std::vector<int>& a) {
  double t = 0;
  for (size_t x = 0; x < in.nodes.size(); ++x) t += in.nodes[x][size_t(a[x])];
  for (const auto& e : in.edges) t += e.m[size_t(a[size_t(e.u)])][size_t(a[size_t(e.v)])];
  return t;
}

// Calls f(assignment) for every assignment (odometer order).
template <class F>
void for_each_assignment(const std::vector<int>& sizes, F f) {
  std::vector<int> a(sizes.size(), 0);
  while (true) {
    f(a);
    size_t k = 0;
    while (k < a.size() && ++a[k] == sizes[k]) a[k++] = 0;
    if (k == a.size()) return;
  }
}

inline std::vector<int> sizes_of(const Inst& in) {
  std::vector<int> s;
  for (const auto& c : in.nodes) s.push_back(int(c.size()));
  return s;
}

// Minimum over all assignments; `fixed_node`/`fixed_label` restrict one node if >= 0.
inline double brute_min(const Inst& in, int fixed_node = -1, int fixed_label = -1,
                        std::vector<int>* argmin = nullptr) {
  double best = inf;
  bool have = false;
  for_each_assignment(sizes_of(in), [&](const std::vector<int>& a) {
    if (fixed_node >= 0 && a[size_t(fixed_node)] != fixed_label) return;
    double t = naive_eval(in, a);
    if (!have || t < best) {
      best = t;
      have = true;
      if (argmin) *argmin = a;
    }
  });
  return best;
}

inline bool close(double a, double b, double rel = 1e-9) {
  if (a == inf || b == inf) return a == b;
  return std::fabs(a - b) <= rel * std::max({1.0, std::fabs(a), std::fabs(b)});
}

enum class Topo { none, chain, tree, cycle, diamond, clique, dense, star, mixed };
inline constexpr Topo all_topos[] = {Topo::none,  Topo::chain,   Topo::tree,
                                     Topo::cycle, Topo::diamond, Topo::clique,
                                     Topo::dense, Topo::star,    Topo::mixed};

struct RandomSpec {
  int min_nodes = 1, max_nodes = 8;
  int min_labels = 1, max_labels = 4;
  double inf_prob = 0.0;       // each entry (vector or matrix) is +inf with this probability
  double parallel_prob = 0.2;  // an edge is added a second time (sometimes reversed)
  bool integer_costs = false;  // small integers: many ties
};

// Random instance with the given topology.
inline Inst random_inst(std::mt19937_64& rng, Topo topo, const RandomSpec& s) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto cost = [&]() -> double {
    if (uni(0, 1) < s.inf_prob) return inf;
    return s.integer_costs ? double(pick(0, 4)) : uni(-3.0, 10.0);
  };
  Inst in;
  const int n = pick(s.min_nodes, s.max_nodes);
  for (int x = 0; x < n; ++x) {
    std::vector<double> c(size_t(pick(s.min_labels, s.max_labels)));
    for (auto& v : c) v = cost();
    in.nodes.push_back(c);
  }
  std::vector<std::pair<int, int>> pairs;
  // Each pair x < y with probability p (p = 1: all of them, drawing nothing).
  auto some_pairs = [&](double p) {
    for (int x = 0; x < n; ++x)
      for (int y = x + 1; y < n; ++y)
        if (p >= 1 || uni(0, 1) < p) pairs.emplace_back(x, y);
  };
  switch (topo) {
    case Topo::none:
      break;
    case Topo::chain:
      for (int x = 1; x < n; ++x) pairs.emplace_back(x - 1, x);
      break;
    case Topo::tree:
      for (int x = 1; x < n; ++x) pairs.emplace_back(pick(0, x - 1), x);
      break;
    case Topo::cycle:
      for (int x = 1; x < n; ++x) pairs.emplace_back(x - 1, x);
      if (n > 2) pairs.emplace_back(n - 1, 0);
      break;
    case Topo::diamond:  // 0 -> {1..n-2} -> n-1
      for (int x = 1; x + 1 < n; ++x) pairs.emplace_back(0, x), pairs.emplace_back(x, n - 1);
      if (n == 2) pairs.emplace_back(0, 1);
      break;
    case Topo::clique:
      some_pairs(1);
      break;
    case Topo::dense:
      some_pairs(0.6);
      break;
    case Topo::star:
      for (int x = 1; x < n; ++x) pairs.emplace_back(0, x);
      break;
    case Topo::mixed:
      some_pairs(0.3);
      break;
  }
  auto add = [&](int u, int v) {
    if (uni(0, 1) < 0.5) std::swap(u, v);
    Inst::E e{u, v, {}};
    e.m.assign(in.nodes[size_t(u)].size(), std::vector<double>(in.nodes[size_t(v)].size()));
    for (auto& row : e.m)
      for (auto& c : row) c = cost();
    in.edges.push_back(e);
  };
  for (auto [u, v] : pairs) {
    add(u, v);
    if (uni(0, 1) < s.parallel_prob) add(u, v);
  }
  return in;
}

}  // namespace kiln::test
