// Pad's index arithmetic, shared by shape inference, the reference kernel and the glue kernel
// (jit/glue/pad.cpp) so that reflect / edge / wrap mean the same everywhere (ONNX Pad-19, whose
// reference is numpy.pad: reflection repeats for pads wider than the dim).
#pragma once

#include <cstdint>

namespace kiln {

// The input index that output index i reads along a dim of n > 0 elements, i counted from the
// input's first element (so i < 0 and i >= n are the pads). Modes other than constant.
inline int64_t pad_source_index(bool reflect, bool wrap, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  if (wrap) return ((i % n) + n) % n;
  if (!reflect || n == 1) return i < 0 ? 0 : n - 1;  // edge
  const int64_t period = 2 * (n - 1);
  int64_t r = ((i % period) + period) % period;
  return r < n ? r : period - r;
}

}  // namespace kiln
