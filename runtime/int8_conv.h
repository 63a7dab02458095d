// Where a conv of a QDQ model can run in int8 (jit/conv/conv_kernel.h ConvInt8): its input is a
// QuantizeDequantize output, standalone or the last post-op fused into its producer (values on
// a uint8 / int8 grid), and its constant weights are, per
// output channel, a scale times integers in [-128, 127]. The scales are recovered from the
// folded f32 weights (DequantizeLinear of int8 weights folds into them at load): channel oc's
// largest |w| over the integer it stands for (127 for symmetric quantization), else the
// tensor's, accepted only when every weight divided by it is an integer in [-128, 127] to
// within 1e-3, so an int8 kernel computes the same function as f32 ones. A Gemm / MatMul with a
// constant 2-D B (no transA, alpha 1) is decided the same way, a scale per output column
// (jit/gemm/fc_kernel.h takes the same ConvInt8).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"

namespace kiln {

// Decides for every Conv (and Gemm / MatMul) of g (once its passes and fusions are done:
// Session::prepare) and marks those that qualify (attribute kInt8Attr: x_scale, x_zero, then
// w_scale per output channel). Deciding reads every weight, and labels ask about each conv many
// times per load (it was half of a QDQ ResNet-50's warm load). Returns the convs marked.
constexpr const char* kInt8Attr = "int8_params";
int mark_int8_convs(Graph& g);

// Node n's mark as ConvInt8; nullptr when unmarked (not a QDQ conv, or its graph not marked).
// ConvInt8::residual is set when the conv's one fused `add` reads a value u8_output allows.
std::shared_ptr<const ConvInt8> conv_int8_params(const Node& n);

// The uint8 grid of node n's output 0 when it is a QuantizeDequantize's (n is one, or its last
// fused post-op is; an int8 grid as uint8 q + 128, the zero point moving with it), a MaxPool
// of such a value (graph/passes.h maxpool_keeps_grid) or a Concat of such values all on one
// grid: the values a nChw16c_u8 layout may hold
// (jit/layout.h). mark_int8_convs marks these nodes (kU8OutAttr); an int8 conv's input is one.
constexpr const char* kU8OutAttr = "u8_out";
std::optional<U8Quant> u8_output(const Node& n);
// Value v's grid: its producer's u8_output (producer: Graph::producers()); none for graph
// inputs, constants and kNoValue.
std::optional<U8Quant> u8_value(const Graph& g, const std::vector<int>& producer, ValueId v);

}  // namespace kiln
