// Shape inference for the reductions: Reduce* over axes, ArgMax / ArgMin over one axis, and
// the normalisations over groups of channels (InstanceNormalization, GroupNormalization) and
// over a window of neighbouring channels (LRN).
#include <cmath>
#include <string>

#include "graph/infer_util.h"
#include "graph/post_ops.h"

namespace kiln::infer_detail {

namespace {

// x's shape with the dims marked in `reduced` removed, or kept as 1.
Shape reduced_shape(const Shape& x, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!reduced[i])
      out.push_back(x[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

}  // namespace

void infer_reduce(Graph& g, Node& n) {
  // int64 for the reductions whose result stays an integer; float32 for all.
  const ReduceOp op = *reduce_op(n.op);
  const bool int_ok =
      op == ReduceOp::sum || op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::prod;
  const DType d = input(g, n, 0).dtype;
  if (d != DType::f32 && !(int_ok && d == DType::i64))
    n.fail(Code::unsupported, input_desc(g, n, 0) + " has dtype " + dtype_name(d) + "; " + n.op +
                                  " runs on float32" + (int_ok ? " or int64" : ""));
  reject_attr(n, "axes");
  const Shape& x = input(g, n, 0).shape;
  const int64_t r = int64_t(x.size());
  const bool keepdims = attr_flag(n, "keepdims", true);
  const bool noop = attr_flag(n, "noop_with_empty_axes", false);
  std::vector<int64_t> axes =
      normalize_axes(n, const_ints(g, n, 1).value_or(std::vector<int64_t>{}), r);
  if (axes.empty()) {
    if (noop) {
      set_output(g, n, 0, d, x);
      return;
    }
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  std::vector<bool> reduced(x.size(), false);
  for (int64_t a : axes) {
    reduced[size_t(a)] = true;
    if (x[size_t(a)] == 0)
      n.fail(Code::unsupported,
             "reduces the empty axis " + std::to_string(a) + " of shape " + shape_str(x));
  }
  set_output(g, n, 0, d, reduced_shape(x, reduced, keepdims));
}

void infer_arg_reduce(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_min_rank(g, n, 0, 1);
  const Shape& x = input(g, n, 0).shape;
  const int64_t axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(x.size()));
  n.attrs["axis"] = attr_i(axis);
  attr_flag(n, "select_last_index", false);
  if (x[size_t(axis)] == 0)
    n.fail(Code::invalid_model, "axis " + std::to_string(axis) + " of shape " + shape_str(x) +
                                    " is empty: no index to return");
  std::vector<bool> reduced(x.size(), false);
  reduced[size_t(axis)] = true;
  set_output(g, n, 0, DType::i64, reduced_shape(x, reduced, attr_flag(n, "keepdims", true)));
}

// InstanceNormalization (groups = C) and GroupNormalization (attr num_groups): x [N, C, ...];
// canonical form (graph/ops.h): scale and bias per channel, [C]. Opset < 21 GroupNormalization
// has them per group ([G]): constant ones are expanded here (each repeated C / G times).
void infer_group_norm(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_min_rank(g, n, 0, 3);
  const Shape x = input(g, n, 0).shape;  // a copy: add_const below may move the values
  const int64_t C = x[1];
  const bool instance = n.op == "InstanceNormalization";
  const int64_t G = instance ? C : n.attr_i("num_groups", 0);
  if (!instance && !n.has("num_groups"))
    n.fail(Code::invalid_model, "attribute 'num_groups' is required");
  if (G < 1 || C % G != 0)
    n.fail(Code::invalid_model, "num_groups " + std::to_string(G) + " does not divide the " +
                                    std::to_string(C) + " channels of " + shape_str(x));
  const float eps = n.attr_f("epsilon", 1e-5f);
  if (!(eps >= 0)) n.fail(Code::invalid_model, "epsilon " + std::to_string(eps) + " is negative");
  for (size_t i = 1; i < 3; ++i) {
    expect_dtype(g, n, i, DType::f32, Code::unsupported);
    const Value& v = input(g, n, i);
    if (v.shape == Shape{C}) continue;
    if (instance || v.shape != Shape{G} || g.opset >= 21)
      n.fail(Code::invalid_model, input_desc(g, n, i) + " has shape " + shape_str(v.shape) +
                                      ", expected [" + std::to_string(C) + "] (one per channel)");
    if (!v.is_const())
      n.fail(Code::unsupported,
             input_desc(g, n, i) + " holds one value per group (opset < 21) and is not a constant");
    Tensor t(DType::f32, {C});
    const float* src = v.constant->data<float>();
    for (int64_t c = 0; c < C; ++c) t.data<float>()[c] = src[c / (C / G)];
    n.inputs[i] = g.add_const(unique_value_name(g, n.name + "_per_channel"), std::move(t));
  }
  set_output(g, n, 0, DType::f32, x);
}

void infer_topk(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_min_rank(g, n, 0, 1);
  Shape y = input(g, n, 0).shape;
  const int64_t axis = normalize_axis(n, n.attr_i("axis", -1), int64_t(y.size()));
  n.attrs["axis"] = attr_i(axis);
  const auto k = const_ints(g, n, 1);
  if (!k || k->size() != 1)
    n.fail(Code::unsupported, input_desc(g, n, 1) + " is not a constant holding one value");
  if ((*k)[0] < 0 || (*k)[0] > y[size_t(axis)])
    n.fail(Code::invalid_model, "K = " + std::to_string((*k)[0]) + " is outside [0, " +
                                    std::to_string(y[size_t(axis)]) + "] (axis " +
                                    std::to_string(axis) + " of " + shape_str(y) + ")");
  attr_flag(n, "largest", true);
  attr_flag(n, "sorted", true);
  y[size_t(axis)] = (*k)[0];
  set_output(g, n, 0, DType::f32, y);
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) set_output(g, n, 1, DType::i64, y);
}

void infer_cumsum(Graph& g, Node& n) {
  const DType t = input(g, n, 0).dtype;
  if (t != DType::f32 && t != DType::i64)
    n.fail(Code::unsupported,
           input_desc(g, n, 0) + " is " + dtype_name(t) + "; CumSum takes float32 or int64");
  const Shape x = input(g, n, 0).shape;
  const auto axis = const_ints(g, n, 1);
  if (!axis || axis->size() != 1)
    n.fail(Code::unsupported, input_desc(g, n, 1) + " is not a constant holding one value");
  n.attrs["axis"] = attr_i(normalize_axis(n, (*axis)[0], int64_t(x.size())));
  attr_flag(n, "exclusive", false);
  attr_flag(n, "reverse", false);
  set_output(g, n, 0, t, x);
}

void infer_lrn(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_min_rank(g, n, 0, 3);
  if (!n.has("size")) n.fail(Code::invalid_model, "attribute 'size' is required");
  const int64_t size = n.attr_i("size", 0);
  if (size < 1)
    n.fail(Code::invalid_model, "attribute 'size' is " + std::to_string(size) + ", not >= 1");
  // The window's sum of squares is scaled by alpha / size and raised to -beta after adding
  // bias: non-finite parameters give no meaningful output.
  const int64_t lo = n.attr_i("window_lo", (size - 1) / 2);
  if (lo < 0 || lo >= size)
    n.fail(Code::invalid_model, "window_lo " + std::to_string(lo) + " is outside [0, size)");
  for (const char* a : {"alpha", "beta", "bias"})
    if (!std::isfinite(n.attr_f(a, 0.f)))
      n.fail(Code::invalid_model, std::string("attribute '") + a + "' is not finite");
  set_output(g, n, 0, DType::f32, input(g, n, 0).shape);
}

}  // namespace kiln::infer_detail
