// Resize (canonical form, graph/ops.h) and DepthToSpace / SpaceToDepth: the arithmetic that
// shape inference, the reference kernels and the JIT factories share, so the output sizes and
// the interpolation taps are defined once (ONNX's Resize-19 spec and reference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// What one Resize computes, per axis of the input (axes not in `axes` keep scale 1).
struct ResizeSpec {
  std::string mode, coord, nearest;  // nearest|linear|cubic; coordinate_transformation_mode
  float cubic_a = -0.75f, extrapolation = 0.f;
  bool exclude_outside = false, antialias = false;
  Shape in, out;
  std::vector<double> scale;  // per axis (the scale the coordinate transform divides by)
  std::vector<float> roi_start, roi_end;  // per axis (tf_crop_and_resize), else 0 / 1
};

// Reads the node's attributes and its scales / sizes / roi tensors (nullptr or empty: absent)
// for input shape x, applying axes and keep_aspect_ratio_policy. Fails naming the node
// (unsupported for valid ONNX Kiln does not run, invalid_model for a malformed node).
ResizeSpec resize_spec(const Node& n, const Shape& x, const Tensor* roi, const Tensor* scales,
                       const Tensor* sizes);

// The taps of one axis: output index o reads input indices idx[o * taps + t] (already clamped
// into [0, in)) with weights w[o * taps + t]; `outside[o]` marks tf_crop_and_resize
// coordinates outside the input (the output is the extrapolation value there).
struct ResizeTaps {
  int taps = 1;
  int64_t in = 0;  // the axis's input length
  std::vector<int64_t> idx;
  std::vector<float> w;
  std::vector<uint8_t> outside;
  // As many outputs as inputs and every output o is input o (weight 1): the axis is not resized.
  // (Taps alone can look so on a shrinking axis: nearest's output o may read input o.)
  bool identity() const;
};
ResizeTaps resize_taps(const ResizeSpec& s, size_t axis);

// DepthToSpace / SpaceToDepth of a 4-D tensor x as a Transpose of a 6-D view of its buffer:
// output (row-major) = transpose(x viewed as `in6`, perm).
struct SpaceDepthView {
  Shape in6;
  std::vector<int64_t> perm;
};
SpaceDepthView space_depth_view(const Node& n, const Shape& x);

}  // namespace kiln
