// fuse_epilogues: elementwise consumers of a Conv/Gemm output become the node's post-ops; so do
// unary ones of a BatchNormalization (the pre-activation BN+Relu that fold_batchnorm could not
// fold into a conv: one pass over the tensor instead of two), of a MatMul by a constant matrix
// (a Linear layer on [.., tokens, C]: its bias Add, activation, per-channel scale and residual in
// the FC kernel's epilogue instead of one pass each), and of standalone elementwise ops (Add,
// Mul, a unary op: a chain of them one pass) and of Layer / Instance / GroupNormalization.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/canonicalize.h"
#include "graph/passes.h"
#include "graph/post_ops.h"

namespace kiln {
namespace {

// A MatMul of an f32 activation (rank >= 2) by a constant 2-D f32 matrix: the FC kernels'
// (inputs past B: the post-ops' fused into it).
bool is_linear(const Graph& g, const Node& n) {
  if (n.op != "MatMul" || n.in(0) == kNoValue || n.in(1) == kNoValue) return false;
  const Value &a = g.value(n.in(0)), &b = g.value(n.in(1));
  return !a.is_const() && a.dtype == DType::f32 && a.shape.size() >= 2 && b.is_const() &&
         b.dtype == DType::f32 && b.shape.size() == 2;
}

// A standalone elementwise node whose kernels (the glue eltwise kernel, the broadcast binary
// kernel) and reference run a chain of unary post-ops after it: an f32 Add / Sub / Mul / Div,
// or a unary op of the glue kernels' (not the quantizing ones: their u8 kernel takes none).
bool is_elementwise_target(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue ||
      g.value(n.outputs[0]).dtype != DType::f32 || n.op == "QuantizeDequantize" ||
      n.op == "Quantize")
    return false;
  for (ValueId v : n.inputs)
    if (v == kNoValue || g.value(v).dtype != DType::f32) return false;
  if (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") return n.inputs.size() == 2;
  return elementwise_post_op(g, n).has_value();
}

// Layer / Instance / GroupNormalization of f32: their kernels (the glue's row kernels and the
// reference) apply one-input post-ops of any glue kind to y (GroupNorm + SiLU in diffusion
// U-Nets, InstanceNorm + ReLU in style-transfer and GAN generators).
bool is_norm_target(const Graph& g, const Node& n) {
  return (n.op == "LayerNormalization" || n.op == "InstanceNormalization" ||
          n.op == "GroupNormalization") &&
         n.outputs.size() == 1 && n.outputs[0] != kNoValue &&
         g.value(n.outputs[0]).dtype == DType::f32;
}

// `residual`: the fused op is an Add reading another tensor (Conv, Gemm and such a MatMul).
bool is_fusion_target(const Graph& g, const Node& n, bool residual = false) {
  return n.op == "Conv" || n.op == "Gemm" || (!residual && n.op == "BatchNormalization") ||
         is_linear(g, n) || (!residual && (is_elementwise_target(g, n) || is_norm_target(g, n)));
}

// Whether constant c scales / shifts the last dim of y only: shape [N] or [1, .., 1, N].
bool last_dim_vector(const Value& c, const Shape& y) {
  if (!c.is_const() || c.dtype != DType::f32 || y.empty() || c.shape.size() > y.size())
    return false;
  const int64_t n = shape_numel(c.shape);
  return n == 1 || (!c.shape.empty() && c.shape.back() == y.back() && n == y.back());
}

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), prod_(g.producers()), cons_(g.consumers()) {}

  int run() {
    int fused = 0;
    for (size_t j = 0; j < g_.nodes.size(); ++j) fused += try_fuse(int(j));
    for (size_t j = 0; j < g_.nodes.size(); ++j) fused += try_fuse_concat(int(j));
    std::vector<Node> kept;
    for (Node& n : g_.nodes)
      if (!n.op.empty()) kept.push_back(std::move(n));
    g_.nodes = std::move(kept);
    return fused;
  }

 private:
  // The fusion target producing v whose only consumer is `user`, or -1.
  int target_for(ValueId v, int user, bool residual = false) const {
    if (v == kNoValue || g_.is_output(v)) return -1;
    int p = prod_[size_t(v)];
    if (p < 0 || !is_fusion_target(g_, g_.nodes[size_t(p)], residual)) return -1;
    const auto& c = cons_[size_t(v)];
    if (c.size() != 1 || c[0] != user) return -1;
    // Only the primary output may be fused (Conv/Gemm have one anyway).
    if (g_.nodes[size_t(p)].outputs[0] != v) return -1;
    const auto ops = g_.nodes[size_t(p)].attrs.find("post_ops");
    if (ops != g_.nodes[size_t(p)].attrs.end() && int(ops->second.strings.size()) >= kMaxPostOps)
      return -1;
    return p;
  }

  // Moves target p into slot j (the consumer's position, where every operand of both nodes is
  // available), appends `op`, and makes the consumer's output its output.
  void fuse(int p, int j, const PostOp& op, std::vector<ValueId> extra) {
    Node fused = std::move(g_.nodes[size_t(p)]);
    g_.nodes[size_t(p)].op.clear();  // tombstone
    // Extra inputs start at index 3 for Conv, Gemm and MatMul (after the optional bias / C;
    // MatMul's slot 2 stays empty); BatchNormalization gets none (unary post-ops only).
    // (An elementwise target takes unary post-ops only: its inputs stay as they are.)
    const bool slots = fused.op == "Conv" || fused.op == "Gemm" || fused.op == "MatMul";
    if (slots && fused.inputs.size() < 3) fused.inputs.resize(3, kNoValue);
    append_post_op(fused, op, extra);
    ValueId out = g_.nodes[size_t(j)].outputs[0];
    fused.outputs[0] = out;
    prod_[size_t(out)] = j;
    for (ValueId v : fused.inputs)
      if (v != kNoValue)
        for (int& c : cons_[size_t(v)])
          if (c == p) c = j;
    g_.nodes[size_t(j)] = std::move(fused);
  }

  int try_fuse(int j) {
    const Node& n = g_.nodes[size_t(j)];
    if (n.op.empty() || n.outputs.empty() || n.inputs.empty()) return 0;
    if ((n.op == "Add" || n.op == "Sub" || n.op == "Mul") && n.inputs.size() == 2 &&
        (try_fuse_vector(j) || try_fuse_scalar(j)))
      return 1;
    if (n.op == "Add" && n.inputs.size() == 2) return try_fuse_add(j);
    if (n.op == "PRelu" && n.inputs.size() == 2) return try_fuse_prelu(j);
    if (n.op == "Mul" && n.inputs.size() == 2) return try_fuse_swish(j);
    // The glue kernels' ops (Tanh, Exp, Neg, Pow by a constant, ...) go after elementwise ops
    // only; a quantize-dequantize never does (it may store the uint8 an int8 conv reads).
    const bool qdq = n.op == "QuantizeDequantize" || n.op == "Quantize";
    std::optional<PostOp> op = unary_post_op(g_, n);
    if (!op && !qdq) op = elementwise_post_op(g_, n);
    if (!op) return 0;
    int p = target_for(n.in(0), j);
    if (p < 0) return 0;
    const bool glue =
        is_elementwise_target(g_, g_.nodes[size_t(p)]) || is_norm_target(g_, g_.nodes[size_t(p)]);
    if (glue ? qdq : glue_only(op->kind)) return 0;
    fuse(p, j, *op, {});
    return 1;
  }

  // PRelu(x, slope) with a constant f32 slope: a scalar one is a leaky_relu of any target; one
  // per output channel (dim 1 of a Conv's output, the last of a Gemm's or linear MatMul's) a
  // prelu post-op whose 1-D slope is the extra input.
  int try_fuse_prelu(int j) {
    const Node& n = g_.nodes[size_t(j)];
    const ValueId x = n.inputs[0], sl = n.inputs[1];
    if (x == kNoValue || sl == kNoValue || g_.value(x).dtype != DType::f32) return 0;
    const Value& s = g_.value(sl);
    if (!s.is_const() || s.dtype != DType::f32) return 0;
    const Shape ys = g_.value(n.outputs[0]).shape;
    if (g_.value(x).shape != ys) return 0;
    const int p = target_for(x, j);
    if (p < 0) return 0;
    if (s.constant->numel() == 1) {
      PostOp op;
      op.kind = PostOp::Kind::leaky_relu;
      op.alpha = s.constant->data<float>()[0];
      if (!std::isfinite(op.alpha)) return 0;
      fuse(p, j, op, {});
      return 1;
    }
    const std::string& op_p = g_.nodes[size_t(p)].op;
    const bool conv = op_p == "Conv", fc = op_p == "Gemm" || is_linear(g_, g_.nodes[size_t(p)]);
    if (!(conv || fc) || ys.size() < 2) return 0;
    // Conv: [C] right-aligned onto dim 1 (1s after it); Gemm / MatMul: the last dim.
    const size_t axis = conv ? 1 : ys.size() - 1;
    const Shape& ss = s.shape;
    if (ss.size() > ys.size()) return 0;
    for (size_t k = 0; k < ss.size(); ++k) {
      const size_t dim = ys.size() - ss.size() + k;
      if (ss[k] != (dim == axis ? ys[axis] : 1)) return 0;
    }
    if (s.constant->numel() != ys[axis]) return 0;
    Tensor slope(DType::f32, {ys[axis]});
    std::copy_n(s.constant->data<float>(), ys[axis], slope.data<float>());
    const ValueId v = const_for(g_, n, "slope", std::move(slope));  // (may move g_.values)
    if (size_t(v) >= prod_.size()) prod_.resize(size_t(v) + 1, -1);
    if (size_t(v) >= cons_.size()) cons_.resize(size_t(v) + 1);
    cons_[size_t(v)] = {j};
    PostOp op;
    op.kind = PostOp::Kind::prelu;
    fuse(p, j, op, {v});
    return 1;
  }

  // y = x + c, x - c or x * c (Add / Mul either order) with c a constant along the last dim of
  // a Gemm's or linear MatMul's output (a bias, a per-channel scale) or a scalar (attention's
  // q * d^-0.5): a scale_shift post-op, its scale and shift [N] constants the extra inputs.
  int try_fuse_vector(int j) {
    const Node& n = g_.nodes[size_t(j)];
    for (int k = 0; k < 2; ++k) {
      if (n.op == "Sub" && k == 1) break;
      const ValueId x = n.inputs[size_t(k)], c = n.inputs[size_t(1 - k)];
      if (x == kNoValue || c == kNoValue || g_.value(x).dtype != DType::f32) continue;
      const Shape& ys = g_.value(n.outputs[0]).shape;
      if (g_.value(x).shape != ys || !last_dim_vector(g_.value(c), ys)) continue;
      const int p = target_for(x, j);
      if (p < 0 || (g_.nodes[size_t(p)].op != "Gemm" && g_.nodes[size_t(p)].op != "MatMul"))
        continue;
      const int64_t cn = ys.back();
      Tensor scale(DType::f32, {cn}), shift(DType::f32, {cn});
      // (Read before const_for adds values: it may move them.)
      const float* cv = g_.value(c).constant->data<float>();
      const bool scalar = g_.value(c).constant->numel() == 1;
      for (int64_t i = 0; i < cn; ++i) {
        const bool mul = n.op == "Mul";
        const float v = cv[scalar ? 0 : i];
        scale.data<float>()[i] = mul ? v : 1.f;
        shift.data<float>()[i] = mul ? 0.f : n.op == "Sub" ? -v : v;
      }
      const ValueId sv = const_for(g_, n, "scale", std::move(scale));
      const ValueId tv = const_for(g_, n, "shift", std::move(shift));
      for (ValueId v : {sv, tv}) {
        if (size_t(v) >= prod_.size()) prod_.resize(size_t(v) + 1, -1);
        if (size_t(v) >= cons_.size()) cons_.resize(size_t(v) + 1);
        cons_[size_t(v)] = {j};
      }
      PostOp op;
      op.kind = PostOp::Kind::scale_shift;
      fuse(p, j, op, {sv, tv});
      return 1;
    }
    return 0;
  }

  // y = x + c, x - c, c - x or x * c with c an f32 scalar constant, x from a standalone
  // elementwise op: a linear post-op (x * alpha + beta with alpha 1 or beta 0: exact).
  int try_fuse_scalar(int j) {
    const Node& n = g_.nodes[size_t(j)];
    for (int k = 0; k < 2; ++k) {
      const ValueId x = n.inputs[size_t(k)], c = n.inputs[size_t(1 - k)];
      if (x == kNoValue || c == kNoValue) continue;
      const Value& cv = g_.value(c);
      if (!cv.is_const() || cv.dtype != DType::f32 || cv.constant->numel() != 1 ||
          g_.value(x).shape != g_.value(n.outputs[0]).shape)
        continue;
      const int p = target_for(x, j);
      if (p < 0 || !is_elementwise_target(g_, g_.nodes[size_t(p)])) continue;
      const float v = cv.constant->data<float>()[0];
      PostOp op;
      op.kind = PostOp::Kind::linear;
      op.alpha = n.op == "Mul" ? v : n.op == "Sub" && k == 1 ? -1.f : 1.f;
      op.beta = n.op == "Mul" ? 0.f : n.op == "Sub" && k == 0 ? -v : v;
      fuse(p, j, op, {});
      return 1;
    }
    return 0;
  }

  // Add(a, b) with equal shapes: fuse into the producer of one operand, the other becomes the
  // residual. Prefer the later producer (the earlier value's lifetime is already open).
  int try_fuse_add(int j) {
    const Node& n = g_.nodes[size_t(j)];
    ValueId a = n.inputs[0], b = n.inputs[1];
    if (a == b || g_.value(a).shape != g_.value(b).shape || g_.value(a).dtype != DType::f32)
      return 0;
    int pa = target_for(a, j, true), pb = target_for(b, j, true);
    if (pa < 0 && pb < 0) return 0;
    bool use_a = pb < 0 || (pa >= 0 && pa > pb);
    PostOp op;
    op.kind = PostOp::Kind::add;
    fuse(use_a ? pa : pb, j, op, {use_a ? b : a});
    return 1;
  }

  // The gate of x * gate(x): Sigmoid makes swish; HardSigmoid with ONNX HardSwish's constants
  // (alpha 1/6, beta 0.5: how opsets before 14 export HardSwish) makes hardswish; a Softplus
  // that has absorbed a Tanh (x * tanh(softplus(x)): how opsets before 18 export Mish) mish.
  static std::optional<PostOp::Kind> gated(const Node& gate) {
    if (gate.op == "Sigmoid") return PostOp::Kind::swish;
    if (gate.op == "Softplus") {
      const auto it = gate.attrs.find("post_ops");
      if (it != gate.attrs.end() && it->second.strings == std::vector<std::string>{"tanh"})
        return PostOp::Kind::mish;
    }
    if (gate.op == "HardSigmoid" && std::fabs(gate.attr_f("alpha", 0.2f) - 1.f / 6.f) < 1e-7f &&
        gate.attr_f("beta", 0.5f) == 0.5f)
      return PostOp::Kind::hardswish;
    return std::nullopt;
  }

  // x * gate(x) (gated(), either operand order) where x comes from a fusion target and feeds
  // only the gate and the Mul.
  int try_fuse_swish(int j) {
    const Node& mul = g_.nodes[size_t(j)];
    for (int k = 0; k < 2; ++k) {
      ValueId x = mul.inputs[size_t(k)], s = mul.inputs[size_t(1 - k)];
      if (s == kNoValue || x == kNoValue || g_.is_output(s)) continue;
      int ps = prod_[size_t(s)];
      const std::optional<PostOp::Kind> kind = ps < 0 ? std::nullopt : gated(g_.nodes[size_t(ps)]);
      if (!kind || g_.nodes[size_t(ps)].in(0) != x || cons_[size_t(s)].size() != 1) continue;
      if (g_.is_output(x) || prod_[size_t(x)] < 0) continue;
      int p = prod_[size_t(x)];
      const auto& cx = cons_[size_t(x)];
      if (!is_fusion_target(g_, g_.nodes[size_t(p)]) || cx.size() != 2) continue;
      if (!((cx[0] == ps && cx[1] == j) || (cx[0] == j && cx[1] == ps))) continue;
      g_.nodes[size_t(ps)].op.clear();  // the gate is absorbed
      PostOp op;
      op.kind = *kind;
      cons_[size_t(x)] = {j};
      fuse(p, j, op, {});
      return 1;
    }
    return 0;
  }

  // BatchNormalization j (with its post-ops) reading a channel Concat's output that nothing else
  // reads: the Concat applies the affine map and the post-ops and takes over j's output. It
  // stays where it is (before j): its inputs are ready there and j's consumers come later.
  int try_fuse_concat(int j) {
    Node& bn = g_.nodes[size_t(j)];
    std::vector<float> scale, shift;
    if (bn.op != "BatchNormalization" || bn.outputs.size() != 1 ||
        !batchnorm_affine(g_, bn, &scale, &shift))
      return 0;
    const ValueId x = bn.inputs[0];
    const int p = prod_[size_t(x)];
    if (p < 0 || g_.is_output(x) || cons_[size_t(x)].size() != 1) return 0;
    Node& cat = g_.nodes[size_t(p)];
    if (cat.op != "Concat" || cat.has("affine_scale") || cat.has("post_ops") ||
        cat.outputs.size() != 1 || g_.value(x).shape.size() != 4 ||
        (cat.attr_i("axis", 0) + 4) % 4 != 1)
      return 0;
    cat.attrs["axis"] = attr_i(1);
    cat.attrs["affine_scale"] = attr_floats(std::move(scale));
    cat.attrs["affine_shift"] = attr_floats(std::move(shift));
    for (const char* a : {"post_ops", "post_alpha", "post_beta"})
      if (bn.has(a)) cat.attrs[a] = bn.attrs.at(a);
    const ValueId y = bn.outputs[0];
    cat.outputs[0] = y;
    prod_[size_t(y)] = p;
    for (ValueId v : bn.inputs)
      if (v != kNoValue) std::erase(cons_[size_t(v)], j);
    bn.op.clear();  // tombstone
    return 1;
  }

  Graph& g_;
  std::vector<int> prod_;
  std::vector<std::vector<int>> cons_;
};

// Ops that only move or relabel elements of their input 0 (other inputs constant): a
// one-input elementwise op commutes with them exactly.
bool is_move(const Graph& g, const Node& n) {
  static const char* const kMoves[] = {"Reshape",   "Flatten",      "Squeeze",      "Unsqueeze",
                                       "Transpose", "DepthToSpace", "SpaceToDepth", "Identity"};
  if (std::find(std::begin(kMoves), std::end(kMoves), n.op) == std::end(kMoves)) return false;
  if (n.outputs.size() != 1 || n.in(0) == kNoValue || g.value(n.inputs[0]).dtype != DType::f32)
    return false;
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (n.inputs[k] != kNoValue && !g.value(n.inputs[k]).is_const()) return false;
  return true;
}

// A one-input elementwise op u (its other inputs constant, not a quantizing one) reading a
// chain of moves m1 .. mk (each output read by the next only) of x: u is moved before m1 when
// x's producer would take u as a post-op (YOLOv5's head: Conv -> Reshape -> Transpose ->
// Sigmoid; ESPCN: Conv -> DepthToSpace -> Sigmoid), so that it fuses there instead of running
// as a pass of its own. The elements and their values are the same either way.
int sink_unary_before_moves(Graph& g) {
  int moved = 0;
  std::vector<int> prod = g.producers();
  std::vector<std::vector<int>> cons = g.consumers();
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    Node& u = g.nodes[j];
    if (u.op == "QuantizeDequantize" || u.op == "Quantize" || u.outputs.size() != 1 ||
        u.in(0) == kNoValue)
      continue;
    const std::optional<PostOp> op = elementwise_post_op(g, u);
    if (!op || extra_inputs(op->kind) > 0) continue;
    bool const_rest = true;
    for (size_t k = 1; k < u.inputs.size(); ++k)
      const_rest = const_rest && (u.inputs[k] == kNoValue || g.value(u.inputs[k]).is_const());
    if (!const_rest) continue;
    // Walk back through single-reader moves to x.
    ValueId v = u.inputs[0];
    int first = -1, last = -1;
    while (!g.is_output(v) && cons[size_t(v)].size() == 1 && prod[size_t(v)] >= 0 &&
           is_move(g, g.nodes[size_t(prod[size_t(v)])])) {
      first = prod[size_t(v)];
      if (last < 0) last = first;
      v = g.nodes[size_t(first)].inputs[0];
    }
    if (first < 0 || g.is_output(v) || cons[size_t(v)].size() != 1 || prod[size_t(v)] < 0) continue;
    const Node& p = g.nodes[size_t(prod[size_t(v)])];
    const bool epilogue = p.op == "Conv" || p.op == "Gemm" || is_linear(g, p);
    if (!(epilogue ? !glue_only(op->kind) : is_elementwise_target(g, p) || is_norm_target(g, p)))
      continue;
    // u reads x into a new value t; m1 reads t; mk writes u's output.
    const ValueId y = u.outputs[0];
    const ValueId t = g.add_value(unique_value_name(g, g.value(v).name + "_" + u.op), DType::f32);
    g.value(t).shape = g.value(v).shape;
    g.nodes[size_t(last)].outputs[0] = y;
    u.inputs[0] = v;
    u.outputs[0] = t;
    g.nodes[size_t(first)].inputs[0] = t;
    // u goes right before m1 (the nodes between keep their order: none reads t or y).
    std::rotate(g.nodes.begin() + first, g.nodes.begin() + std::ptrdiff_t(j),
                g.nodes.begin() + std::ptrdiff_t(j) + 1);
    prod = g.producers();
    cons = g.consumers();
    ++moved;
  }
  return moved;
}

}  // namespace

int fuse_epilogues(Graph& g) {
  const int moved = sink_unary_before_moves(g);
  return moved + Fuser(g).run();
}

}  // namespace kiln
