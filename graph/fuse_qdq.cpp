// QuantizeLinear -> DequantizeLinear pairs of QDQ models into one QuantizeDequantize node
// (graph/passes.h fuse_qdq).
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "graph/import_qdq.h"
#include "graph/infer.h"
#include "graph/passes.h"

namespace kiln {
namespace {

// A per-tensor scale or zero point: a constant of one f32 element (zero point absent: 0).
bool scalar_param(const Graph& g, ValueId v, float def, float* out) {
  if (v == kNoValue) return *out = def, true;
  const Value& val = g.value(v);
  if (!val.is_const() || val.dtype != DType::f32 || val.constant->numel() != 1) return false;
  *out = val.constant->data<float>()[0];
  return true;
}

struct QuantParams {
  ValueId x = kNoValue;
  float scale = 0, zero_point = 0;
  int64_t to = 0;
};

std::optional<QuantParams> params_of(const Graph& g, const Node& n, ValueId x) {
  QuantParams p;
  p.x = x;
  if (!scalar_param(g, n.in(1), 0.f, &p.scale) || !scalar_param(g, n.in(2), 0.f, &p.zero_point))
    return std::nullopt;
  // ONNX scales are positive; other values are left to the reference kernels.
  if (!(p.scale > 0) || !std::isfinite(p.scale) || !std::isfinite(p.zero_point))
    return std::nullopt;
  p.to = n.attr_i("to", 0);
  return p;
}

bool same_grid(const Node& a, const Node& b) {
  for (const char* k : {"scale", "zero_point"})
    if (a.attrs.at(k).f != b.attrs.at(k).f) return false;
  return a.attrs.at("to").i == b.attrs.at("to").i;
}

// QuantizeDequantize nodes whose input is already on their grid become Identity.
int drop_requantizations(Graph& g) {
  const std::vector<int> producer = g.producers();
  auto node_of = [&](ValueId v) -> const Node* {
    const int p = v == kNoValue ? -1 : producer[size_t(v)];
    return p < 0 ? nullptr : &g.nodes[size_t(p)];
  };
  // Whether v is on q's grid: a QuantizeDequantize's output with the same one, a MaxPool of
  // such a value (maxpool_keeps_grid), a Concat of such values, another op that only moves or
  // selects its input's values (Reshape, Flatten, ...: import_qdq.h) of one (a few levels deep).
  std::function<bool(ValueId, const Node&, int)> on_grid = [&](ValueId v, const Node& q,
                                                               int depth) {
    const Node* p = node_of(v);
    if (!p || depth > 4) return false;
    if (p->op == "QuantizeDequantize") return same_grid(*p, q);
    if (p->op == "MaxPool" && maxpool_keeps_grid(g, *p)) return on_grid(p->in(0), q, depth + 1);
    if (p->op != "MaxPool" && p->op != "Concat" && moves_values(*p))
      return on_grid(p->in(0), q, depth + 1);
    if (p->op != "Concat" || p->inputs.empty()) return false;
    for (ValueId x : p->inputs)
      if (!on_grid(x, q, depth + 1)) return false;
    return true;
  };
  std::vector<size_t> drop;  // (decided on the graph as it is: a chain drops all but its first)
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == "QuantizeDequantize" && on_grid(g.nodes[i].in(0), g.nodes[i], 0))
      drop.push_back(i);
  for (size_t i : drop) {
    g.nodes[i].op = "Identity";
    g.nodes[i].attrs.clear();
  }
  return int(drop.size());
}

// Concat(x_i) -> QuantizeDequantize q becomes Concat(q(x_i)) (an elementwise op commutes with
// a concat: exact) where the concat's output feeds q alone and each x_i feeds the concat alone:
// each q(x_i) can then fuse into x_i's producer, and the concat copies values all on q's grid
// (uint8 bytes where int8 convs produce and read them). Likewise MaxPool(Concat) -> q becomes
// MaxPool(q(Concat)) (q is monotone: it commutes with a max; maxpool_keeps_grid), which the
// concat then takes on.
int push_qdq_up(Graph& g, const std::string& op) {
  const std::vector<std::vector<int>> consumers = g.consumers();
  // (The QuantizeLinear of a fused pair still reads its input until dead code goes: a node
  // none of whose outputs is read does not count.)
  auto live = [&](int node) {
    for (ValueId o : g.nodes[size_t(node)].outputs)
      if (o != kNoValue && (g.is_output(o) || !consumers[size_t(o)].empty())) return true;
    return false;
  };
  auto only_consumer = [&](ValueId v) -> int {
    if (v == kNoValue || g.is_output(v)) return -1;
    int only = -1;
    for (int c : consumers[size_t(v)])
      if (live(c)) {
        if (only >= 0) return -1;
        only = c;
      }
    return only;
  };
  // Concat output -> its quantize-dequantize's output and attributes.
  std::map<ValueId, ValueId> out_of;
  std::map<ValueId, std::map<std::string, Attribute>> qattrs;
  const std::vector<int> producer = g.producers();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& c = g.nodes[i];
    if (c.op != op || c.outputs.size() != 1 || c.inputs.empty()) continue;
    if (op == "MaxPool") {
      const int p = producer[size_t(c.inputs[0])];
      if (!maxpool_keeps_grid(g, c) || p < 0 || g.nodes[size_t(p)].op != "Concat") continue;
    }
    const int q = only_consumer(c.outputs[0]);
    if (q < 0 || g.nodes[size_t(q)].op != "QuantizeDequantize") continue;
    bool ok = true;
    for (ValueId x : c.inputs)
      ok = ok && only_consumer(x) == int(i) && g.value(x).dtype == DType::f32;
    if (!ok) continue;
    out_of[c.outputs[0]] = g.nodes[size_t(q)].outputs[0];
    qattrs[c.outputs[0]] = g.nodes[size_t(q)].attrs;
  }
  if (out_of.empty()) return 0;
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    if (n.op == "QuantizeDequantize" && n.in(0) != kNoValue && out_of.count(n.in(0)))
      return true;  // (the concat writes its output now)
    if (n.op != op || n.outputs.size() != 1 || !out_of.count(n.outputs[0])) return false;
    Node c = n;
    for (ValueId& x : c.inputs) {
      Node q;
      q.op = "QuantizeDequantize";
      q.name = n.name + "/" + g.value(x).name + "_qdq";
      q.inputs = {x};
      q.attrs = qattrs.at(n.outputs[0]);
      x = emit_node(g, nodes, std::move(q), g.value(x).name + "_qdq");
    }
    emit_node(g, nodes, std::move(c), n.name, out_of.at(n.outputs[0]));
    return true;
  });
}

// An 8-bit tensor's op that moves or selects values (import_qdq.h moves_values), read only by
// DequantizeLinears of one per-tensor grid (a QOperator model max-pools or flattens uint8
// tensors): P(u) -> DQ becomes DQ(u) -> P -> QuantizeLinear -> DQ, exact (a per-tensor
// dequantization is elementwise and increasing, so it commutes with P; P's result is on the
// grid, so quantizing it again changes nothing): the form QDQ models write, whose pairs fuse and
// whose int8 convs read the bytes. The 8-bit type comes from the QuantizeLinear u descends from;
// returns how many ops moved.
int dequantize_before_moves(Graph& g) {
  const std::vector<int> producer = g.producers();
  const std::vector<std::vector<int>> consumers = g.consumers();
  // The ONNX type of the QuantizeLinear v descends from through value-moving ops (0: none).
  std::function<int64_t(ValueId, int)> type_of = [&](ValueId v, int depth) -> int64_t {
    const int p = v == kNoValue ? -1 : producer[size_t(v)];
    if (p < 0 || depth > 16) return 0;
    const Node& n = g.nodes[size_t(p)];
    if (n.op == "QuantizeLinear") return n.attr_i("to", 0);
    return moves_values(n) || n.op == "Identity" ? type_of(n.in(0), depth + 1) : 0;
  };
  // op -> its first reader's scale and zero point (all its readers' grid) and the 8-bit type
  struct Grid {
    ValueId scale, zero_point;
    int64_t to;
  };
  std::map<int, Grid> moved;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& p = g.nodes[i];
    if (!moves_values(p)) continue;
    std::optional<QuantParams> grid;
    const Node* first = nullptr;
    bool ok = true;
    for (ValueId o : p.outputs) {
      if (o == kNoValue) continue;
      ok = ok && !g.is_output(o) && !consumers[size_t(o)].empty();
      for (int c : consumers[size_t(o)]) {
        const Node& d = g.nodes[size_t(c)];
        const auto q =
            d.op == "DequantizeLinear" && d.in(0) == o ? params_of(g, d, o) : std::nullopt;
        ok = ok && q && (!grid || (q->scale == grid->scale && q->zero_point == grid->zero_point));
        if (ok && !grid) grid = q, first = &d;
      }
    }
    const int64_t to = type_of(p.in(0), 0);
    if (ok && grid && to != 0) moved[int(i)] = {first->in(1), first->in(2), to};
  }
  if (moved.empty()) return 0;
  std::map<ValueId, int64_t> out_type;  // moved ops' outputs
  for (const auto& [i, grid] : moved)
    for (ValueId o : g.nodes[size_t(i)].outputs)
      if (o != kNoValue) out_type[o] = grid.to;
  auto node = [](const Node& n, const char* op, const char* part, std::vector<ValueId> in) {
    Node m;
    m.op = op;
    m.name = n.name + "_" + part;
    m.inputs = std::move(in);
    if (m.inputs.back() == kNoValue) m.inputs.pop_back();  // (no zero point)
    return m;
  };
  size_t index = 0;
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    const size_t i = index++;
    if (auto m = moved.find(int(i)); m != moved.end()) {
      const Grid& q = m->second;
      Node p = n;
      for (size_t j = 0; j < p.inputs.size(); ++j)
        if (value_input(p, int(j)) && p.inputs[j] != kNoValue)
          p.inputs[j] = emit_node(
              g, nodes, node(n, "DequantizeLinear", "dq", {p.inputs[j], q.scale, q.zero_point}),
              n.name + "_dq");
      infer_node(g, p);
      nodes.push_back(std::move(p));
      return true;
    }
    if (n.op != "DequantizeLinear" || !out_type.count(n.in(0))) return false;
    Node qn = node(n, "QuantizeLinear", "q", {n.in(0), n.in(1), n.in(2)});
    qn.attrs["to"] = attr_i(out_type.at(n.in(0)));
    Node d = n;
    d.inputs[0] = emit_node(g, nodes, std::move(qn), n.name + "_q");
    nodes.push_back(std::move(d));
    return true;
  });
}

// A per-tensor DequantizeLinear of an 8-bit graph input (an image the caller passes as bytes,
// held as float32 integers: graph/ir.h io_dtypes) becomes QuantizeDequantize((x - z) * s): the
// same values bit for bit (rint((x - z) * s / s) recovers x - z exactly for 8-bit integers, so
// the quantize-dequantize computes the same product), now on a grid the int8 convs read and on
// glue kernels instead of the reference DequantizeLinear. Returns how many.
int dequantize_inputs(Graph& g) {
  std::map<ValueId, int64_t> byte_inputs;  // graph input -> its ONNX 8-bit type
  for (ValueId v : g.inputs)
    if (auto it = g.io_dtypes.find(g.value(v).name); it != g.io_dtypes.end())
      if (it->second == DType::u8 || it->second == DType::i8) byte_inputs[v] = int64_t(it->second);
  if (byte_inputs.empty()) return 0;
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    if (n.op != "DequantizeLinear" || n.outputs.size() != 1 || !byte_inputs.count(n.in(0)))
      return false;
    const auto p = params_of(g, n, n.in(0));  // (per-tensor only)
    if (!p) return false;
    auto binary = [&](const char* op, ValueId a, ValueId b) {
      Node m;
      m.op = op;
      m.name = n.name + "_" + op;
      m.inputs = {a, b};
      return emit_node(g, nodes, std::move(m), n.name + "_" + op);
    };
    ValueId x = n.in(0);
    if (p->zero_point != 0) x = binary("Sub", x, n.in(2));
    x = binary("Mul", x, n.in(1));
    Node f;
    f.op = "QuantizeDequantize";
    f.name = n.name;
    f.inputs = {x};
    f.attrs["scale"] = attr_f(p->scale);
    f.attrs["zero_point"] = attr_f(p->zero_point);
    f.attrs["to"] = attr_i(byte_inputs.at(n.in(0)));
    emit_node(g, nodes, std::move(f), n.name, n.outputs[0]);
    return true;
  });
}

}  // namespace

bool maxpool_keeps_grid(const Graph& g, const Node& n) {
  if (n.op != "MaxPool" || n.outputs.size() != 1 || n.in(0) == kNoValue) return false;
  const Shape& x = g.value(n.inputs[0]).shape;
  const Shape& y = g.value(n.outputs[0]).shape;
  const auto k = n.attr_ints("kernel_shape"), s = n.attr_ints("strides", {1, 1});
  const auto p = n.attr_ints("pads", {0, 0, 0, 0}), d = n.attr_ints("dilations", {1, 1});
  if (x.size() != 4 || y.size() != 4 || k.size() != 2 || s.size() != 2 || p.size() != 4 ||
      d != std::vector<int64_t>{1, 1} || n.attr_s("auto_pad", "NOTSET") != "NOTSET")
    return false;
  for (size_t a = 0; a < 2; ++a)  // the first and the last window of each axis reach the input
    if (p[a] > k[a] - 1 || (y[a + 2] - 1) * s[a] - p[a] > x[a + 2] - 1) return false;
  return true;
}

int fuse_qdq(Graph& g) {
  int moved = dequantize_inputs(g);  // (a chain below moves one op a round, from its end)
  while (const int k = dequantize_before_moves(g)) moved += k;
  std::map<ValueId, QuantParams> quantized;  // QuantizeLinear outputs
  for (const Node& n : g.nodes)
    if (n.op == "QuantizeLinear" && n.outputs.size() == 1 && n.outputs[0] != kNoValue)
      if (auto p = params_of(g, n, n.in(0))) quantized[n.outputs[0]] = *p;
  if (quantized.empty()) return moved;
  const int fused = rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    if (n.op != "DequantizeLinear" || n.outputs.size() != 1) return false;
    auto q = quantized.find(n.in(0));
    if (q == quantized.end()) return false;
    const auto d = params_of(g, n, n.in(0));
    // The same scale and zero point (a model may requantize with other ones: not fused).
    if (!d || d->scale != q->second.scale || d->zero_point != q->second.zero_point) return false;
    Node f;
    f.op = "QuantizeDequantize";
    f.name = n.name;
    f.inputs = {q->second.x};
    f.attrs["scale"] = attr_f(q->second.scale);
    f.attrs["zero_point"] = attr_f(q->second.zero_point);
    f.attrs["to"] = attr_i(q->second.to);
    emit_node(g, nodes, std::move(f), n.name, n.outputs[0]);
    return true;
  });
  const int pushed = push_qdq_up(g, "MaxPool") + push_qdq_up(g, "Concat");
  // A QuantizeLinear left unpaired, per tensor (its integers are a graph output, or a
  // DequantizeLinear with other parameters reads them): the glue kernels' Quantize, its
  // parameters as attributes.
  const int alone = rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    if (n.op != "QuantizeLinear" || n.outputs.size() != 1) return false;
    const auto p = params_of(g, n, n.in(0));
    if (!p || n.attr_i("precision", 0) != 0) return false;
    Node f;
    f.op = "Quantize";
    f.name = n.name;
    f.inputs = {n.in(0)};
    f.attrs["scale"] = attr_f(p->scale);
    f.attrs["zero_point"] = attr_f(p->zero_point);
    f.attrs["to"] = attr_i(p->to);
    emit_node(g, nodes, std::move(f), n.name, n.outputs[0]);
    return true;
  });
  return moved + fused + pushed + alone + drop_requantizations(g);
}

}  // namespace kiln
