#include "graph/passes.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>

#include "graph/canonicalize.h"
#include "graph/function_ops.h"
#include "graph/infer.h"
#include "graph/ops.h"
#include "graph/spectral.h"

namespace kiln {
namespace {

// Folding a node whose output is bigger than this would trade a little load time for a lot of
// memory (e.g. an Expand of a scalar); leave it to run time.
constexpr int64_t kMaxFoldElements = int64_t(1) << 24;
// Total bytes constant folding may create for one graph: a chain of folds each under the
// per-node limit must not add up to unbounded memory; past it, nodes run at run time.
constexpr int64_t kMaxFoldTotalBytes = int64_t(1) << 30;

// Folding a node evaluates it with the scalar reference kernel at load time, so its cost is
// bounded too: a hostile Conv on a constant input could otherwise keep the load busy for
// hours. Rough multiply-add count (saturating); past the limits the node runs at run time.
constexpr int64_t kMaxFoldWork = int64_t(1) << 26;       // per node
constexpr int64_t kMaxFoldTotalWork = int64_t(1) << 30;  // per graph

int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t fold_work(const Graph& g, const Node& n) {
  int64_t out = 0, in = 0;
  for (ValueId v : n.outputs)
    if (v != kNoValue) out += shape_numel(g.value(v).shape);
  if (n.op == "Shape" || n.op == "Size") return out;  // reads only its input's shape
  for (ValueId v : n.inputs)
    if (v != kNoValue) in += shape_numel(g.value(v).shape);
  int64_t reduce = 1;  // multiply-adds per output element
  auto shape = [&](size_t i) -> const Shape& { return g.value(n.inputs[i]).shape; };
  if (n.op == "Conv" && n.inputs.size() > 1 && !shape(1).empty() && shape(1)[0] > 0) {
    reduce = shape_numel(shape(1)) / shape(1)[0];  // C/group * kh * kw
  } else if (n.op == "ConvTranspose" && n.inputs.size() > 1 && !shape(1).empty() &&
             shape(1)[0] > 0 && out > 0) {  // each input element scatters M/group * kh * kw
    reduce = std::max<int64_t>(
        1, sat_mul(shape_numel(shape(0)), shape_numel(shape(1)) / shape(1)[0]) / out);
  } else if (n.op == "SoftmaxAttention" && n.inputs.size() >= 3 && shape(2).size() >= 2) {
    const Shape& v = shape(2);  // each output value: N products with V, K per score
    reduce = sat_mul(v[v.size() - 2], shape(0).back() + v.back()) / std::max<int64_t>(v.back(), 1);
  } else if ((n.op == "Gemm" || n.op == "MatMul") && !shape(0).empty()) {
    const Shape& a = shape(0);
    reduce = n.op == "Gemm" && n.attr_i("transA", 0) ? a[0] : a.back();
  } else if (n.op == "MaxPool" || n.op == "AveragePool") {
    reduce = shape_numel(n.attr_ints("kernel_shape"));
  }
  int64_t work = sat_mul(out, std::max<int64_t>(reduce, 1));
  return work == INT64_MAX ? work : work + in;
}

bool is_graph_input(const Graph& g, ValueId v) {
  for (ValueId i : g.inputs)
    if (i == v) return true;
  return false;
}

}  // namespace

int infer_shapes(Graph& g, const Evaluator* fold) {
  InferOptions o;
  o.fold = fold;
  return infer_shapes(g, o);
}

namespace {
// Ops whose output sizes follow their input values (OpInfo::data_dependent): inference
// computes them, so it folds them whenever it can infer them at all.
bool data_dependent(const Node& n) {
  const OpInfo* op = find_op(n.op);
  return op && op->data_dependent;
}
}  // namespace

int infer_shapes(Graph& g, const InferOptions& o) {
  const Evaluator* fold = o.fold;
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  int folded = 0;
  int64_t folded_bytes = 0, folded_work = 0;
  std::vector<bool> at_run_time;  // per value: computed by a node moved to o.tail
  auto runtime_value = [&](ValueId v) {
    return v != kNoValue && size_t(v) < at_run_time.size() && at_run_time[size_t(v)];
  };
  auto computed = [&](ValueId v) { return v != kNoValue && !g.value(v).is_const(); };
  // Nodes step has kept or moved to the tail so far (unchanged: it folded the ones since).
  auto not_folded = [&] { return kept.size() + (o.tail ? o.tail->size() : 0); };
  auto to_tail = [&](const Node& n) {
    for (ValueId v : n.inputs)
      if (runtime_value(v)) return true;
    if (data_dependent(n)) return std::any_of(n.inputs.begin(), n.inputs.end(), computed);
    if (const OpInfo* op = find_op(n.op); op && op->shape_inputs)
      for (size_t i = 0; i < n.inputs.size() && i < 32; ++i)
        if ((op->shape_inputs >> i & 1u) && computed(n.inputs[i])) return true;
    if (n.op == "Loop") return !loop_at_load(g, n);
    return n.op == "If" && !n.inputs.empty() && computed(n.inputs[0]);
  };
  // (A function: an If is replaced by the nodes of the branch it takes, a Loop by its
  // iterations, each stepped through in turn.)
  std::function<void(Node&)> step = [&](Node& n) {
    if (o.tail && to_tail(n)) {
      for (ValueId v : n.outputs)
        if (v != kNoValue) {
          if (at_run_time.size() <= size_t(v)) at_run_time.resize(g.values.size(), false);
          at_run_time[size_t(v)] = true;
        }
      o.tail->push_back(std::move(n));
      return;
    }
    if (n.has(kLegacyAxisAttr)) {  // (opsets < 7: B aligned once A's rank is known)
      for (Node& m : align_legacy_broadcast(g, std::move(n))) step(m);
      return;
    }
    infer_node(g, n);
    if (n.op == "DFT" || n.op == "STFT" || n.op == "OneHot") {  // (checked, sizes known)
      for (Node& m : n.op == "OneHot" ? expand_one_hot(g, n) : expand_spectral(g, n)) step(m);
      return;
    }
    if (expand_at_inference(g, n)) {
      for (Node& m : expand_inferred(g, n)) step(m);
      return;
    }
    if (n.op == "If") {
      for (Node& m : inline_if(g, n)) step(m);
      return;
    }
    if (n.op == "Loop") {
      unroll_loop(g, n, step, not_folded);
      return;
    }
    if (data_dependent(n)) {  // inference computed the outputs
      ++folded;
      return;
    }
    bool foldable = fold != nullptr;
    for (ValueId v : n.inputs)
      if (v != kNoValue && !g.value(v).is_const() && n.op != "Shape" && n.op != "Size")
        foldable = false;
    int64_t bytes = 0;
    for (ValueId v : n.outputs) {
      if (v == kNoValue) continue;
      int64_t numel = shape_numel(g.value(v).shape);
      if (numel > kMaxFoldElements && !o.unlimited) foldable = false;
      bytes += numel * int64_t(dtype_size(g.value(v).dtype));
    }
    if (foldable && !o.unlimited) {
      if (folded_bytes + bytes > kMaxFoldTotalBytes) foldable = false;
      const int64_t work = foldable ? fold_work(g, n) : 0;
      if (work > kMaxFoldWork || folded_work + work > kMaxFoldTotalWork) foldable = false;
      if (foldable) folded_bytes += bytes, folded_work += work;
    }
    if (!foldable) {
      kept.push_back(std::move(n));
      return;
    }
    std::vector<const Tensor*> ins;
    std::vector<Tensor> shape_only;  // Shape/Size read only the shape of a non-constant input
    shape_only.reserve(n.inputs.size());
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        ins.push_back(nullptr);
      } else if (g.value(v).is_const()) {
        ins.push_back(&*g.value(v).constant);
      } else {
        shape_only.push_back(Tensor::wrap(g.value(v).dtype, g.value(v).shape, nullptr));
        ins.push_back(&shape_only.back());
      }
    }
    std::vector<Tensor> outs;
    std::vector<Tensor*> out_ptrs;
    outs.reserve(n.outputs.size());
    for (ValueId v : n.outputs) {
      if (v == kNoValue) {
        out_ptrs.push_back(nullptr);
        continue;
      }
      outs.emplace_back(g.value(v).dtype, g.value(v).shape);
      out_ptrs.push_back(&outs.back());
    }
    (*fold)(n, ins, out_ptrs);
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] != kNoValue) g.value(n.outputs[i]).constant = *out_ptrs[i];
    ++folded;
  };
  // o.release: after its last reader is folded, a value's constant goes (the graph's outputs
  // stay), so a run-time tail holds what is live, not every tensor it made.
  std::vector<std::vector<ValueId>> dies_after(o.release ? g.nodes.size() : 0);
  if (o.release) {
    std::vector<size_t> last(g.values.size(), SIZE_MAX);
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].inputs)
        if (v != kNoValue) last[size_t(v)] = i;
    for (ValueId v : g.outputs) last[size_t(v)] = SIZE_MAX;
    for (size_t v = 0; v < last.size(); ++v)
      if (last[v] != SIZE_MAX) dies_after[last[v]].push_back(ValueId(v));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const size_t before = not_folded();
    step(g.nodes[i]);
    if (o.release && not_folded() == before)
      for (ValueId v : dies_after[i]) g.value(v).constant.reset();
  }
  g.nodes = std::move(kept);
  return folded;
}

namespace {
// Keeps the nodes whose drop flag is 0, in order.
void drop_nodes(Graph& g, const std::vector<char>& drop) {
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

bool has_consumer_after(const Graph& g, size_t i, ValueId v) {
  for (size_t j = i + 1; j < g.nodes.size(); ++j)
    for (ValueId u : g.nodes[j].inputs)
      if (u == v) return true;
  return false;
}
}  // namespace

int remove_identities(Graph& g) {
  int removed = 0;
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  bool renamed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    bool identity = n.op == "Identity" || n.op == "Dropout";
    ValueId x = n.in(0), y = n.outputs.empty() ? kNoValue : n.outputs[0];
    // A Dropout's mask (all true) read by later nodes or the caller: the node stays.
    const ValueId mask = n.outputs.size() > 1 ? n.outputs[1] : kNoValue;
    if (mask != kNoValue && (g.is_output(mask) || has_consumer_after(g, i, mask))) identity = false;
    if (!identity || x == kNoValue || y == kNoValue) {
      kept.push_back(std::move(n));
      continue;
    }
    if (g.is_output(y)) {
      // y's name is part of the model's interface. Give it to x when x is an ordinary
      // intermediate; otherwise (x is an input, a constant or another output) keep the copy.
      if (is_graph_input(g, x) || g.value(x).is_const() || g.is_output(x)) {
        kept.push_back(std::move(n));
        continue;
      }
      std::swap(g.value(x).name, g.value(y).name);
      for (ValueId& o : g.outputs)
        if (o == y) o = x;
      renamed = true;
    }
    for (size_t j = i + 1; j < g.nodes.size(); ++j)
      for (ValueId& v : g.nodes[j].inputs)
        if (v == y) v = x;
    ++removed;
  }
  g.nodes = std::move(kept);
  if (renamed) g.reindex();
  return removed;
}

int fold_batchnorm(Graph& g) {
  auto prod = g.producers();
  auto cons = g.consumers();
  std::vector<char> drop(g.nodes.size(), 0);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.inputs.size() < 5) continue;
    ValueId x = bn.inputs[0];
    int p = prod[size_t(x)];
    if (p < 0 || g.nodes[size_t(p)].op != "Conv" || cons[size_t(x)].size() != 1 || g.is_output(x))
      continue;
    bool params_const = true;
    for (int k = 1; k < 5; ++k) params_const &= g.value(bn.inputs[size_t(k)]).is_const();
    Node& conv = g.nodes[size_t(p)];
    ValueId w_id = conv.inputs[1], b_id = conv.in(2);
    if (!params_const || !g.value(w_id).is_const() ||
        (b_id != kNoValue && !g.value(b_id).is_const()))
      continue;
    const Tensor& w = *g.value(w_id).constant;
    const int64_t m = w.shape()[0], per_oc = w.numel() / m;
    auto param = [&](int k) { return g.value(bn.inputs[size_t(k)]).constant->data<float>(); };
    const float *scale = param(1), *shift = param(2), *mean = param(3), *var = param(4);
    const float eps = bn.attr_f("epsilon", 1e-5f);
    Tensor w2(DType::f32, w.shape()), b2(DType::f32, {m});
    const float* b = b_id != kNoValue ? g.value(b_id).constant->data<float>() : nullptr;
    const ModelFloats src(w);  // where the model keeps them: no aligned copy
    float *dw = w2.data<float>(), *db = b2.data<float>();
    for (int64_t oc = 0; oc < m; ++oc) {
      // Double precision so folding itself adds no visible rounding error.
      double s = double(scale[oc]) / std::sqrt(double(var[oc]) + double(eps));
      for (int64_t j = oc * per_oc; j < (oc + 1) * per_oc; ++j) dw[j] = float(double(src[j]) * s);
      db[oc] = float(((b ? double(b[oc]) : 0.0) - double(mean[oc])) * s + shift[oc]);
    }
    conv.inputs.resize(3);
    conv.inputs[1] = g.add_const(unique_value_name(g, conv.name + "_w_bnfold"), std::move(w2));
    conv.inputs[2] = g.add_const(unique_value_name(g, conv.name + "_b_bnfold"), std::move(b2));
    conv.outputs[0] = bn.outputs[0];
    drop[i] = 1;
    ++folded;
  }
  drop_nodes(g, drop);
  return folded;
}

namespace {

// Can conv's input be scaled and shifted per channel in its weights and bias: f32 constant
// weights (and bias) and no padding (a padded tap reads 0, not the shift)?
bool takes_input_affine(const Graph& g, const Node& conv, ValueId x) {
  if (conv.op != "Conv" || conv.in(0) != x || conv.inputs.size() < 2 || conv.in(1) == x ||
      conv.in(2) == x || conv.outputs.size() != 1)
    return false;
  const Value& w = g.value(conv.in(1));
  if (!w.is_const() || w.dtype != DType::f32 || w.shape.size() < 3) return false;
  if (conv.in(2) != kNoValue && !g.value(conv.in(2)).is_const()) return false;
  const std::string pad = conv.attr_s("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return false;
  for (int64_t v : conv.attr_ints("pads", {}))
    if (v != 0) return false;
  return true;
}

}  // namespace

int fold_batchnorm_into_consumers(Graph& g) {
  const auto cons = g.consumers();
  std::vector<char> drop(g.nodes.size(), 0);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    std::vector<float> a, s;
    if (bn.op != "BatchNormalization" || bn.outputs.size() != 1 || g.is_output(bn.outputs[0]) ||
        g.value(bn.in(0)).shape.size() < 3 || !batchnorm_affine(g, bn, &a, &s))
      continue;
    const ValueId y = bn.outputs[0];
    const std::vector<int>& users = cons[size_t(y)];
    bool ok = !users.empty();
    for (int u : users) ok = ok && takes_input_affine(g, g.nodes[size_t(u)], y);
    if (!ok) continue;
    for (int u : users) {
      Node& conv = g.nodes[size_t(u)];
      const Tensor& w = *g.value(conv.in(1)).constant;
      const int64_t m = w.shape()[0], icpg = w.shape()[1], taps = w.numel() / (m * icpg);
      const int64_t opg = m / std::max<int64_t>(1, conv.attr_i("group", 1));
      const ValueId b_id = conv.in(2);
      const float* b = b_id != kNoValue ? g.value(b_id).constant->data<float>() : nullptr;
      const ModelFloats src(w);
      Tensor w2(DType::f32, w.shape()), b2(DType::f32, {m});
      float *dw = w2.data<float>(), *db = b2.data<float>();
      for (int64_t oc = 0; oc < m; ++oc) {
        // (Double precision: the fold adds no visible rounding of its own.)
        double bias = b ? double(b[oc]) : 0.0;
        for (int64_t ic = 0; ic < icpg; ++ic) {
          const size_t c = size_t(oc / opg * icpg + ic);  // the input channel
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t j = (oc * icpg + ic) * taps + t;
            dw[j] = float(double(src[j]) * double(a[c]));
            bias += double(src[j]) * double(s[c]);
          }
        }
        db[oc] = float(bias);
      }
      conv.inputs.resize(3);
      conv.inputs[0] = bn.inputs[0];
      conv.inputs[1] = g.add_const(unique_value_name(g, conv.name + "_w_bnin"), std::move(w2));
      conv.inputs[2] = g.add_const(unique_value_name(g, conv.name + "_b_bnin"), std::move(b2));
    }
    drop[i] = 1;
    ++folded;
  }
  drop_nodes(g, drop);
  return folded;
}

bool batchnorm_affine(const Graph& g, const Node& bn, std::vector<float>* scale,
                      std::vector<float>* shift) {
  if (bn.op != "BatchNormalization" || bn.inputs.size() != 5 || bn.attr_i("training_mode", 0) != 0)
    return false;
  const Value& x = g.value(bn.inputs[0]);
  if (x.dtype != DType::f32 || x.shape.size() < 2) return false;
  const Shape c{x.shape[1]};
  for (size_t k = 1; k < 5; ++k) {
    const Value& v = g.value(bn.inputs[k]);
    if (!v.is_const() || v.dtype != DType::f32 || v.shape != c) return false;
  }
  auto p = [&](size_t k) { return g.value(bn.inputs[k]).constant->data<float>(); };
  const double eps = bn.attr_f("epsilon", 1e-5f);
  scale->resize(size_t(c[0]));
  shift->resize(size_t(c[0]));
  for (size_t i = 0; i < scale->size(); ++i) {
    const double s = double(p(1)[i]) / std::sqrt(double(p(4)[i]) + eps);
    (*scale)[i] = float(s);
    (*shift)[i] = float(double(p(2)[i]) - double(p(3)[i]) * s);
  }
  return true;
}

int remove_dead_code(Graph& g) {
  std::vector<char> live(g.values.size(), 0);
  for (ValueId v : g.outputs) live[size_t(v)] = 1;
  std::vector<char> keep(g.nodes.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (ValueId v : n.outputs)
      if (v != kNoValue && live[size_t(v)]) keep[i] = 1;
    if (keep[i])
      for (ValueId v : n.inputs)
        if (v != kNoValue) live[size_t(v)] = 1;
  }
  std::vector<Node> kept;
  int removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (keep[i])
      kept.push_back(std::move(g.nodes[i]));
    else
      ++removed;
  }
  g.nodes = std::move(kept);

  // Compact the value table: only values still referenced survive (frees dead weights).
  std::vector<char> used(g.values.size(), 0);
  for (ValueId v : g.inputs) used[size_t(v)] = 1;
  for (ValueId v : g.outputs) used[size_t(v)] = 1;
  for (const Node& n : g.nodes) {
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[size_t(v)] = 1;
    for (ValueId v : n.outputs)
      if (v != kNoValue) used[size_t(v)] = 1;
  }
  std::vector<ValueId> remap(g.values.size(), kNoValue);
  std::vector<Value> values;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (used[i]) {
      remap[i] = ValueId(values.size());
      values.push_back(std::move(g.values[i]));
    }
  auto fix = [&](ValueId& v) {
    if (v != kNoValue) v = remap[size_t(v)];
  };
  for (ValueId& v : g.inputs) fix(v);
  for (ValueId& v : g.outputs) fix(v);
  for (Node& n : g.nodes) {
    for (ValueId& v : n.inputs) fix(v);
    for (ValueId& v : n.outputs) fix(v);
  }
  g.values = std::move(values);
  g.reindex();
  return removed;
}

PassStats optimize(Graph& g, const Evaluator& eval) {
  PassStats s;
  s.folded = infer_shapes(g, &eval);
  s.identities = remove_identities(g);  // (fuse_qdq pairs a QuantizeLinear and a
                                        // DequantizeLinear through an 8-bit Cast's Identity)
  const int lrn = fuse_lrn(g);
  const int conv3d = rewrite_conv3d(g) + rewrite_resize_ranks(g);
  const int qdq = fuse_qdq(g);         // before rewrite_forms: it sees unary ops
  const int forms = rewrite_forms(g);  // may leave Identity nodes
  s.identities += remove_identities(g);
  s.batchnorms = fold_batchnorm(g);
  s.batchnorms += fold_batchnorm_into_consumers(g);
  s.rewrites = lrn + conv3d + qdq + forms + rewrite_conv_transposes(g);
  s.rewrites += rewrite_einsums(g);
  s.rewrites += sink_channels_last(g);
  s.rewrites += fuse_layer_norm(g);
  s.rewrites += fuse_group_norm(g);
  s.rewrites += fuse_gelu(g);
  s.rewrites += fuse_attention(g);
  s.rewrites += fold_conv_affine(g);
  s.rewrites += merge_branches(g);  // (after BN folding: branches are Convs with biases)
  s.glue = rewrite_channel_ops(g) + rewrite_splits(g) + rewrite_reduce_means(g) + fold_pads(g);
  s.dead = remove_dead_code(g);
  return s;
}

}  // namespace kiln
