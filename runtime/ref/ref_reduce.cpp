// Reductions: Reduce*, ArgMax / ArgMin, global pooling and Softmax / LogSoftmax / Hardmax.
// Sums are accumulated in double so the reference is at least as accurate as anything it is
// compared against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "graph/post_ops.h"
#include "runtime/ref/ref_common.h"

namespace kiln::ref {

namespace {

// Accumulates in double (f32 input) or int64 (wrapping, as the integer ops of numpy).
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, float>, double, int64_t>;

template <class T>
T nan_max(T a, T b, bool max) {
  if constexpr (std::is_same_v<T, float>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return max ? std::max(a, b) : std::min(a, b);
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& x, Tensor& y, const std::vector<int64_t>& ys,
                  int64_t count) {
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const bool extremum = op == ReduceOp::max || op == ReduceOp::min;
  // Every input element combines into the output element it reduces to (ys: stride 0 along
  // reduced dims).
  auto sweep = [&](auto&& fn) {
    for_each_row(x.shape(), {strides_of(x.shape()), ys},
                 [&](const int64_t* o, int64_t len, const int64_t* s) {
                   for (int64_t i = 0; i < len; ++i) fn(o[1] + i * s[1], xp[o[0] + i]);
                 });
  };
  std::vector<T> m;  // the maximum: ReduceLogSumExp's shift, ReduceMax/Min's result
  if (extremum || op == ReduceOp::log_sum_exp) {
    const bool max = op != ReduceOp::min;
    m.assign(size_t(y.numel()),
             max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max());
    if constexpr (std::is_same_v<T, float>)
      std::fill(m.begin(), m.end(), max ? -INFINITY : INFINITY);
    sweep([&](int64_t o, T v) { m[size_t(o)] = nan_max(m[size_t(o)], v, max); });
    if (extremum) {
      std::copy(m.begin(), m.end(), yp);
      return;
    }
  }
  using A = Acc<T>;
  std::vector<A> acc(size_t(y.numel()), op == ReduceOp::prod ? A(1) : A(0));
  sweep([&](int64_t o, T v) {
    A& a = acc[size_t(o)];
    const A d = A(v);
    if constexpr (std::is_same_v<T, float>) {
      switch (op) {
        case ReduceOp::prod:
          a *= d;
          return;
        case ReduceOp::l1:
          a += std::fabs(d);
          return;
        case ReduceOp::l2:
        case ReduceOp::sum_square:
          a += d * d;
          return;
        case ReduceOp::log_sum_exp: {
          // An infinite or NaN maximum: shift by 0 (the sum then gives inf / NaN / 0).
          const double sh = std::isfinite(m[size_t(o)]) ? double(m[size_t(o)]) : 0.0;
          a += std::exp(d - sh);
          return;
        }
        default:
          a += d;
          return;
      }
    } else {
      a = op == ReduceOp::prod ? A(uint64_t(a) * uint64_t(d)) : A(uint64_t(a) + uint64_t(d));
    }
  });
  for (int64_t i = 0; i < y.numel(); ++i) {
    const A a = acc[size_t(i)];
    if constexpr (std::is_same_v<T, float>) {
      double r = a;
      switch (op) {
        case ReduceOp::mean:
          r = a / double(count);
          break;
        case ReduceOp::l2:
          r = std::sqrt(a);
          break;
        case ReduceOp::log_sum:
          r = std::log(a);
          break;
        case ReduceOp::log_sum_exp:
          r = (std::isfinite(m[size_t(i)]) ? double(m[size_t(i)]) : 0.0) + std::log(a);
          break;
        default:
          break;
      }
      yp[i] = float(r);
    } else {
      yp[i] = a;
    }
  }
}

}  // namespace

void reduce(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  const std::optional<ReduceOp> op = reduce_op(node.op);
  if (!op) node.fail(Code::internal, "is not a Reduce* op");
  const bool int_ok =
      *op == ReduceOp::sum || *op == ReduceOp::max || *op == ReduceOp::min || *op == ReduceOp::prod;
  if (!(int_ok && x.dtype() == DType::i64)) expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, x.dtype(), "output");
  const int64_t rank = int64_t(x.shape().size());
  std::vector<int64_t> axes;
  if (const Tensor* t = opt_input(in, 1)) axes = read_i64s(node, *t, "axes");
  if (axes.empty() && node.attr_i("noop_with_empty_axes", 0) != 0) {
    expect_same_size(node, x, y);
    std::memcpy(y.raw(), x.raw(), size_t(x.numel()) * dtype_size(x.dtype()));
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
  if (count == 0) node.fail(Code::unsupported, "reduces an empty set");
  std::vector<int64_t> ys = strides_of(kept);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[size_t(d)]) ys[size_t(d)] = 0;
  dispatch_type(x.dtype(), [&](auto t) { reduce_typed<decltype(t)>(*op, x, y, ys, count); });
}

// ArgMax / ArgMin over `axis`, as numpy: the first extreme index (select_last_index: the last);
// a NaN counts as the extreme (numpy's argmax / argmin return the first NaN).
void arg_reduce(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, DType::i64, "output");
  const Shape& s = x.shape();
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", 0), int64_t(s.size())));
  const int64_t outer = prod(s, 0, axis), n = s[axis], inner = prod(s, axis + 1, s.size());
  if (y.numel() != outer * inner || n == 0) node.fail(Code::internal, "output size mismatch");
  const bool max = node.op == "ArgMax", last = node.attr_i("select_last_index", 0) != 0;
  const float* xp = x.data<float>();
  int64_t* yp = y.data<int64_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* p = xp + o * n * inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k) {
        const float v = p[k * inner], b = p[best * inner];
        const bool better = std::isnan(b)   ? last && std::isnan(v)
                            : std::isnan(v) ? true
                            : last          ? (max ? v >= b : v <= b)
                                            : (max ? v > b : v < b);
        if (better) best = k;
      }
      yp[o * inner + i] = best;
    }
}

// TopK over `axis` (set by inference): the K largest (smallest) values in order, ties to the
// lower index (ONNX), a NaN counting as the extreme (as arg_reduce).
void topk(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  Tensor* idx = out.size() > 1 ? out[1] : nullptr;
  expect_dtype(node, x, DType::f32, "input");
  const Shape& s = x.shape();
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", -1), int64_t(s.size())));
  const int64_t outer = prod(s, 0, axis), n = s[axis], inner = prod(s, axis + 1, s.size());
  const int64_t k = y.shape()[axis];
  if (k > n || y.numel() != outer * k * inner) node.fail(Code::internal, "output size mismatch");
  const bool largest = node.attr_i("largest", 1) != 0;
  const float* xp = x.data<float>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* p = xp + o * n * inner + i;
      auto before = [&](int64_t a, int64_t b) {
        const float va = p[a * inner], vb = p[b * inner];
        if (std::isnan(va) || std::isnan(vb)) return std::isnan(va) && (!std::isnan(vb) || a < b);
        return largest ? va > vb || (va == vb && a < b) : va < vb || (va == vb && a < b);
      };
      for (int64_t j = 0; j < n; ++j) order[size_t(j)] = j;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * inner + i;
        y.data<float>()[at] = p[order[size_t(j)] * inner];
        if (idx) idx->data<int64_t>()[at] = order[size_t(j)];
      }
    }
}

// CumSum over `axis` (set by inference), inclusive or exclusive, forward or reversed; float32
// sums in double.
void cumsum(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_shape(node, y, x.shape(), "output");
  const Shape& s = x.shape();
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", 0), int64_t(s.size())));
  const int64_t outer = prod(s, 0, axis), n = s[axis], inner = prod(s, axis + 1, s.size());
  const bool exclusive = node.attr_i("exclusive", 0) != 0, reverse = node.attr_i("reverse", 0) != 0;
  dispatch_type(x.dtype(), [&](auto t) {
    using T = decltype(t);
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, int64_t>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        Acc acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + (reverse ? n - 1 - j : j)) * inner + i;
          if (exclusive) {
            yp[at] = T(acc);
            acc += Acc(xp[at]);
          } else {
            acc += Acc(xp[at]);
            yp[at] = T(acc);
          }
        }
      }
  });
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
  const bool log = node.op == "LogSoftmax", hardmax = node.op == "Hardmax";
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      // Subtracting the max keeps exp() from overflowing.
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::fmax(m, xp[base + k * inner]);
      if (hardmax) {  // 1 at the first maximum (np.argmax: the first NaN if any), else 0
        int64_t at = 0;
        for (int64_t k = 0; k < n && !std::isnan(xp[base + at * inner]); ++k)
          if (xp[base + k * inner] > xp[base + at * inner] || std::isnan(xp[base + k * inner]))
            at = k;
        for (int64_t k = 0; k < n; ++k) yp[base + k * inner] = k == at ? 1.f : 0.f;
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(double(xp[base + k * inner]) - m);
      const double log_sum = std::log(sum);
      for (int64_t k = 0; k < n; ++k) {
        const double d = double(xp[base + k * inner]) - m;
        yp[base + k * inner] = float(log ? d - log_sum : std::exp(d) / sum);
      }
    }
}

}  // namespace kiln::ref
