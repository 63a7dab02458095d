#include "graph/import_qdq.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>

#include "graph/integer_ops.h"
#include "graph/ir.h"
#include "graph/qlinear.h"

namespace kiln {
namespace {

bool is_8bit(int32_t t) {
  return t == onnx::TensorProto::UINT8 || t == onnx::TensorProto::INT8;
}

std::string type_name(int32_t t) {
  return onnx::TensorProto_DataType_IsValid(t)
             ? onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t))
             : "type " + std::to_string(t);
}

}  // namespace

bool moves_values(const Node& n) {
  if (n.op == "Resize" || n.op == "Upsample") return n.attr_s("mode", "nearest") == "nearest";
  for (const char* o : {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
                        "Concat", "Slice", "Split", "Gather", "DepthToSpace", "SpaceToDepth"})
    if (n.op == o) return true;
  return false;
}

void check_quantized_tensors(const onnx::GraphProto& gp, Graph& g) {
  // ONNX element types of the constants (initializers, Constant nodes' value tensors), of 8-bit
  // graph inputs (the caller passes bytes; Session widens them) and of QuantizeLinear outputs:
  // only these can hold integers for DequantizeLinear.
  std::map<std::string, int32_t> types;
  for (const auto& vi : gp.input())
    if (vi.type().has_tensor_type() && is_8bit(vi.type().tensor_type().elem_type()))
      types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto& t : gp.initializer()) types[t.name()] = t.data_type();
  for (const auto& np : gp.node())
    if (np.op_type() == "Constant" && np.output_size() == 1)
      for (const auto& a : np.attribute())
        if (a.name() == "value" && a.has_t()) types[np.output(0)] = a.t().data_type();
  // ConvInteger / MatMulInteger results: int32 held as float32 integers (graph/integer_ops.h).
  std::set<std::string> int_sums;
  bool any = false;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node& cn = g.nodes[size_t(i)];
    if (is_integer_op(np.op_type())) {
      any = true;
      if (np.op_type() == "DynamicQuantizeLinear") {
        for (int o : {0, 2})
          if (o < np.output_size() && !np.output(o).empty())
            types[np.output(o)] = onnx::TensorProto::UINT8;
      } else if (np.output_size() > 0) {
        int_sums.insert(np.output(0));
      }
      continue;
    }
    const auto to_attr = cn.attrs.find("to");  // (opsets < 6 name the type: not 8-bit work)
    if (np.op_type() == "Cast" && np.input_size() == 1 && np.output_size() == 1 &&
        (to_attr == cn.attrs.end() || to_attr->second.kind == Attribute::Kind::i)) {
      // PyTorch's quantized exports cast each QuantizeLinear output to its own type before the
      // DequantizeLinear, and build int32 bias zero points as Cast(ConstantOfShape). A cast of
      // an 8-bit tensor to its own type, or to float (which holds the same integers), is an
      // Identity here; a cast to a type other than 8 bits gives its output that type (a cast to
      // 8 bits is refused by inference).
      const int32_t to = int32_t(cn.attr_i("to", 0));
      auto in = types.find(np.input(0));
      if (int_sums.count(np.input(0)) && to == onnx::TensorProto::FLOAT) {  // already float
        cn.op = "Identity";
        cn.attrs.clear();
      } else if (in != types.end() && is_8bit(in->second) &&
                 (to == in->second || to == onnx::TensorProto::FLOAT)) {
        cn.op = "Identity";
        cn.attrs.clear();
        if (to == in->second) types[np.output(0)] = to;
      } else if (!is_8bit(to)) {
        types[np.output(0)] = to;
      }
      continue;
    }
    if (np.op_type() == "Identity" || moves_values(cn)) {
      // 8-bit data inputs pass their type on (a Concat's must all have one type; a MaxPool's
      // Indices are refused later, by inference).
      int32_t t = 0;
      for (int j = 0; j < np.input_size(); ++j)
        if (auto in = types.find(np.input(j));
            (j == 0 || value_input(cn, j)) && in != types.end() && is_8bit(in->second)) {
          if (t != 0 && t != in->second)
            cn.fail(Code::unsupported,
                    "concatenates " + type_name(t) + " and " + type_name(in->second) + " tensors");
          t = in->second;
        }
      if (t != 0)
        for (const auto& o : np.output())
          if (!o.empty()) types[o] = t;
      continue;
    }
    if (np.op_type() == "ConstantOfShape" && np.output_size() == 1) {
      int32_t t = onnx::TensorProto::FLOAT;  // ONNX's default value: float 0
      for (const auto& a : np.attribute())
        if (a.name() == "value" && a.has_t()) t = a.t().data_type();
      types[np.output(0)] = t;
      continue;
    }
    if (const QLinearOp* ql = find_qlinear(cn.op)) {
      // An operator-form quantized op: its output has its zero point's type (else x's).
      const int yz = ql->y_zero_point;
      int32_t to = onnx::TensorProto::UINT8;
      if (yz < np.input_size() && !np.input(yz).empty()) {
        auto it = types.find(np.input(yz));
        if (it == types.end())
          cn.fail(Code::unsupported, "zero point '" + np.input(yz) +
                                         "' is computed at run time; Kiln needs a constant");
        to = it->second;
      } else if (auto x = types.find(np.input_size() > 0 ? np.input(0) : std::string());
                 yz != 1 && x != types.end()) {
        to = x->second;
      }
      if (!is_8bit(to))
        cn.fail(Code::unsupported,
                "quantizes to " + type_name(to) + "; Kiln quantizes to UINT8 and INT8");
      cn.attrs["to"] = attr_i(to);
      if (np.output_size() > 0) types[np.output(0)] = to;
      any = true;
      continue;
    }
    if (np.op_type() != "QuantizeLinear") continue;
    any = true;
    Node& n = g.nodes[size_t(i)];
    int32_t to = onnx::TensorProto::UINT8;  // ONNX's default without a zero point
    if (np.input_size() > 2 && !np.input(2).empty()) {
      auto it = types.find(np.input(2));
      if (it == types.end())
        n.fail(Code::unsupported,
               "zero point '" + np.input(2) + "' is computed at run time; Kiln needs a constant");
      to = it->second;
    }
    if (const int64_t od = n.attr_i("output_dtype", 0); od != 0) {
      if (np.input_size() > 2 && !np.input(2).empty() && od != to)
        n.fail(Code::invalid_model, "output_dtype " + type_name(int32_t(od)) +
                                        " differs from its zero point's type " + type_name(to));
      to = int32_t(od);
    }
    if (!is_8bit(to))
      n.fail(Code::unsupported,
             "quantizes to " + type_name(to) + "; Kiln quantizes to UINT8 and INT8");
    n.attrs["to"] = attr_i(to);
    n.attrs.erase("output_dtype");
    if (np.output_size() > 0) types[np.output(0)] = to;
  }
  for (const auto& [name, t] : types) any = any || is_8bit(t);
  for (const auto& np : gp.node()) any = any || np.op_type() == "DequantizeLinear";
  if (!any) return;

  // Every reader of an 8-bit tensor must be one that does not depend on its element type.
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    const Node& n = g.nodes[size_t(i)];
    const bool dq = np.op_type() == "DequantizeLinear", q = np.op_type() == "QuantizeLinear";
    for (int j = 0; j < np.input_size(); ++j) {
      auto it = types.find(np.input(j));
      if (it == types.end() || !is_8bit(it->second)) continue;
      if ((dq && (j == 0 || j == 2)) || (q && j == 2) || n.op == "Identity" || value_input(n, j) ||
          is_integer_op(n.op))
        continue;
      if (const QLinearOp* ql = find_qlinear(n.op); ql && ql->int8_input(j)) continue;
      n.fail(Code::unsupported,
             "reads '" + np.input(j) + "', a " + type_name(it->second) +
                 " tensor; Kiln keeps 8-bit tensors as float32 and reads them only in "
                 "DequantizeLinear (and as QuantizeLinear's zero point)");
    }
    if (dq && np.input_size() > 0) {
      auto it = types.find(np.input(0));
      if (it == types.end())
        n.fail(Code::unsupported, "input '" + np.input(0) +
                                      "' is not a QuantizeLinear output or an integer constant; "
                                      "Kiln dequantizes only those");
      if (!is_8bit(it->second) && it->second != onnx::TensorProto::INT32)
        n.fail(Code::unsupported, "input '" + np.input(0) + "' is " + type_name(it->second) +
                                      "; Kiln dequantizes UINT8, INT8 and INT32");
      if (np.input_size() > 2 && !np.input(2).empty()) {
        auto zp = types.find(np.input(2));
        if (zp == types.end())
          n.fail(Code::unsupported,
                 "zero point '" + np.input(2) + "' is computed at run time; Kiln needs a constant");
        if (zp->second != it->second)
          n.fail(Code::invalid_model, "zero point '" + np.input(2) + "' is " +
                                          type_name(zp->second) + " but input '" + np.input(0) +
                                          "' is " + type_name(it->second));
      }
    }
  }
  // An 8-bit graph output (a QuantizeLinear's, say) reaches the caller as bytes: Session
  // narrows the float32 integers (graph/ir.h io_dtypes). It must be declared so.
  for (const auto& vi : gp.output()) {
    auto it = types.find(vi.name());
    if (it != types.end() && is_8bit(it->second) &&
        (!vi.type().has_tensor_type() || vi.type().tensor_type().elem_type() != it->second))
      fail(Code::invalid_model, "graph output '" + vi.name() + "' is a " + type_name(it->second) +
                                    " tensor but is not declared as one");
  }
}

}  // namespace kiln
