// The 1x1 -> depthwise and depthwise -> 1x1 pairs a chain kernel may run
// (jit/dw/dw_pw_kernel.h): which graph pairs qualify, which labels it replaces, and its
// tuning-cache key. The selection measures and
// chooses them (runtime/selection.cpp), the plan fuses the chosen ones (runtime/plan.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/dw/dw_pw_kernel.h"
#include "runtime/labels.h"

namespace kiln {

// The depthwise Conv whose output only node `pw` reads, when `pw` is a dense 1x1 Conv of
// stride 1 without padding reading it as its input 0 and both have constant weights: the pairs
// a separable kernel may run (jit/dw/dw_pw_kernel.h); -1 otherwise. producers / consumers: the
// graph's (Graph::producers(), Graph::consumers()).
int separable_dw_node(const Graph& g, int pw, const std::vector<int>& producers,
                      const std::vector<std::vector<int>>& consumers);
// The dense 1x1 Conv of stride 1 without padding whose output only the depthwise Conv `dw`
// reads (as its input 0), both with constant weights: the expand pairs (an inverted residual
// block's expand conv); -1 otherwise.
int expand_pw_node(const Graph& g, int dw, const std::vector<int>& producers,
                   const std::vector<std::vector<int>>& consumers);
// The pair kernel's time in the tuning cache: problem (+ the selection's cold-weights suffix)
// and label key. expand: pw is the 1x1 before dw, else the one after.
std::string separable_problem(const Graph& g, int dw, int pw, bool expand = false);
inline constexpr const char* kSeparableLabelKey = "dwpw.nhwc";
inline constexpr const char* kExpandLabelKey = "pwdw.nhwc";
// The chain kernel of depthwise node dw with expand node e and / or project node p (-1: none),
// given each node's kernel input count (ignored for -1), or nullptr and *why_not.
std::unique_ptr<Kernel> chain_kernel(const Graph& g, int e, int dw, int p, int e_inputs,
                                     int dw_inputs, int p_inputs, Isa isa, std::string* why_not);
// Whether l is an f32 conv label of `family` reading and writing NHWC (the separable kernel's
// operands; family nullopt: any).
bool nhwc_conv_label(const Label& l, std::optional<ConvFamily> family = std::nullopt);

}  // namespace kiln
