// Rewrites of data-movement patterns into forms the glue kernels run in any layout:
// channel shuffles, slices, splits (and the concats feeding them) become ChannelShuffle nodes
// (graph/channel_shuffle.h) that move each element once; ReduceMean over H,W becomes a global
// average pool; constant Pads are folded into the consumer's padding where that is exact.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/channel_shuffle.h"
#include "graph/infer.h"
#include "graph/passes.h"

namespace kiln {
namespace {

bool is4d_f32(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).shape.size() == 4 && g.value(v).dtype == DType::f32;
}

// v feeds only node `user` (once) and is not a graph output.
bool only_feeds(const Graph& g, const std::vector<std::vector<int>>& cons, ValueId v, int user) {
  return !g.is_output(v) && cons[size_t(v)].size() == 1 && cons[size_t(v)][0] == user;
}

// The single constant f32 value of input i; `def` when absent, nullopt when not constant.
std::optional<float> scalar_of(const Graph& g, const Node& n, size_t i, float def) {
  const ValueId v = n.in(i);
  if (v == kNoValue) return def;
  if (!g.value(v).is_const() || g.value(v).dtype != DType::f32 || g.value(v).constant->numel() != 1)
    return std::nullopt;
  return *g.value(v).constant->data<float>();
}

Node channel_shuffle_node(const std::string& name, std::vector<ValueId> inputs,
                          std::vector<ValueId> outputs, int64_t groups, int64_t offset,
                          std::vector<int64_t> split) {
  Node cs;
  cs.name = name;
  cs.op = "ChannelShuffle";
  cs.inputs = std::move(inputs);
  cs.outputs = std::move(outputs);
  cs.attrs["groups"] = attr_i(groups);
  cs.attrs["offset"] = attr_i(offset);
  cs.attrs["split"] = attr_ints(std::move(split));
  return cs;
}

void drop_tombstones(Graph& g) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& n : g.nodes)
    if (!n.op.empty()) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
}

// Reshape [N,C,H,W] -> [N,g,C/g,H,W], Transpose (0,2,1,3,4), Reshape back to [N,C,H,W].
std::optional<Node> match_shuffle(const Graph& g, const std::vector<int>& prod,
                                  const std::vector<std::vector<int>>& cons, int last) {
  const Node& r2 = g.nodes[size_t(last)];
  if (r2.op != "Reshape" || r2.outputs.size() != 1) return std::nullopt;
  const ValueId t = r2.in(0);
  const int ti = t == kNoValue ? -1 : prod[size_t(t)];
  if (ti < 0 || !only_feeds(g, cons, t, last)) return std::nullopt;
  const Node& tr = g.nodes[size_t(ti)];
  if (tr.op != "Transpose" || tr.attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3, 4})
    return std::nullopt;
  const ValueId r = tr.in(0);
  const int ri = r == kNoValue ? -1 : prod[size_t(r)];
  if (ri < 0 || !only_feeds(g, cons, r, ti) || g.nodes[size_t(ri)].op != "Reshape")
    return std::nullopt;
  const ValueId x = g.nodes[size_t(ri)].in(0);
  if (!is4d_f32(g, x) || g.value(x).is_const()) return std::nullopt;
  const Shape& xs = g.value(x).shape;
  const Shape& rs = g.value(r).shape;
  if (rs.size() != 5 || rs[0] != xs[0] || rs[1] < 1 || rs[1] * rs[2] != xs[1] || rs[3] != xs[2] ||
      rs[4] != xs[3] || g.value(r2.outputs[0]).shape != xs)
    return std::nullopt;
  return channel_shuffle_node(r2.name, {x}, r2.outputs, rs[1], 0, {xs[1]});
}

// A Slice of channels only (step 1, every other dim whole) or a Split along channels, of a
// 4-D f32 activation, as ChannelShuffle with groups 1.
std::optional<Node> match_channel_slice(const Graph& g, const Node& n) {
  const ValueId x = n.in(0);
  if (!is4d_f32(g, x) || g.value(x).is_const()) return std::nullopt;
  const Shape& xs = g.value(x).shape;
  std::vector<int64_t> split;
  for (ValueId y : n.outputs) {
    if (y == kNoValue) return std::nullopt;
    Shape ys = g.value(y).shape;
    if (ys.size() != 4 || ys[1] < 1) return std::nullopt;
    split.push_back(ys[1]);
    ys[1] = xs[1];
    if (ys != xs) return std::nullopt;
  }
  int64_t offset = 0;
  if (n.op == "Split") {
    if ((n.attr_i("axis", 0) + 4) % 4 != 1) return std::nullopt;
  } else if (n.op == "Slice") {
    auto starts = ints_of(g, n, 1), axes = ints_of(g, n, 3), steps = ints_of(g, n, 4);
    if (!starts || (n.in(3) != kNoValue && !axes) || (n.in(4) != kNoValue && !steps))
      return std::nullopt;
    for (size_t i = 0; i < starts->size(); ++i) {
      if (steps && steps->at(i) != 1) return std::nullopt;
      const int64_t axis = axes ? axes->at(i) : int64_t(i);
      if (axis != 1 && axis != -3) continue;  // other dims are whole (shapes checked above)
      const int64_t s = (*starts)[i];
      offset = std::clamp<int64_t>(s < 0 ? s + xs[1] : s, 0, xs[1]);
    }
  } else {
    return std::nullopt;
  }
  return channel_shuffle_node(n.name, {x}, n.outputs, 1, offset, split);
}

class ChannelRewriter {
 public:
  explicit ChannelRewriter(Graph& g) : g_(g) {}

  int run() {
    int changed = make_shuffles();
    changed += fold_concats();
    changed += fold_slices();
    return changed;
  }

 private:
  int make_shuffles() {
    const auto prod = g_.producers();
    const auto cons = g_.consumers();
    int made = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      std::optional<Node> cs = match_shuffle(g_, prod, cons, int(i));
      if (cs) {
        const int ti = prod[size_t(g_.nodes[i].inputs[0])];
        g_.nodes[size_t(prod[size_t(g_.nodes[size_t(ti)].inputs[0])])].op.clear();
        g_.nodes[size_t(ti)].op.clear();
      } else {
        cs = match_channel_slice(g_, g_.nodes[i]);
      }
      if (!cs) continue;
      g_.nodes[i] = std::move(*cs);
      infer_node(g_, g_.nodes[i]);
      ++made;
    }
    drop_tombstones(g_);
    return made;
  }

  // A channel Concat feeding only a ChannelShuffle: the shuffle reads the concat's inputs.
  int fold_concats() {
    const auto prod = g_.producers();
    const auto cons = g_.consumers();
    int folded = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& cs = g_.nodes[i];
      if (cs.op != "ChannelShuffle") continue;
      std::vector<ValueId> ins;
      bool any = false;
      for (ValueId v : cs.inputs) {
        const int p = prod[size_t(v)];
        if (p >= 0 && concat_foldable(g_.nodes[size_t(p)]) && only_feeds(g_, cons, v, int(i))) {
          const Node& cat = g_.nodes[size_t(p)];
          ins.insert(ins.end(), cat.inputs.begin(), cat.inputs.end());
          g_.nodes[size_t(p)].op.clear();
          any = true;
          ++folded;
        } else {
          ins.push_back(v);
        }
      }
      if (any) cs.inputs = std::move(ins);
    }
    drop_tombstones(g_);
    return folded;
  }

  bool concat_foldable(const Node& n) const {
    if (n.op != "Concat" || (n.attr_i("axis", 0) + 4) % 4 != 1) return false;
    for (ValueId v : n.inputs)
      if (!is4d_f32(g_, v) || g_.value(v).is_const() || g_.value(v).shape[1] < 1) return false;
    return true;
  }

  // Consumers that are all groups-1 ChannelShuffles (slices) of a shuffle's single output,
  // covering one contiguous channel range: the shuffle writes their outputs directly.
  int fold_slices() {
    auto cons = g_.consumers();
    int folded = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      while (absorb_slices(int(i), cons)) ++folded;
    drop_tombstones(g_);
    return folded;
  }

  bool absorb_slices(int pi, std::vector<std::vector<int>>& cons) {
    Node& p = g_.nodes[size_t(pi)];
    if (p.op != "ChannelShuffle" || p.outputs.size() != 1 || g_.is_output(p.outputs[0]))
      return false;
    std::vector<int> users = cons[size_t(p.outputs[0])];
    if (users.empty()) return false;
    for (int u : users) {
      const Node& q = g_.nodes[size_t(u)];
      if (q.op != "ChannelShuffle" || q.attr_i("groups", 1) != 1 || q.inputs.size() != 1)
        return false;
    }
    std::sort(users.begin(), users.end(), [&](int a, int b) {
      return g_.nodes[size_t(a)].attr_i("offset", 0) < g_.nodes[size_t(b)].attr_i("offset", 0);
    });
    int64_t at = g_.nodes[size_t(users[0])].attr_i("offset", 0);
    const int64_t first = at;
    std::vector<int64_t> split;
    std::vector<ValueId> outs;
    for (int u : users) {
      const Node& q = g_.nodes[size_t(u)];
      if (q.attr_i("offset", 0) != at) return false;  // a gap or an overlap
      for (int64_t s : q.attr_ints("split")) split.push_back(s), at += s;
      outs.insert(outs.end(), q.outputs.begin(), q.outputs.end());
    }
    p.attrs["offset"] = attr_i(p.attr_i("offset", 0) + first);
    p.attrs["split"] = attr_ints(split);
    p.outputs = outs;
    for (int u : users) g_.nodes[size_t(u)].op.clear();
    for (ValueId o : outs) cons[size_t(o)] = real_consumers(o);
    infer_node(g_, p);
    return true;
  }

  std::vector<int> real_consumers(ValueId v) const {
    std::vector<int> c;
    for (size_t j = 0; j < g_.nodes.size(); ++j)
      if (!g_.nodes[j].op.empty())
        for (ValueId x : g_.nodes[j].inputs)
          if (x == v) c.push_back(int(j));
    return c;
  }

  Graph& g_;
};

}  // namespace

int rewrite_reduce_means(Graph& g) {
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  int rewritten = 0;
  for (Node& n : g.nodes) {
    const ValueId x = n.in(0);
    std::optional<std::vector<int64_t>> axes;
    if (n.op == "ReduceMean") axes = ints_of(g, n, 1);
    bool hw = is4d_f32(g, x) && axes && axes->size() == 2;
    if (hw) {
      for (int64_t& a : *axes) a = (a + 4) % 4;
      std::sort(axes->begin(), axes->end());
      hw = *axes == std::vector<int64_t>{2, 3};
    }
    if (!hw) {
      out.push_back(std::move(n));
      continue;
    }
    const bool keepdims = n.attr_i("keepdims", 1) != 0;
    Node pool;
    pool.name = n.name;
    pool.op = "GlobalAveragePool";
    pool.inputs = {x};
    pool.outputs = n.outputs;
    if (!keepdims) {
      // [N,C,1,1] then Flatten to the [N,C] ReduceMean produced.
      const ValueId t = g.add_value(unique_value_name(g, n.name + "_pooled"));
      pool.outputs = {t};
      Node flat;
      flat.name = n.name + "_flatten";
      flat.op = "Flatten";
      flat.inputs = {t};
      flat.outputs = n.outputs;
      flat.attrs["axis"] = attr_i(1);
      infer_node(g, pool);
      out.push_back(std::move(pool));
      infer_node(g, flat);
      out.push_back(std::move(flat));
    } else {
      infer_node(g, pool);
      out.push_back(std::move(pool));
    }
    ++rewritten;
  }
  g.nodes = std::move(out);
  return rewritten;
}

namespace {

// ---- constant Pad folded into the consumer's padding ----

// x is >= 0 wherever it is defined: the output of a Relu, or of a Clip with a constant min >= 0.
bool non_negative(const Graph& g, const std::vector<int>& prod, ValueId x) {
  const int p = prod[size_t(x)];
  if (p < 0) return false;
  const Node& n = g.nodes[size_t(p)];
  if (n.op == "Relu") return true;
  const std::optional<float> lo = scalar_of(g, n, 1, -INFINITY);
  return n.op == "Clip" && lo && *lo >= 0;
}

struct HwPads {
  int64_t t, l, b, r;  // top, left, bottom, right
};

// Whether every MaxPool window over the padded input holds at least one element of x (so
// padding with `value` and padding with -inf give the same maxima).
bool windows_see_input(const Node& pool, const Shape& xs, const HwPads& p) {
  const auto k = pool.attr_ints("kernel_shape"), s = pool.attr_ints("strides"),
             d = pool.attr_ints("dilations", {1, 1});
  if (k.size() != 2 || s.size() != 2 || d != std::vector<int64_t>{1, 1}) return false;
  const int64_t begin[2] = {p.t, p.l}, end[2] = {p.b, p.r};
  for (int a = 0; a < 2; ++a) {
    const int64_t in = xs[size_t(2 + a)], span = in + begin[a] + end[a] - k[size_t(a)];
    if (span < 0) return false;
    const int64_t last = span / s[size_t(a)] * s[size_t(a)] - begin[a];  // last window start
    if (k[size_t(a)] - 1 - begin[a] < 0 || last > in - 1) return false;
  }
  return true;
}

// Folds a constant Pad of x (H/W only) with output y into consumer c when exact: c reads y as
// its input 0 and nowhere else. The consumer's own pads are added (ceil_mode pools are left
// alone: their last-window rule reads the pads).
bool fold_pad_into(Graph& g, const std::vector<int>& prod, Node& c, ValueId y, ValueId x,
                   const HwPads& p, float value) {
  if (c.in(0) != y) return false;
  for (size_t k = 1; k < c.inputs.size(); ++k)
    if (c.inputs[k] == y) return false;
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.size() != 4) return false;
  const std::vector<int64_t> total = {pads[0] + p.t, pads[1] + p.l, pads[2] + p.b, pads[3] + p.r};
  if (c.op != "Conv") {  // pools: no window may lie in the padding alone (inference refuses it)
    const auto k = c.attr_ints("kernel_shape"), d = c.attr_ints("dilations", {1, 1});
    if (k.size() != 2 || d.size() != 2) return false;
    for (size_t a = 0; a < 4; ++a)
      if (total[a] >= (k[a % 2] - 1) * d[a % 2] + 1) return false;
  }
  if (c.op == "Conv") {
    if (value != 0) return false;
  } else if (c.op == "AveragePool") {
    // The explicit zeros count in every window: fold only where the pool's own padding
    // counts too (or it has none), then count all of it.
    const bool include = c.attr_i("count_include_pad", 0) != 0;
    if (value != 0 || c.attr_i("ceil_mode", 0) != 0 ||
        (!include && pads != std::vector<int64_t>(4, 0)))
      return false;
    c.attrs["count_include_pad"] = attr_i(1);
  } else if (c.op == "MaxPool") {
    const bool neg_inf = std::isinf(value) && value < 0;
    if (c.attr_i("ceil_mode", 0) != 0 || c.outputs.size() > 1) return false;
    if (!neg_inf && !(value == 0 && non_negative(g, prod, x))) return false;
    if (!windows_see_input(c, g.value(x).shape, {total[0], total[1], total[2], total[3]}))
      return false;
  } else {
    return false;
  }
  c.attrs["pads"] = attr_ints(total);
  c.inputs[0] = x;
  infer_node(g, c);
  return true;
}

}  // namespace

int fold_pads(Graph& g) {
  const auto prod = g.producers();
  const auto cons = g.consumers();
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& pad = g.nodes[i];
    const ValueId x = pad.in(0);
    if (pad.op != "Pad" || !is4d_f32(g, x) || pad.outputs.size() != 1 ||
        pad.attr_s("mode", "constant") != "constant")
      continue;
    const ValueId y = pad.outputs[0];
    const std::optional<std::vector<int64_t>> q = ints_of(g, pad, 1);  // begins, then ends
    const std::optional<float> value = scalar_of(g, pad, 2, 0.f);
    if (!q || q->size() != 8 || !value || pad.in(3) != kNoValue || g.is_output(y) || (*q)[0] ||
        (*q)[1] || (*q)[4] || (*q)[5])
      continue;
    const std::vector<int>& users = cons[size_t(y)];
    if (*q == std::vector<int64_t>(8, 0)) {  // no padding at all: consumers read x
      for (int u : users)
        for (ValueId& v : g.nodes[size_t(u)].inputs)
          if (v == y) v = x;
    } else {
      const HwPads p{(*q)[2], (*q)[3], (*q)[6], (*q)[7]};
      bool ok = !users.empty();
      for (int u : users) {  // all consumers or none: try on copies first
        Node trial = g.nodes[size_t(u)];
        ok = ok && fold_pad_into(g, prod, trial, y, x, p, *value);
      }
      if (!ok) continue;
      for (int u : users) fold_pad_into(g, prod, g.nodes[size_t(u)], y, x, p, *value);
    }
    pad.op.clear();
    ++folded;
  }
  drop_tombstones(g);
  return folded;
}

int rewrite_channel_ops(Graph& g) {
  return ChannelRewriter(g).run();
}

}  // namespace kiln
