#include "graph/qlinear.h"

#include <array>
#include <initializer_list>

#include "graph/canonicalize.h"

namespace kiln {
namespace {

// Operands (x, scale, zero point) at 0-2 and 3-5, the output's scale and zero point at 6-7.
const std::vector<int> kBinary = {0, 2, 3, 5, 7};
// One operand at 0-2, the output's scale and zero point at 3-4.
const std::vector<int> kUnary = {0, 2, 4};

const std::array<QLinearOp, 9> kOps = {{
    {"QLinearConv", kBinary, 7},  // (w at 3-5; an int32 bias at 8)
    {"QLinearMatMul", kBinary, 7},
    {"com.microsoft.QLinearAdd", kBinary, 7},
    {"com.microsoft.QLinearMul", kBinary, 7},
    {"com.microsoft.QLinearGlobalAveragePool", kUnary, 4},
    {"com.microsoft.QLinearAveragePool", kUnary, 4},
    {"com.microsoft.QLinearSigmoid", kUnary, 4},
    {"com.microsoft.QLinearLeakyRelu", kUnary, 4},
    // (Y's scale and zero point at 0-1, then (x, scale, zero point) per input: int8_input)
    {"com.microsoft.QLinearConcat", {1}, 1},
}};

bool is_concat(const QLinearOp& q) {
  return q.y_zero_point == 1;
}

}  // namespace

bool QLinearOp::int8_input(int slot) const {
  if (is_concat(*this)) return slot == 1 || (slot >= 2 && (slot - 2) % 3 != 1);
  for (int s : int8_ins)
    if (s == slot) return true;
  return false;
}

const QLinearOp* find_qlinear(const std::string& op) {
  for (const QLinearOp& q : kOps)
    if (op == q.name) return &q;
  return nullptr;
}

bool expand_qlinear(Graph& g, const Node& n, std::vector<Node>& out) {
  const QLinearOp* q = find_qlinear(n.op);
  if (!q) return false;
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue)
    n.fail(Code::invalid_model, "must have exactly one output");
  auto need = [&](std::initializer_list<size_t> slots) {
    for (size_t i : slots)
      if (n.in(i) == kNoValue)
        n.fail(Code::invalid_model, "input " + std::to_string(i) + " is required");
  };
  // A per-axis scale (a constant of more than one value) takes `axis`; a scalar leaves it out.
  auto per_axis = [&](size_t scale) {
    const Value& s = g.value(n.in(scale));
    return s.is_const() && s.constant->numel() > 1;
  };
  auto dequantize = [&](size_t x, const char* part, int64_t axis = 1) {
    std::vector<ValueId> ins = {n.in(x), n.in(x + 1)};
    if (n.in(x + 2) != kNoValue) ins.push_back(n.in(x + 2));
    const ValueId v = append_node(g, n, "DequantizeLinear", std::move(ins), kNoValue, part, out);
    if (per_axis(x + 1)) out.back().attrs["axis"] = attr_i(axis);
    return v;
  };
  // The float result f quantized to n's output with the scale and zero point at `scale`.
  auto quantize = [&](ValueId f, size_t scale) {
    std::vector<ValueId> ins = {f, n.in(scale)};
    if (n.in(scale + 1) != kNoValue) ins.push_back(n.in(scale + 1));
    append_node(g, n, "QuantizeLinear", std::move(ins), n.outputs[0], "quantize", out);
    out.back().attrs["to"] = attr_i(n.attr_i("to", 0));
  };
  // Appends the float op over `ins` with n's attributes (less the named ones).
  auto float_op = [&](const char* op, std::vector<ValueId> ins,
                      std::initializer_list<const char*> drop = {}) {
    const ValueId v = append_node(g, n, op, std::move(ins), kNoValue, "float", out);
    out.back().attrs = n.attrs;
    out.back().attrs.erase("to");
    for (const char* a : drop) out.back().attrs.erase(a);
    return v;
  };

  const std::string op = n.op.substr(n.op.rfind('.') + 1);
  if (is_concat(*q)) {
    need({0});
    if (n.inputs.size() < 5 || (n.inputs.size() - 2) % 3 != 0)
      n.fail(Code::invalid_model,
             "needs Y's scale and zero point, then (X, scale, zero point) "
             "for each input");
    std::vector<ValueId> xs;
    for (size_t i = 2; i < n.inputs.size(); i += 3) {
      need({i, i + 1});
      xs.push_back(dequantize(i, "x"));
    }
    quantize(float_op("Concat", std::move(xs)), 0);
    return true;
  }
  if (q->y_zero_point == 4) {  // one operand
    need({0, 1, 3});
    if (n.attr_i("channels_last", 0) != 0)
      n.fail(Code::unsupported, "channels_last = 1 (an NHWC input) is not supported");
    const char* fop = op == "QLinearGlobalAveragePool" ? "GlobalAveragePool"
                      : op == "QLinearAveragePool"     ? "AveragePool"
                      : op == "QLinearSigmoid"         ? "Sigmoid"
                                                       : "LeakyRelu";
    quantize(float_op(fop, {dequantize(0, "x")}, {"channels_last"}), 3);
    return true;
  }
  need({0, 1, 3, 4, 6});
  if (op == "QLinearConv") {
    std::vector<ValueId> ins = {dequantize(0, "x"), dequantize(3, "w", 0)};
    if (n.in(8) != kNoValue) {  // int32 bias on the grid x_scale * w_scale, zero point 0
      const ValueId s = append_node(g, n, "Mul", {n.in(1), n.in(4)}, kNoValue, "bias_scale", out);
      ins.push_back(append_node(g, n, "DequantizeLinear", {n.in(8), s}, kNoValue, "bias", out));
      if (per_axis(4)) out.back().attrs["axis"] = attr_i(0);
    }
    quantize(float_op("Conv", std::move(ins)), 6);
    return true;
  }
  // MatMul: a's scale per row, b's per column; Add / Mul broadcast as the float ops do.
  const char* fop = op == "QLinearMatMul" ? "MatMul" : op == "QLinearAdd" ? "Add" : "Mul";
  const bool mm = op == "QLinearMatMul";
  quantize(float_op(fop, {dequantize(0, "a", mm ? -2 : 1), dequantize(3, "b", mm ? -1 : 1)}), 6);
  return true;
}

}  // namespace kiln
