#include "graph/function_ops.h"

#include <algorithm>
#include <cmath>

#include "graph/canonicalize.h"

namespace kiln {
namespace {

ValueId f32(Graph& g, const Node& n, const char* part, float v) {
  Tensor t(DType::f32, {});
  *t.data<float>() = v;
  return const_for(g, n, part, std::move(t));
}

ValueId i64s(Graph& g, const Node& n, const char* part, std::vector<int64_t> v) {
  return const_for(g, n, part, ints_tensor(v));
}

void require(const Node& n, size_t inputs, size_t outputs) {
  if (n.inputs.size() != inputs || n.outputs.size() != outputs)
    n.fail(Code::invalid_model, "expects " + std::to_string(inputs) + " input(s) and " +
                                    std::to_string(outputs) + " output(s)");
  for (ValueId v : n.inputs)
    if (v == kNoValue) n.fail(Code::invalid_model, "an input is missing");
  if (n.outputs[0] == kNoValue) n.fail(Code::invalid_model, "its output is missing");
}

// Nodes appended to `out` named after n (canonicalize.h append_node), and int64 scalars.
struct Emit {
  Graph& g;
  const Node& n;
  std::vector<Node>& out;
  ValueId operator()(const char* o, std::vector<ValueId> in, const char* part,
                     ValueId y = kNoValue) {
    return append_node(g, n, o, std::move(in), y, part, out);
  }
  ValueId scalar(const char* part, int64_t v) {
    Tensor t(DType::i64, {});
    *t.data<int64_t>() = v;
    return const_for(g, n, part, std::move(t));
  }
};

void shrink(Graph& g, const Node& n, std::vector<Node>& out) {
  require(n, 1, 1);
  const float lambd = n.attr_f("lambd", 0.5f), bias = n.attr_f("bias", 0.f);
  if (!std::isfinite(lambd) || !std::isfinite(bias))
    n.fail(Code::invalid_model, "lambd and bias must be finite");
  Emit op{g, n, out};
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
  Emit op{g, n, out};
  const ValueId x = n.in(0), axes = i64s(g, n, "axes", n.attr_ints("axes", {0, 2, 3}));
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
  Emit op{g, n, out};
  const ValueId shape = op("Shape", {n.in(0)}, "shape");
  const ValueId start = op.scalar("start", 0), step = op.scalar("step", 1);
  auto index = [&](int64_t d, const char* part) {  // 0 .. dim d of x
    return op("Range", {start, op("Gather", {shape, op.scalar(part, d)}, part), step}, part);
  };
  const ValueId rows = index(0, "rows"), cols = index(1, "cols");
  const ValueId column = op("Unsqueeze", {rows, i64s(g, n, "column_axis", {1})}, "row_column");
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
  Emit op{g, n, out};
  ValueId x = n.in(0);
  const bool flat = !n.has("axis");
  if (flat) x = op("Reshape", {x, i64s(g, n, "flat", {-1})}, "flat");
  const ValueId nz = op("NonZero", {n.in(1)}, "selected");
  const ValueId idx = op("Squeeze", {nz, i64s(g, n, "squeeze_axes", {0})}, "indices");
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
  Emit op{g, n, out};
  const ValueId shape = op("Shape", {n.in(0)}, "shape");
  const ValueId one = op.scalar("one", 1);
  const ValueId steps = op(
      "Range", {op.scalar("zero", 0), op("Gather", {shape, op.scalar("time", ta)}, "steps"), one},
      "time_index");
  // (The step index along the time axis, the lengths along the batch axis: [T, B] or [B, T].)
  const ValueId t = op("Unsqueeze", {steps, i64s(g, n, "time_axes", {1 - ta})}, "t");
  const ValueId len = op("Unsqueeze", {n.in(1), i64s(g, n, "batch_axes", {1 - ba})}, "len");
  const ValueId back = op("Sub", {op("Sub", {len, one}, "last"), t}, "reversed");
  const ValueId idx = op("Where", {op("Less", {t, len}, "inside"), back, t}, "index");
  // [dim 0, dim 1, 1, ...] (the input's rank), then the input's shape.
  const ValueId ones =
      op("ConstantOfShape",
         {op("Unsqueeze",
             {op("Sub", {op("Size", {shape}, "rank"), op.scalar("two", 2)}, "inner_rank"),
              i64s(g, n, "rank_axes", {0})},
             "inner_count")},
         "inner_ones");
  Tensor fill(DType::i64, {1});
  *fill.data<int64_t>() = 1;
  out.back().attrs["value"] = attr_t(std::move(fill));
  const ValueId lead =
      op("Slice", {shape, i64s(g, n, "lead_begin", {0}), i64s(g, n, "lead_end", {2})}, "leading");
  const ValueId rshape = op("Concat", {lead, ones}, "index_shape");
  out.back().attrs["axis"] = attr_i(0);
  const ValueId full = op("Expand", {op("Reshape", {idx, rshape}, "index_r"), shape}, "index_full");
  op("GatherElements", {n.in(0), full}, "y", n.outputs[0]);
  out.back().attrs["axis"] = attr_i(ta);
}

}  // namespace

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
  else
    return false;
  return true;
}

}  // namespace kiln
