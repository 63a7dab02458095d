// A depthwise conv with the 1x1 convs next to it, run as one kernel over bands of the
// depthwise conv's output rows (the separable convs of Xception, the inverted residual blocks
// of MobileNets and EfficientNets: expand 1x1 -> depthwise -> project 1x1). On large maps the
// depthwise conv is memory-bound and the round trips of its input and output through memory
// are most of its time; here those tensors never leave the cache:
// - an expand 1x1 (whose output only the depthwise conv reads) computes the input rows a band
//   reads into a per-thread scratch (NHWC, every channel); a tile walks its bands in order and
//   keeps the rows the next band reads again, so no row is computed twice within a tile;
// - the depthwise conv runs the band's rows into a second scratch, or into the output;
// - a project 1x1 (reading only the depthwise output) runs over them into the band's output rows.
// The planner fuses only what the solver chose where the fused kernel measured faster than the
// kernels it replaces (runtime/selection.cpp, runtime/plan.cpp).
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"

namespace kiln {

// One conv of a chain: its problem, its Conv node's constant weights ([OC, IC/g, kh, kw]) and
// bias ([OC] or null), and the node's input count (2 without a bias or post-op operands).
struct ChainConv {
  ConvProblem p;
  const Tensor* weights = nullptr;
  const Tensor* bias = nullptr;
  int inputs = 2;
};

// dw: the depthwise conv (groups == ic == oc). expand (or null): a dense 1x1 of stride 1
// without padding whose output is dw's input; project (or null): one reading dw's output. At
// least one of them. All f32, NHWC. Only project's post-ops may read a tensor other than a
// per-channel operand (a residual). `band` > 0 pins the depthwise output rows per band
// (tests). nullptr and *why_not when it does not apply.
//
// KernelArgs: src = the nodes' inputs in chain order, expand's (if any; its input 0 the
// activation in NHWC, weight / bias slots ignored, post-op operands as create_conv_kernel reads
// them), then dw's (input 0 the activation when there is no expand, else ignored), then
// project's (input 0 ignored; a residual in NHWC); dst[0] = the last conv's output, NHWC.
std::unique_ptr<Kernel> create_dw_chain_kernel(const ChainConv* expand, const ChainConv& dw,
                                               const ChainConv* project, Isa isa,
                                               std::string* why_not, int64_t band = 0);

// The depthwise -> project pair alone (the separable kernel).
inline std::unique_ptr<Kernel> create_dw_pw_kernel(const ConvProblem& dw, const Tensor& dw_weights,
                                                   const Tensor* dw_bias, int dw_inputs,
                                                   const ConvProblem& pw, const Tensor& pw_weights,
                                                   const Tensor* pw_bias, int pw_inputs, Isa isa,
                                                   std::string* why_not, int64_t band = 0) {
  const ChainConv d{dw, &dw_weights, dw_bias, dw_inputs}, p{pw, &pw_weights, pw_bias, pw_inputs};
  return create_dw_chain_kernel(nullptr, d, &p, isa, why_not, band);
}

}  // namespace kiln
