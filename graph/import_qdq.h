// ONNX QDQ models at import. Kiln keeps 8-bit tensors as float32 holding their integer values
// (uint8 / int8 initializers are widened exactly, QuantizeLinear writes float32), so the only
// ops that may read one are those whose result does not depend on the element type:
// DequantizeLinear (x, x_zero_point) and QuantizeLinear's y_zero_point. This check enforces
// that, and records on each QuantizeLinear the integer type it rounds and saturates to. A Cast
// of an 8-bit tensor to its own type (PyTorch's quantized exports write one before every
// DequantizeLinear) or to float becomes an Identity (its readers then read the 8-bit tensor).
#pragma once

#include <string>

#include "graph/ir.h"

namespace onnx {
class GraphProto;
}

namespace kiln {

struct Graph;

// `g` was built from `gp` node for node (g.nodes[i] is gp.node(i); not yet sorted). Sets
// attribute `to` (the ONNX type code, 2 = uint8, 3 = int8) on every QuantizeLinear node: its
// output_dtype (opset 21), else its zero point's type, else uint8. Throws Error
// (Code::unsupported) naming the node and tensor when an 8-bit tensor is read by another op
// (Code::invalid_model: is a graph output not declared 8-bit), when a QuantizeLinear's zero
// point is not a constant, or when a DequantizeLinear's input is not an integer constant, an
// 8-bit graph input or a QuantizeLinear output.
void check_quantized_tensors(const onnx::GraphProto& gp, Graph& g);

// Ops that only move or select values (MaxPool, Reshape, Concat, a nearest-neighbour Resize,
// ...): on an 8-bit tensor's integers (held as float32) they compute exactly what they compute
// in 8 bits, so they may read one (the ONNX model zoo's int8 models max-pool and flatten uint8
// tensors) and their outputs have its type. Their data inputs: every input of a Concat, else
// input 0.
bool moves_values(const Node& n);
inline bool value_input(const Node& n, int slot) {
  return moves_values(n) && (slot == 0 || n.op == "Concat");
}

}  // namespace kiln
