// Comparisons, boolean logic, Where, Sign, Mod and Cast: the ops that make or
// consume bool tensors (DType::boolean, one byte 0/1) or convert between dtypes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/ref/ref_common.h"

namespace kiln::ref {

namespace {

enum class Cmp { eq, lt, gt, le, ge };

Cmp cmp_of(const Node& node) {
  if (node.op == "Equal") return Cmp::eq;
  if (node.op == "Less") return Cmp::lt;
  if (node.op == "Greater") return Cmp::gt;
  if (node.op == "LessOrEqual") return Cmp::le;
  if (node.op == "GreaterOrEqual") return Cmp::ge;
  node.fail(Code::internal, "is not a comparison");
}

template <class T>
uint8_t compare_one(Cmp c, T a, T b) {
  switch (c) {
    case Cmp::eq:
      return a == b;
    case Cmp::lt:
      return a < b;
    case Cmp::gt:
      return a > b;
    case Cmp::le:
      return a <= b;
    case Cmp::ge:
      return a >= b;
  }
  return 0;
}

// float -> integer the way x86's cvttss2si does (what ONNX Runtime's static_cast gives on
// this hardware): truncation, and the "integer indefinite" INT_MIN for NaN or out of range.
template <class I>
I truncate_float(float x) {
  constexpr float lim = float(uint64_t(1) << (sizeof(I) * 8 - 1));  // 2^31 or 2^63
  if (!(x > -lim && x < lim)) return std::numeric_limits<I>::min();
  return I(x);
}

// IEEE binary16 round-to-nearest-even of x, kept in a float: 11 significant bits, normal
// exponents down to 2^-14, subnormals in steps of 2^-24, overflow to infinity past 65504.
float round_to_half(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int ulp = std::max(e - 11, -24);
  return std::copysign(std::ldexp(std::nearbyint(std::ldexp(a, -ulp)), ulp), x);
}

}  // namespace

void compare(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = req_input(node, in, 0);
  const Tensor& b = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, b, a.dtype(), "input 1");
  expect_dtype(node, y, DType::boolean, "output");
  const Cmp c = cmp_of(node);
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    broadcast_binary<T, T, uint8_t>(node, a, b, y, [c](T p, T q) { return compare_one(c, p, q); });
  });
}

void logic(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, a, DType::boolean, "input 0");
  expect_dtype(node, y, DType::boolean, "output");
  if (node.op == "Not") {
    expect_shape(node, y, a.shape(), "output");
    for (int64_t i = 0; i < a.numel(); ++i) y.data<uint8_t>()[i] = !a.data<uint8_t>()[i];
    return;
  }
  const Tensor& b = req_input(node, in, 1);
  expect_dtype(node, b, DType::boolean, "input 1");
  const char op = node.op == "And" ? '&' : node.op == "Or" ? '|' : '^';
  broadcast_binary<uint8_t, uint8_t, uint8_t>(node, a, b, y, [op](uint8_t p, uint8_t q) {
    return uint8_t(op == '&' ? p & q : op == '|' ? p | q : p ^ q);
  });
}

void where(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& c = req_input(node, in, 0);
  const Tensor& a = req_input(node, in, 1);
  const Tensor& b = req_input(node, in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, c, DType::boolean, "condition");
  expect_dtype(node, b, a.dtype(), "input 2");
  expect_dtype(node, y, a.dtype(), "output");
  expect_shape(node, y,
               broadcast_shapes(node, c.shape(), broadcast_shapes(node, a.shape(), b.shape())),
               "output");
  const std::vector<std::vector<int64_t>> st = {
      broadcast_strides(node, c.shape(), y.shape()), broadcast_strides(node, a.shape(), y.shape()),
      broadcast_strides(node, b.shape(), y.shape()), strides_of(y.shape())};
  const uint8_t* cp = c.data<uint8_t>();
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* yp = y.data<T>();
    for_each_row(y.shape(), st, [&](const int64_t* o, int64_t len, const int64_t* s) {
      for (int64_t i = 0; i < len; ++i)
        yp[o[3] + i * s[3]] = cp[o[0] + i * s[0]] ? ap[o[1] + i * s[1]] : bp[o[2] + i * s[2]];
    });
  });
}

void sign(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, x.shape(), "output");
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const T v = x.data<T>()[i];
      y.data<T>()[i] = v > T(0) ? T(1) : v < T(0) ? T(-1) : v;  // NaN and 0 stay as they are
    }
  });
}

// fmod=1: the remainder has the dividend's sign (C fmod); fmod=0 (integers only): the
// divisor's sign (Python's %). Integer division by zero is an error, not a crash.
void mod(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = req_input(node, in, 0);
  const Tensor& b = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, b, a.dtype(), "input 1");
  expect_dtype(node, y, a.dtype(), "output");
  const bool fmod = node.attr_i("fmod", 0) != 0;
  if (a.dtype() == DType::f32) {
    if (!fmod) node.fail(Code::invalid_model, "fmod must be 1 for float inputs");
    broadcast_binary<float, float, float>(node, a, b, y,
                                          [](float p, float q) { return std::fmod(p, q); });
    return;
  }
  expect_dtype(node, a, DType::i64, "input 0");
  broadcast_binary<int64_t, int64_t, int64_t>(node, a, b, y, [&](int64_t p, int64_t q) {
    if (q == 0) node.fail(Code::invalid_argument, "integer modulo by zero");
    if (q == -1) return int64_t(0);  // also INT64_MIN % -1, which traps in C++
    const int64_t r = p % q;
    return !fmod && r != 0 && ((r < 0) != (q < 0)) ? r + q : r;
  });
}

// Cast / CastLike into the output's dtype; Cast to float16 rounds to half precision (the
// value stays a float32), to int32 wraps to 32 bits (the value stays an int64).
void cast(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_shape(node, y, x.shape(), "output");
  const int64_t to = node.op == "Cast" ? node.attr_i("to", 0) : 0;
  const bool half = to == 10, int32 = to == 6;
  dispatch_type(x.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    const S* xp = x.data<S>();
    dispatch_type(y.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      D* yp = y.data<D>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const S v = xp[i];
        if constexpr (std::is_same_v<D, uint8_t>) {
          yp[i] = v != S(0);  // NaN is nonzero: true
        } else if constexpr (std::is_same_v<D, float>) {
          yp[i] = half ? round_to_half(float(v)) : float(v);
        } else if constexpr (std::is_same_v<S, float>) {
          yp[i] = int32 ? truncate_float<int32_t>(v) : truncate_float<int64_t>(v);
        } else {
          yp[i] = int32 ? int64_t(int32_t(uint32_t(uint64_t(v)))) : int64_t(v);
        }
      }
    });
  });
}

}  // namespace kiln::ref
