// Forms of ops that have no kernel of their own, rewritten into ops that have one: Max / Min /
// Mean / Sum of one or of three and more operands into chains of two-operand ops (the broadcast
// kernel), Clip with computed bounds into Max then Min, Gemm forms the fc kernel does not take
// (computed B, transA, a C that is not a constant row) into Transpose / MatMul / Gemm / Mul /
// Add, Softmax / LogSoftmax over a middle axis between two Transposes, Tile into Concats, and a
// Split that the channel rewrites left (any axis, any rank) into one Slice per output (the
// block-copy kernel). Each computes what the original does (Mean: the sum, then one division by
// n). Also the Squeeze / Unsqueeze views around lifted 1-D convs (graph/canonicalize.cpp) are
// moved out of the way of folding and fusion, or dropped; a rank-2 BatchNormalization becomes
// the Mul / Add of its last-dim constants, and such last-dim ops move ahead of the views between
// them and a Linear, into whose epilogue they fuse. A Transpose that moves only axes of size 1
// becomes a Reshape.
#include "graph/canonicalize.h"
#include "graph/infer.h"
#include "graph/passes.h"
#include "graph/post_ops.h"

namespace kiln {
namespace {

Node make(const Node& n, const std::string& op, std::vector<ValueId> inputs, int part) {
  Node x;
  x.name = n.name + "_" + op + std::to_string(part);
  x.op = op;
  x.inputs = std::move(inputs);
  return x;
}

ValueId scalar_const(Graph& g, const std::string& base, float v) {
  Tensor t(DType::f32, {});
  *t.data<float>() = v;
  return g.add_const(unique_value_name(g, base), t);
}

// Every operand present (optional ones may be absent) is f32, and so is the first output.
bool all_f32(const Graph& g, const Node& n, bool optional = false) {
  for (ValueId v : n.inputs)
    if (v == kNoValue ? !optional : g.value(v).dtype != DType::f32) return false;
  return n.in(0) != kNoValue && !n.outputs.empty() && n.outputs[0] != kNoValue;
}

// Sum whose operands all have the output's shape runs as one elementwise kernel: kept.
bool same_shape_sum(const Graph& g, const Node& n) {
  const Shape& y = g.value(n.outputs[0]).shape;
  for (ValueId v : n.inputs)
    if (g.value(v).shape != y) return false;
  return true;
}

bool rewrite_variadic(Graph& g, std::vector<Node>& nodes, const Node& n) {
  const bool mean = n.op == "Mean";
  if ((n.op != "Max" && n.op != "Min" && n.op != "Sum" && !mean) || n.inputs.size() == 2 ||
      n.outputs.size() != 1 || !all_f32(g, n) || (n.op == "Sum" && same_shape_sum(g, n)))
    return false;
  const ValueId y = n.outputs[0];
  if (n.inputs.size() == 1) {  // the operand itself (removed with the other identities)
    emit_node(g, nodes, make(n, "Identity", {n.inputs[0]}, 0), "", y);
    return true;
  }
  const std::string op = n.op == "Max" || n.op == "Min" ? n.op : "Add";
  ValueId acc = n.inputs[0];
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    const bool last = k + 1 == n.inputs.size() && !mean;
    acc = emit_node(g, nodes, make(n, op, {acc, n.inputs[k]}, int(k)), n.name + "_acc",
                    last ? y : kNoValue);
  }
  if (mean)
    emit_node(g, nodes,
              make(n, "Div", {acc, scalar_const(g, n.name + "_count", float(n.inputs.size()))}, 0),
              "", y);
  return true;
}

// Clip(x, lo, hi) with a computed bound: Min(Max(x, lo), hi) (NaN propagates through both, as
// through Clip; lo > hi gives hi, as ONNX's Clip).
bool rewrite_clip(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Clip" || n.outputs.size() != 1 || !all_f32(g, n, true)) return false;
  const ValueId lo = n.in(1), hi = n.in(2);
  const bool computed =
      (lo != kNoValue && !g.value(lo).is_const()) || (hi != kNoValue && !g.value(hi).is_const());
  if (!computed) return false;  // constant bounds: the elementwise kernel's clip
  ValueId x = n.inputs[0];
  if (lo != kNoValue)
    x = emit_node(g, nodes, make(n, "Max", {x, lo}, 0), n.name + "_lo",
                  hi == kNoValue ? n.outputs[0] : kNoValue);
  if (hi != kNoValue) emit_node(g, nodes, make(n, "Min", {x, hi}, 0), "", n.outputs[0]);
  return true;
}

// Split into one Slice per output (sizes from the inferred output shapes).
bool rewrite_split(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Split" || n.in(0) == kNoValue || g.value(n.in(0)).dtype != DType::f32) return false;
  const int64_t rank = int64_t(g.value(n.in(0)).shape.size());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  int64_t at = 0;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k] == kNoValue) return false;
    const int64_t len = g.value(n.outputs[k]).shape[size_t(axis)];
    Node s = make(n, "Slice", {n.inputs[0]}, int(k));
    for (int64_t v : {at, at + len, axis})
      s.inputs.push_back(g.add_const(unique_value_name(g, s.name + "_arg"), ints_tensor({v})));
    emit_node(g, nodes, std::move(s), "", n.outputs[k]);
    at += len;
  }
  return true;
}

// Gemm -> [Transpose A] -> MatMul with [Transpose] B (computed B) or Gemm without C (constant
// B: the fc kernel) -> [Mul alpha] -> [Add beta * C], where the fc kernel would refuse it.
bool rewrite_gemm(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Gemm" || n.outputs.size() != 1 || !all_f32(g, n, true) || n.in(1) == kNoValue ||
      n.has("post_ops"))
    return false;
  const ValueId a = n.in(0), b = n.in(1), c = n.in(2), y = n.outputs[0];
  const bool trans_a = n.attr_i("transA", 0) != 0, trans_b = n.attr_i("transB", 0) != 0;
  const float alpha = n.attr_f("alpha", 1.f), beta = n.attr_f("beta", 1.f);
  const bool b_const = g.value(b).is_const();
  const int64_t cols = g.value(y).shape.back();
  const bool c_row =
      c == kNoValue || (g.value(c).is_const() &&
                        (g.value(c).shape == Shape{cols} || g.value(c).shape == Shape{1, cols}));
  if (b_const && !trans_a && c_row) return false;  // the fc kernel's form
  auto transpose = [&](ValueId v, int part) {
    Node t = make(n, "Transpose", {v}, part);
    t.attrs["perm"] = attr_ints({1, 0});
    return emit_node(g, nodes, std::move(t), n.name + "_t");
  };
  const ValueId a2 = trans_a ? transpose(a, 0) : a;
  const bool scale = !b_const && alpha != 1.f;
  const bool out_last = c == kNoValue && !scale;
  ValueId p;
  if (b_const) {
    Node m = make(n, "Gemm", {a2, b}, 0);
    m.attrs["transB"] = attr_i(trans_b);
    m.attrs["alpha"] = attr_f(alpha);
    p = emit_node(g, nodes, std::move(m), n.name + "_ab", out_last ? y : kNoValue);
  } else {
    const ValueId b2 = trans_b ? transpose(b, 1) : b;
    p = emit_node(g, nodes, make(n, "MatMul", {a2, b2}, 0), n.name + "_ab",
                  out_last ? y : kNoValue);
  }
  if (scale)
    p = emit_node(g, nodes, make(n, "Mul", {p, scalar_const(g, n.name + "_alpha", alpha)}, 0),
                  n.name + "_scaled", c == kNoValue ? y : kNoValue);
  if (c != kNoValue) {
    ValueId c2 = c;
    if (beta != 1.f)
      c2 = emit_node(g, nodes, make(n, "Mul", {c, scalar_const(g, n.name + "_beta", beta)}, 1),
                     n.name + "_c");
    emit_node(g, nodes, make(n, "Add", {p, c2}, 0), "", y);
  }
  return true;
}

// Softmax / LogSoftmax over an axis that is neither the last nor a 4-D tensor's channels (the
// kernels' forms) -> Transpose that axis last, the op over the last axis, Transpose back.
bool rewrite_softmax_axis(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if ((n.op != "Softmax" && n.op != "LogSoftmax") || n.outputs.size() != 1 || !all_f32(g, n) ||
      n.attr_i("coerce_2d", 0) != 0)
    return false;
  const int64_t rank = int64_t(g.value(n.in(0)).shape.size());
  int64_t axis = n.attr_i("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1 || (rank == 4 && axis == 1)) return false;
  std::vector<int64_t> perm, back(size_t(rank), 0);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d = 0; d < rank; ++d) back[size_t(perm[size_t(d)])] = d;
  Node t = make(n, "Transpose", {n.inputs[0]}, 0);
  t.attrs["perm"] = attr_ints(perm);
  Node m = make(n, n.op, {emit_node(g, nodes, std::move(t), n.name + "_t")}, 0);
  m.attrs["axis"] = attr_i(-1);
  Node u = make(n, "Transpose", {emit_node(g, nodes, std::move(m), n.name + "_last")}, 1);
  u.attrs["perm"] = attr_ints(back);
  emit_node(g, nodes, std::move(u), "", n.outputs[0]);
  return true;
}

// Tile(x, repeats) of an f32 tensor with constant repeats -> one Concat of r copies per axis
// repeated r > 1 times (the concat / block-copy kernels).
bool rewrite_tile(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Tile" || n.outputs.size() != 1 || n.in(0) == kNoValue ||
      g.value(n.in(0)).dtype != DType::f32 || n.outputs[0] == kNoValue)
    return false;
  const auto r = ints_of(g, n, 1);
  if (!r) return false;
  const std::vector<int64_t>& reps = *r;
  int last = -1;
  for (size_t d = 0; d < reps.size(); ++d)
    if (reps[d] > 1) last = int(d);
  ValueId x = n.inputs[0];
  if (last < 0) {  // no repeat: the input itself
    emit_node(g, nodes, make(n, "Identity", {x}, 0), "", n.outputs[0]);
    return true;
  }
  for (int d = 0; d <= last; ++d) {
    if (reps[size_t(d)] <= 1) continue;
    Node c = make(n, "Concat", std::vector<ValueId>(size_t(reps[size_t(d)]), x), d);
    c.attrs["axis"] = attr_i(d);
    x = emit_node(g, nodes, std::move(c), n.name + "_tile", d == last ? n.outputs[0] : kNoValue);
  }
  return true;
}

// A Transpose that moves only axes of size 1 leaves every element where it was: a Reshape (a
// view), not a copy. (The 3-D rewrites' frame transposes of a one-channel volume [N, 1, D, H, W]
// or of a 3-D SE block's pooled [N, C, 1, 1, 1]; ECA's and coordinate attention's permutes of
// [N, C, 1, 1].)
bool rewrite_unit_transpose(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Transpose" || n.outputs.size() != 1 || n.in(0) == kNoValue ||
      n.outputs[0] == kNoValue || !g.value(n.in(0)).shape_known ||
      !g.value(n.outputs[0]).shape_known)
    return false;
  const Shape& s = g.value(n.in(0)).shape;
  std::vector<int64_t> reverse(s.size());
  for (size_t i = 0; i < s.size(); ++i) reverse[i] = int64_t(s.size() - 1 - i);
  const std::vector<int64_t> perm = n.attr_ints("perm", reverse);
  if (perm.size() != s.size()) return false;
  int64_t last = -1;  // the last input axis of size > 1 met in output order
  for (int64_t a : perm) {
    if (a < 0 || a >= int64_t(s.size())) return false;
    if (s[size_t(a)] == 1) continue;
    if (a < last) return false;
    last = a;
  }
  Emitter{g, n, nodes}.reshape(n.inputs[0], g.value(n.outputs[0]).shape, "unit", n.outputs[0]);
  return true;
}

// Moves ops ahead of the views they read, until none moves: try(prod, cons, i) returns the slot
// of node i's operand that a view node (Squeeze, Reshape, ...) produces when op(view(z)) may run
// as view(op(z)), or -1. The pair swaps in place in the node order (the op's other operands are
// constants), the op's output renamed base + suffix. Returns the number moved.
template <class Try>
int move_before_views(Graph& g, const char* suffix, Try&& try_move) {
  int moved = 0;
  for (bool again = true; again;) {
    again = false;
    const std::vector<int> prod = g.producers();
    const std::vector<std::vector<int>> cons = g.consumers();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const int at = try_move(prod, cons, i);
      if (at < 0) continue;
      Node& n = g.nodes[i];
      Node& view = g.nodes[size_t(prod[size_t(n.inputs[size_t(at)])])];
      // view: v(z) -> x, n: op(x) -> y   becomes   view: op(z) -> t, n: v(t) -> y.
      const ValueId z = view.inputs[0], y = n.outputs[0];
      const ValueId t = g.add_value(unique_value_name(g, g.value(y).name + suffix));
      std::swap(view, n);  // n now holds the view, `view` the op
      view.inputs[size_t(at)] = z;
      view.outputs[0] = t;
      n.inputs[0] = t;
      n.outputs[0] = y;
      infer_node(g, view);
      infer_node(g, n);
      ++moved;
      again = true;
      break;  // producers changed
    }
  }
  return moved;
}

// BatchNormalization of a rank-2 [N, C] (BatchNorm1d after a Linear, on flattened tokens as
// LeViT writes it): its channel axis is the last one, so it is y = x * a + b with [C]
// constants (batchnorm_affine), which broadcast along the last dim and fuse into the Linear's
// epilogue; as a BatchNormalization it ran one tile per element.
bool rewrite_last_dim_bn(Graph& g, std::vector<Node>& nodes, const Node& n) {
  std::vector<float> a, b;
  if (n.op != "BatchNormalization" || n.outputs.size() != 1 || n.in(0) == kNoValue ||
      g.value(n.in(0)).shape.size() != 2 || !batchnorm_affine(g, n, &a, &b))
    return false;
  auto vec = [&](const char* part, const std::vector<float>& v) {
    Tensor t(DType::f32, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.data<float>());
    return g.add_const(unique_value_name(g, n.name + "_" + part), std::move(t));
  };
  const ValueId s =
      emit_node(g, nodes, make(n, "Mul", {n.inputs[0], vec("a", a)}, 0), n.name + "_scaled");
  emit_node(g, nodes, make(n, "Add", {s, vec("b", b)}, 0), "", n.outputs[0]);
  return true;
}

// Is k (a constant) broadcast along the last dim only: every dim but its last is 1 (a scalar
// too)?
bool last_dim_const(const Graph& g, ValueId k) {
  if (k == kNoValue || !g.value(k).is_const() || g.value(k).dtype != DType::f32) return false;
  const Shape& s = g.value(k).shape;
  for (size_t d = 0; d + 1 < s.size(); ++d)
    if (s[d] != 1) return false;
  return true;
}

// A unary elementwise op (other operands constant), or Add / Sub / Mul / Div of a last-dim
// constant, on the only output of a view (Reshape, Flatten, Squeeze, Unsqueeze: row-major order
// kept) that keeps the last dim (so every element keeps its last-dim index) runs before the view
// instead, next to the producer whose epilogue can take it (a Linear's MatMul before LeViT's
// flatten to [N * HW, C]). Returns the number moved.
int hoist_last_dim_ops(Graph& g) {
  return move_before_views(g, "_unviewed", [&](const auto& prod, const auto& cons, size_t i) {
    const Node& n = g.nodes[i];
    if (n.outputs.size() != 1 || n.inputs.empty() || !all_f32(g, n, true)) return -1;
    // The computed operand's slot (0, or 1 for Add / Mul with the constant first); the others
    // are constants.
    int at = -1;
    const bool binary = n.op == "Add" || n.op == "Mul" || n.op == "Sub" || n.op == "Div";
    if (binary) {
      const bool commutes = n.op == "Add" || n.op == "Mul";
      if (n.inputs.size() == 2)
        at = last_dim_const(g, n.in(1)) ? 0 : commutes && last_dim_const(g, n.in(0)) ? 1 : -1;
    } else if (n.op != "Quantize" && is_unary_elementwise_op(n.op)) {
      at = 0;
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (n.in(k) != kNoValue && !g.value(n.in(k)).is_const()) at = -1;
    }
    if (at < 0) return -1;
    const ValueId v = n.in(size_t(at));
    const int p = prod[size_t(v)];
    if (p < 0 || g.is_output(v) || cons[size_t(v)].size() != 1) return -1;
    const Node& r = g.nodes[size_t(p)];
    if ((r.op != "Reshape" && r.op != "Flatten" && r.op != "Squeeze" && r.op != "Unsqueeze") ||
        r.outputs.size() != 1 || r.in(0) == kNoValue)
      return -1;
    const Value& z = g.value(r.in(0));
    if (z.dtype != DType::f32 || g.value(n.outputs[0]).shape != g.value(v).shape) return -1;
    if (binary) {  // the constant (1 or the output's last dim) must run along z's last dim too
      const Shape& ks = g.value(n.in(size_t(1 - at))).shape;
      if (ks.size() > z.shape.size() ||
          (!ks.empty() && ks.back() != 1 && ks.back() != z.shape.back()))
        return -1;
    }
    return at;
  });
}

// A per-channel op on a Squeeze's only output, where the Squeeze drops a size-1 dim after the
// channels ([N, C, 1, L] -> [N, C, L]: a lifted 1-D conv's output), runs before the Squeeze on
// the 4-D tensor instead: BatchNormalization (then folded into the conv), unary elementwise
// ops (then fused into its epilogue) and global pools ([N, C, 1, 1], squeezed to [N, C, 1]). The
// swapped pair stays in place in the node order (the op's other inputs are constants). Returns the
// number moved.
int sink_squeezes(Graph& g) {
  return move_before_views(g, "_4d", [&](const auto& prod, const auto& cons, size_t i) {
    const Node& n = g.nodes[i];
    const bool bn = n.op == "BatchNormalization" && n.outputs.size() == 1;
    const bool gp = n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
    if ((!bn && !gp && !is_unary_elementwise_op(n.op)) || n.in(0) == kNoValue ||
        n.outputs.size() != 1 || g.value(n.in(0)).dtype != DType::f32)
      return -1;
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.in(k) != kNoValue && !g.value(n.in(k)).is_const()) return -1;
    const ValueId v = n.in(0);
    const int p = prod[size_t(v)];
    if (p < 0 || g.nodes[size_t(p)].op != "Squeeze" || g.is_output(v) ||
        cons[size_t(v)].size() != 1)
      return -1;
    const Node& s = g.nodes[size_t(p)];
    if (s.in(0) == kNoValue) return -1;
    const Shape& zs = g.value(s.in(0)).shape;
    // Exactly axis 2 (the same Squeeze then fits the op's 4-D output too).
    const auto axes = ints_of(g, s, 1);
    if (zs.size() != 4 || zs[2] != 1 || !axes || axes->size() != 1 ||
        ((*axes)[0] != 2 && (*axes)[0] != -2))
      return -1;
    return 0;
  });
}

// Unsqueeze(Squeeze(z)) with z's own shape is z (the same elements in the same row-major order):
// what lifting 1-D convs to 2-D (graph/canonicalize.cpp) leaves between two of them.
int drop_squeeze_pairs(Graph& g) {
  const std::vector<int> prod = g.producers();
  std::vector<ValueId> alias(g.values.size(), kNoValue);
  int dropped = 0;
  for (Node& n : g.nodes) {
    if (n.op != "Unsqueeze" || n.outputs.size() != 1 || n.in(0) == kNoValue ||
        g.is_output(n.outputs[0]))
      continue;
    const int p = prod[size_t(n.in(0))];
    if (p < 0 || g.nodes[size_t(p)].op != "Squeeze") continue;
    const ValueId z = g.nodes[size_t(p)].in(0);
    if (z == kNoValue || g.value(z).shape != g.value(n.outputs[0]).shape) continue;
    alias[size_t(n.outputs[0])] = z;
    n.op.clear();
    ++dropped;
  }
  if (!dropped) return 0;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    if (n.op.empty()) continue;
    for (ValueId& v : n.inputs)
      if (v != kNoValue && alias[size_t(v)] != kNoValue) v = alias[size_t(v)];
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  return dropped;
}

}  // namespace

int rewrite_forms(Graph& g) {
  const int pairs = sink_squeezes(g) + drop_squeeze_pairs(g);
  const int forms = rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    return rewrite_variadic(g, nodes, n) || rewrite_clip(g, nodes, n) ||
           rewrite_gemm(g, nodes, n) || rewrite_softmax_axis(g, nodes, n) ||
           rewrite_tile(g, nodes, n) || rewrite_last_dim_bn(g, nodes, n) ||
           rewrite_unit_transpose(g, nodes, n);
  });
  return pairs + forms + hoist_last_dim_ops(g);
}

int rewrite_splits(Graph& g) {
  return rewrite_nodes(
      g, [&](std::vector<Node>& nodes, const Node& n) { return rewrite_split(g, nodes, n); });
}

}  // namespace kiln
