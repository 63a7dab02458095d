// Sliding-window helpers shared by Conv and the 2-D pooling kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::ref {

// Floor / ceil of a / b for b > 0 and any sign of a.
inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

// The output positions o in [0, n_out) whose input position o * stride + off lies in
// [0, n_in): a contiguous range [lo, hi), empty when hi == lo.
struct Range {
  int64_t lo, hi;
};
inline Range valid_range(int64_t n_out, int64_t n_in, int64_t stride, int64_t off) {
  int64_t lo = std::max<int64_t>(0, ceil_div(-off, stride));
  int64_t hi = std::min<int64_t>(n_out, floor_div(n_in - 1 - off, stride) + 1);
  return {lo, std::max(lo, hi)};
}

// The explicit 2-D window attributes every Conv/MaxPool/AveragePool node carries after shape
// inference (pads are [top, left, bottom, right]).
struct Window2d {
  int64_t kh, kw;
  int64_t sh, sw;
  int64_t dh, dw;
  int64_t pt, pl, pb, pr;
};

// Reads and validates kernel_shape/strides/dilations/pads. `kernel` is the kernel size known
// from elsewhere (Conv's weights) or empty (pooling: kernel_shape is required).
Window2d read_window2d(const Node& node, const std::vector<int64_t>& kernel);

}  // namespace kiln::ref
