// Where a conv of a QDQ model can run in int8 (jit/conv/conv_kernel.h ConvInt8): its input is a
// QuantizeDequantize output, standalone or the last post-op fused into its producer (values on
// a uint8 / int8 grid), and its constant weights are, per
// output channel, a scale times integers in [-128, 127]. The scales are recovered from the
// folded f32 weights (DequantizeLinear of int8 weights folds into them at load): channel oc's
// largest |w| over the integer it stands for (127 for symmetric quantization), else the
// tensor's, accepted only when every weight divided by it is an integer in [-128, 127] to
// within 1e-3, so an int8 kernel computes the same function as f32 ones.
#pragma once

#include <memory>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"

namespace kiln {

// nullptr when node `n` (a Conv) does not qualify. Needs the graph's producers.
std::shared_ptr<const ConvInt8> conv_int8_params(const Graph& g, const Node& n);

}  // namespace kiln
