// Fused epilogues (graph/post_ops.h) for the reference Conv and Gemm: after fuse_epilogues a
// Conv/Gemm node may carry a chain of elementwise post-ops and their extra inputs; the
// reference applies them with apply_post_op(), the scalar semantics the JIT emitters match.
#pragma once

#include <vector>

#include "graph/post_ops.h"
#include "runtime/ref/ref_common.h"

namespace kiln::ref {

class Epilogue {
 public:
  // Parses the node's post-ops (extra inputs start at `first_extra_input`) and checks their
  // tensors: a residual has the output's shape, scale/shift are 1-D [channels] where the
  // channel is output dim `channel_dim` (Conv, Gemm: 1; MatMul: the last).
  Epilogue(const Node& node, const Inputs& in, int first_extra_input, const Tensor& out,
           size_t channel_dim = 1);

  bool empty() const { return ops_.empty(); }

  // Applies the chain to y[j], j in [0, n), the output elements at flat offsets out_off + j
  // whose channel is ch + j * ch_step.
  void apply_row(float* y, int64_t n, int64_t out_off, int64_t ch, int64_t ch_step) const;

 private:
  std::vector<PostOp> ops_;
  // Per op: residual data (add), scale and shift data (scale_shift) or the slope (prelu), else
  // nullptr.
  std::vector<const float*> a_, b_;
};

}  // namespace kiln::ref
