// fuse_epilogues: elementwise consumers of a Conv/Gemm output become the node's post-ops; so do
// unary ones of a BatchNormalization (the pre-activation BN+Relu that fold_batchnorm could not
// fold into a conv: one pass over the tensor instead of two).
#include <cmath>
#include <optional>

#include "graph/passes.h"
#include "graph/post_ops.h"

namespace kiln {
namespace {

// `residual`: the fused op is an Add reading another tensor (Conv and Gemm only).
bool is_fusion_target(const Node& n, bool residual = false) {
  return n.op == "Conv" || n.op == "Gemm" || (!residual && n.op == "BatchNormalization");
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
    if (p < 0 || !is_fusion_target(g_.nodes[size_t(p)], residual)) return -1;
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
    // Extra inputs start at index 3 for both Conv and Gemm (after the optional bias / C);
    // BatchNormalization gets none (unary post-ops only).
    if (fused.inputs.size() < 3) fused.inputs.resize(3, kNoValue);
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
    if (n.op == "Add" && n.inputs.size() == 2) return try_fuse_add(j);
    if (n.op == "Mul" && n.inputs.size() == 2) return try_fuse_swish(j);
    const std::optional<PostOp> op = unary_post_op(g_, n);
    if (!op) return 0;
    int p = target_for(n.in(0), j);
    if (p < 0) return 0;
    fuse(p, j, *op, {});
    return 1;
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
  // (alpha 1/6, beta 0.5: how opsets before 14 export HardSwish) makes hardswish.
  static std::optional<PostOp::Kind> gated(const Node& gate) {
    if (gate.op == "Sigmoid") return PostOp::Kind::swish;
    if (gate.op == "HardSigmoid" && std::fabs(gate.attr_f("alpha", 0.2f) - 1.f / 6.f) < 1e-7f &&
        gate.attr_f("beta", 0.5f) == 0.5f)
      return PostOp::Kind::hardswish;
    return std::nullopt;
  }

  // x * Sigmoid(x) or x * HardSigmoid(x) (gated(), either operand order) where x comes from a
  // fusion target and feeds only the gate and the Mul.
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
      if (!is_fusion_target(g_.nodes[size_t(p)]) || cx.size() != 2) continue;
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

}  // namespace

int fuse_epilogues(Graph& g) {
  return Fuser(g).run();
}

}  // namespace kiln
