// The depthwise -> 1x1 pairs a separable kernel may run (jit/dw/dw_pw_kernel.h): which graph
// pairs qualify, which labels it replaces, and its tuning-cache key. The selection measures and
// chooses them (runtime/selection.cpp), the plan fuses the chosen ones (runtime/plan.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "runtime/labels.h"

namespace kiln {

// The depthwise Conv whose output only node `pw` reads, when `pw` is a dense 1x1 Conv of
// stride 1 without padding reading it as its input 0 and both have constant weights: the pairs
// a separable kernel may run (jit/dw/dw_pw_kernel.h); -1 otherwise. producers / consumers: the
// graph's (Graph::producers(), Graph::consumers()).
int separable_dw_node(const Graph& g, int pw, const std::vector<int>& producers,
                      const std::vector<std::vector<int>>& consumers);
// The separable kernel's time in the tuning cache: problem (+ the selection's cold-weights
// suffix) and label key.
std::string separable_problem(const Graph& g, int dw, int pw);
inline constexpr const char* kSeparableLabelKey = "dwpw.nhwc";
// Whether l is an f32 conv label of `family` reading and writing NHWC (the separable kernel's
// operands; family nullopt: any).
bool nhwc_conv_label(const Label& l, std::optional<ConvFamily> family = std::nullopt);

}  // namespace kiln
