// PBQP instance: storage, validation and evaluation. The solver is in pbqp_solve.cpp.
#include "solver/pbqp.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "graph/error.h"

namespace kiln {

void check_pbqp_cost(double c, const std::string& where) {
  if (std::isnan(c) || c == -pbqp_inf)
    fail(Code::invalid_argument, where + ": cost must be finite or +inf, got " + std::to_string(c));
}

Matrix::Matrix(int rows, int cols, double fill) : rows_(rows), cols_(cols) {
  if (rows < 0 || cols < 0) fail(Code::invalid_argument, "pbqp: negative matrix size");
  data_.assign(size_t(rows) * size_t(cols), fill);
}

Matrix::Matrix(int rows, int cols, std::vector<double> row_major)
    : rows_(rows), cols_(cols), data_(std::move(row_major)) {
  if (rows < 0 || cols < 0 || data_.size() != size_t(rows) * size_t(cols))
    fail(Code::invalid_argument, "pbqp: matrix data has " + std::to_string(data_.size()) +
                                     " entries, expected " + std::to_string(rows) + "x" +
                                     std::to_string(cols));
}

Matrix Matrix::transposed() const {
  Matrix t(cols_, rows_);
  for (int r = 0; r < rows_; ++r)
    for (int c = 0; c < cols_; ++c) t(c, r) = (*this)(r, c);
  return t;
}

Matrix& Matrix::operator+=(const Matrix& o) {
  if (o.rows_ != rows_ || o.cols_ != cols_)
    fail(Code::invalid_argument, "pbqp: adding matrices of different shapes");
  for (size_t i = 0; i < data_.size(); ++i) data_[i] += o.data_[i];
  return *this;
}

void Pbqp::check_node(int u, const char* what) const {
  if (u < 0 || u >= num_nodes())
    fail(Code::invalid_argument, std::string("pbqp: ") + what + ": no node " + std::to_string(u) +
                                     " (instance has " + std::to_string(num_nodes()) + ")");
}

int Pbqp::add_node(std::vector<double> costs) {
  const std::string where = "pbqp: node " + std::to_string(num_nodes());
  if (costs.empty()) fail(Code::invalid_argument, where + " has no labels");
  for (double c : costs) check_pbqp_cost(c, where);
  costs_.push_back(std::move(costs));
  return num_nodes() - 1;
}

void Pbqp::add_node_costs(int u, const std::vector<double>& costs) {
  check_node(u, "add_node_costs");
  auto& v = costs_[size_t(u)];
  const std::string where = "pbqp: node " + std::to_string(u);
  if (costs.size() != v.size())
    fail(Code::invalid_argument, where + " has " + std::to_string(v.size()) + " labels, got " +
                                     std::to_string(costs.size()) + " costs");
  for (double c : costs) check_pbqp_cost(c, where);
  for (size_t i = 0; i < v.size(); ++i) v[i] += costs[i];
}

void Pbqp::add_edge(int u, int v, const Matrix& m) {
  check_node(u, "add_edge");
  check_node(v, "add_edge");
  const std::string where = "pbqp: edge " + std::to_string(u) + "-" + std::to_string(v);
  if (u == v) fail(Code::invalid_argument, where + " is a self-loop");
  if (m.rows() != num_labels(u) || m.cols() != num_labels(v))
    fail(Code::invalid_argument, where + ": matrix is " + std::to_string(m.rows()) + "x" +
                                     std::to_string(m.cols()) + ", nodes have " +
                                     std::to_string(num_labels(u)) + " and " +
                                     std::to_string(num_labels(v)) + " labels");
  for (double c : m.data()) check_pbqp_cost(c, where);
  Matrix oriented = u < v ? m : m.transposed();
  const std::pair<int, int> key = std::minmax(u, v);
  auto it = edge_index_.find(key);
  if (it != edge_index_.end()) {
    edges_[size_t(it->second)].m += oriented;
    return;
  }
  edge_index_.emplace(key, num_edges());
  edges_.push_back(Edge{key.first, key.second, std::move(oriented)});
}

bool Pbqp::edge_costs(int u, int v, Matrix* out) const {
  check_node(u, "edge_costs");
  check_node(v, "edge_costs");
  auto it = edge_index_.find(std::pair<int, int>(std::minmax(u, v)));
  if (it == edge_index_.end()) return false;
  const Matrix& m = edges_[size_t(it->second)].m;
  if (out) *out = u < v ? m : m.transposed();
  return true;
}

std::vector<int> Pbqp::neighbours(int u) const {
  check_node(u, "neighbours");
  std::vector<int> out;
  for (const Edge& e : edges_) {
    if (e.u == u) out.push_back(e.v);
    if (e.v == u) out.push_back(e.u);
  }
  return out;
}

double Pbqp::evaluate(const std::vector<int>& labels) const {
  if (labels.size() != costs_.size())
    fail(Code::invalid_argument, "pbqp: evaluate: " + std::to_string(labels.size()) +
                                     " labels for " + std::to_string(num_nodes()) + " nodes");
  double total = 0.0;
  for (int u = 0; u < num_nodes(); ++u) {
    int l = labels[size_t(u)];
    if (l < 0 || l >= num_labels(u))
      fail(Code::invalid_argument,
           "pbqp: evaluate: node " + std::to_string(u) + " has no label " + std::to_string(l));
    total += costs_[size_t(u)][size_t(l)];
  }
  for (const Edge& e : edges_) total += e.m(labels[size_t(e.u)], labels[size_t(e.v)]);
  return total;
}

}  // namespace kiln
