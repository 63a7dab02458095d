// QuantizeLinear -> DequantizeLinear pairs of QDQ models into one QuantizeDequantize node
// (graph/passes.h fuse_qdq).
#include <cmath>
#include <map>
#include <optional>
#include <vector>

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
  std::vector<size_t> drop;  // (decided on the graph as it is: a chain drops all but its first)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != "QuantizeDequantize") continue;
    const Node* p = node_of(n.in(0));
    if (p && p->op == "MaxPool" && maxpool_keeps_grid(g, *p)) p = node_of(p->in(0));
    if (p && p->op == "QuantizeDequantize" && same_grid(*p, n)) drop.push_back(i);
  }
  for (size_t i : drop) {
    g.nodes[i].op = "Identity";
    g.nodes[i].attrs.clear();
  }
  return int(drop.size());
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
  std::map<ValueId, QuantParams> quantized;  // QuantizeLinear outputs
  for (const Node& n : g.nodes)
    if (n.op == "QuantizeLinear" && n.outputs.size() == 1 && n.outputs[0] != kNoValue)
      if (auto p = params_of(g, n, n.in(0))) quantized[n.outputs[0]] = *p;
  if (quantized.empty()) return 0;
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
  return fused + drop_requantizations(g);
}

}  // namespace kiln
