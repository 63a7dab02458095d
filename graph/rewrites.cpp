// Pattern rewrites of exported subgraphs into the ops Kiln has fast kernels for (ConvNeXt and
// friends): channels-last regions back to NCHW, decomposed LayerNorm, GroupNorm, GELU and LRN
// into single nodes, per-channel Add/Mul after a Conv into its weights and bias. Each rewrite
// matches only where the result computes the same function (up to float rounding order).
#include <algorithm>
#include <cmath>
#include <set>

#include "graph/infer.h"
#include "graph/passes.h"
#include "graph/post_ops.h"

namespace kiln {
namespace {

// NHWC dim i of a channels-last region value is NCHW dim kToNchw[i] of its rewritten value.
constexpr int64_t kToNchw[4] = {0, 2, 3, 1};

bool has_perm(const Node& n, const std::vector<int64_t>& perm) {
  return n.op == "Transpose" && n.outputs.size() == 1 && n.attr_ints("perm") == perm;
}

// A constant f32 scalar (any shape of one element) within `tol` of `want`.
bool const_near(const Graph& g, ValueId v, double want, double tol = 0) {
  const Tensor* t = const_f32(g, v);
  return t && t->numel() == 1 && std::fabs(double(t->data<float>()[0]) - want) <= tol;
}

// The constant's values as a vector along `axis` of a rank-`rank` tensor whose dim there is
// `c`: a scalar, or a shape that right-aligned is 1 everywhere but `axis` (= c). Else empty.
std::vector<float> axis_vector(const Graph& g, ValueId v, int64_t axis, int64_t rank, int64_t c) {
  const Tensor* t = const_f32(g, v);
  if (!t) return {};
  const Shape& s = t->shape();
  if (t->numel() == 1) return std::vector<float>(size_t(c), t->data<float>()[0]);
  if (int64_t(s.size()) > rank) return {};
  for (size_t k = 0; k < s.size(); ++k) {
    const int64_t dim = rank - int64_t(s.size()) + int64_t(k);
    if (s[k] != (dim == axis ? c : 1)) return {};
  }
  return std::vector<float>(t->data<float>(), t->data<float>() + c);
}

ValueId vector_const(Graph& g, const std::string& base, const std::vector<float>& v) {
  Tensor t(DType::f32, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return g.add_const(unique_value_name(g, base), std::move(t));
}

// The one axis a ReduceMean(keepdims=1) reduces, normalised; -1 otherwise.
int64_t reduce_axis(const Graph& g, const Node& n) {
  if (n.op != "ReduceMean" || n.attr_i("keepdims", 1) != 1 || n.in(1) == kNoValue) return -1;
  const Value& axes = g.value(n.inputs[1]);
  if (!axes.is_const() || axes.dtype != DType::i64 || axes.constant->numel() != 1) return -1;
  const int64_t r = int64_t(g.value(n.inputs[0]).shape.size());
  int64_t a = axes.constant->data<int64_t>()[0];
  if (a < 0) a += r;
  return a >= 0 && a < r ? a : -1;
}

// Shared state of one rewrite sweep: producers, consumers and tombstones (nodes whose op is
// cleared are dropped by finish()).
class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g), prod_(g.producers()), cons_(g.consumers()) {}

  // The live node producing v, or nullptr.
  Node* producer(ValueId v) {
    if (v == kNoValue) return nullptr;
    const int p = prod_[size_t(v)];
    return p < 0 || g_.nodes[size_t(p)].op.empty() ? nullptr : &g_.nodes[size_t(p)];
  }
  int index(const Node* n) const { return int(n - g_.nodes.data()); }
  // v is an intermediate read by exactly the given nodes.
  bool only_users(ValueId v, std::set<int> users) const {
    if (v == kNoValue || g_.is_output(v)) return false;
    return std::set<int>(cons_[size_t(v)].begin(), cons_[size_t(v)].end()) == users;
  }
  // The single consumer of v (an intermediate), or nullptr.
  Node* sole_user(ValueId v) {
    if (v == kNoValue || g_.is_output(v) || cons_[size_t(v)].size() != 1) return nullptr;
    Node* n = &g_.nodes[size_t(cons_[size_t(v)][0])];
    return n->op.empty() ? nullptr : n;
  }
  // The operand of binary node n that is not v (kNoValue if n does not read v).
  static ValueId other(const Node& n, ValueId v) {
    if (n.inputs.size() != 2) return kNoValue;
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : kNoValue;
  }
  void kill(Node* n) { n->op.clear(); }
  // Drops tombstones; returns the number of nodes removed.
  int finish() {
    const size_t before = g_.nodes.size();
    std::vector<Node> kept;
    for (Node& n : g_.nodes)
      if (!n.op.empty()) kept.push_back(std::move(n));
    g_.nodes = std::move(kept);
    return int(before - g_.nodes.size());
  }

  Graph& g_;
  std::vector<int> prod_;
  std::vector<std::vector<int>> cons_;
};

// ---- channels-last regions ----

bool is_region_unary(const std::string& op) {
  return op == "Identity" || is_unary_elementwise_op(op);
}

bool is_region_binary(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow";
}

// A constant operand of an elementwise op in the region, rank <= 4, re-laid as NCHW.
ValueId nchw_const(Graph& g, ValueId v) {
  const Tensor& t = *g.value(v).constant;
  if (t.numel() == 1) return v;
  Shape s = t.shape();
  while (s.size() < 4) s.insert(s.begin(), 1);
  const Shape ns = {s[0], s[3], s[1], s[2]};
  Tensor out(DType::f32, ns);
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t w = 0; w < s[2]; ++w)
        for (int64_t c = 0; c < s[3]; ++c)
          dst[((n * s[3] + c) * s[1] + h) * s[2] + w] = src[((n * s[1] + h) * s[2] + w) * s[3] + c];
  return g.add_const(unique_value_name(g, g.value(v).name + "_nchw"), std::move(out));
}

class ChannelsLast : public Rewriter {
 public:
  using Rewriter::Rewriter;

  // t = Transpose(x, perm 0,2,3,1) opening a region of nodes that only work along the last
  // axis (elementwise with constants broadcast along it, ReduceMean, MatMul by a constant,
  // LayerNorm over it) and end in Transpose(perm 0,3,1,2): the region computes the same on
  // NCHW values with the axes mapped, MatMul becoming a 1x1 Conv. Returns whether rewritten.
  bool try_match(Node& t) {
    if (!has_perm(t, {0, 2, 3, 1}) || g_.value(t.inputs[0]).shape.size() != 4) return false;
    std::vector<int> region, exits;
    std::set<ValueId> values = {t.outputs[0]};
    std::vector<ValueId> work = {t.outputs[0]};
    std::set<int> seen;
    while (!work.empty()) {
      const ValueId v = work.back();
      work.pop_back();
      if (g_.is_output(v)) return false;
      for (int c : cons_[size_t(v)]) {
        if (!seen.insert(c).second) continue;
        Node& n = g_.nodes[size_t(c)];
        if (has_perm(n, {0, 3, 1, 2})) {
          if (g_.is_output(n.outputs[0])) return false;
          exits.push_back(c);
          continue;
        }
        if (!convertible(n)) return false;
        region.push_back(c);
        for (ValueId o : n.outputs) values.insert(o), work.push_back(o);
      }
    }
    // Every other operand of a region node must be a constant (checked by convertible for the
    // ops' own operands); a non-constant one from outside would keep its NHWC meaning.
    for (int i : region)
      for (ValueId v : g_.nodes[size_t(i)].inputs)
        if (v != kNoValue && !values.count(v) && !g_.value(v).is_const()) return false;
    for (int e : exits)
      if (!values.count(g_.nodes[size_t(e)].inputs[0])) return false;
    std::sort(region.begin(), region.end());
    for (int i : region) to_nchw(g_.nodes[size_t(i)], values);
    replace_uses(t.outputs[0], t.inputs[0]);
    for (int e : exits) {
      replace_uses(g_.nodes[size_t(e)].outputs[0], g_.nodes[size_t(e)].inputs[0]);
      kill(&g_.nodes[size_t(e)]);
    }
    kill(&t);
    return true;
  }

 private:
  bool convertible(const Node& n) const {
    if (n.outputs.size() != 1 || n.inputs.empty()) return false;
    if (is_region_unary(n.op)) return true;
    if (is_region_binary(n.op)) {
      for (ValueId v : n.inputs)
        if (g_.value(v).is_const() &&
            (g_.value(v).dtype != DType::f32 || g_.value(v).shape.size() > 4))
          return false;
      return true;
    }
    if (n.op == "ReduceMean") {
      const ValueId a = n.in(1);
      return n.attr_i("keepdims", 1) == 1 && a != kNoValue && g_.value(a).is_const() &&
             g_.value(a).constant->numel() > 0;
    }
    if (n.op == "MatMul") {
      const Tensor* w = const_f32(g_, n.inputs[1]);
      return w && w->shape().size() == 2 && !g_.value(n.inputs[0]).is_const();
    }
    if (n.op == "LayerNormalization")  // Y only: Mean / InvStdDev would change shape
      return n.attr_i("axis", -1) == 3 && n.attr_i("norm_dims", 1) == 1 &&
             std::all_of(n.outputs.begin() + 1, n.outputs.end(),
                         [](ValueId v) { return v == kNoValue; });
    return false;
  }

  void to_nchw(Node& n, const std::set<ValueId>& values) {
    if (is_region_binary(n.op)) {
      for (ValueId& v : n.inputs)
        if (!values.count(v)) v = nchw_const(g_, v);
    } else if (n.op == "ReduceMean") {
      const Tensor& axes = *g_.value(n.inputs[1]).constant;
      Tensor na(DType::i64, axes.shape());
      for (int64_t k = 0; k < axes.numel(); ++k) {
        int64_t a = axes.data<int64_t>()[k];
        na.data<int64_t>()[k] = kToNchw[a < 0 ? a + 4 : a];
      }
      n.inputs[1] = g_.add_const(unique_value_name(g_, n.name + "_axes_nchw"), std::move(na));
    } else if (n.op == "MatMul") {
      const Tensor& w = *g_.value(n.inputs[1]).constant;
      const int64_t k = w.shape()[0], m = w.shape()[1];
      Tensor cw(DType::f32, {m, k, 1, 1});
      // The transpose in 16 x 16 tiles, each output row's run written in order (the tile's 16
      // input rows stay cached), reading the weights where the model keeps them.
      const ModelFloats src(w);
      float* dst = cw.data<float>();
      for (int64_t i0 = 0; i0 < k; i0 += 16)
        for (int64_t j0 = 0; j0 < m; j0 += 16)
          for (int64_t j = j0; j < std::min(m, j0 + 16); ++j)
            for (int64_t i = i0; i < std::min(k, i0 + 16); ++i) dst[j * k + i] = src[i * m + j];
      n.op = "Conv";
      n.inputs[1] = g_.add_const(unique_value_name(g_, n.name + "_w_1x1"), std::move(cw));
      n.attrs.clear();
    } else if (n.op == "LayerNormalization") {
      n.attrs["axis"] = attr_i(1);
    }
  }

  void replace_uses(ValueId from, ValueId to) {
    for (Node& n : g_.nodes)
      if (!n.op.empty())
        for (ValueId& v : n.inputs)
          if (v == from) v = to;
  }
};

// ---- LayerNorm ----

// Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps))) with d = Sub(x, ReduceMean(x)) over one axis,
// then optionally Mul by a per-axis constant and Add of one: LayerNormalization over that
// axis (ONNX's when it is the last one).
class LayerNormFuser : public Rewriter {
 public:
  using Rewriter::Rewriter;

  bool try_match(Node& div) {
    if (div.op != "Div" || div.inputs.size() != 2) return false;
    const ValueId d = div.inputs[0], s = div.inputs[1];
    Node* sub = producer(d);
    Node* sqrt = producer(s);
    if (!sub || sub->op != "Sub" || !sqrt || sqrt->op != "Sqrt" || !only_users(s, {index(&div)}))
      return false;
    const ValueId x = sub->inputs[0];
    Node* mean = producer(sub->inputs[1]);
    if (!mean || mean->inputs[0] != x || !only_users(sub->inputs[1], {index(sub)})) return false;
    const int64_t axis = reduce_axis(g_, *mean);
    Node* add = producer(sqrt->inputs[0]);
    if (axis < 0 || !add || add->op != "Add" || !only_users(sqrt->inputs[0], {index(sqrt)}))
      return false;
    // Add(var, eps) in either order.
    const int vi = const_f32(g_, add->inputs[0]) ? 1 : 0;
    const ValueId var = add->inputs[size_t(vi)], eps_v = add->inputs[size_t(1 - vi)];
    const Tensor* eps = const_f32(g_, eps_v);
    if (!eps || eps->numel() != 1 || !(eps->data<float>()[0] >= 0)) return false;
    // Read now: adding the scale/bias constants below may move the graph's values.
    const float epsilon = eps->data<float>()[0];
    Node* var_mean = producer(var);
    if (!var_mean || reduce_axis(g_, *var_mean) != axis || !only_users(var, {index(add)}))
      return false;
    Node* sq = producer(var_mean->inputs[0]);
    if (!sq || !only_users(var_mean->inputs[0], {index(var_mean)})) return false;
    const bool square =
        (sq->op == "Pow" && sq->inputs[0] == d && const_near(g_, sq->inputs[1], 2)) ||
        (sq->op == "Mul" && sq->inputs[0] == d && sq->inputs[1] == d);
    if (!square || !only_users(d, {index(sq), index(&div)})) return false;

    const Shape& xs = g_.value(x).shape;
    const int64_t rank = int64_t(xs.size()), c = xs[size_t(axis)];
    if (g_.value(x).dtype != DType::f32 || g_.value(d).shape != xs) return false;
    // The affine tail: Mul(y, gamma) then Add(., beta), each optional, either operand order.
    std::vector<Node*> tail = {&div};
    std::vector<float> gamma(size_t(c), 1.f), beta;
    if (Node* mul = sole_user(div.outputs[0]); mul && mul->op == "Mul") {
      auto v = axis_vector(g_, other(*mul, div.outputs[0]), axis, rank, c);
      if (!v.empty()) gamma = std::move(v), tail.push_back(mul);
    }
    if (Node* badd = sole_user(tail.back()->outputs[0]); badd && badd->op == "Add") {
      auto v = axis_vector(g_, other(*badd, tail.back()->outputs[0]), axis, rank, c);
      if (!v.empty()) beta = std::move(v), tail.push_back(badd);
    }
    Node* last = tail.back();
    if (g_.value(last->outputs[0]).shape != xs) return false;
    Node ln;
    ln.name = div.name + "_layernorm";
    ln.op = "LayerNormalization";
    ln.inputs = {x, vector_const(g_, ln.name + "_scale", gamma)};
    if (!beta.empty()) ln.inputs.push_back(vector_const(g_, ln.name + "_bias", beta));
    ln.outputs = {last->outputs[0]};
    ln.attrs["axis"] = attr_i(axis);
    ln.attrs["norm_dims"] = attr_i(1);
    ln.attrs["epsilon"] = attr_f(epsilon);
    for (Node* n : {mean, sub, sq, var_mean, add, sqrt}) kill(n);
    for (Node* n : tail) kill(n);
    *last = std::move(ln);  // the last matched node's slot: every operand is available there
    return true;
  }
};

// ---- GELU ----

// h * 0.5 * (1 + Erf(h / sqrt 2)) in the association orders exporters write (Div by sqrt 2
// or Mul by 1/sqrt 2; the 0.5 applied last, first to h, or to the erf term): one Gelu node.
class GeluFuser : public Rewriter {
 public:
  using Rewriter::Rewriter;

  bool try_match(Node& erf) {
    if (erf.op != "Erf") return false;
    const ValueId u = erf.inputs[0];
    Node* scale = producer(u);
    if (!scale || scale->inputs.size() != 2 || !only_users(u, {index(&erf)})) return false;
    ValueId h = kNoValue;
    if (scale->op == "Div" && const_near(g_, scale->inputs[1], M_SQRT2, 1e-6)) {
      h = scale->inputs[0];
    } else if (scale->op == "Mul") {
      for (int k = 0; k < 2; ++k)
        if (const_near(g_, scale->inputs[size_t(k)], M_SQRT1_2, 1e-6))
          h = scale->inputs[size_t(1 - k)];
    }
    if (h == kNoValue || g_.value(h).dtype != DType::f32) return false;
    Node* plus = sole_user(erf.outputs[0]);
    if (!plus || plus->op != "Add" || !const_near(g_, other(*plus, erf.outputs[0]), 1))
      return false;
    const ValueId f = plus->outputs[0];
    Node* m1 = sole_user(f);
    if (!m1 || m1->op != "Mul") return false;
    const ValueId o = other(*m1, f);
    Node* out = nullptr;      // the node computing the result
    Node* reads_h = nullptr;  // the product's node that reads h
    Node* half = nullptr;     // Mul(h, 0.5) when the 0.5 goes to h first
    if (o == h) {             // Mul(Mul(h, f), 0.5)
      out = sole_user(m1->outputs[0]);
      if (!out || out->op != "Mul" || !const_near(g_, other(*out, m1->outputs[0]), 0.5))
        return false;
      reads_h = m1;
    } else if (const_near(g_, o, 0.5)) {  // Mul(h, Mul(f, 0.5))
      out = sole_user(m1->outputs[0]);
      if (!out || out->op != "Mul" || other(*out, m1->outputs[0]) != h) return false;
      reads_h = out;
    } else {  // Mul(Mul(h, 0.5), f)
      half = producer(o);
      if (!half || half->op != "Mul" || other(*half, h) == kNoValue ||
          !const_near(g_, other(*half, h), 0.5) || !only_users(o, {index(m1)}))
        return false;
      out = m1;
      reads_h = half;
    }
    if (!only_users(h, {index(scale), index(reads_h)}) ||
        g_.value(out->outputs[0]).shape != g_.value(h).shape)
      return false;
    Node gelu;
    gelu.name = erf.name + "_gelu";
    gelu.op = "Gelu";
    gelu.inputs = {h};
    gelu.outputs = {out->outputs[0]};
    for (Node* n : {scale, &erf, plus, m1}) kill(n);
    if (half) kill(half);
    *out = std::move(gelu);
    return true;
  }
};

// ---- Attention ----

// MatMul(A, B) -> [Mul / Div by a scalar constant] -> [Add(., bias)] -> Softmax(last axis) ->
// MatMul(., V), each intermediate read once: one SoftmaxAttention(A, B, V[, bias]), whose kernel
// keeps the scores in cache (jit/glue/attention.cpp) instead of writing and reading them four
// times. The bias (Swin's and LeViT's relative positions, BoTNet's position logits, a mask) is
// any f32 tensor over the keys that broadcasts to the scores without widening them.
class AttentionFuser : public Rewriter {
 public:
  using Rewriter::Rewriter;

  bool try_match(Node& sm) {
    if (sm.op != "Softmax" || sm.has("post_ops") || sm.outputs.size() != 1) return false;
    const Shape& x = g_.value(sm.inputs[0]).shape;
    const int64_t rank = int64_t(x.size()), axis = sm.attr_i("axis", -1);
    if (rank < 2 || (axis != -1 && axis != rank - 1)) return false;
    Node* out = sole_user(sm.outputs[0]);
    if (!matmul(out) || out->inputs[0] != sm.outputs[0] || out->inputs[1] == sm.outputs[0])
      return false;
    // `reader` reads the (scaled) scores: the bias's Add, or the Softmax itself.
    Node* reader = &sm;
    ValueId scaled = sm.inputs[0], bias = kNoValue;
    Node* add = producer(scaled);
    if (add && add->op == "Add" && !add->has("post_ops") && add->inputs.size() == 2 &&
        add->outputs.size() == 1 && only_users(scaled, {index(&sm)})) {
      // The scores' side: a scaled MatMul's output before a bare one's (both sides may be
      // products: BoTNet's bias is q x positions).
      int side = -1;
      for (int pass = 0; pass < 2 && side < 0; ++pass)
        for (int k = 0; k < 2 && side < 0; ++k) {
          Node* p = producer(add->inputs[size_t(k)]);
          if (pass == 0 ? scaled_matmul(p) : matmul(p)) side = k;
        }
      if (side < 0) return false;
      bias = add->inputs[size_t(1 - side)];
      scaled = add->inputs[size_t(side)];
      if (bias == scaled || !bias_fits(bias, scaled)) return false;
      reader = add;
    } else {
      add = nullptr;
    }
    Node* scale = producer(scaled);
    if (!scale || !only_users(scaled, {index(reader)})) return false;
    float factor = 1.f;
    bool divide = false;
    ValueId scores = scaled;
    if (scale->op == "Mul" || scale->op == "Div") {
      const Tensor* c = scale_factor(*scale, &scores);
      const float f = c ? c->data<float>()[0] : 0.f;
      if (!c || !std::isfinite(f) || f == 0.f) return false;
      factor = f;
      divide = scale->op == "Div";
      if (!only_users(scores, {index(scale)})) return false;
    } else {
      scale = nullptr;
    }
    Node* qk = producer(scores);
    if (!matmul(qk) || (!scale && !only_users(scores, {index(reader)}))) return false;
    Node fused;
    fused.name = out->name;
    fused.op = "SoftmaxAttention";
    fused.inputs = {qk->inputs[0], qk->inputs[1], out->inputs[1]};
    if (bias != kNoValue) fused.inputs.push_back(bias);
    fused.outputs = out->outputs;
    fused.attrs["scale"] = attr_f(factor);
    if (divide) fused.attrs["divide"] = attr_i(1);
    kill(qk);
    if (scale) kill(scale);
    if (add) kill(add);
    kill(&sm);
    *out = std::move(fused);
    return true;
  }

 private:
  // A MatMul of two f32 operands of rank >= 2 without fused post-ops.
  bool matmul(const Node* n) const {
    if (!n || n->op != "MatMul" || n->inputs.size() != 2 || n->has("post_ops")) return false;
    for (ValueId v : n->inputs)
      if (v == kNoValue || g_.value(v).dtype != DType::f32 || g_.value(v).shape.size() < 2)
        return false;
    return true;
  }
  // The scalar constant a two-input Mul / Div n scales by (a Div's divisor, either of a Mul's
  // operands), *other set to the operand it scales; nullptr if there is none.
  const Tensor* scale_factor(const Node& n, ValueId* other) const {
    if ((n.op != "Mul" && n.op != "Div") || n.inputs.size() != 2) return nullptr;
    const int k = n.op == "Div" || scalar(n.inputs[1]) ? 1 : 0;  // the constant's slot
    *other = n.inputs[size_t(1 - k)];
    return scalar(n.inputs[size_t(k)]);
  }
  // A Mul / Div of a MatMul's output by a scalar constant.
  bool scaled_matmul(Node* n) {
    ValueId x = kNoValue;
    return n && scale_factor(*n, &x) && matmul(producer(x));
  }
  // An f32 bias over the scores' last dim (a per-query one would not change the softmax) that
  // broadcasts to them without widening them.
  bool bias_fits(ValueId bias, ValueId scores) const {
    const Value& b = g_.value(bias);
    const Shape& s = g_.value(scores).shape;
    if (b.dtype != DType::f32 || b.shape.empty() || b.shape.size() > s.size() || s.empty() ||
        b.shape.back() != s.back())
      return false;
    for (size_t i = 0; i < b.shape.size(); ++i) {
      const int64_t d = b.shape[b.shape.size() - 1 - i];
      if (d != 1 && d != s[s.size() - 1 - i]) return false;
    }
    return true;
  }
  // The constant f32 scalar v holds (any shape of one element), or nullptr.
  const Tensor* scalar(ValueId v) const {
    const Tensor* t = const_f32(g_, v);
    return t && t->numel() == 1 ? t : nullptr;
  }
};

// ---- GroupNorm ----

// Reshape(x, [N, G, L]) -> InstanceNormalization(scale 1, B 0 over the G rows) -> Reshape(back
// to x's shape) -> Mul(gamma per channel) -> Add(beta per channel), the last two optional: how
// PyTorch exports GroupNorm before opset 18. One GroupNormalization of x (num_groups G, per-
// channel scale and B: the canonical form, graph/ops.h), whose kernel also takes the
// activation after it (graph/fuse.cpp).
class GroupNormFuser : public Rewriter {
 public:
  using Rewriter::Rewriter;

  bool try_match(Node& in) {
    if (in.op != "InstanceNormalization" || in.inputs.size() != 3 || in.outputs.size() != 1)
      return false;
    Node* r1 = producer(in.inputs[0]);
    if (!r1 || r1->op != "Reshape" || !only_users(r1->outputs[0], {index(&in)})) return false;
    const ValueId x = r1->inputs[0];
    const Shape xs = g_.value(x).shape, gs = g_.value(r1->outputs[0]).shape;  // (copies)
    if (xs.size() < 3 || gs.size() != 3 || g_.value(x).dtype != DType::f32) return false;
    for (int64_t d : xs)
      if (d < 1) return false;
    const int64_t c = xs[1], groups = gs[1], rank = int64_t(xs.size());
    if (gs[0] != xs[0] || groups < 1 || c % groups || shape_numel(gs) != shape_numel(xs))
      return false;
    auto all = [&](ValueId v, float want) {
      const Tensor* t = const_f32(g_, v);
      if (!t || t->numel() != groups) return false;
      for (int64_t i = 0; i < groups; ++i)
        if (t->data<float>()[i] != want) return false;
      return true;
    };
    if (!all(in.inputs[1], 1.f) || !all(in.inputs[2], 0.f)) return false;
    Node* r2 = sole_user(in.outputs[0]);
    if (!r2 || r2->op != "Reshape" || g_.value(r2->outputs[0]).shape != xs) return false;
    std::vector<float> gamma(size_t(c), 1.f), beta(size_t(c), 0.f);
    std::vector<Node*> tail = {r2};
    for (const char* op : {"Mul", "Add"}) {
      Node* u = sole_user(tail.back()->outputs[0]);
      if (!u || u->op != op || g_.value(u->outputs[0]).shape != xs) break;
      std::vector<float> v = axis_vector(g_, other(*u, tail.back()->outputs[0]), 1, rank, c);
      if (v.empty()) break;
      (u->op == "Mul" ? gamma : beta) = std::move(v);
      tail.push_back(u);
    }
    Node gn;
    gn.name = in.name + "_groupnorm";
    gn.op = "GroupNormalization";
    gn.inputs = {x, vector_const(g_, gn.name + "_scale", gamma),
                 vector_const(g_, gn.name + "_bias", beta)};
    gn.outputs = {tail.back()->outputs[0]};
    gn.attrs["num_groups"] = attr_i(groups);
    gn.attrs["epsilon"] = attr_f(in.attr_f("epsilon", 1e-5f));
    kill(r1);
    kill(&in);
    for (size_t k = 0; k + 1 < tail.size(); ++k) kill(tail[k]);
    *tail.back() = std::move(gn);  // the last matched node's slot: every operand is ready there
    return true;
  }
};

// Rebuilds conv's weights and bias as w * mul[oc], b * mul[oc] + add[oc] (double precision).
// The bias is a new constant; the weights stay as they are where mul is all ones, are scaled
// in place where only this conv reads them and the tensor is exclusively its own (a pass made
// it: MatMul -> Conv), and are a new constant otherwise (the originals may be shared). Each
// copy is fresh pages, the big cost of a load (bench/NOTES.md, "ConvNeXt-T's warm load").
void rescale_conv(Graph& g, Node& conv, const std::vector<double>& mul,
                  const std::vector<double>& add, bool sole_reader) {
  const Tensor& w = *g.value(conv.inputs[1]).constant;
  const int64_t m = w.shape()[0], per_oc = w.numel() / m;
  const Tensor* b = conv.in(2) != kNoValue ? &*g.value(conv.inputs[2]).constant : nullptr;
  Tensor b2(DType::f32, {m});
  float* db = b2.data<float>();
  const float* bias = b ? b->data<float>() : nullptr;
  for (int64_t oc = 0; oc < m; ++oc)
    db[oc] = float((bias ? double(bias[oc]) : 0.0) * mul[size_t(oc)] + add[size_t(oc)]);
  if (std::any_of(mul.begin(), mul.end(), [](double s) { return s != 1.0; })) {
    const bool in_place = sole_reader && w.exclusive();
    Tensor w2 = in_place ? w : Tensor(DType::f32, w.shape());
    const ModelFloats src(w);  // read where the model keeps them (no aligned copy)
    float* dw = w2.data<float>();
    for (int64_t oc = 0; oc < m; ++oc) {
      const double s = mul[size_t(oc)];
      for (int64_t j = oc * per_oc; j < (oc + 1) * per_oc; ++j) dw[j] = float(double(src[j]) * s);
    }
    if (!in_place)
      conv.inputs[1] = g.add_const(unique_value_name(g, conv.name + "_w_affine"), std::move(w2));
  }
  conv.inputs.resize(3);
  conv.inputs[2] = g.add_const(unique_value_name(g, conv.name + "_b_affine"), std::move(b2));
}

// ---- LRN ----

// PyTorch's F.local_response_norm, as exported: x / (Mul(S, alpha) + k)^beta where S is x^2
// viewed as [N, 1, C, spatial...], zero-padded by (lo, size - 1 - lo) channels and averaged over
// windows of `size` channels (AveragePool, kernel [size, 1, ...], stride 1), viewed back as x.
// Becomes one LRN (window_lo = lo; graph/ops.h), which runs on the JIT kernel in any layout.
class LrnFuser : public Rewriter {
 public:
  using Rewriter::Rewriter;

  bool try_match(Node& div) {
    if (div.op != "Div" || div.inputs.size() != 2) return false;
    const ValueId x = div.inputs[0];
    const Shape xs = g_.value(x).shape;
    if (g_.value(x).dtype != DType::f32 || xs.size() < 3 || g_.value(div.outputs[0]).shape != xs)
      return false;
    std::vector<Node*> chain;  // every node replaced
    auto single = [&](ValueId v, const char* op, Node* user) -> Node* {
      Node* p = producer(v);
      if (!p || p->op != op || !only_users(v, {index(user)})) return nullptr;
      chain.push_back(p);
      return p;
    };
    // (Mul(S, alpha) + k)^beta, constants either side.
    auto scalar = [&](ValueId v, float* out) {
      const Tensor* t = const_f32(g_, v);
      if (!t || t->numel() != 1) return false;
      *out = t->data<float>()[0];
      return true;
    };
    float alpha = 0, beta = 0, k = 0;
    Node* pow = single(div.inputs[1], "Pow", &div);
    if (!pow || !scalar(pow->inputs[1], &beta)) return false;
    Node* add = single(pow->inputs[0], "Add", pow);
    if (!add) return false;
    const int ki = scalar(add->inputs[1], &k) ? 1 : scalar(add->inputs[0], &k) ? 0 : -1;
    if (ki < 0) return false;
    Node* mul = single(add->inputs[size_t(1 - ki)], "Mul", add);
    if (!mul) return false;
    const int ai = scalar(mul->inputs[1], &alpha) ? 1 : scalar(mul->inputs[0], &alpha) ? 0 : -1;
    if (ai < 0) return false;
    // Views back from the pool's output.
    ValueId v = mul->inputs[size_t(1 - ai)];
    Node* user = mul;
    // Follows single-use views up from v (read by user): v and user become the first non-view
    // value and its reader; returns v's producer.
    auto skip_views = [&]() {
      Node* p = producer(v);
      while (p && is_view(*p) && only_users(v, {index(user)})) {
        chain.push_back(p);
        user = p;
        v = p->inputs[0];
        p = producer(v);
      }
      return p;
    };
    skip_views();
    if (g_.value(mul->inputs[size_t(1 - ai)]).shape != xs) return false;
    Node* pool = single(v, "AveragePool", user);
    if (!pool) return false;
    const Shape& ps = g_.value(pool->outputs[0]).shape;
    const int64_t size =
        pool->attr_ints("kernel_shape").empty() ? 0 : pool->attr_ints("kernel_shape")[0];
    if (!window_pool(*pool, xs, size)) return false;
    // Exporters may pad in several Pads (PyTorch adds one of zeros before its pool).
    int64_t lo = 0, hi = 0;
    v = pool->inputs[0];
    user = pool;
    while (Node* pad = single(v, "Pad", user)) {
      if (!channel_pad(*pad, &lo, &hi)) return false;
      user = pad;
      v = pad->inputs[0];
    }
    if (user == pool || lo + hi != size - 1) return false;
    // Views down to the square.
    Node* p = skip_views();
    if (!p || !only_users(v, {index(user)})) return false;
    const bool square =
        (p->op == "Mul" && p->inputs.size() == 2 && p->inputs[0] == x && p->inputs[1] == x) ||
        (p->op == "Pow" && p->inputs[0] == x && const_near(g_, p->inputs[1], 2));
    if (!square || shape_numel(ps) != shape_numel(xs)) return false;
    chain.push_back(p);
    Node lrn;
    lrn.name = div.name + "_lrn";
    lrn.op = "LRN";
    lrn.inputs = {x};
    lrn.outputs = {div.outputs[0]};
    lrn.attrs["size"] = attr_i(size);
    lrn.attrs["alpha"] = attr_f(alpha);
    lrn.attrs["beta"] = attr_f(beta);
    lrn.attrs["bias"] = attr_f(k);
    if (lo != (size - 1) / 2) lrn.attrs["window_lo"] = attr_i(lo);
    for (Node* n : chain) kill(n);
    div = std::move(lrn);
    return true;
  }

 private:
  static bool is_view(const Node& n) {
    return (n.op == "Reshape" || n.op == "Squeeze" || n.op == "Unsqueeze" || n.op == "Identity") &&
           n.outputs.size() == 1 && n.in(0) != kNoValue;
  }

  // An average over windows of `size` along dim 2 of [N, 1, C + size - 1, spatial...] (x's N, C
  // and as many spatial elements), nothing else pooled, padded or strided.
  bool window_pool(const Node& pool, const Shape& xs, int64_t size) const {
    const Shape& in = g_.value(pool.inputs[0]).shape;
    const Shape& out = g_.value(pool.outputs[0]).shape;
    const size_t r = in.size();
    if (size < 1 || r < 4 || out.size() != r || in[0] != xs[0] || in[1] != 1 || out[2] != xs[1] ||
        in[2] != xs[1] + size - 1)
      return false;
    const auto kernel = pool.attr_ints("kernel_shape"), strides = pool.attr_ints("strides"),
               pads = pool.attr_ints("pads"), dil = pool.attr_ints("dilations");
    if (kernel.size() != r - 2) return false;
    for (size_t d = 0; d < r - 2; ++d) {
      if ((d > 0 && kernel[d] != 1) || (d < strides.size() && strides[d] != 1) ||
          (d < dil.size() && dil[d] != 1))
        return false;
    }
    for (int64_t q : pads)
      if (q != 0) return false;
    return true;
  }

  // Constant zero padding of dim 2 only: adds its pads there to lo / hi.
  bool channel_pad(const Node& pad, int64_t* lo, int64_t* hi) const {
    if (pad.attr_s("mode", "constant") != "constant") return false;
    if (pad.in(2) != kNoValue && !const_near(g_, pad.in(2), 0)) return false;
    const auto pads = ints_of(g_, pad, 1);
    const size_t r = g_.value(pad.inputs[0]).shape.size();
    if (!pads || pads->size() != 2 * r || pad.in(3) != kNoValue) return false;
    for (size_t d = 0; d < 2 * r; ++d)
      if ((d % r != 2 && (*pads)[d] != 0) || (*pads)[d] < 0) return false;
    *lo += (*pads)[2];
    *hi += (*pads)[r + 2];
    return true;
  }
};

// ---- parallel branches (structural re-parameterisation) ----

// A sum of branches of one input x, as RepVGG, ACNet, DBB and MobileOne train them and export
// them un-merged: Convs of x (constant f32 weights and bias, one stride, dilation 1, one group
// count), x itself and inference BatchNormalizations of x (when the convs keep x's shape), added
// together (any tree of same-shape Adds, at most one other summand): one Conv whose kernel
// holds each branch's kernel at its place in the widest window (x and BN as a centre tap per
// channel) and whose bias is the sum. Exact up to float rounding order: each output element is
// the same sum of products, zero taps aside.
class BranchMerger : public Rewriter {
 public:
  using Rewriter::Rewriter;

  bool try_match(Node& root) {
    if (root.op != "Add" || root.inputs.size() != 2 || root.outputs.size() != 1) return false;
    const ValueId y = root.outputs[0];
    const Shape ys = g_.value(y).shape;
    if (ys.size() != 4 || g_.value(y).dtype != DType::f32) return false;
    if (Node* u = sole_user(y); u && in_tree(*u, ys)) return false;  // (its root takes it)
    std::vector<ValueId> leaves;
    std::vector<Node*> adds;
    if (!collect(root, ys, &leaves, &adds)) return false;
    // The input whose branches are merged: the one with the most summands, a Conv among them.
    std::vector<ValueId> xs;
    for (ValueId v : leaves) xs.push_back(branch_input(v, adds));
    ValueId x = kNoValue;
    size_t best = 1;
    for (ValueId c : xs) {
      const size_t k = size_t(std::count(xs.begin(), xs.end(), c));
      bool conv = false;
      for (size_t i = 0; i < leaves.size(); ++i)
        conv |= xs[i] == c && producer(leaves[i]) && producer(leaves[i])->op == "Conv";
      if (c != kNoValue && conv && k > best) x = c, best = k;
    }
    if (x == kNoValue) return false;
    std::vector<ValueId> members, rest;
    for (size_t i = 0; i < leaves.size(); ++i) (xs[i] == x ? members : rest).push_back(leaves[i]);
    if (rest.size() > 1) return false;
    return merge(root, x, members, rest, adds, ys);
  }

 private:
  // An Add of same-shape operands (no broadcast) whose output has shape ys.
  bool in_tree(const Node& n, const Shape& ys) const {
    if (n.op != "Add" || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        g_.value(n.outputs[0]).shape != ys)
      return false;
    return g_.value(n.inputs[0]).shape == ys && g_.value(n.inputs[1]).shape == ys;
  }

  // The summands of the Add tree under `add` (Adds read only by the tree are opened).
  bool collect(Node& add, const Shape& ys, std::vector<ValueId>* leaves, std::vector<Node*>* adds) {
    if (!in_tree(add, ys) || adds->size() > 64) return false;
    adds->push_back(&add);
    for (ValueId v : add.inputs) {
      Node* p = producer(v);
      if (p && sole_user(v) == &add && in_tree(*p, ys)) {
        if (!collect(*p, ys, leaves, adds)) return false;
      } else {
        leaves->push_back(v);
      }
    }
    return true;
  }

  // The x a summand is a branch of: a Conv's or BN's input when only the tree reads the summand,
  // else the summand itself (x as its own identity branch).
  ValueId branch_input(ValueId v, const std::vector<Node*>& adds) {
    Node* p = producer(v);
    Node* u = sole_user(v);
    if (p && u && std::count(adds.begin(), adds.end(), u) && p->outputs.size() == 1 &&
        (p->op == "Conv" || p->op == "BatchNormalization"))
      return p->inputs[0];
    return g_.value(v).is_const() ? kNoValue : v;
  }

  // Per spatial dim of a member: its window [s, e] relative to the output position times the
  // stride, and its kernel extent.
  struct Member {
    Node* node = nullptr;  // Conv or BatchNormalization; nullptr: x itself
    int64_t k[2] = {1, 1}, s[2] = {0, 0};
  };

  bool merge(Node& root, ValueId x, const std::vector<ValueId>& leaves,
             const std::vector<ValueId>& rest, const std::vector<Node*>& adds, const Shape& ys) {
    const Shape xs = g_.value(x).shape;
    if (xs.size() != 4 || g_.value(x).dtype != DType::f32) return false;
    const int64_t m = ys[1];
    std::vector<Member> mem;
    Node* first = nullptr;  // the first Conv in node order: becomes the merged one
    std::vector<int64_t> strides;
    int64_t group = 0;
    for (ValueId v : leaves) {
      Member b;
      Node* p = producer(v);
      if (p && p->inputs[0] == x && p->op == "Conv") {
        const Tensor* w = const_f32(g_, p->in(1));
        if (!w || p->has("post_ops") || (p->in(2) != kNoValue && !const_f32(g_, p->in(2))) ||
            w->shape().size() != 4 || w->shape()[0] != m ||
            p->attr_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1})
          return false;
        const std::vector<int64_t> st = p->attr_ints("strides", {1, 1}),
                                   pads = p->attr_ints("pads");
        const int64_t grp = p->attr_i("group", 1);
        if (pads.size() != 4 || (!strides.empty() && (st != strides || grp != group))) return false;
        strides = st, group = grp;
        b.node = p;
        for (int d = 0; d < 2; ++d) b.k[d] = w->shape()[size_t(2 + d)], b.s[d] = -pads[size_t(d)];
        if (!first || index(p) < index(first)) first = p;
      } else if (p && p->inputs[0] == x && p->op == "BatchNormalization") {
        b.node = p;
      } else if (v != x) {
        return false;
      }
      if (b.node &&
          std::any_of(mem.begin(), mem.end(), [&](const Member& o) { return o.node == b.node; }))
        return false;  // (one branch read twice)
      mem.push_back(b);
    }
    if (!first) return false;
    const int64_t cpg = xs[1] / group;  // input channels per group
    const bool identities = std::any_of(
        mem.begin(), mem.end(), [](const Member& b) { return !b.node || b.node->op != "Conv"; });
    if (identities && (xs != ys || strides != std::vector<int64_t>{1, 1})) return false;
    // The merged window per dim: from the earliest start to the latest end; the trailing pad
    // that keeps the output's size (every branch's taps read what they read before).
    int64_t s0[2], k[2], pad_end[2];
    for (int d = 0; d < 2; ++d) {
      int64_t lo = 0, hi = 0;
      for (size_t i = 0; i < mem.size(); ++i) {
        const int64_t s = mem[i].s[d], e = s + mem[i].k[d] - 1;
        lo = i == 0 ? s : std::min(lo, s);
        hi = i == 0 ? e : std::max(hi, e);
      }
      s0[d] = lo, k[d] = hi - lo + 1;
      pad_end[d] = std::max<int64_t>(
          0, (ys[size_t(2 + d)] - 1) * strides[size_t(d)] + hi - (xs[size_t(2 + d)] - 1));
      if (k[d] > 64) return false;
    }
    std::vector<double> w(size_t(m * cpg * k[0] * k[1]), 0.0), bias(size_t(m), 0.0);
    auto at = [&](int64_t o, int64_t c, int64_t h, int64_t ww) {
      return size_t(((o * cpg + c) * k[0] + h) * k[1] + ww);
    };
    for (const Member& b : mem) {
      const int64_t oh = b.s[0] - s0[0], ow = b.s[1] - s0[1];
      if (b.node && b.node->op == "Conv") {
        const Tensor& wt = *g_.value(b.node->inputs[1]).constant;
        if (wt.shape()[1] != cpg) return false;
        const ModelFloats src(wt);
        for (int64_t o = 0; o < m; ++o)
          for (int64_t c = 0; c < cpg; ++c)
            for (int64_t h = 0; h < b.k[0]; ++h)
              for (int64_t ww = 0; ww < b.k[1]; ++ww)
                w[at(o, c, oh + h, ow + ww)] +=
                    double(src[size_t(((o * cpg + c) * b.k[0] + h) * b.k[1] + ww)]);
        if (const Tensor* bt = const_f32(g_, b.node->in(2))) {
          const ModelFloats bs(*bt);
          for (int64_t o = 0; o < m; ++o) bias[size_t(o)] += double(bs[size_t(o)]);
        }
        continue;
      }
      std::vector<float> scale(size_t(m), 1.f), shift(size_t(m), 0.f);
      if (b.node && !batchnorm_affine(g_, *b.node, &scale, &shift)) return false;
      for (int64_t o = 0; o < m; ++o) {  // output channel o reads input channel o
        w[at(o, o % cpg, oh, ow)] += double(scale[size_t(o)]);
        bias[size_t(o)] += double(shift[size_t(o)]);
      }
    }
    Tensor wt(DType::f32, {m, cpg, k[0], k[1]}), bt(DType::f32, {m});
    std::transform(w.begin(), w.end(), wt.data<float>(), [](double v) { return float(v); });
    std::transform(bias.begin(), bias.end(), bt.data<float>(), [](double v) { return float(v); });
    const std::string name = first->name;
    first->inputs.resize(3);
    first->inputs[1] = g_.add_const(unique_value_name(g_, name + "_w_merged"), std::move(wt));
    first->inputs[2] = g_.add_const(unique_value_name(g_, name + "_b_merged"), std::move(bt));
    first->attrs["kernel_shape"] = attr_ints({k[0], k[1]});
    first->attrs["pads"] = attr_ints({-s0[0], -s0[1], pad_end[0], pad_end[1]});
    for (const Member& b : mem)
      if (b.node && b.node != first) kill(b.node);
    for (Node* a : adds)
      if (a != &root) kill(a);
    if (rest.empty()) {
      first->outputs[0] = root.outputs[0];
      kill(&root);
    } else {
      root.inputs = {first->outputs[0], rest[0]};
    }
    return true;
  }
};

// One pass of rewriter R (its try_match) over every live node; shapes are inferred again
// when something changed (new nodes, re-laid values).
template <class R>
int sweep(Graph& g) {
  R r(g);
  int n = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].op.empty()) n += r.try_match(g.nodes[i]);
  r.finish();
  if (n) infer_shapes(g);
  return n;
}

}  // namespace

int fuse_gelu(Graph& g) {
  return sweep<GeluFuser>(g);
}

int fold_conv_affine(Graph& g) {
  Rewriter r(g);
  int n = 0;
  for (Node& conv : g.nodes) {
    if (conv.op != "Conv" || conv.has("post_ops") || !const_f32(g, conv.inputs[1]) ||
        (conv.in(2) != kNoValue && !const_f32(g, conv.inputs[2])) ||
        g.value(conv.outputs[0]).shape.size() != 4)
      continue;
    const int64_t m = g.value(conv.outputs[0]).shape[1];
    // The chain's per-channel functions composed (y * mul + add), then one rebuild of the
    // weights, not one copy per link.
    std::vector<double> mul(size_t(m), 1.0), add(size_t(m), 0.0);
    int links = 0;
    while (Node* u = r.sole_user(conv.outputs[0])) {
      if (u->op != "Add" && u->op != "Mul") break;
      std::vector<float> k = axis_vector(g, Rewriter::other(*u, conv.outputs[0]), 1, 4, m);
      if (k.empty()) break;
      for (size_t c = 0; c < size_t(m); ++c) {
        if (u->op == "Add") {
          add[c] += double(k[c]);
        } else {
          mul[c] *= double(k[c]);
          add[c] *= double(k[c]);
        }
      }
      conv.outputs[0] = u->outputs[0];
      r.kill(u);
      ++links;
    }
    if (links) rescale_conv(g, conv, mul, add, r.sole_user(conv.inputs[1]) == &conv);
    n += links;
  }
  r.finish();
  return n;
}

int merge_branches(Graph& g) {
  return sweep<BranchMerger>(g);
}

int sink_channels_last(Graph& g) {
  return sweep<ChannelsLast>(g);  // region values are NCHW now, MatMuls Convs
}

int fuse_layer_norm(Graph& g) {
  return sweep<LayerNormFuser>(g);
}

int fuse_group_norm(Graph& g) {
  return sweep<GroupNormFuser>(g);
}

int fuse_attention(Graph& g) {
  return sweep<AttentionFuser>(g);
}

int fuse_lrn(Graph& g) {
  return sweep<LrnFuser>(g);
}

}  // namespace kiln
