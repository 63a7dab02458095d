// ChannelShuffle, Kiln's internal channel-gather op (never imported: graph/rewrite_glue.cpp
// makes it from ONNX patterns). One node moves data once for what ONNX spells as
// Concat -> Reshape -> Transpose -> Reshape (ShuffleNet's channel shuffle) -> Slice/Split:
//   X = concat(inputs, axis 1)                 every input [N, C_k, H, W] f32, C = sum C_k
//   Y[:, j] = X[:, (j % g) * (C / g) + j / g]  attr `groups` g (1: no permutation)
//   output i = Y[:, offset + sum(split[<i]) ...][:split[i]]   attrs `offset` (0), `split`
// so it is also a channel Slice (one input, one output) or Split (groups 1).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graph/ir.h"

namespace kiln {

struct ChannelShuffleSpec {
  std::vector<int64_t> in_channels;  // C_k per input
  int64_t groups = 1, offset = 0;
  std::vector<int64_t> split;  // channels per output

  int64_t total() const {
    int64_t c = 0;
    for (int64_t x : in_channels) c += x;
    return c;
  }
  // Channel of X (the concatenated inputs) that output channel `c` of output `o` reads.
  int64_t source(size_t o, int64_t c) const {
    int64_t j = offset + c;
    for (size_t i = 0; i < o; ++i) j += split[i];
    const int64_t per = total() / groups;
    return (j % groups) * per + j / groups;
  }
  // Input index and its channel for channel x of X.
  std::pair<int, int64_t> locate(int64_t x) const {
    int k = 0;
    while (k + 1 < int(in_channels.size()) && x >= in_channels[size_t(k)])
      x -= in_channels[size_t(k++)];
    return {k, x};
  }
  // A ChannelShuffle node's attributes, its inputs having `in_channels` channels.
  static ChannelShuffleSpec from_node(const Node& n, std::vector<int64_t> in_channels) {
    ChannelShuffleSpec s;
    s.in_channels = std::move(in_channels);
    s.groups = n.attr_i("groups", 1);
    s.offset = n.attr_i("offset", 0);
    s.split = n.attr_ints("split");
    return s;
  }
  static ChannelShuffleSpec from_node(const Graph& g, const Node& n) {
    std::vector<int64_t> c;
    for (ValueId v : n.inputs) c.push_back(g.value(v).shape.at(1));
    return from_node(n, std::move(c));
  }
};

}  // namespace kiln
