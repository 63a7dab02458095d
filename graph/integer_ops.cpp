#include "graph/integer_ops.h"

#include "graph/canonicalize.h"

namespace kiln {
namespace {

ValueId scalar(Graph& g, const Node& n, const char* part, float v) {
  Tensor t(DType::f32, {});
  *t.data<float>() = v;
  return const_for(g, n, part, std::move(t));
}

// DynamicQuantizeLinear as the ONNX reference computes it: with lo = min(0, min x) and
// hi = max(0, max x), scale = (hi == lo ? 1 : hi - lo) / 255, zero point = rint(clamp(-lo /
// scale, 0, 255)), y = clamp(rint(x / scale) + zero point, 0, 255) (ties to even).
void dynamic_quantize(Graph& g, const Node& n, std::vector<Node>& out) {
  if (n.outputs.size() != 3)
    n.fail(Code::invalid_model, "must have 3 outputs (y, y_scale, y_zero_point)");
  const ValueId x = n.in(0), zero = scalar(g, n, "zero", 0.f), top = scalar(g, n, "qmax", 255.f);
  auto op = [&](const char* o, std::vector<ValueId> in, const char* part, ValueId y = kNoValue) {
    return append_node(g, n, o, std::move(in), y, part, out);
  };
  const ValueId mn = op("ReduceMin", {x}, "min");
  out.back().attrs["keepdims"] = attr_i(0);
  const ValueId mx = op("ReduceMax", {x}, "max");
  out.back().attrs["keepdims"] = attr_i(0);
  const ValueId lo = op("Min", {mn, zero}, "lo"), hi = op("Max", {mx, zero}, "hi");
  const ValueId range = op("Sub", {hi, lo}, "range");
  const ValueId flat = op("Equal", {range, zero}, "flat");
  const ValueId span = op("Where", {flat, scalar(g, n, "one", 1.f), range}, "span");
  const ValueId s = op("Div", {span, top}, "scale", n.outputs[1]);
  const ValueId shift = op("Div", {lo, s}, "lo_steps");
  const ValueId zf = op("Sub", {zero, shift}, "zero_point_f");
  const ValueId zc = op("Clip", {zf, zero, top}, "zero_point_clip");
  const ValueId zp = op("Round", {zc}, "zero_point", n.outputs[2]);
  const ValueId q = op("Round", {op("Div", {x, s}, "steps")}, "rounded");
  op("Clip", {op("Add", {q, zp}, "shifted"), zero, top}, "y", n.outputs[0]);
}

// x - z for an optional zero point z (per row of a MatMul's A: a 1-D z becomes a column).
ValueId minus_zero_point(Graph& g, const Node& n, size_t x, size_t z, bool per_row,
                         std::vector<Node>& out) {
  if (n.in(z) == kNoValue) return n.in(x);
  ValueId zv = n.in(z);
  const Value& zval = g.value(zv);
  if (zval.shape_known && zval.shape.size() == 1 && zval.shape[0] > 1) {
    // A per-row (A) / per-output-channel (ConvInteger's w) zero point against dim 0.
    const bool conv = n.op == "ConvInteger";
    if (per_row || conv) {
      Tensor axes(DType::i64, {conv ? 3 : 1});
      for (int64_t i = 0; i < axes.numel(); ++i) axes.data<int64_t>()[i] = i + 1;
      zv = append_node(g, n, "Unsqueeze", {zv, const_for(g, n, "zp_axes", std::move(axes))},
                       kNoValue, "zp_column", out);
    }
  }
  return append_node(g, n, "Sub", {n.in(x), zv}, kNoValue, x == 0 ? "x_minus_zp" : "w_minus_zp",
                     out);
}

}  // namespace

bool is_integer_op(const std::string& op) {
  return op == "DynamicQuantizeLinear" || op == "ConvInteger" || op == "MatMulInteger";
}

bool expand_integer_op(Graph& g, const Node& n, std::vector<Node>& out) {
  if (!is_integer_op(n.op)) return false;
  if (n.in(0) == kNoValue) n.fail(Code::invalid_model, "input 0 is required");
  if (n.op == "DynamicQuantizeLinear") {
    dynamic_quantize(g, n, out);
    return true;
  }
  if (n.in(1) == kNoValue) n.fail(Code::invalid_model, "input 1 is required");
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue)
    n.fail(Code::invalid_model, "must have exactly one output");
  const bool conv = n.op == "ConvInteger";
  const ValueId a = minus_zero_point(g, n, 0, 2, !conv, out);
  const ValueId b = minus_zero_point(g, n, 1, 3, false, out);
  // Into a graph output the declared int32 (exact: the float sums are integers).
  const bool typed = g.is_output(n.outputs[0]);
  const ValueId y = append_node(g, n, conv ? "Conv" : "MatMul", {a, b},
                                typed ? kNoValue : n.outputs[0], "float", out);
  if (conv) out.back().attrs = n.attrs;
  if (typed) {
    // The int32 sums themselves leave the graph: no algorithm that rounds its transforms
    // (Winograd), whatever the accuracy option (runtime/selection.cpp). Read as float (the
    // usual Cast and scale multiply), the sums are f32 values like any conv's, under the
    // session's accuracy option (Winograd's ~1e-6 relative error against the 8-bit steps').
    out.back().attrs[kExactAttr] = attr_i(1);
    append_node(g, n, "Cast", {y}, n.outputs[0], "int32", out);
    out.back().attrs["to"] = attr_i(6);  // INT32
  }
  return true;
}

}  // namespace kiln
