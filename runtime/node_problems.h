// A graph node as the problem of the glue kernel that runs it (jit/glue/glue.h), read from its
// shapes, attributes and constants: Pad, block copies (Slice / Gather / Concat), subpixel
// interleaves, Transpose / DepthToSpace / SpaceToDepth, Resize, pooling, the norms and Softmax,
// LRN, reductions, TopK, CumSum, Recurrence, computed Gather / GatherElements, ScatterND /
// ScatterElements, ArgMax / ArgMin / Hardmax; and the Slices that are views.
// nullopt when the node is not that op or its kernel cannot take it (then the plan keeps the
// reference kernel). Used by runtime/labels.cpp for candidates, instances and problem keys.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"

namespace kiln {

// A Pad of an f32 tensor with constant pads, axes and value, as a Pad of a 4-D shape: the pads
// per dim and the mode. Other ranks are viewed 4-D in row-major order (leading 1s; over rank
// 4, the leading dims merged when none of them is padded).
struct PadSpec {
  Shape shape;  // the input, 4-D
  std::vector<int64_t> begin, end;
  float value = 0;
  std::string mode;
};

// A Transpose of an f32 tensor of rank <= 6: its permutation (default: reversed dims).
// A Transpose, or a DepthToSpace / SpaceToDepth as a Transpose of a 6-D view of its input.
struct TransposeView {
  Shape in;
  std::vector<int64_t> perm;
};

// A Resize of a 4-D f32 tensor's H and W with constant scales / sizes: the taps of H and W.
struct ResizeJit {
  ResizeTaps h, w;
  std::string mode;
};

// Instance / GroupNormalization (constant scale / B; outer = images x groups, c = a group's
// channels x pixels), LayerNormalization (constant f32 scale / bias; graph/ops.h: dims [axis,
// axis + norm_dims) are c) or Softmax / LogSoftmax (f32; dim `axis`, or [axis, rank) with
// coerce_2d) as [outer, c, inner]; nullopt for other nodes. `channels`: c is the channel dim of a
// 4-D tensor (the nhwc and blocked layouts' rows).
struct NormView {
  int64_t outer = 1, c = 1, inner = 1;
  bool channels = false;
};

// A Reduce* of an f32 tensor with constant axes whose reduced dims are contiguous in the order
// layout l stores them (nchw: row-major; nhwc: a 4-D tensor's N, H, W, C; blocked: N, C blocks,
// H, W, lanes — C itself never reduced, the output 4-D), as the kernel's [outer, c, inner]; the
// output's bytes (4-D: stored in l, else row-major) must be the kept dims in that same order.
// (Blocked: the pad lanes reduce like the others, finite in, finite out.) nullopt otherwise.
struct ReduceView {
  ReduceOp op = ReduceOp::sum;
  int64_t outer = 1, c = 1, inner = 1;
};

std::optional<PadSpec> pad_spec(const Graph& g, const Node& n);
std::optional<BlockCopyProblem> block_copy_problem(const Graph& g, const Node& n);
std::optional<SubpixelProblem> subpixel_problem(const Graph& g, const Node& n);
std::optional<TransposeView> transpose_view(const Graph& g, const Node& n);
// The (input, output) layouts in which a 4-D Transpose moves no byte (node_problems.cpp).
std::optional<std::pair<Layout, Layout>> transpose_layout_view(const Graph& g, const Node& n);
std::optional<ResizeJit> resize_jit(const Graph& g, const Node& n);
std::optional<PoolProblem> pool_problem(const Node& n, const Shape& xs, const Shape& ys);
std::optional<NormView> norm_view(const Graph& g, const Node& n);
std::optional<LrnProblem> lrn_problem(const Graph& g, const Node& n);
std::optional<ReduceView> reduce_view(const Graph& g, const Node& n, Layout l);
// A Slice whose output is one contiguous run of its input: the run's first element.
std::optional<int64_t> slice_view_floats(const Graph& g, const Node& n);
std::optional<TopKProblem> topk_problem(const Graph& g, const Node& n);
std::optional<CumSumProblem> cumsum_problem(const Graph& g, const Node& n);
std::optional<RecurrenceProblem> recurrence_problem(const Graph& g, const Node& n);
std::optional<GatherProblem> gather_problem(const Graph& g, const Node& n);
std::optional<ScatterProblem> scatter_problem(const Graph& g, const Node& n);
std::optional<ArgReduceProblem> arg_problem(const Graph& g, const Node& n);

}  // namespace kiln
