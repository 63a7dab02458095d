// Private helpers shared by the reference kernels: argument checks that name the node, shape
// arithmetic, and a strided walk used by broadcasting, Transpose, Slice and MatMul.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/scatter_reduce.h"
#include "runtime/ref/ref_kernels.h"

namespace kiln::ref {

using Inputs = std::vector<const Tensor*>;
using Outputs = std::vector<Tensor*>;

// Input i, or nullptr when omitted (absent or past the end).
inline const Tensor* opt_input(const Inputs& in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}
// Input i, which must be present.
const Tensor& req_input(const Node& n, const Inputs& in, size_t i);
// Output i, which must be present.
Tensor& req_output(const Node& n, const Outputs& out, size_t i);
// Fails (unsupported) if output i is requested: for optional outputs Kiln does not produce.
void forbid_output(const Node& n, const Outputs& out, size_t i, const char* what);

// Fails (unsupported) unless t has dtype `want`.
void expect_dtype(const Node& n, const Tensor& t, DType want, const char* what);
// Fails (internal) unless t has exactly shape `want`: the inferred shape is trusted, but a
// mismatch must not turn into an out-of-bounds access.
void expect_shape(const Node& n, const Tensor& t, const Shape& want, const char* what);
void expect_rank(const Node& n, const Tensor& t, size_t rank, const char* what);
// Fails (internal) unless both have the same dtype and element count (pure copies).
void expect_same_size(const Node& n, const Tensor& a, const Tensor& b);

// Axis in [-rank, rank) normalised to [0, rank); fails (invalid_model) otherwise.
int64_t norm_axis(const Node& n, int64_t axis, int64_t rank);

// C-order strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
// Strides of `s` right-aligned to `out` (numpy broadcasting), 0 where s has size 1 or is
// missing. Fails (internal) if s does not broadcast to out.
std::vector<int64_t> broadcast_strides(const Node& n, const Shape& s, const Shape& out);
// numpy multidirectional broadcast of two shapes; fails (invalid_model) if incompatible.
Shape broadcast_shapes(const Node& n, const Shape& a, const Shape& b);
int64_t prod(const Shape& s, size_t begin, size_t end);

// Contents of an i64 tensor of rank <= 1 (shape-arithmetic inputs such as Slice's starts).
std::vector<int64_t> read_i64s(const Node& n, const Tensor& t, const char* what);
// A one-element f32 tensor (Clip's min/max).
float read_f32_scalar(const Node& n, const Tensor& t, const char* what);

// Visits `shape` in C order one innermost row at a time. For every row calls
// fn(offs, len, inner) where offs[k] = sum over outer dims of idx[d] * strides[k][d] and
// inner[k] = strides[k][last]: the caller walks the row itself. Offsets are kept up to date
// incrementally (no division per element). A rank-0 shape is one row of length 1.
template <class F>
void for_each_row(const Shape& shape, const std::vector<std::vector<int64_t>>& strides, F&& fn) {
  const size_t k = strides.size();
  const size_t rank = shape.size();
  std::vector<int64_t> offs(k, 0), inner(k, 0);
  if (rank == 0) {
    fn(offs.data(), int64_t(1), inner.data());
    return;
  }
  for (int64_t d : shape)
    if (d == 0) return;
  for (size_t j = 0; j < k; ++j) inner[j] = strides[j][rank - 1];
  const int64_t len = shape[rank - 1];
  std::vector<int64_t> idx(rank - 1, 0);
  while (true) {
    fn(offs.data(), len, inner.data());
    // Advance the odometer over the outer dims [0, rank-1).
    int64_t d = int64_t(rank) - 2;
    for (; d >= 0; --d) {
      const size_t u = size_t(d);
      if (++idx[u] < shape[u]) {
        for (size_t j = 0; j < k; ++j) offs[j] += strides[j][u];
        break;
      }
      idx[u] = 0;
      for (size_t j = 0; j < k; ++j) offs[j] -= strides[j][u] * (shape[u] - 1);
    }
    if (d < 0) return;
  }
}

// Calls fn(float{}), fn(int64_t{}) or fn(uint8_t{}) (bool) according to dtype.
template <class F>
void dispatch_type(DType t, F&& fn) {
  if (t == DType::f32)
    fn(float{});
  else if (t == DType::boolean)
    fn(uint8_t{});
  else
    fn(int64_t{});
}

// ScatterND / ScatterElements' `reduction` (graph/scatter_reduce.h), read once: compared per
// element it cost more than the scatter. invalid_model for an unknown name.
Reduction scatter_reduction(const Node& node);

// y[i] = op(a[bcast i], b[bcast i]) for any shapes that broadcast to y's shape; the element
// types are the tensors' (TA, TB, TY).
template <class TA, class TB, class TY, class Op>
void broadcast_binary(const Node& node, const Tensor& a, const Tensor& b, Tensor& y, Op op) {
  expect_shape(node, y, broadcast_shapes(node, a.shape(), b.shape()), "output");
  const std::vector<std::vector<int64_t>> st = {broadcast_strides(node, a.shape(), y.shape()),
                                                broadcast_strides(node, b.shape(), y.shape()),
                                                strides_of(y.shape())};
  const TA* ap = a.data<TA>();
  const TB* bp = b.data<TB>();
  TY* yp = y.data<TY>();
  for_each_row(y.shape(), st, [&](const int64_t* o, int64_t len, const int64_t* s) {
    for (int64_t i = 0; i < len; ++i)
      yp[o[2] + i * s[2]] = op(ap[o[0] + i * s[0]], bp[o[1] + i * s[1]]);
  });
}

// ---- kernels (one per op; see the files named in the comments) ----
#define KILN_REF_KERNEL(fn) void fn(const Node& node, const Inputs& in, const Outputs& out)
KILN_REF_KERNEL(quantize_linear);  // ref_quant.cpp
KILN_REF_KERNEL(dequantize_linear);
KILN_REF_KERNEL(conv);            // ref_conv.cpp
KILN_REF_KERNEL(conv_transpose);  // ref_convt.cpp
KILN_REF_KERNEL(subpixel_interleave);
KILN_REF_KERNEL(max_pool);  // ref_pool.cpp
KILN_REF_KERNEL(average_pool);
KILN_REF_KERNEL(batch_norm);  // ref_norm.cpp
KILN_REF_KERNEL(layer_norm);
KILN_REF_KERNEL(group_norm);  // InstanceNormalization, GroupNormalization
KILN_REF_KERNEL(lrn);
KILN_REF_KERNEL(grid_sample);
KILN_REF_KERNEL(topk);
KILN_REF_KERNEL(cumsum);
KILN_REF_KERNEL(recurrence);  // ref_recurrent.cpp
KILN_REF_KERNEL(relu);        // ref_elementwise.cpp
KILN_REF_KERNEL(leaky_relu);
KILN_REF_KERNEL(clip);
KILN_REF_KERNEL(sigmoid);
KILN_REF_KERNEL(hard_sigmoid);
KILN_REF_KERNEL(hard_swish);
KILN_REF_KERNEL(tanh_op);
KILN_REF_KERNEL(sqrt_op);
KILN_REF_KERNEL(erf_op);
KILN_REF_KERNEL(glue_unary);  // Exp ... ThresholdedRelu: apply_post_op (graph/post_ops.h)
KILN_REF_KERNEL(gelu);
KILN_REF_KERNEL(prelu);
KILN_REF_KERNEL(add);
KILN_REF_KERNEL(sub);
KILN_REF_KERNEL(mul);
KILN_REF_KERNEL(div);
KILN_REF_KERNEL(pow_op);
KILN_REF_KERNEL(variadic);  // Sum, Max, Min, Mean
KILN_REF_KERNEL(is_nan);    // f32 -> bool
KILN_REF_KERNEL(is_inf);
KILN_REF_KERNEL(gemm);  // ref_gemm.cpp
KILN_REF_KERNEL(matmul);
KILN_REF_KERNEL(softmax_attention);  // SoftmaxAttention: the MatMul, scale, Softmax, MatMul
KILN_REF_KERNEL(einsum);             // ref_einsum.cpp
KILN_REF_KERNEL(scatter_nd);         // ref_scatter.cpp
KILN_REF_KERNEL(gather_nd);          // ref_scatter.cpp
KILN_REF_KERNEL(reduce);             // ref_reduce.cpp: every Reduce* op (graph/post_ops.h ReduceOp)
KILN_REF_KERNEL(arg_reduce);         // ArgMax, ArgMin
KILN_REF_KERNEL(global_average_pool);
KILN_REF_KERNEL(global_max_pool);
KILN_REF_KERNEL(softmax);    // Softmax, LogSoftmax, Hardmax
KILN_REF_KERNEL(copy_data);  // ref_shape_ops.cpp: Reshape, Flatten, Squeeze, Unsqueeze, ...
KILN_REF_KERNEL(transpose);
KILN_REF_KERNEL(concat);
KILN_REF_KERNEL(split);
KILN_REF_KERNEL(slice);
KILN_REF_KERNEL(gather);
KILN_REF_KERNEL(gather_elements);
KILN_REF_KERNEL(scatter_elements);
KILN_REF_KERNEL(trilu);
KILN_REF_KERNEL(roi_align);   // ref_resize.cpp
KILN_REF_KERNEL(math_unary);  // Sin .. Atanh (graph/unary_math.h)
KILN_REF_KERNEL(shape_op);
KILN_REF_KERNEL(pad);
KILN_REF_KERNEL(channel_shuffle);
KILN_REF_KERNEL(constant);
KILN_REF_KERNEL(expand);  // ref_shape_ops.cpp (shape builders)
KILN_REF_KERNEL(tile);
KILN_REF_KERNEL(constant_of_shape);
KILN_REF_KERNEL(range);
KILN_REF_KERNEL(size_op);
KILN_REF_KERNEL(compare);  // ref_logic.cpp: Equal, Less, Greater, LessOrEqual, GreaterOrEqual
KILN_REF_KERNEL(logic);    // Not, And, Or, Xor
KILN_REF_KERNEL(where);
KILN_REF_KERNEL(sign);
KILN_REF_KERNEL(mod);
KILN_REF_KERNEL(cast);    // Cast, CastLike
KILN_REF_KERNEL(resize);  // ref_resize.cpp
KILN_REF_KERNEL(space_depth);
#undef KILN_REF_KERNEL

}  // namespace kiln::ref
