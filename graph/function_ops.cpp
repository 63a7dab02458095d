#include "graph/function_ops.h"

#include <algorithm>
#include <cmath>

#include "graph/canonicalize.h"
#include "graph/infer_util.h"

namespace kiln {
namespace {

ValueId f32(Graph& g, const Node& n, const char* part, float v) {
  Tensor t(DType::f32, {});
  *t.data<float>() = v;
  return const_for(g, n, part, std::move(t));
}

void require(const Node& n, size_t inputs, size_t outputs) {
  if (n.inputs.size() != inputs || n.outputs.size() != outputs)
    n.fail(Code::invalid_model, "expects " + std::to_string(inputs) + " input(s) and " +
                                    std::to_string(outputs) + " output(s)");
  for (ValueId v : n.inputs)
    if (v == kNoValue) n.fail(Code::invalid_model, "an input is missing");
  if (n.outputs[0] == kNoValue) n.fail(Code::invalid_model, "its output is missing");
}

void shrink(Graph& g, const Node& n, std::vector<Node>& out) {
  require(n, 1, 1);
  const float lambd = n.attr_f("lambd", 0.5f), bias = n.attr_f("bias", 0.f);
  if (!std::isfinite(lambd) || !std::isfinite(bias))
    n.fail(Code::invalid_model, "lambd and bias must be finite");
  Emitter op{g, n, out};
  const ValueId x = n.in(0);
  const ValueId low = op("Less", {x, f32(g, n, "minus_lambd", -lambd)}, "low");
  const ValueId high = op("Greater", {x, f32(g, n, "lambd", lambd)}, "high");
  const ValueId up = op("Add", {x, f32(g, n, "bias", bias)}, "plus_bias");
  const ValueId down = op("Sub", {x, f32(g, n, "bias_sub", bias)}, "minus_bias");
  const ValueId inner = op("Where", {high, down, f32(g, n, "zero", 0.f)}, "inner");
  op("Where", {low, up, inner}, "y", n.outputs[0]);
}

void mean_variance_normalization(Graph& g, const Node& n, std::vector<Node>& out) {
  require(n, 1, 1);
  Emitter op{g, n, out};
  const ValueId x = n.in(0), axes = op.ints("axes", n.attr_ints("axes", {0, 2, 3}));
  const ValueId two = f32(g, n, "two", 2.f);
  const ValueId mean = op("ReduceMean", {x, axes}, "mean");
  const ValueId mean_sq = op("Pow", {mean, two}, "mean_squared");
  const ValueId sq_mean = op("ReduceMean", {op("Pow", {x, two}, "x_squared"), axes}, "sq_mean");
  const ValueId sd = op("Sqrt", {op("Sub", {sq_mean, mean_sq}, "variance")}, "std");
  op("Div",
     {op("Sub", {x, mean}, "centred"), op("Add", {sd, f32(g, n, "epsilon", 1e-9f)}, "std_eps")},
     "y", n.outputs[0]);
}

void eye_like(Graph& g, const Node& n, std::vector<Node>& out) {
  require(n, 1, 1);
  Emitter op{g, n, out};
  const ValueId shape = op("Shape", {n.in(0)}, "shape");
  const ValueId start = op.scalar("start", 0), step = op.scalar("step", 1);
  auto index = [&](int64_t d, const char* part) {  // 0 .. dim d of x
    return op("Range", {start, op("Gather", {shape, op.scalar(part, d)}, part), step}, part);
  };
  const ValueId rows = index(0, "rows"), cols = index(1, "cols");
  const ValueId column = op("Unsqueeze", {rows, op.ints("column_axis", {1})}, "row_column");
  // (A k past every dim means no diagonal; clamped so the index arithmetic cannot overflow.)
  const int64_t k = std::clamp<int64_t>(n.attr_i("k", 0), -(int64_t(1) << 40), int64_t(1) << 40);
  const ValueId shifted = op("Add", {column, op.scalar("k", k)}, "row_plus_k");
  const ValueId eq = op("Equal", {shifted, cols}, "diagonal");
  if (n.has("dtype")) {
    op("Cast", {eq}, "y", n.outputs[0]);
    out.back().attrs["to"] = attr_i(n.attr_i("dtype", 1));
  } else {  // the input's type
    op("CastLike", {eq, n.in(0)}, "y", n.outputs[0]);
  }
}

void compress(Graph& g, const Node& n, std::vector<Node>& out) {
  require(n, 2, 1);
  Emitter op{g, n, out};
  ValueId x = n.in(0);
  const bool flat = !n.has("axis");
  if (flat) x = op("Reshape", {x, op.ints("flat", {-1})}, "flat");
  const ValueId nz = op("NonZero", {n.in(1)}, "selected");
  const ValueId idx = op("Squeeze", {nz, op.ints("squeeze_axes", {0})}, "indices");
  op("Gather", {x, idx}, "y", n.outputs[0]);
  out.back().attrs["axis"] = attr_i(flat ? 0 : n.attr_i("axis", 0));
}

// y[t, b, ...] = x[t < len[b] ? len[b] - 1 - t : t, b, ...] (time and batch axes 0 and 1, in
// either order), as a GatherElements along the time axis; the index arithmetic folds at load
// when the lengths are constants.
void reverse_sequence(Graph& g, const Node& n, std::vector<Node>& out) {
  require(n, 2, 1);
  const int64_t ta = n.attr_i("time_axis", 0), ba = n.attr_i("batch_axis", 1);
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
    n.fail(Code::invalid_model, "time_axis and batch_axis must be 0 and 1, in either order");
  Emitter op{g, n, out};
  const ValueId shape = op("Shape", {n.in(0)}, "shape");
  const ValueId one = op.scalar("one", 1);
  const ValueId steps = op(
      "Range", {op.scalar("zero", 0), op("Gather", {shape, op.scalar("time", ta)}, "steps"), one},
      "time_index");
  // (The step index along the time axis, the lengths along the batch axis: [T, B] or [B, T].)
  const ValueId t = op("Unsqueeze", {steps, op.ints("time_axes", {1 - ta})}, "t");
  const ValueId len = op("Unsqueeze", {n.in(1), op.ints("batch_axes", {1 - ba})}, "len");
  const ValueId back = op("Sub", {op("Sub", {len, one}, "last"), t}, "reversed");
  const ValueId idx = op("Where", {op("Less", {t, len}, "inside"), back, t}, "index");
  // [dim 0, dim 1, 1, ...] (the input's rank), then the input's shape.
  const ValueId ones =
      op("ConstantOfShape",
         {op("Unsqueeze",
             {op("Sub", {op("Size", {shape}, "rank"), op.scalar("two", 2)}, "inner_rank"),
              op.ints("rank_axes", {0})},
             "inner_count")},
         "inner_ones");
  Tensor fill(DType::i64, {1});
  *fill.data<int64_t>() = 1;
  out.back().attrs["value"] = attr_t(std::move(fill));
  const ValueId lead =
      op("Slice", {shape, op.ints("lead_begin", {0}), op.ints("lead_end", {2})}, "leading");
  const ValueId rshape = op("Concat", {lead, ones}, "index_shape");
  out.back().attrs["axis"] = attr_i(0);
  const ValueId full = op("Expand", {op("Reshape", {idx, rshape}, "index_r"), shape}, "index_full");
  op("GatherElements", {n.in(0), full}, "y", n.outputs[0]);
  out.back().attrs["axis"] = attr_i(ta);
}

// Hann, Hamming and Blackman windows: a0 - a1 cos(x) + a2 cos(2x) over x = 2 pi i / N (periodic)
// or / (N - 1) (symmetric), i = 0 .. size - 1, term for term as ONNX's function bodies (a
// constant at load when the size is; else computed per run, graph/dynamic.h).
void window(Graph& g, const Node& n, std::vector<Node>& out, float a0, float a1, float a2) {
  require(n, 1, 1);
  Emitter op{g, n, out};
  const ValueId size = op("Cast", {n.in(0)}, "size");
  out.back().attrs["to"] = attr_i(1);
  const ValueId one = f32(g, n, "one", 1.f);
  const ValueId span =
      n.attr_i("periodic", 1) != 0 ? size : op("Sub", {size, one}, "symmetric_size");
  const ValueId increment = op("Div", {f32(g, n, "tau", 6.2831855f), span}, "angular_increment");
  const ValueId angle =
      op("Mul", {op("Range", {f32(g, n, "zero", 0.f), size, one}, "index"), increment}, "angle");
  const ValueId first =
      op("Mul", {f32(g, n, "a1", a1), op("Cos", {angle}, "cos_angle")}, "a1_component");
  ValueId w = op("Sub", {f32(g, n, "a0", a0), first}, "a0_a1");
  if (a2 != 0.f) {
    const ValueId twice = op("Mul", {angle, f32(g, n, "two", 2.f)}, "twice_angle");
    w = op("Add", {w, op("Mul", {f32(g, n, "a2", a2), op("Cos", {twice}, "cos_twice")}, "a2_term")},
           "a0_a1_a2");
  }
  op("Cast", {w}, "y", n.outputs[0]);
  out.back().attrs["to"] = attr_i(n.attr_i("output_datatype", 1));
}

struct OneHot {
  int64_t depth = 0, axis = 0;
};

OneHot one_hot_spec(const Graph& g, const Node& n) {
  using namespace infer_detail;
  expect_f32_or_i64(g, n, 0);
  expect_f32_or_i64(g, n, 1);
  expect_scalar(g, n, 1);
  expect_rank(g, n, 2, 1);
  if (input(g, n, 2).shape[0] != 2)
    n.fail(Code::invalid_model,
           "values must hold [off_value, on_value], not " + shape_str(input(g, n, 2).shape));
  const Tensor& d = const_input(g, n, 1);
  // (A float depth is truncated, as ONNX Runtime does; bounded so that index + depth and the
  // output's size cannot overflow.)
  const double depth =
      d.dtype() == DType::f32 ? double(d.data<float>()[0]) : double(d.data<int64_t>()[0]);
  if (!(depth >= 1 && depth <= double(kMaxElements)))
    n.fail(Code::invalid_model, "depth must be at least 1 (and sane)");
  OneHot s;
  s.depth = int64_t(depth);
  const int64_t rank = int64_t(input(g, n, 0).shape.size());
  s.axis = normalize_axis(n, n.attr_i("axis", -1), rank + 1);
  return s;
}

}  // namespace

void infer_one_hot(Graph& g, Node& n) {
  const OneHot s = one_hot_spec(g, n);
  Shape y = g.value(n.in(0)).shape;
  y.insert(y.begin() + s.axis, s.depth);
  infer_detail::set_output(g, n, 0, g.value(n.in(2)).dtype, y);
}

std::vector<Node> expand_one_hot(Graph& g, const Node& n) {
  const OneHot s = one_hot_spec(g, n);
  std::vector<Node> out;
  Emitter op{g, n, out};
  ValueId idx = n.in(0);
  if (g.value(idx).dtype != DType::i64) {
    idx = op("Cast", {idx}, "indices_int64");
    out.back().attrs["to"] = attr_i(7);
  }
  const ValueId depth = op.scalar("depth", s.depth);
  const ValueId wrapped = op("Where",
                             {op("Less", {idx, op.scalar("zero", 0)}, "negative"),
                              op("Add", {idx, depth}, "indices_plus_depth"), idx},
                             "wrapped");
  const ValueId at = op("Unsqueeze", {wrapped, op.ints("axis", {s.axis})}, "at_axis");
  // 0 .. depth - 1 along the axis (a Range: folded at load within the folding limits, not
  // made here whatever the depth).
  Shape cs(g.value(n.in(0)).shape.size() + 1, 1);
  cs[size_t(s.axis)] = -1;
  const ValueId range = op("Range", {op.scalar("first", 0), depth, op.scalar("step", 1)}, "range");
  const ValueId classes = op.reshape(range, cs, "classes");
  const ValueId hot = op("Equal", {at, classes}, "hot");
  const ValueId on = op("Gather", {n.in(2), op.scalar("on_index", 1)}, "on_value");
  const ValueId off = op("Gather", {n.in(2), op.scalar("off_index", 0)}, "off_value");
  op("Where", {hot, on, off}, "y", n.outputs[0]);
  return out;
}

bool computed_affine(const Graph& g, const Node& n) {
  if (n.op != "BatchNormalization" && n.op != "LayerNormalization" &&
      n.op != "InstanceNormalization" && n.op != "GroupNormalization")
    return false;
  if (n.inputs.empty() || n.outputs.empty() || n.outputs[0] == kNoValue) return false;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) return false;  // (LayerNormalization's Mean / InvStdDev)
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (n.inputs[k] != kNoValue && !g.value(n.inputs[k]).is_const()) return true;
  return false;
}

std::vector<Node> expand_computed_affine(Graph& g, const Node& n) {
  std::vector<Node> out;
  Emitter op{g, n, out};
  const Shape xs = g.value(n.in(0)).shape;  // (a copy: constants added below move values)
  const int64_t r = int64_t(xs.size());
  // Where a per-channel / normalised-dims parameter broadcasts against x.
  Shape at(size_t(r), 1);
  int64_t from = 1, to = 2;  // the parameters' dims of x: [from, to)
  if (n.op == "LayerNormalization") {
    from = n.attr_i("axis", 0);
    to = from + n.attr_i("norm_dims", 1);
  }
  for (int64_t d = 0; d < r; ++d) at[size_t(d)] = d >= from && d < to ? xs[size_t(d)] : 1;
  at.erase(at.begin(), at.begin() + from);  // (numpy broadcasting aligns the trailing dims)
  if (n.op == "BatchNormalization") {
    // y = x * a + (B - mean * a), a = scale / sqrt(var + eps), as fold_batchnorm folds it.
    const ValueId sd =
        op("Sqrt", {op("Add", {n.in(4), f32(g, n, "eps", n.attr_f("epsilon", 1e-5f))}, "var_eps")},
           "std");
    const ValueId a = op("Div", {n.in(1), sd}, "a");
    const ValueId b = op("Sub", {n.in(2), op("Mul", {n.in(3), a}, "mean_a")}, "b");
    const ValueId xa = op("Mul", {n.in(0), op.reshape(a, at, "a_at")}, "x_a");
    op("Add", {xa, op.reshape(b, at, "b_at")}, "y", n.outputs[0]);
    return out;
  }
  // The normalisation with constant parameters (ones / zeros where they were computed), then
  // the computed scale and the bias as broadcast ops.
  Node norm = n;
  std::vector<ValueId> after(3, kNoValue);
  for (size_t k = 1; k < 3 && k < n.inputs.size(); ++k) {
    const ValueId v = n.inputs[k];
    // (A constant bias too when the scale is computed: it is added after the scale.)
    if (v == kNoValue || (g.value(v).is_const() && after[1] == kNoValue)) continue;
    after[k] = v;
    if (k == 2 && n.op == "LayerNormalization") {
      norm.inputs[k] = kNoValue;  // (optional)
      continue;
    }
    Tensor t(DType::f32, g.value(v).shape);
    std::fill(t.data<float>(), t.data<float>() + t.numel(), k == 1 ? 1.f : 0.f);
    norm.inputs[k] = const_for(g, n, k == 1 ? "ones" : "zeros", std::move(t));
  }
  while (norm.inputs.size() > 2 && norm.inputs.back() == kNoValue) norm.inputs.pop_back();
  ValueId y = op(n.op.c_str(), norm.inputs, "normalised",
                 after[1] == kNoValue && after[2] == kNoValue ? n.outputs[0] : kNoValue);
  out.back().attrs = n.attrs;
  if (after[1] != kNoValue)
    y = op("Mul", {y, op.reshape(after[1], at, "scale_at")}, "scaled",
           after[2] == kNoValue ? n.outputs[0] : kNoValue);
  if (after[2] != kNoValue) op("Add", {y, op.reshape(after[2], at, "bias_at")}, "y", n.outputs[0]);
  return out;
}

bool batch_norm_training(const Graph& g, const Node& n) {
  if (n.op != "BatchNormalization") return false;
  if (g.opset >= 14) return n.attr_i("training_mode", 0) != 0;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) return true;
  return false;
}

std::vector<Node> expand_batch_norm_training(Graph& g, const Node& n) {
  std::vector<Node> out;
  Emitter op{g, n, out};
  const Shape xs = g.value(n.in(0)).shape;  // (a copy: constants added below move values)
  Shape at(xs.size() - 1, 1);               // [C, 1, ...]: a [C] vector against x from dim 1
  at[0] = xs[1];
  // The mean over N and the spatial dims: over the spatial dims, then over N, each a contiguous
  // run of dims as the reduction kernels take them (the groups are equal: the mean of means is
  // the mean); one reduction where N is 1 or there is no spatial dim.
  std::vector<int64_t> spatial, all{0};
  for (int64_t d = 2; d < int64_t(xs.size()); ++d) spatial.push_back(d), all.push_back(d);
  const bool split = xs[0] != 1 && !spatial.empty();
  auto batch_mean = [&](ValueId v, const char* part) {
    if (split) v = op("ReduceMean", {v, op.ints("spatial_axes", spatial)}, "spatial_mean");
    return op("ReduceMean", {v, op.ints("axes", split ? std::vector<int64_t>{0} : all)}, part);
  };
  const ValueId mean = batch_mean(n.in(0), "batch_mean");
  const ValueId centred = op("Sub", {n.in(0), mean}, "centred");
  const ValueId var = batch_mean(op("Mul", {centred, centred}, "squared"), "batch_var");
  const ValueId eps = f32(g, n, "eps", n.attr_f("epsilon", 1e-5f));
  const ValueId sd = op("Sqrt", {op("Add", {var, eps}, "var_eps")}, "std");
  const ValueId a = op("Div", {op.reshape(n.in(1), at, "scale_at"), sd}, "a");
  op("Add", {op("Mul", {centred, a}, "scaled"), op.reshape(n.in(2), at, "bias_at")}, "y",
     n.outputs[0]);
  auto out_at = [&](size_t k) { return k < n.outputs.size() ? n.outputs[k] : kNoValue; };
  const Shape c{xs[1]};
  const float momentum = n.attr_f("momentum", 0.9f);
  for (size_t k = 1; k < 3; ++k) {
    if (out_at(k) == kNoValue) continue;
    const ValueId batch = op.reshape(k == 1 ? mean : var, c, k == 1 ? "mean_c" : "var_c");
    const ValueId kept = op("Mul", {n.in(2 + k), f32(g, n, "momentum", momentum)}, "kept");
    const ValueId added = op("Mul", {batch, f32(g, n, "one_minus", 1.f - momentum)}, "added");
    op("Add", {kept, added}, k == 1 ? "running_mean" : "running_var", out_at(k));
  }
  if (out_at(3) != kNoValue) op.reshape(mean, c, "saved_mean", out_at(3));
  if (out_at(4) != kNoValue) op.reshape(var, c, "saved_var", out_at(4));
  return out;
}

bool trilu_as_where(const Graph& g, const Node& n) {
  if (n.op != "Trilu" || n.inputs.empty() || n.outputs.size() != 1) return false;
  const Value& x = g.value(n.in(0));
  if (x.is_const() || x.shape.size() < 2) return false;  // (a constant is folded)
  if (x.dtype != DType::f32 && x.dtype != DType::i64 && x.dtype != DType::boolean) return false;
  return x.shape[x.shape.size() - 2] * x.shape.back() <= kMaxTriluMask;
}

std::vector<Node> expand_trilu(Graph& g, const Node& n) {
  const Value& x = g.value(n.in(0));
  const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  const DType dt = x.dtype;
  const bool upper = n.attr_i("upper", 1) != 0;
  std::vector<Node> out;
  Emitter op{g, n, out};
  ValueId kept;
  if (n.in(1) == kNoValue || g.value(n.in(1)).is_const()) {
    const int64_t k = n.in(1) == kNoValue ? 0 : *g.value(n.in(1)).constant->data<int64_t>();
    Tensor mask(DType::boolean, {rows, cols});
    uint8_t* m = mask.data<uint8_t>();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) m[i * cols + j] = upper ? j - i >= k : j - i <= k;
    kept = const_for(g, n, "kept", std::move(mask));
  } else {  // k computed: the diagonal offsets j - i compared with it per run
    Tensor diag(DType::i64, {rows, cols});
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) diag.data<int64_t>()[i * cols + j] = j - i;
    kept = op(upper ? "GreaterOrEqual" : "LessOrEqual",
              {const_for(g, n, "diagonals", std::move(diag)), n.in(1)}, "kept");
  }
  Tensor zero(dt, {});  // (zero-filled)
  op("Where", {kept, n.in(0), const_for(g, n, "zero", std::move(zero))}, "y", n.outputs[0]);
  return out;
}

namespace {
bool has_extra_outputs(const Node& n) {
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) return true;
  return false;
}

// Inference drops nothing (infer_dropout refuses training): y = x, the mask all true.
std::vector<Node> dropout_mask(Graph& g, const Node& n) {
  std::vector<Node> out;
  Emitter op{g, n, out};
  const Shape xs = g.value(n.in(0)).shape;
  if (n.outputs[0] != kNoValue) op("Identity", {n.in(0)}, "y", n.outputs[0]);
  Tensor t(DType::boolean, {});
  *t.data<uint8_t>() = 1;
  op("Expand", {const_for(g, n, "true", std::move(t)), op.ints("shape", xs)}, "mask", n.outputs[1]);
  return out;
}

// LayerNormalization's Mean and InvStdDev outputs: ONNX's function body over the normalised
// dims beside the normalisation itself (which keeps only Y).
std::vector<Node> layer_norm_statistics(Graph& g, const Node& n) {
  std::vector<Node> out;
  Node norm = n;
  norm.outputs.resize(1);
  out.push_back(std::move(norm));
  Emitter op{g, n, out};
  const int64_t axis = n.attr_i("axis", 0), dims = n.attr_i("norm_dims", 1);
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < axis + dims; ++d) axes.push_back(d);
  const ValueId ax = op.ints("axes", axes);
  const ValueId mean = op("ReduceMean", {n.in(0), ax}, "mean", n.outputs[1]);
  if (n.outputs.size() > 2 && n.outputs[2] != kNoValue) {
    const ValueId d = op("Sub", {n.in(0), mean}, "centred");
    const ValueId var = op("ReduceMean", {op("Mul", {d, d}, "squared"), ax}, "variance");
    const ValueId eps = f32(g, n, "epsilon", n.attr_f("epsilon", 1e-5f));
    const ValueId sd = op("Sqrt", {op("Add", {var, eps}, "var_eps")}, "std");
    op("Reciprocal", {sd}, "inv_std", n.outputs[2]);
  }
  return out;
}
}  // namespace

bool expand_at_inference(const Graph& g, const Node& n) {
  if (n.op == "Dropout") return n.outputs.size() > 1 && n.outputs[1] != kNoValue;
  if (n.op == "LayerNormalization" && has_extra_outputs(n)) return n.outputs[0] != kNoValue;
  if (batch_norm_training(g, n)) return true;
  return computed_affine(g, n) || trilu_as_where(g, n);
}

std::vector<Node> expand_inferred(Graph& g, const Node& n) {
  if (n.op == "Trilu") return expand_trilu(g, n);
  if (n.op == "Dropout") return dropout_mask(g, n);
  if (n.op == "LayerNormalization" && has_extra_outputs(n)) return layer_norm_statistics(g, n);
  if (batch_norm_training(g, n)) return expand_batch_norm_training(g, n);
  return expand_computed_affine(g, n);
}

bool expand_function_op(Graph& g, Node& n, std::vector<Node>& out) {
  if (n.op == "Scatter") {  // (deprecated in opset 11 for its new name)
    n.op = "ScatterElements";
    return false;
  }
  if (n.op == "Shrink")
    shrink(g, n, out);
  else if (n.op == "MeanVarianceNormalization")
    mean_variance_normalization(g, n, out);
  else if (n.op == "EyeLike")
    eye_like(g, n, out);
  else if (n.op == "Compress")
    compress(g, n, out);
  else if (n.op == "ReverseSequence")
    reverse_sequence(g, n, out);
  else if (n.op == "HannWindow")
    window(g, n, out, 0.5f, 0.5f, 0.f);
  else if (n.op == "HammingWindow")  // (a0 = 25 / 46)
    window(g, n, out, 25.f / 46.f, 21.f / 46.f, 0.f);
  else if (n.op == "BlackmanWindow")
    window(g, n, out, 0.42f, 0.5f, 0.08f);
  else
    return false;
  return true;
}

}  // namespace kiln
