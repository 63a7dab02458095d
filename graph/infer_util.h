// Private helpers shared by the per-op shape inference functions (graph/infer_*.cpp).
// Every check throws through Node::fail, so each message names the node and its op.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::infer_detail {

// Largest tensor Kiln accepts (elements); bigger outputs are reported, never allocated.
constexpr int64_t kMaxElements = int64_t(1) << 31;
// Bound on window attributes (pads, strides, dilations, kernel dims) so that the int64
// arithmetic of output sizes can never overflow.
constexpr int64_t kMaxAttr = int64_t(1) << 31;

bool has_input(const Node& n, size_t i);
// Input i, which must be present (required inputs are checked by infer_node already).
const Value& input(const Graph& g, const Node& n, size_t i);
// "input 1 'w'" for messages.
std::string input_desc(const Graph& g, const Node& n, size_t i);

// A wrong dtype is invalid_model by default; ops that ONNX defines for more dtypes than Kiln
// implements pass Code::unsupported.
void expect_dtype(const Graph& g, const Node& n, size_t i, DType want,
                  Code code = Code::invalid_model);
// f32 or i64 (shape arithmetic ops); returns the dtype.
DType expect_f32_or_i64(const Graph& g, const Node& n, size_t i);
void expect_same_dtype(const Graph& g, const Node& n, size_t i, size_t j);
void expect_rank(const Graph& g, const Node& n, size_t i, size_t rank);
void expect_min_rank(const Graph& g, const Node& n, size_t i, size_t rank);
// Rank 0, or a tensor of exactly one element (Clip min/max, Pad constant_value).
void expect_scalar(const Graph& g, const Node& n, size_t i);

// Maps axis in [-rank, rank-1] to [0, rank); invalid_model otherwise. `what` names it.
int64_t normalize_axis(const Node& n, int64_t axis, int64_t rank, const char* what = "axis");
// Normalizes every axis and rejects duplicates.
std::vector<int64_t> normalize_axes(const Node& n, const std::vector<int64_t>& axes, int64_t rank,
                                    const char* what = "axes");

// Numpy multidirectional broadcasting; invalid_model naming both shapes when incompatible.
Shape broadcast_shapes(const Node& n, const Shape& a, const Shape& b);

// Values of a constant integer input: nullopt when the input is omitted; unsupported when it
// is present but not a constant (Kiln needs it at load time); invalid_model when it is not an
// int64 tensor of rank <= 1.
std::optional<std::vector<int64_t>> const_ints(const Graph& g, const Node& n, size_t i);
// Input i's constant tensor, for ops whose outputs follow their input values (computed by
// inference: NonZero, MelWeightMatrix, ...); unsupported (naming the input) when it is computed
// at run time in a graph planned at load, which graph/dynamic.h never lets happen.
const Tensor& const_input(const Graph& g, const Node& n, size_t i);
// The output tensor, set as output i's constant (the node is folded by infer_shapes).
void set_const_output(Graph& g, const Node& n, size_t i, Tensor t);
// One element of an optional scalar constant input of `dtype` (absent: `def`).
template <class T>
T scalar_input(const Graph& g, const Node& n, size_t i, DType dtype, T def) {
  if (!has_input(n, i)) return def;
  expect_dtype(g, n, i, dtype);
  expect_scalar(g, n, i);
  return const_input(g, n, i).data<T>()[0];
}
// Values of a constant tensor as int64 (f32 values are truncated, saturated at the int64 range,
// NaN reads as 1); for boolean-like flags.
std::vector<int64_t> tensor_as_ints(const Tensor& t);

// Attributes of older opsets that the importer turns into inputs (axes, split, pads, ...):
// seeing one means the node is not in canonical form, or is invalid for its opset.
void reject_attr(const Node& n, const char* name);
std::string ints_str(const std::vector<int64_t>& v);  // "[1,2,3]"

// An int attribute that must be 0 or 1.
bool attr_flag(const Node& n, const std::string& name, bool def);
void set_attr_ints(Node& n, const std::string& name, std::vector<int64_t> v);

// Number of elements, with a node-named error on negative dims or overflow.
int64_t checked_numel(const Node& n, const Shape& s);
// Validates and records output i (skipped when omitted): negative dims -> invalid_model,
// more than kMaxElements elements or an empty float tensor -> unsupported.
void set_output(Graph& g, const Node& n, size_t i, DType dtype, Shape shape);
// Declared and not omitted.
bool has_output(const Node& n, size_t i);

// One InferFn per op; see graph/ops.cpp for the table.
// infer_conv_pool.cpp
void infer_conv(Graph& g, Node& n);
void infer_conv_transpose(Graph& g, Node& n);
void infer_subpixel_interleave(Graph& g, Node& n);  // internal (graph/rewrite_convt.cpp)
void infer_max_pool(Graph& g, Node& n);
void infer_average_pool(Graph& g, Node& n);
void infer_global_pool(Graph& g, Node& n);
void infer_batch_norm(Graph& g, Node& n);
void infer_layer_norm(Graph& g, Node& n);
// infer_elementwise.cpp
void infer_unary_f32(Graph& g, Node& n);
void infer_identity(Graph& g, Node& n);
void infer_clip(Graph& g, Node& n);
void infer_dropout(Graph& g, Node& n);
void infer_binary_arith(Graph& g, Node& n);
void infer_prelu(Graph& g, Node& n);  // float32; the slope broadcasts to X (unidirectional)
void infer_pow(Graph& g, Node& n);    // float32 base and exponent, numpy broadcasting
void infer_sum(Graph& g, Node& n);
void infer_compare(Graph& g, Node& n);     // Equal, Less, ...: f32/i64 (Equal: bool) -> bool
void infer_logic(Graph& g, Node& n);       // Not, And, Or, Xor: bool, broadcasting
void infer_where(Graph& g, Node& n);       // bool condition, X and Y of one dtype
void infer_float_test(Graph& g, Node& n);  // IsNaN, IsInf: f32 -> bool
void infer_sign(Graph& g, Node& n);        // Sign, Neg, Abs: float32 or int64, same dtype out
void infer_mod(Graph& g, Node& n);
void infer_cast(Graph& g, Node& n);        // Cast, CastLike
void infer_quantize(Graph& g, Node& n);    // QuantizeLinear, QuantizeDequantize (infer_quant)
void infer_dequantize(Graph& g, Node& n);  // DequantizeLinear
void infer_quantize_dequantize(Graph& g, Node& n);  // internal (graph/fuse_qdq.cpp)
// infer_linalg.cpp
void infer_gemm(Graph& g, Node& n);
void infer_matmul(Graph& g, Node& n);
void infer_softmax_attention(Graph& g, Node& n);
void infer_einsum(Graph& g, Node& n);  // einsum.cpp
void infer_softmax(Graph& g, Node& n);
// infer_reduce.cpp
void infer_reduce(Graph& g, Node& n);  // Reduce* (graph/post_ops.h reduce_op)
void infer_arg_reduce(Graph& g, Node& n);
void infer_group_norm(Graph& g, Node& n);  // InstanceNormalization, GroupNormalization
void infer_lrn(Graph& g, Node& n);
void infer_topk(Graph& g, Node& n);
void infer_cumsum(Graph& g, Node& n);
void infer_if(Graph& g, Node& n);    // graph/inline_if.cpp
void infer_loop(Graph& g, Node& n);  // graph/inline_loop.cpp
void infer_grid_sample(Graph& g, Node& n);
// infer_dynamic.cpp: output sizes that depend on the data; every input must be constant.
void infer_nonzero(Graph& g, Node& n);
void infer_nms(Graph& g, Node& n);  // NonMaxSuppression
void infer_unique(Graph& g, Node& n);
// infer_shape_ops.cpp
void infer_flatten(Graph& g, Node& n);
void infer_reshape(Graph& g, Node& n);
void infer_squeeze(Graph& g, Node& n);
void infer_unsqueeze(Graph& g, Node& n);
void infer_transpose(Graph& g, Node& n);
void infer_shape(Graph& g, Node& n);
void infer_constant(Graph& g, Node& n);
void infer_expand(Graph& g, Node& n);
void infer_tile(Graph& g, Node& n);
void infer_constant_of_shape(Graph& g, Node& n);
void infer_range(Graph& g, Node& n);  // constant scalar inputs (the length depends on them)
void infer_size(Graph& g, Node& n);
// infer_tensor_ops.cpp
void infer_concat(Graph& g, Node& n);
void infer_split(Graph& g, Node& n);
void infer_slice(Graph& g, Node& n);
void infer_gather(Graph& g, Node& n);
void infer_gather_elements(Graph& g, Node& n);
void infer_scatter_nd(Graph& g, Node& n);
void infer_gather_nd(Graph& g, Node& n);
void infer_scatter_elements(Graph& g, Node& n);
void infer_trilu(Graph& g, Node& n);
void infer_pad(Graph& g, Node& n);
void infer_channel_shuffle(Graph& g, Node& n);  // graph/channel_shuffle.h
// infer_resize.cpp
void infer_resize(Graph& g, Node& n);
void infer_space_depth(Graph& g, Node& n);  // DepthToSpace, SpaceToDepth
void infer_roi_align(Graph& g, Node& n);

}  // namespace kiln::infer_detail
