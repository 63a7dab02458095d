// Einsum (ONNX opset 12, numpy.einsum semantics): the equation parsed once for shape inference,
// the reference kernel and the rewrite into Transpose / ReduceSum / Reshape / MatMul.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// Each operand's and the output's labels, one char per dim. An ellipsis's dims get the labels
// '0' .. '0' + E - 1 (E: the widest ellipsis), aligned right as numpy broadcasts them; those are
// the only labels whose size may be 1 in one operand and larger in another.
struct EinsumSpec {
  std::vector<std::string> in;
  std::string out;
  std::map<char, int64_t> size;  // each label's (broadcast) size
};

// Parses the node's equation for operands of these shapes. Fails naming the node: invalid_model
// for a malformed equation or mismatched sizes.
EinsumSpec einsum_spec(const Node& n, const std::vector<Shape>& shapes);

}  // namespace kiln
