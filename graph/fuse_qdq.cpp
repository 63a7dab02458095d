// QuantizeLinear -> DequantizeLinear pairs of QDQ models into one QuantizeDequantize node
// (graph/passes.h fuse_qdq).
#include <cmath>
#include <map>
#include <optional>

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

}  // namespace

int fuse_qdq(Graph& g) {
  std::map<ValueId, QuantParams> quantized;  // QuantizeLinear outputs
  for (const Node& n : g.nodes)
    if (n.op == "QuantizeLinear" && n.outputs.size() == 1 && n.outputs[0] != kNoValue)
      if (auto p = params_of(g, n, n.in(0))) quantized[n.outputs[0]] = *p;
  if (quantized.empty()) return 0;
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
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
}

}  // namespace kiln
