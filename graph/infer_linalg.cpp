// Shape inference for the matrix ops (Gemm, MatMul) and the normalisations along axes
// (Softmax, LogSoftmax, Hardmax, LayerNormalization).
#include <string>

#include "graph/infer_util.h"

namespace kiln::infer_detail {

void infer_gemm(Graph& g, Node& n) {
  for (size_t i = 0; i < 2; ++i) {
    expect_dtype(g, n, i, DType::f32, Code::unsupported);
    expect_rank(g, n, i, 2);
  }
  const Shape& a = input(g, n, 0).shape;
  const Shape& b = input(g, n, 1).shape;
  bool ta = attr_flag(n, "transA", false), tb = attr_flag(n, "transB", false);
  int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], nn = tb ? b[0] : b[1];
  if (k != kb)
    n.fail(Code::invalid_model, "inner dimensions do not match: A " + shape_str(a) +
                                    (ta ? " (transposed)" : "") + " and B " + shape_str(b) +
                                    (tb ? " (transposed)" : "") + " give K = " + std::to_string(k) +
                                    " vs " + std::to_string(kb));
  if (has_input(n, 2)) {
    expect_same_dtype(g, n, 0, 2);
    const Shape& c = input(g, n, 2).shape;
    // C must broadcast one-way to [M, N].
    Shape target{m, nn};
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) {
      int64_t t = target[2 - c.size() + i];
      ok = c[i] == 1 || c[i] == t;
    }
    if (!ok)
      n.fail(Code::invalid_model, "C " + input_desc(g, n, 2) + " has shape " + shape_str(c) +
                                      ", which does not broadcast to the output shape " +
                                      shape_str(target));
  }
  set_output(g, n, 0, DType::f32, {m, nn});
}

void infer_matmul(Graph& g, Node& n) {
  for (size_t i = 0; i < 2; ++i) {
    expect_dtype(g, n, i, DType::f32, Code::unsupported);
    expect_min_rank(g, n, i, 1);
  }
  const Shape& a0 = input(g, n, 0).shape;
  const Shape& b0 = input(g, n, 1).shape;
  // numpy.matmul: a 1-D A is a row vector, a 1-D B a column vector; the added dim is removed.
  Shape a = a0.size() == 1 ? Shape{1, a0[0]} : a0;
  Shape b = b0.size() == 1 ? Shape{b0[0], 1} : b0;
  if (a.back() != b[b.size() - 2])
    n.fail(Code::invalid_model,
           "inner dimensions do not match: " + shape_str(a0) + " x " + shape_str(b0));
  Shape batch = broadcast_shapes(n, Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  Shape out = batch;
  if (a0.size() > 1) out.push_back(a[a.size() - 2]);
  if (b0.size() > 1) out.push_back(b.back());
  set_output(g, n, 0, DType::f32, out);
}

// SoftmaxAttention (graph/rewrites.cpp fuse_attention): Softmax(scores) x V over the last axis,
// scores = A x B times `scale` (divided by it with `divide`) [plus a bias]; ranks >= 2, numpy
// batch dims as MatMul's, V's broadcasting with the scores'; the bias (rank >= 1, last dim N)
// broadcasts to the scores without widening them.
void infer_softmax_attention(Graph& g, Node& n) {
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    expect_dtype(g, n, i, DType::f32, Code::unsupported);
    expect_min_rank(g, n, i, i == 3 ? 1 : 2);
  }
  const Shape& a = input(g, n, 0).shape;
  const Shape& b = input(g, n, 1).shape;
  const Shape& v = input(g, n, 2).shape;
  if (a.back() != b[b.size() - 2] || b.back() != v[v.size() - 2])
    n.fail(Code::invalid_model, "inner dimensions do not match: " + shape_str(a) + " x " +
                                    shape_str(b) + " x " + shape_str(v));
  Shape batch = broadcast_shapes(n, Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  batch = broadcast_shapes(n, batch, Shape(v.begin(), v.end() - 2));
  batch.push_back(a[a.size() - 2]);
  if (n.inputs.size() > 3) {
    const Shape& bias = input(g, n, 3).shape;
    Shape scores = batch;
    scores.push_back(b.back());
    if (bias.back() != b.back() || broadcast_shapes(n, scores, bias) != scores)
      n.fail(Code::invalid_model, "bias " + shape_str(bias) + " does not broadcast to scores " +
                                      shape_str(scores) + " along their last dim");
  }
  batch.push_back(v.back());
  set_output(g, n, 0, DType::f32, batch);
}

void infer_softmax(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_min_rank(g, n, 0, 1);
  const Shape& x = input(g, n, 0).shape;
  normalize_axis(n, n.attr_i("axis", -1), int64_t(x.size()));
  attr_flag(n, "coerce_2d", false);
  set_output(g, n, 0, DType::f32, x);
}

void infer_layer_norm(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32);
  expect_min_rank(g, n, 0, 1);
  const Shape& x = input(g, n, 0).shape;
  const int64_t r = int64_t(x.size());
  const int64_t axis = normalize_axis(n, n.attr_i("axis", -1), r);
  const int64_t dims = n.attr_i("norm_dims", r - axis);
  if (dims < 1 || dims > r - axis)
    n.fail(Code::invalid_model, "norm_dims " + std::to_string(dims) + " outside 1.." +
                                    std::to_string(r - axis) + " for axis " + std::to_string(axis));
  n.attrs["axis"] = attr_i(axis);
  n.attrs["norm_dims"] = attr_i(dims);
  const float eps = n.attr_f("epsilon", 1e-5f);
  if (!(eps >= 0)) n.fail(Code::invalid_model, "epsilon " + std::to_string(eps) + " is negative");
  // scale / B: the normalised dims, leading 1s allowed (broadcast over the outer dims).
  const Shape norm(x.begin() + axis, x.begin() + axis + dims);
  for (size_t i = 1; i < 3; ++i) {
    if (!has_input(n, i)) continue;
    expect_dtype(g, n, i, DType::f32);
    Shape s = input(g, n, i).shape;
    while (s.size() > norm.size() && s.front() == 1) s.erase(s.begin());
    if (s != norm)
      n.fail(Code::invalid_model, input_desc(g, n, i) + " has shape " +
                                      shape_str(input(g, n, i).shape) + ", expected " +
                                      shape_str(norm) + " (the normalised dims)");
  }
  const int64_t stash = n.attr_i("stash_type", 1);
  if (stash != 1)
    n.fail(Code::unsupported, "stash_type " + std::to_string(stash) + " (only 1, float32)");
  set_output(g, n, 0, DType::f32, x);
  // Mean and InvStdDev: the input's shape with the normalised dims 1.
  Shape stats = x;
  for (int64_t d = axis; d < axis + dims; ++d) stats[size_t(d)] = 1;
  for (size_t i = 1; i < 3 && i < n.outputs.size(); ++i)
    if (has_output(n, i)) set_output(g, n, i, DType::f32, stats);
}

}  // namespace kiln::infer_detail
