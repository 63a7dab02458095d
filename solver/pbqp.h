// PBQP (Partitioned Boolean Quadratic Programming) instances and their exact solver: Kiln's
// global choice of kernel algorithm and data layout per operator.
//
// An instance has nodes, each with a cost vector over its labels, and edges (u, v), each with
// a cost matrix [labels(u) x labels(v)]. An assignment picks one label per node; its cost is
// the sum of the chosen vector entries plus the chosen matrix entry of every edge. +inf marks
// an illegal label or label pair (never use 0 for "illegal"); -inf and NaN are rejected.
//
// Solving (see pbqp_solve.cpp): normalisation (edges that are a row vector plus a column
// vector are moved into the node vectors and dropped), the reductions R0/RI/RII of Scholz &
// Eckstein / Hames & Scholz, and branch-and-bound where only nodes of degree >= 3 remain (RN).
// The result is proven optimal unless the search was cut short (SolveOptions). Graphs made
// of chains, residual blocks and Inception-style fan-out/fan-in are series-parallel: the
// reductions alone solve them exactly, in well under a millisecond for ~300 nodes.
//
// Modelling Kiln's networks (solver/network.h builds this for you)
// -----------------------------------------------------------------
// * One node per operator; a label = (input layout per input, output layout, kernel). Keep
//   per operator only the fastest label for each layout combination: the others never win.
// * A tensor with ONE consumer becomes an edge producer -> consumer whose matrix is the
//   conversion cost out_layout(producer label) -> in_layout(consumer label), 0 when equal.
// * A tensor with SEVERAL consumers (residual fan-out, Inception branches) must NOT become one
//   such edge per consumer: two consumers that both want layout L1 != L would each be charged
//   the conversion L -> L1, although the runtime converts once and shares the result. Model
//   the tensor as its own node T instead. Its labels are the sets S of layouts the tensor is
//   made available in (non-empty, |S| <= number of consumers). Edges:
//     producer -> T : cost(a, S) = sum over L in S, L != out(a), of conv(out(a), L)
//                     (each distinct target layout paid once, converted from what was written)
//     T -> consumer : cost(S, b) = 0 if in(b) is in S, else +inf.
//   The optimum never keeps a layout nobody reads (conversion costs are >= 0), so its S is
//   exactly the set of layouts the consumers read and the total is exactly "pay once per
//   tensor and target layout". The fan-out point stays one node, so chains with residual
//   and Inception blocks stay series-parallel and are solved by RI/RII alone.
// * A network input in a fixed layout, or an output that must be delivered in a fixed layout,
//   adds those conversion costs to the vector of the node that reads / writes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

inline constexpr double pbqp_inf = std::numeric_limits<double>::infinity();

// Costs may be any finite value or +inf; -inf and NaN would break every min/sum. Fails
// (invalid_argument, "WHERE: cost must be ...") otherwise.
void check_pbqp_cost(double c, const std::string& where);

// Dense row-major cost matrix.
class Matrix {
 public:
  Matrix() = default;
  Matrix(int rows, int cols, double fill = 0.0);
  Matrix(int rows, int cols, std::vector<double> row_major);  // throws on size mismatch

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  double& operator()(int r, int c) { return data_[size_t(r) * cols_ + c]; }
  double operator()(int r, int c) const { return data_[size_t(r) * cols_ + c]; }
  const std::vector<double>& data() const { return data_; }
  Matrix transposed() const;
  Matrix& operator+=(const Matrix& o);  // throws on shape mismatch

 private:
  int rows_ = 0, cols_ = 0;
  std::vector<double> data_;
};

struct SolveOptions {
  // false: every RN choice is the local heuristic one (LLVM-style), for the ablation.
  bool branch_and_bound = true;
  // After this much wall time the search stops branching and returns the best assignment
  // found so far (never worse than heuristic mode's), reported as not proven optimal.
  // Reductions are never cut short. +inf = no limit.
  double time_budget_ms = 1000.0;
  // The same after this many subproblems below the root (bnb_nodes; < 0: no limit): a bound
  // that, unlike time, gives the same answer on every machine.
  int64_t max_search_nodes = -1;
  // Move decomposable edge costs into the node vectors and drop all-zero edges first.
  bool normalise = true;
  // Heuristic RN choices try the next label when the first one turns out infeasible; this
  // caps how many extra labels they may try in total (a feasibility search, not an optimum).
  int64_t max_feasibility_retries = 256;
};

struct SolveStats {
  int64_t r0 = 0, ri = 0, rii = 0;  // reductions applied (summed over all search nodes)
  int64_t rn = 0;                   // RN decisions (search nodes that had to branch)
  int64_t bnb_nodes = 0;            // subproblems solved below the root
  int64_t edges_removed = 0;        // by normalisation (all-zero / decomposable edges)
  int core_nodes = 0;               // nodes left at the root after R0/RI/RII (0: no RN)
  bool timed_out = false;           // cut short by time_budget_ms or max_search_nodes
  double time_ms = 0.0;
};

struct Solution {
  std::vector<int> labels;  // label per node
  double total = pbqp_inf;  // cost of `labels` (evaluated on the instance); +inf if infeasible
  bool feasible = false;    // total < +inf
  // The total is the minimum over all assignments (also when infeasible: proven infeasible).
  // False when a heuristic RN choice was made (branch-and-bound off or time budget exceeded).
  bool optimal = false;
  SolveStats stats;
};

class Pbqp {
 public:
  struct Edge {
    int u, v;  // u < v; m is [labels(u) x labels(v)]
    Matrix m;
  };

  // Returns the node id (0, 1, ...). At least one label.
  int add_node(std::vector<double> costs);
  // Adds `costs` to node u's vector (same length).
  void add_node_costs(int u, const std::vector<double>& costs);
  // m is [labels(u) x labels(v)]; u != v. A second edge between the same pair is summed.
  void add_edge(int u, int v, const Matrix& m);

  int num_nodes() const { return int(costs_.size()); }
  int num_labels(int u) const { return int(costs_.at(size_t(u)).size()); }
  const std::vector<double>& node_costs(int u) const { return costs_.at(size_t(u)); }
  int num_edges() const { return int(edges_.size()); }
  const std::vector<Edge>& edges() const { return edges_; }
  // The summed matrix between u and v oriented [labels(u) x labels(v)]; false if no edge.
  bool edge_costs(int u, int v, Matrix* out) const;
  std::vector<int> neighbours(int u) const;

  // Cost of an assignment (label per node); +inf if any chosen entry is +inf.
  double evaluate(const std::vector<int>& labels) const;

  Solution solve(const SolveOptions& opts = {}) const;

 private:
  void check_node(int u, const char* what) const;

  std::vector<std::vector<double>> costs_;
  std::vector<Edge> edges_;
  std::map<std::pair<int, int>, int> edge_index_;  // (u, v) with u < v -> edges_ index
};

}  // namespace kiln
