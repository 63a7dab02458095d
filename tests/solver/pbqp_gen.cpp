// Generator of network-like PBQP instances (see pbqp_gen.h).
#include "solver/pbqp_gen.h"

#include <random>
#include <vector>

namespace kiln {

namespace {

class Gen {
 public:
  Gen(uint64_t seed, const NetworkGenOptions& o) : rng_(seed), o_(o) {
    // Cost of converting a unit tensor between two layouts: fixed per instance.
    conv_.assign(size_t(o.layouts) * size_t(o.layouts), 0.0);
    for (auto& c : conv_) c = uniform(0.5, 3.0);
  }

  int node() {
    const int n = int_in(o_.min_labels, o_.max_labels);
    const double base = uniform(10.0, 1000.0);
    std::vector<double> costs(static_cast<size_t>(n));
    std::vector<int> lay(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      lay[size_t(i)] = i == 0 ? 0 : int_in(0, o_.layouts - 1);
      costs[size_t(i)] = base * uniform(0.4, 1.6);
      if (i > 0 && uniform(0, 1) < o_.illegal_label_prob) costs[size_t(i)] = pbqp_inf;
    }
    layouts_.push_back(lay);
    return p_.add_node(std::move(costs));
  }

  // Conversion costs for the tensor u -> v: 0 if both labels use the same layout.
  void edge(int u, int v) {
    const auto& lu = layouts_[size_t(u)];
    const auto& lv = layouts_[size_t(v)];
    const double size = uniform(1.0, 100.0);
    Matrix m(int(lu.size()), int(lv.size()));
    for (size_t a = 0; a < lu.size(); ++a)
      for (size_t b = 0; b < lv.size(); ++b) {
        if (lu[a] == lv[b]) continue;
        m(int(a), int(b)) = uniform(0, 1) < o_.illegal_pair_prob
                                ? pbqp_inf
                                : size * conv_[size_t(lu[a]) * size_t(o_.layouts) + size_t(lv[b])];
      }
    p_.add_edge(u, v, m);
  }

  int chain(int from, int len) {
    for (int k = 0; k < len; ++k) {
      int n = node();
      edge(from, n);
      from = n;
    }
    return from;
  }

  Pbqp build() {
    const int target = int_in(o_.min_nodes, o_.max_nodes);
    int prev = node();
    while (p_.num_nodes() < target) {
      const double r = uniform(0, 1);
      if (r < 0.35) {  // residual block, sometimes with a projection on the skip path
        int end = chain(prev, int_in(2, 3));
        int skip = uniform(0, 1) < 0.3 ? chain(prev, 1) : prev;
        int add = node();
        edge(end, add);
        edge(skip, add);
        prev = add;
      } else if (r < 0.5) {  // Inception: 2-4 branches into a concat
        std::vector<int> ends;
        for (int b = int_in(2, 4); b > 0; --b) ends.push_back(chain(prev, int_in(1, 3)));
        int cat = node();
        for (int e : ends) edge(e, cat);
        prev = cat;
      } else {
        prev = chain(prev, 1);
      }
    }
    for (int k = 0; k < o_.extra_edges; ++k) {
      int u = int_in(0, p_.num_nodes() - 1), v = int_in(0, p_.num_nodes() - 1);
      if (u != v) edge(u, v);
    }
    return std::move(p_);
  }

 private:
  double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  int int_in(int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng_); }

  std::mt19937_64 rng_;
  NetworkGenOptions o_;
  std::vector<double> conv_;
  std::vector<std::vector<int>> layouts_;
  Pbqp p_;
};

}  // namespace

Pbqp random_network_pbqp(uint64_t seed, const NetworkGenOptions& opts) {
  return Gen(seed, opts).build();
}

}  // namespace kiln
