// Shape inference for the ops that only reinterpret or describe a shape: Flatten, Reshape,
// Squeeze, Unsqueeze, Transpose, Shape, Constant; the shape builders Expand, Tile,
// ConstantOfShape, Range and Size.
#include <algorithm>
#include <cmath>
#include <string>

#include "graph/infer_util.h"

namespace kiln::infer_detail {

void infer_flatten(Graph& g, Node& n) {
  const DType d = input(g, n, 0).dtype;  // any: only the bytes move
  const Shape& x = input(g, n, 0).shape;
  int64_t r = int64_t(x.size());
  int64_t axis = n.attr_i("axis", 1);
  if (axis < -r || axis > r)
    n.fail(Code::invalid_model, "axis " + std::to_string(axis) + " is out of range for rank " +
                                    std::to_string(r) + " (expected " + std::to_string(-r) + ".." +
                                    std::to_string(r) + ")");
  if (axis < 0) axis += r;
  int64_t outer = checked_numel(n, Shape(x.begin(), x.begin() + axis));
  int64_t inner = checked_numel(n, Shape(x.begin() + axis, x.end()));
  set_output(g, n, 0, d, {outer, inner});
}

void infer_reshape(Graph& g, Node& n) {
  DType d = input(g, n, 0).dtype;  // any: only the bytes move
  const Shape& x = input(g, n, 0).shape;
  expect_rank(g, n, 1, 1);
  std::vector<int64_t> spec = *const_ints(g, n, 1);
  bool allowzero = attr_flag(n, "allowzero", false);
  auto what = [&] { return "cannot reshape " + shape_str(x) + " to " + ints_str(spec) + ": "; };

  Shape out(spec.size());
  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) n.fail(Code::invalid_model, what() + "more than one -1");
      infer_at = int(i);
      out[i] = 1;
    } else if (v < -1) {
      n.fail(Code::invalid_model, what() + "negative dimension " + std::to_string(v));
    } else if (v == 0 && !allowzero) {
      // 0 copies the input's dim at the same index.
      if (i >= x.size())
        n.fail(Code::invalid_model, what() + "0 at index " + std::to_string(i) +
                                        " copies a dimension the input does not have");
      out[i] = x[i];
    } else {
      has_zero |= v == 0;
      out[i] = v;
    }
  }
  if (allowzero && has_zero && infer_at >= 0)
    n.fail(Code::invalid_model, what() + "-1 cannot be combined with a literal 0 (allowzero=1)");

  int64_t in_count = checked_numel(n, x);
  int64_t known = 1;
  for (int64_t v : out)
    if (__builtin_mul_overflow(known, v, &known))
      n.fail(Code::invalid_model, what() + "too many elements");
  if (infer_at >= 0) {
    if (known == 0 || in_count % known != 0)
      n.fail(Code::invalid_model, what() + "the input's " + std::to_string(in_count) +
                                      " elements are not a multiple of the other dims' product " +
                                      std::to_string(known));
    out[size_t(infer_at)] = in_count / known;
  } else if (known != in_count) {
    n.fail(Code::invalid_model,
           what() + "element count " + std::to_string(in_count) + " vs " + std::to_string(known));
  }
  set_output(g, n, 0, d, out);
}

void infer_squeeze(Graph& g, Node& n) {
  DType d = input(g, n, 0).dtype;  // any: only the bytes move
  reject_attr(n, "axes");
  const Shape& x = input(g, n, 0).shape;
  std::vector<int64_t> axes =
      normalize_axes(n, const_ints(g, n, 1).value_or(std::vector<int64_t>{}), int64_t(x.size()));
  std::vector<bool> drop(x.size(), false);
  if (axes.empty()) {
    // No axes (or an empty list, as ONNX Runtime treats it): drop every dim of size 1.
    for (size_t i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
  }
  for (int64_t a : axes) {
    if (x[size_t(a)] != 1)
      n.fail(Code::invalid_model, "cannot squeeze axis " + std::to_string(a) + " of shape " +
                                      shape_str(x) + ": its size is " +
                                      std::to_string(x[size_t(a)]) + ", not 1");
    drop[size_t(a)] = true;
  }
  Shape out;
  for (size_t i = 0; i < x.size(); ++i)
    if (!drop[i]) out.push_back(x[i]);
  set_output(g, n, 0, d, out);
}

void infer_unsqueeze(Graph& g, Node& n) {
  DType d = input(g, n, 0).dtype;  // any: only the bytes move
  reject_attr(n, "axes");
  const Shape& x = input(g, n, 0).shape;
  std::vector<int64_t> raw = *const_ints(g, n, 1);
  if (raw.size() > 64)
    n.fail(Code::invalid_model, "too many axes (" + std::to_string(raw.size()) + ")");
  // Axes are relative to the output's rank.
  int64_t out_rank = int64_t(x.size() + raw.size());
  std::vector<int64_t> axes = normalize_axes(n, raw, out_rank);
  Shape out;
  size_t next = 0;
  for (int64_t j = 0; j < out_rank; ++j) {
    if (std::find(axes.begin(), axes.end(), j) != axes.end())
      out.push_back(1);
    else
      out.push_back(x[next++]);
  }
  set_output(g, n, 0, d, out);
}

void infer_transpose(Graph& g, Node& n) {
  const DType d = expect_f32_or_i64(g, n, 0);  // int64: shape arithmetic (torch's F.pad export)
  const Shape& x = input(g, n, 0).shape;
  size_t r = x.size();
  std::vector<int64_t> perm;
  for (size_t i = 0; i < r; ++i) perm.push_back(int64_t(r - 1 - i));
  if (n.has("perm")) perm = n.attr_ints("perm");
  std::vector<bool> seen(r, false);
  bool ok = perm.size() == r;
  for (size_t i = 0; ok && i < r; ++i) {
    ok = perm[i] >= 0 && perm[i] < int64_t(r) && !seen[size_t(perm[i])];
    if (ok) seen[size_t(perm[i])] = true;
  }
  if (!ok)
    n.fail(Code::invalid_model, "perm " + ints_str(perm) + " is not a permutation of 0.." +
                                    std::to_string(int64_t(r) - 1) + " (input shape " +
                                    shape_str(x) + ")");
  Shape out(r);
  for (size_t i = 0; i < r; ++i) out[i] = x[size_t(perm[i])];
  set_output(g, n, 0, d, out);
}

void infer_shape(Graph& g, Node& n) {
  int64_t r = int64_t(input(g, n, 0).shape.size());
  // Opset 15: negative start/end count from the back, then both are clamped to [0, r].
  auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t(0), r); };
  int64_t start = clamp(n.attr_i("start", 0));
  int64_t end = n.has("end") ? clamp(n.attr_i("end", r)) : r;
  set_output(g, n, 0, DType::i64, {std::max<int64_t>(0, end - start)});
}

void infer_constant(Graph& g, Node& n) {
  static const char* supported[] = {"value", "value_float", "value_floats", "value_int",
                                    "value_ints"};
  std::string which;
  for (const auto& [name, attr] : n.attrs) {
    if (std::find(std::begin(supported), std::end(supported), name) == std::end(supported)) {
      if (name == "sparse_value" || name == "value_string" || name == "value_strings")
        n.fail(Code::unsupported, "attribute '" + name + "' is not supported");
      continue;  // unknown attributes are ignored, as elsewhere
    }
    if (!which.empty())
      n.fail(Code::invalid_model, "has both '" + which + "' and '" + name +
                                      "'; exactly one "
                                      "value is allowed");
    which = name;
  }
  if (which.empty()) n.fail(Code::invalid_model, "has no value attribute");
  if (which == "value") {
    const Tensor* t = n.attr_t("value");
    set_output(g, n, 0, t->dtype(), t->shape());
  } else if (which == "value_float") {
    n.attr_f(which, 0);  // kind check
    set_output(g, n, 0, DType::f32, {});
  } else if (which == "value_floats") {
    set_output(g, n, 0, DType::f32, {int64_t(n.attr_floats(which).size())});
  } else if (which == "value_int") {
    n.attr_i(which, 0);
    set_output(g, n, 0, DType::i64, {});
  } else {
    set_output(g, n, 0, DType::i64, {int64_t(n.attr_ints(which).size())});
  }
}

void infer_expand(Graph& g, Node& n) {
  const Value& x = input(g, n, 0);
  expect_rank(g, n, 1, 1);
  const std::vector<int64_t> shape = *const_ints(g, n, 1);
  for (int64_t d : shape)
    if (d < 0) n.fail(Code::invalid_model, "shape " + ints_str(shape) + " has a negative dim");
  // Bidirectional: a 1 in `shape` keeps the input's dim.
  set_output(g, n, 0, x.dtype, broadcast_shapes(n, x.shape, shape));
}

void infer_tile(Graph& g, Node& n) {
  const Value& x = input(g, n, 0);
  expect_rank(g, n, 1, 1);
  const std::vector<int64_t> repeats = *const_ints(g, n, 1);
  if (repeats.size() != x.shape.size())
    n.fail(Code::invalid_model,
           "repeats " + ints_str(repeats) + " does not match the rank of " + shape_str(x.shape));
  Shape out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    if (repeats[d] < 0 || repeats[d] > kMaxElements)
      n.fail(Code::invalid_model, "repeats " + ints_str(repeats) + " must be in [0, 2^31]");
    out[d] *= repeats[d];  // both <= 2^31: no overflow; set_output bounds the result
  }
  set_output(g, n, 0, x.dtype, out);
}

void infer_constant_of_shape(Graph& g, Node& n) {
  expect_rank(g, n, 0, 1);
  const std::vector<int64_t> shape = *const_ints(g, n, 0);
  for (int64_t d : shape)
    if (d < 0) n.fail(Code::invalid_model, "shape " + ints_str(shape) + " has a negative dim");
  const Tensor* v = n.attr_t("value");
  if (v && v->numel() != 1) n.fail(Code::invalid_model, "attribute 'value' must have one element");
  set_output(g, n, 0, v ? v->dtype() : DType::f32, shape);
}

namespace {

// Number of elements of Range(start, limit, delta): max(ceil((limit - start) / delta), 0),
// computed in double as numpy.arange does; nullopt when delta is 0 or the count is absurd.
std::optional<int64_t> range_count(double start, double limit, double delta) {
  if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
    return std::nullopt;
  const double c = std::ceil((limit - start) / delta);
  if (!(c < double(kMaxElements))) return std::nullopt;
  return c > 0 ? int64_t(c) : 0;
}

}  // namespace

void infer_range(Graph& g, Node& n) {
  const DType d = expect_f32_or_i64(g, n, 0);
  double v[3];
  for (size_t i = 0; i < 3; ++i) {
    expect_same_dtype(g, n, 0, i);
    expect_scalar(g, n, i);
    const Value& x = input(g, n, i);
    // The output's length depends on the values: they must be known at load.
    if (!x.is_const())
      n.fail(Code::unsupported,
             input_desc(g, n, i) + " is computed at run time; Range needs constant inputs");
    v[i] = d == DType::f32 ? double(x.constant->data<float>()[0])
                           : double(x.constant->data<int64_t>()[0]);
  }
  const std::optional<int64_t> count = range_count(v[0], v[1], v[2]);
  if (!count)
    n.fail(Code::invalid_model, "delta is 0, a value is not finite, or too many elements");
  set_output(g, n, 0, d, {*count});
}

void infer_size(Graph& g, Node& n) {
  set_output(g, n, 0, DType::i64, {});
}

}  // namespace kiln::infer_detail
