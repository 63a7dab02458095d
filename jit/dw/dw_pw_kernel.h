// A depthwise conv whose output feeds only a 1x1 conv (the separable convs of Xception, the
// depthwise -> project pairs of MobileNets and EfficientNets), run as one kernel over bands
// of output rows: a tile computes its band's depthwise rows, every channel, into its scratch
// (NHWC, sized to stay in L2), then the 1x1 over them. On large maps the depthwise conv is
// memory-bound and its output's round trip through memory is most of its time; here that
// tensor never leaves the cache. The planner fuses a pair only where the fused kernel measured
// faster than the two kernels it replaces (runtime/plan.cpp).
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"

namespace kiln {

// dw: the depthwise conv (groups == ic == oc); pw: the 1x1 conv reading its output (stride 1,
// no padding, groups 1, pw.ic == dw.oc, same n / rows / columns). Both f32, NHWC. The weights
// and biases are the Conv nodes' constants ([C, 1, kh, kw] / [OC, C, 1, 1], [C] / [OC] or
// null). dw's post-ops may not read a residual (their operands are per channel); pw's may.
// `band` > 0 pins the output rows per tile (tests). nullptr and *why_not when it does not apply.
//
// KernelArgs: src[0 .. dw_inputs) = the depthwise node's inputs (src[0] the activation in NHWC,
// weights / bias slots ignored, post-op operands as create_conv_kernel reads them), then
// src[dw_inputs + k], k < pw_inputs = the 1x1 node's input k (k = 0, its activation, ignored;
// a residual in NHWC); dst[0] = the 1x1's output, NHWC. dw_inputs / pw_inputs: the nodes'
// input counts (2 without a bias or post-op operands).
std::unique_ptr<Kernel> create_dw_pw_kernel(const ConvProblem& dw, const Tensor& dw_weights,
                                            const Tensor* dw_bias, int dw_inputs,
                                            const ConvProblem& pw, const Tensor& pw_weights,
                                            const Tensor* pw_bias, int pw_inputs, Isa isa,
                                            std::string* why_not, int64_t band = 0);

}  // namespace kiln
