// The solver's working graph: a mutable copy of a PBQP instance on which normalisation and
// the reductions R0/RI/RII are applied, plus the records needed to back-propagate choices.
// Exposed (rather than hidden in pbqp_solve.cpp) so tests can check each step on its own.
#pragma once

#include <utility>
#include <vector>

#include "solver/pbqp.h"

namespace kiln::pbqp {

// One reduction, kept for back-propagation: the removed node x's vector and the matrices of
// its edges at the time it was removed, oriented [labels(x) x labels(neighbour)].
struct Step {
  enum Kind { r0, ri, rii } kind = r0;
  int x = -1, y = -1, z = -1;
  int label = -1;  // r0: the label chosen when x was removed
  std::vector<double> cx;
  Matrix exy, exz;
};

// The label of the step's node given the final labels of its neighbours (indexed by node id):
// argmin over i of cx(i) + exy(i, labels[y]) + exz(i, labels[z]); the lowest index on ties.
int back_propagate(const Step& s, const std::vector<int>& labels);

class ReductionGraph {
 public:
  ReductionGraph() = default;
  explicit ReductionGraph(const Pbqp& p);

  int num_nodes() const { return int(cost_.size()); }  // including removed nodes
  bool alive(int x) const { return alive_[size_t(x)] != 0; }
  int degree(int x) const { return int(adj_[size_t(x)].size()); }
  const std::vector<double>& costs(int x) const { return cost_[size_t(x)]; }
  std::vector<int> alive_nodes() const;
  std::vector<int> neighbours(int x) const;
  // Matrix entry of the edge x-y at (label i of x, label j of y); the edge must exist.
  double edge_cost(int x, int i, int y, int j) const;
  int edge_between(int x, int y) const;  // edge id or -1

  // Moves row/column minima of edge `e` into the node vectors (exact for every assignment)
  // and removes the edge if nothing is left. Entries whose row or column label already costs
  // +inf are irrelevant (any assignment using them is +inf) and are set to 0. Returns true if
  // the edge was removed.
  bool normalise_edge(int e);
  int normalise_all();  // returns the number of edges removed

  // The reductions; each removes x (which must have degree 0, 1 or 2 respectively).
  // R0 returns the chosen label's cost in *r0_cost (added to the objective's constant).
  Step reduce_r0(int x, double* r0_cost);
  Step reduce_ri(int x);
  // RII also normalises the (new or summed) edge between x's neighbours when `normalise`.
  Step reduce_rii(int x, bool normalise);

  // A compact copy of the alive nodes with node x fixed to `label`: x's edges become costs
  // on its neighbours. child_to_parent maps the copy's node ids to this graph's ids;
  // *fixed_cost is x's own cost at `label`.
  ReductionGraph fixed_copy(int x, int label, std::vector<int>* child_to_parent,
                            double* fixed_cost) const;

  // The alive part as a PBQP instance (ids mapped as in `ids`: instance node k is ids[k]).
  Pbqp to_pbqp(std::vector<int>* ids) const;

  // Objective of the alive part at `labels` (indexed by node id; removed nodes ignored).
  double objective(const std::vector<int>& labels) const;

  // Relaxation step for bounds: normalises x's edges (so they are >= 0) and removes the
  // weakest one (fewest +inf entries, then smallest mean). The optimum can only decrease.
  void drop_weakest_edge(int x);

  // Lower bound of the objective over the alive part: sum of node minima + edge minima.
  double lower_bound() const;
  // Lower bound given x = i: cost(x,i) + sum over neighbours y of min_j (c_y(j) + E(i,j))
  // + the minima of everything not touching x.
  std::vector<double> label_bounds(int x) const;

 private:
  struct Edge {
    int u = -1, v = -1;  // m is [labels(u) x labels(v)]
    Matrix m;
    bool alive = false;
  };
  int add_edge(int u, int v, Matrix m);  // sums into an existing edge; returns its id
  void remove_edge(int e);
  Matrix oriented(int e, int x) const;  // edge e's matrix with rows = labels of x
  // Entry of edge e at (label i of endpoint x, label j of the other endpoint).
  double at(int e, int x, int i, int j) const {
    const Edge& ed = edges_[size_t(e)];
    return ed.u == x ? ed.m(i, j) : ed.m(j, i);
  }
  double edge_min(int e) const;

  std::vector<std::vector<double>> cost_;
  std::vector<char> alive_;
  std::vector<std::vector<std::pair<int, int>>> adj_;  // (neighbour, edge id)
  std::vector<Edge> edges_;
};

}  // namespace kiln::pbqp
