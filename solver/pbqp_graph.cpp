// Working graph of the PBQP solver: normalisation and the reductions R0, RI, RII.
#include "solver/pbqp_graph.h"

#include <algorithm>

namespace kiln::pbqp {

namespace {

double min_of(const std::vector<double>& v) {
  double m = pbqp_inf;
  for (double c : v) m = std::min(m, c);
  return m;
}

}  // namespace

int back_propagate(const Step& s, const std::vector<int>& labels) {
  if (s.kind == Step::r0) return s.label;
  int best = 0;
  double best_cost = pbqp_inf;
  const int ly = labels[size_t(s.y)];
  const int lz = s.kind == Step::rii ? labels[size_t(s.z)] : 0;
  for (int i = 0; i < int(s.cx.size()); ++i) {
    double c = s.cx[size_t(i)] + s.exy(i, ly);
    if (s.kind == Step::rii) c += s.exz(i, lz);
    if (c < best_cost) best_cost = c, best = i;
  }
  return best;
}

ReductionGraph::ReductionGraph(const Pbqp& p) {
  const int n = p.num_nodes();
  cost_.resize(size_t(n));
  for (int x = 0; x < n; ++x) cost_[size_t(x)] = p.node_costs(x);
  alive_.assign(size_t(n), 1);
  adj_.resize(size_t(n));
  for (const Pbqp::Edge& e : p.edges()) add_edge(e.u, e.v, e.m);
}

std::vector<int> ReductionGraph::alive_nodes() const {
  std::vector<int> out;
  for (int x = 0; x < num_nodes(); ++x)
    if (alive(x)) out.push_back(x);
  return out;
}

std::vector<int> ReductionGraph::neighbours(int x) const {
  std::vector<int> out;
  for (auto [y, e] : adj_[size_t(x)]) out.push_back(y);
  return out;
}

int ReductionGraph::edge_between(int x, int y) const {
  for (auto [n, e] : adj_[size_t(x)])
    if (n == y) return e;
  return -1;
}

double ReductionGraph::edge_cost(int x, int i, int y, int j) const {
  return at(edge_between(x, y), x, i, j);
}

int ReductionGraph::add_edge(int u, int v, Matrix m) {
  int id = edge_between(u, v);
  if (id >= 0) {
    Edge& e = edges_[size_t(id)];
    e.m += e.u == u ? m : m.transposed();
    return id;
  }
  id = int(edges_.size());
  edges_.push_back(Edge{u, v, std::move(m), true});
  adj_[size_t(u)].emplace_back(v, id);
  adj_[size_t(v)].emplace_back(u, id);
  return id;
}

void ReductionGraph::remove_edge(int id) {
  Edge& e = edges_[size_t(id)];
  auto drop = [id](std::vector<std::pair<int, int>>& a) {
    a.erase(std::find_if(a.begin(), a.end(), [id](auto& p) { return p.second == id; }));
  };
  drop(adj_[size_t(e.u)]);
  drop(adj_[size_t(e.v)]);
  e.alive = false;
  e.m = Matrix();
}

Matrix ReductionGraph::oriented(int id, int x) const {
  const Edge& e = edges_[size_t(id)];
  return e.u == x ? e.m : e.m.transposed();
}

bool ReductionGraph::normalise_edge(int id) {
  Edge& e = edges_[size_t(id)];
  std::vector<double>& cu = cost_[size_t(e.u)];
  std::vector<double>& cv = cost_[size_t(e.v)];
  Matrix& m = e.m;
  const int R = m.rows(), C = m.cols();
  // Moves each line's minimum over the legal partner labels into its own label's cost: rows
  // of m for u's labels, then columns (at(j, i) = m(i, j)) for v's. A line that is +inf on
  // every legal partner makes its label illegal.
  auto reduce_lines = [](std::vector<double>& own, const std::vector<double>& other, auto&& at) {
    for (size_t i = 0; i < own.size(); ++i) {
      if (own[i] == pbqp_inf) continue;
      double mn = pbqp_inf;
      for (size_t j = 0; j < other.size(); ++j)
        if (other[j] != pbqp_inf) mn = std::min(mn, at(int(i), int(j)));
      if (mn == pbqp_inf) {
        own[i] = pbqp_inf;  // no legal partner
      } else if (mn != 0.0) {
        own[i] += mn;
        for (size_t j = 0; j < other.size(); ++j) at(int(i), int(j)) -= mn;  // +inf stays +inf
      }
    }
  };
  reduce_lines(cu, cv, [&](int i, int j) -> double& { return m(i, j); });
  reduce_lines(cv, cu, [&](int j, int i) -> double& { return m(i, j); });
  // Irrelevant entries to 0; the edge is gone if every relevant entry is 0 too.
  bool zero = true;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      if (cu[size_t(i)] == pbqp_inf || cv[size_t(j)] == pbqp_inf)
        m(i, j) = 0.0;
      else if (m(i, j) != 0.0)
        zero = false;
    }
  if (zero) remove_edge(id);
  return zero;
}

int ReductionGraph::normalise_all() {
  int removed = 0;
  for (int id = 0; id < int(edges_.size()); ++id)
    if (edges_[size_t(id)].alive && normalise_edge(id)) ++removed;
  return removed;
}

Step ReductionGraph::reduce_r0(int x, double* r0_cost) {
  Step s;
  s.kind = Step::r0;
  s.x = x;
  const std::vector<double>& c = cost_[size_t(x)];
  int best = 0;
  for (int i = 1; i < int(c.size()); ++i)
    if (c[size_t(i)] < c[size_t(best)]) best = i;
  s.label = best;
  *r0_cost = c[size_t(best)];
  alive_[size_t(x)] = 0;
  return s;
}

Step ReductionGraph::reduce_ri(int x) {
  Step s;
  s.kind = Step::ri;
  s.x = x;
  auto [y, id] = adj_[size_t(x)].front();
  s.y = y;
  s.exy = oriented(id, x);
  s.cx = std::move(cost_[size_t(x)]);
  remove_edge(id);
  // c_y(j) += min_i c_x(i) + E(i, j)
  std::vector<double>& cy = cost_[size_t(y)];
  for (int j = 0; j < int(cy.size()); ++j) {
    double mn = pbqp_inf;
    for (int i = 0; i < int(s.cx.size()); ++i) mn = std::min(mn, s.cx[size_t(i)] + s.exy(i, j));
    cy[size_t(j)] += mn;
  }
  alive_[size_t(x)] = 0;
  return s;
}

Step ReductionGraph::reduce_rii(int x, bool normalise) {
  Step s;
  s.kind = Step::rii;
  s.x = x;
  auto [y, ey] = adj_[size_t(x)][0];
  auto [z, ez] = adj_[size_t(x)][1];
  s.y = y;
  s.z = z;
  s.exy = oriented(ey, x);
  s.exz = oriented(ez, x);
  s.cx = std::move(cost_[size_t(x)]);
  remove_edge(ey);
  remove_edge(ez);
  // D(j, k) = min_i c_x(i) + E_xy(i, j) + E_xz(i, k), a new (or summed) edge y-z.
  const int ny = s.exy.cols(), nz = s.exz.cols(), nx = int(s.cx.size());
  Matrix d(ny, nz, pbqp_inf);
  for (int i = 0; i < nx; ++i) {
    const double ci = s.cx[size_t(i)];
    if (ci == pbqp_inf) continue;
    for (int j = 0; j < ny; ++j) {
      const double cij = ci + s.exy(i, j);
      if (cij == pbqp_inf) continue;
      for (int k = 0; k < nz; ++k) d(j, k) = std::min(d(j, k), cij + s.exz(i, k));
    }
  }
  alive_[size_t(x)] = 0;
  int id = add_edge(y, z, std::move(d));
  if (normalise) normalise_edge(id);
  return s;
}

ReductionGraph ReductionGraph::fixed_copy(int x, int label, std::vector<int>* child_to_parent,
                                          double* fixed_cost) const {
  ReductionGraph g;
  std::vector<int> to_child(size_t(num_nodes()), -1);
  child_to_parent->clear();
  for (int p = 0; p < num_nodes(); ++p) {
    if (!alive(p) || p == x) continue;
    to_child[size_t(p)] = int(g.cost_.size());
    child_to_parent->push_back(p);
    g.cost_.push_back(cost_[size_t(p)]);
  }
  g.alive_.assign(g.cost_.size(), 1);
  g.adj_.resize(g.cost_.size());
  for (auto [y, id] : adj_[size_t(x)]) {
    std::vector<double>& cy = g.cost_[size_t(to_child[size_t(y)])];
    for (int j = 0; j < int(cy.size()); ++j) cy[size_t(j)] += at(id, x, label, j);
  }
  for (const Edge& e : edges_) {
    if (!e.alive || e.u == x || e.v == x) continue;
    g.add_edge(to_child[size_t(e.u)], to_child[size_t(e.v)], e.m);
  }
  *fixed_cost = cost_[size_t(x)][size_t(label)];
  return g;
}

Pbqp ReductionGraph::to_pbqp(std::vector<int>* ids) const {
  Pbqp p;
  std::vector<int> to_new(size_t(num_nodes()), -1);
  ids->clear();
  for (int x = 0; x < num_nodes(); ++x) {
    if (!alive(x)) continue;
    to_new[size_t(x)] = p.add_node(cost_[size_t(x)]);
    ids->push_back(x);
  }
  for (const Edge& e : edges_)
    if (e.alive) p.add_edge(to_new[size_t(e.u)], to_new[size_t(e.v)], e.m);
  return p;
}

double ReductionGraph::objective(const std::vector<int>& labels) const {
  double t = 0.0;
  for (int x = 0; x < num_nodes(); ++x)
    if (alive(x)) t += cost_[size_t(x)][size_t(labels[size_t(x)])];
  for (const Edge& e : edges_)
    if (e.alive) t += e.m(labels[size_t(e.u)], labels[size_t(e.v)]);
  return t;
}

void ReductionGraph::drop_weakest_edge(int x) {
  // Normalising may remove edges; then the degree already dropped.
  const int before = degree(x);
  std::vector<int> ids;
  for (auto [y, id] : adj_[size_t(x)]) ids.push_back(id);
  for (int id : ids) normalise_edge(id);
  if (degree(x) < before) return;
  int best = -1;
  double best_infs = 0, best_mean = 0;
  for (auto [y, id] : adj_[size_t(x)]) {
    const std::vector<double>& d = edges_[size_t(id)].m.data();
    double infs = 0, sum = 0;
    for (double v : d) v == pbqp_inf ? ++infs : sum += v;
    const double mean = sum / double(d.size());
    if (best < 0 || infs < best_infs || (infs == best_infs && mean < best_mean))
      best = id, best_infs = infs, best_mean = mean;
  }
  remove_edge(best);
}

double ReductionGraph::edge_min(int id) const {
  return min_of(edges_[size_t(id)].m.data());
}

double ReductionGraph::lower_bound() const {
  double lb = 0.0;
  for (int x = 0; x < num_nodes(); ++x)
    if (alive(x)) lb += min_of(cost_[size_t(x)]);
  for (int id = 0; id < int(edges_.size()); ++id)
    if (edges_[size_t(id)].alive) lb += edge_min(id);
  return lb;
}

std::vector<double> ReductionGraph::label_bounds(int x) const {
  // Everything not touching x contributes its independent minimum.
  std::vector<char> near(size_t(num_nodes()), 0);
  near[size_t(x)] = 1;
  for (auto [y, id] : adj_[size_t(x)]) near[size_t(y)] = 1;
  double rest = 0.0;
  for (int z = 0; z < num_nodes(); ++z)
    if (alive(z) && !near[size_t(z)]) rest += min_of(cost_[size_t(z)]);
  for (int id = 0; id < int(edges_.size()); ++id) {
    const Edge& e = edges_[size_t(id)];
    if (e.alive && e.u != x && e.v != x) rest += edge_min(id);
  }
  const std::vector<double>& cx = cost_[size_t(x)];
  std::vector<double> lb(cx.size());
  for (int i = 0; i < int(cx.size()); ++i) {
    double b = cx[size_t(i)] + rest;
    for (auto [y, id] : adj_[size_t(x)]) {
      const std::vector<double>& cy = cost_[size_t(y)];
      double mn = pbqp_inf;
      for (int j = 0; j < int(cy.size()); ++j) mn = std::min(mn, cy[size_t(j)] + at(id, x, i, j));
      b += mn;
    }
    lb[size_t(i)] = b;
  }
  return lb;
}

}  // namespace kiln::pbqp
