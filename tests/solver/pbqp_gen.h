// Random "network-like" PBQP instances for the solver tests (built into test_solver only, not
// kiln_core): a chain backbone with residual blocks (skip edges into an add) and
// Inception-style fan-out/fan-in, labels with layouts, edge matrices holding layout-conversion
// costs (0 when the layouts agree), a few illegal (+inf) labels and conversions. Label 0 of every
// node uses layout 0 and is legal, so every instance is feasible.
#pragma once

#include <cstdint>

#include "solver/pbqp.h"

namespace kiln {

struct NetworkGenOptions {
  int min_nodes = 150, max_nodes = 300;
  int min_labels = 4, max_labels = 16;
  int layouts = 4;
  double illegal_label_prob = 0.05;  // a label other than 0 costs +inf
  double illegal_pair_prob = 0.03;   // a conversion between two different layouts is +inf
  int extra_edges = 0;               // random long-range edges (the graph stops being
                                     // series-parallel, so RN/branch-and-bound is needed)
};

Pbqp random_network_pbqp(uint64_t seed, const NetworkGenOptions& opts = {});

}  // namespace kiln
