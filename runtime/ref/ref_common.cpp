#include "runtime/ref/ref_common.h"

#include <algorithm>

namespace kiln::ref {

const Tensor& req_input(const Node& n, const Inputs& in, size_t i) {
  const Tensor* t = opt_input(in, i);
  if (!t) n.fail(Code::invalid_model, "input " + std::to_string(i) + " is required");
  return *t;
}

Tensor& req_output(const Node& n, const Outputs& out, size_t i) {
  Tensor* t = i < out.size() ? out[i] : nullptr;
  if (!t) n.fail(Code::internal, "output " + std::to_string(i) + " was not allocated");
  return *t;
}

void forbid_output(const Node& n, const Outputs& out, size_t i, const char* what) {
  if (i < out.size() && out[i])
    n.fail(Code::unsupported, std::string("output '") + what + "' is not supported");
}

void expect_dtype(const Node& n, const Tensor& t, DType want, const char* what) {
  if (t.dtype() != want)
    n.fail(Code::unsupported, std::string(what) + " has dtype " + dtype_name(t.dtype()) +
                                  ", expected " + dtype_name(want));
}

void expect_shape(const Node& n, const Tensor& t, const Shape& want, const char* what) {
  if (t.shape() != want)
    n.fail(Code::internal, std::string(what) + " has shape " + shape_str(t.shape()) +
                               ", expected " + shape_str(want));
}

void expect_rank(const Node& n, const Tensor& t, size_t rank, const char* what) {
  if (t.shape().size() != rank)
    n.fail(Code::unsupported, std::string(what) + " has shape " + shape_str(t.shape()) +
                                  ", expected rank " + std::to_string(rank));
}

void expect_same_size(const Node& n, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    n.fail(Code::internal, std::string("input dtype ") + dtype_name(a.dtype()) +
                               " differs from output dtype " + dtype_name(b.dtype()));
  if (a.numel() != b.numel())
    n.fail(Code::internal, "input " + shape_str(a.shape()) + " and output " + shape_str(b.shape()) +
                               " differ in element count");
}

int64_t norm_axis(const Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    n.fail(Code::invalid_model,
           "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::vector<int64_t> broadcast_strides(const Node& n, const Shape& s, const Shape& out) {
  if (s.size() > out.size())
    n.fail(Code::internal, "shape " + shape_str(s) + " does not broadcast to " + shape_str(out));
  std::vector<int64_t> own = strides_of(s);
  std::vector<int64_t> st(out.size(), 0);
  const size_t shift = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == out[i + shift])
      st[i + shift] = s[i] == 1 ? 0 : own[i];
    else if (s[i] != 1)
      n.fail(Code::internal, "shape " + shape_str(s) + " does not broadcast to " + shape_str(out));
  }
  return st;
}

Shape broadcast_shapes(const Node& n, const Shape& a, const Shape& b) {
  Shape r(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t da = i < r.size() - a.size() ? 1 : a[i - (r.size() - a.size())];
    int64_t db = i < r.size() - b.size() ? 1 : b[i - (r.size() - b.size())];
    if (da != db && da != 1 && db != 1)
      n.fail(Code::invalid_model,
             "shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    r[i] = da == 1 ? db : da;
  }
  return r;
}

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

std::vector<int64_t> read_i64s(const Node& n, const Tensor& t, const char* what) {
  expect_dtype(n, t, DType::i64, what);
  if (t.shape().size() > 1)
    n.fail(Code::invalid_model,
           std::string(what) + " must be 1-D, got shape " + shape_str(t.shape()));
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

float read_f32_scalar(const Node& n, const Tensor& t, const char* what) {
  expect_dtype(n, t, DType::f32, what);
  if (t.numel() != 1)
    n.fail(Code::invalid_model,
           std::string(what) + " must have one element, got shape " + shape_str(t.shape()));
  return t.data<float>()[0];
}

}  // namespace kiln::ref
