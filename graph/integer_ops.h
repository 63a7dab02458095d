// ONNX's integer ops as ONNX Runtime's dynamic quantization (quantize_dynamic) writes them
// around each Conv / MatMul: DynamicQuantizeLinear (uint8 with a scale and zero point from each
// run's minimum and maximum), ConvInteger / MatMulInteger (int32 sums of 8-bit products), then
// Cast to float and a multiply by the two scales. Kiln expands them at import into float ops
// that compute the same values: the 8-bit tensors are float32 integers (graph/import_qdq.h), so
// (x - x_zero_point) and (w - w_zero_point) are exact and the float conv / GEMM sums their
// products exactly while the sums stay below 2^24 (beyond, to float precision; the ops' int32
// result is then read as float32, which a Cast to float would give anyway) — on a direct or
// im2col conv; where the result is read as float, Winograd may compute it, to its usual ~1e-6
// relative error (kExactAttr). The convs run on the f32 JIT kernels: the int8 kernels need the
// input's scale at load, which these models compute per run.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace kiln {

// The attribute (1) of a Conv / MatMul whose result must be exact sums (no Winograd): a
// ConvInteger / MatMulInteger whose int32 result is a graph output.
constexpr const char* kExactAttr = "kiln_exact";

// Whether `op` is one of them (import_qdq.cpp types their 8-bit operands).
bool is_integer_op(const std::string& op);

// Appends n's float form to `out` when n is DynamicQuantizeLinear, ConvInteger or
// MatMulInteger; returns false otherwise. ConvInteger / MatMulInteger write their int32 result
// as float32 integers, except into a graph output (declared int32: a Cast follows).
bool expand_integer_op(Graph& g, const Node& n, std::vector<Node>& out);

}  // namespace kiln
