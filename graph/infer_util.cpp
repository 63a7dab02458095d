#include "graph/infer_util.h"

#include <algorithm>
#include <cmath>

#include "graph/onnx_import.h"

namespace kiln::infer_detail {

bool has_input(const Node& n, size_t i) {
  return n.in(i) != kNoValue;
}

const Value& input(const Graph& g, const Node& n, size_t i) {
  if (!has_input(n, i)) n.fail(Code::invalid_model, "input " + std::to_string(i) + " is missing");
  return g.value(n.inputs[i]);
}

std::string input_desc(const Graph& g, const Node& n, size_t i) {
  return "input " + std::to_string(i) + " '" + input(g, n, i).name + "'";
}

void expect_dtype(const Graph& g, const Node& n, size_t i, DType want, Code code) {
  const Value& v = input(g, n, i);
  if (v.dtype != want)
    n.fail(code, input_desc(g, n, i) + " has dtype " + dtype_name(v.dtype) + ", expected " +
                     dtype_name(want));
}

DType expect_f32_or_i64(const Graph& g, const Node& n, size_t i) {
  // (Of the dtypes Kiln keeps, the ops calling this run on these two; a bool input is refused.)
  DType d = input(g, n, i).dtype;
  if (d != DType::f32 && d != DType::i64)
    n.fail(Code::invalid_model,
           input_desc(g, n, i) + " has dtype " + dtype_name(d) + ", expected float32 or int64");
  return d;
}

void expect_same_dtype(const Graph& g, const Node& n, size_t i, size_t j) {
  const Value& a = input(g, n, i);
  const Value& b = input(g, n, j);
  if (a.dtype != b.dtype)
    n.fail(Code::invalid_model, input_desc(g, n, j) + " has dtype " + dtype_name(b.dtype) +
                                    " but " + input_desc(g, n, i) + " has dtype " +
                                    dtype_name(a.dtype));
}

void expect_rank(const Graph& g, const Node& n, size_t i, size_t rank) {
  const Value& v = input(g, n, i);
  if (v.shape.size() != rank)
    n.fail(Code::invalid_model, input_desc(g, n, i) + " should have rank " + std::to_string(rank) +
                                    " but has shape " + shape_str(v.shape));
}

void expect_min_rank(const Graph& g, const Node& n, size_t i, size_t rank) {
  const Value& v = input(g, n, i);
  if (v.shape.size() < rank)
    n.fail(Code::invalid_model, input_desc(g, n, i) + " should have rank >= " +
                                    std::to_string(rank) + " but has shape " + shape_str(v.shape));
}

void expect_scalar(const Graph& g, const Node& n, size_t i) {
  const Value& v = input(g, n, i);
  if (!v.shape.empty() && checked_numel(n, v.shape) != 1)
    n.fail(Code::invalid_model,
           input_desc(g, n, i) + " should be a scalar but has shape " + shape_str(v.shape));
}

int64_t normalize_axis(const Node& n, int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    n.fail(Code::invalid_model, std::string(what) + " " + std::to_string(axis) +
                                    " is out of range for rank " + std::to_string(rank) +
                                    " (expected " + std::to_string(-rank) + ".." +
                                    std::to_string(rank - 1) + ")");
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const Node& n, const std::vector<int64_t>& axes, int64_t rank,
                                    const char* what) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    int64_t x = normalize_axis(n, a, rank, what);
    if (std::find(out.begin(), out.end(), x) != out.end())
      n.fail(Code::invalid_model,
             std::string(what) + " contains axis " + std::to_string(x) + " more than once");
    out.push_back(x);
  }
  return out;
}

Shape broadcast_shapes(const Node& n, const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    // Right-aligned: missing leading dims act as 1.
    int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      n.fail(Code::invalid_model,
             "cannot broadcast shapes " + shape_str(a) + " and " + shape_str(b));
    out[k] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> tensor_as_ints(const Tensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  if (t.dtype() == DType::i64) {
    const int64_t* p = t.data<int64_t>();
    std::copy(p, p + t.numel(), v.begin());
  } else if (t.dtype() == DType::boolean) {
    const uint8_t* p = t.data<uint8_t>();
    std::copy(p, p + t.numel(), v.begin());
  } else {
    // Truncated toward zero and saturated at the int64 range (a plain cast of a value out of
    // range is undefined: fuzz_graph found a Dropout training_mode of -2.6e33); NaN counts as
    // nonzero, as for a flag.
    const float* p = t.data<float>();
    for (int64_t k = 0; k < t.numel(); ++k) {
      const float x = p[k];
      v[size_t(k)] = std::isnan(x)   ? 1
                     : x >= 0x1p63f  ? INT64_MAX
                     : x <= -0x1p63f ? INT64_MIN
                                     : int64_t(x);
    }
  }
  return v;
}

std::optional<std::vector<int64_t>> const_ints(const Graph& g, const Node& n, size_t i) {
  if (!has_input(n, i)) return std::nullopt;
  const Value& v = input(g, n, i);
  if (!v.is_const())
    n.fail(Code::unsupported, input_desc(g, n, i) +
                                  " must be a constant (computed at load time) but is produced "
                                  "at run time");
  if (v.dtype != DType::i64)
    n.fail(Code::invalid_model,
           input_desc(g, n, i) + " should be int64 but is " + dtype_name(v.dtype));
  if (v.shape.size() > 1)
    n.fail(Code::invalid_model,
           input_desc(g, n, i) + " should be 1-D but has shape " + shape_str(v.shape));
  return tensor_as_ints(*v.constant);
}

const Tensor& const_input(const Graph& g, const Node& n, size_t i) {
  const Value& v = input(g, n, i);
  if (!v.is_const())
    n.fail(Code::unsupported, input_desc(g, n, i) +
                                  " is computed at run time, and this op's output size depends "
                                  "on its values");
  return *v.constant;
}

void set_const_output(Graph& g, const Node& n, size_t i, Tensor t) {
  set_output(g, n, i, t.dtype(), t.shape());
  if (has_output(n, i)) g.value(n.outputs[i]).constant = std::move(t);
}

void reject_attr(const Node& n, const char* name) {
  if (n.has(name))
    n.fail(Code::invalid_model, std::string("attribute '") + name +
                                    "' is not allowed in the canonical form (it is an input)");
}

std::string ints_str(const std::vector<int64_t>& v) {
  return shape_str(v);
}

bool attr_flag(const Node& n, const std::string& name, bool def) {
  int64_t v = n.attr_i(name, def ? 1 : 0);
  if (v != 0 && v != 1)
    n.fail(Code::invalid_model,
           "attribute '" + name + "' should be 0 or 1 but is " + std::to_string(v));
  return v == 1;
}

void set_attr_ints(Node& n, const std::string& name, std::vector<int64_t> v) {
  n.attrs[name] = attr_ints(std::move(v));
}

int64_t checked_numel(const Node& n, const Shape& s) {
  int64_t total = 1;
  for (int64_t d : s) {
    if (d < 0) n.fail(Code::invalid_model, "negative dimension in shape " + shape_str(s));
    if (d != 0 && total > (int64_t(1) << 62) / d)
      n.fail(Code::unsupported, "shape " + shape_str(s) + " has too many elements");
    total *= d;
  }
  return total;
}

bool has_output(const Node& n, size_t i) {
  return i < n.outputs.size() && n.outputs[i] != kNoValue;
}

void set_output(Graph& g, const Node& n, size_t i, DType dtype, Shape shape) {
  if (!has_output(n, i)) return;
  Value& v = g.value(n.outputs[i]);
  // Rank and per-dim limits: a zero dim must not let the others grow unbounded (shape
  // arithmetic downstream adds and multiplies them).
  if (int64_t(shape.size()) > kMaxRank)
    n.fail(Code::unsupported, "output '" + v.name + "' would have rank " +
                                  std::to_string(shape.size()) + "; Kiln supports at most " +
                                  std::to_string(kMaxRank) + " dims");
  for (int64_t d : shape)
    if (d > kMaxElements)
      n.fail(Code::unsupported, "output '" + v.name + "' would have shape " + shape_str(shape) +
                                    ", a dimension larger than Kiln's limit of 2^31");
  int64_t numel = checked_numel(n, shape);
  if (numel > kMaxElements)
    n.fail(Code::unsupported, "output '" + v.name + "' would have shape " + shape_str(shape) +
                                  " (" + std::to_string(numel) +
                                  " elements), more than Kiln's limit of 2^31 elements");
  // Empty int64 tensors are meaningful in shape arithmetic (Shape of a scalar); an empty
  // float activation is not something any CNN kernel here is written for.
  if (numel == 0 && dtype == DType::f32 && !g.runtime_shapes)
    n.fail(Code::unsupported,
           "output '" + v.name + "' would be empty (shape " + shape_str(shape) + ")");
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.shape_known = true;
}

}  // namespace kiln::infer_detail
