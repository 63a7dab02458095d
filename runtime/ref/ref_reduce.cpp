// Reductions: ReduceMean, global pooling and Softmax. Sums are accumulated in double so the
// reference is at least as accurate as anything it is compared against.
#include <cmath>
#include <limits>

#include "runtime/ref/ref_common.h"

namespace kiln::ref {

void reduce_mean(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, DType::f32, "output");
  const int64_t rank = int64_t(x.shape().size());
  std::vector<int64_t> axes;
  if (const Tensor* t = opt_input(in, 1)) axes = read_i64s(node, *t, "axes");
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  if (axes.empty() && node.attr_i("noop_with_empty_axes", 0) != 0) {
    expect_shape(node, y, x.shape(), "output");
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i];
    return;
  }
  std::vector<char> reduced(size_t(rank), axes.empty() ? 1 : 0);
  for (int64_t a : axes) {
    int64_t d = norm_axis(node, a, rank);
    if (reduced[size_t(d)]) node.fail(Code::invalid_model, "axes has a repeated axis");
    reduced[size_t(d)] = 1;
  }
  const bool keepdims = node.attr_i("keepdims", 1) != 0;
  Shape kept, expect;  // kept: the output shape with reduced dims as 1
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t dim = x.shape()[size_t(d)];
    kept.push_back(reduced[size_t(d)] ? 1 : dim);
    if (reduced[size_t(d)]) count *= dim;
    if (!reduced[size_t(d)] || keepdims) expect.push_back(kept.back());
  }
  expect_shape(node, y, expect, "output");
  // Every input element adds into the output element it reduces to (stride 0 along reduced
  // dims).
  std::vector<int64_t> ys = strides_of(kept);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[size_t(d)]) ys[size_t(d)] = 0;
  std::vector<double> acc(size_t(y.numel()), 0.0);
  for_each_row(x.shape(), {strides_of(x.shape()), ys},
               [&](const int64_t* o, int64_t len, const int64_t* s) {
                 for (int64_t i = 0; i < len; ++i) acc[size_t(o[1] + i * s[1])] += xp[o[0] + i];
               });
  // Mean over an empty set is 0/0 = NaN, as in numpy.
  for (int64_t i = 0; i < y.numel(); ++i) yp[i] = float(acc[size_t(i)] / double(count));
}

namespace {

// Shared checks of GlobalAveragePool / GlobalMaxPool: x [N, C, d...], y [N, C, 1...].
int64_t global_pool_plane(const Node& node, const Tensor& x, const Tensor& y) {
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, DType::f32, "output");
  if (x.shape().size() < 3)
    node.fail(Code::invalid_model, "input needs rank >= 3, got " + shape_str(x.shape()));
  Shape expect(x.shape().size(), 1);
  expect[0] = x.shape()[0];
  expect[1] = x.shape()[1];
  expect_shape(node, y, expect, "output");
  return prod(x.shape(), 2, x.shape().size());
}

}  // namespace

namespace {

// GlobalAveragePool / GlobalMaxPool: y[n, c] = reduce(the [n, c] plane of x).
template <class Reduce>
void global_pool(const Node& node, const Inputs& in, const Outputs& out, Reduce reduce) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  const int64_t plane = global_pool_plane(node, x, y);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t nc = 0; nc < y.numel(); ++nc) yp[nc] = reduce(xp + nc * plane, plane);
}

}  // namespace

void global_average_pool(const Node& node, const Inputs& in, const Outputs& out) {
  global_pool(node, in, out, [](const float* p, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return float(s / double(n));
  });
}

void global_max_pool(const Node& node, const Inputs& in, const Outputs& out) {
  global_pool(node, in, out, [](const float* p, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i)
      if (p[i] > m || std::isnan(p[i])) m = p[i];
    return m;
  });
}

void softmax(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, DType::f32, "output");
  expect_shape(node, y, x.shape(), "output");
  const Shape& s = x.shape();
  const int64_t rank = int64_t(s.size());
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", -1), rank));
  // coerce_2d (opset < 13): softmax over the flattened dims [axis, rank), else over `axis`.
  const bool coerce = node.attr_i("coerce_2d", 0) != 0;
  const int64_t outer = prod(s, 0, axis);
  const int64_t n = coerce ? prod(s, axis, s.size()) : s[axis];
  const int64_t inner = coerce ? 1 : prod(s, axis + 1, s.size());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      // Subtracting the max keeps exp() from overflowing.
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::fmax(m, xp[base + k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(double(xp[base + k * inner]) - m);
      for (int64_t k = 0; k < n; ++k)
        yp[base + k * inner] = float(std::exp(double(xp[base + k * inner]) - m) / sum);
    }
}

}  // namespace kiln::ref
