// Quantized models in the operator form (ONNX's QLinearConv / QLinearMatMul and ONNX Runtime's
// com.microsoft QLinearAdd, QLinearGlobalAveragePool, ...: the ONNX model zoo's int8 models,
// ONNX Runtime's QOperator quantization) as the QDQ nodes that define them: DequantizeLinear of
// each 8-bit operand, the float op, QuantizeLinear of the result. fuse_qdq then pairs each
// QuantizeLinear with the next op's DequantizeLinear, and the int8 kernels take the convs and
// GEMMs as they take a QDQ model's.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// Kiln's name of an ONNX Runtime contrib op (node_head gives com.microsoft nodes this name).
inline std::string contrib_op_name(const std::string& op) {
  return "com.microsoft." + op;
}

struct QLinearOp {
  const char* name;           // Kiln's op name
  std::vector<int> int8_ins;  // input slots holding 8-bit tensors (operands, zero points)
  int y_zero_point;           // the output's zero point slot: its type is the output's
  // Whether input `slot` holds an 8-bit tensor (QLinearConcat's are every (X, zero point)).
  bool int8_input(int slot) const;
};

// The operator-form op named `op` (a Node's op), or nullptr.
const QLinearOp* find_qlinear(const std::string& op);

// Appends n's QDQ form to `out` when n is an operator-form quantized op (its attribute `to`, set
// at import by check_quantized_tensors, the output's ONNX type); returns false otherwise.
bool expand_qlinear(Graph& g, const Node& n, std::vector<Node>& out);

}  // namespace kiln
