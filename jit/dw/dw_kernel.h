// Depthwise convolution (group == input channels == output channels): each channel convolved
// with its own kH x kW filter. Memory-bound, so it is judged in GB/s as much as GFLOP/s.
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"

namespace kiln {

// The family's row in jit/conv/conv_families.cpp (ConvFamilyRow::Create: operands
// validated by create_conv_kernel): impl.family must be
// ConvFamily::depthwise; impl.src == impl.dst, one of nChw16c (avx512) / nChw8c (avx2) /
// nhwc. Returns nullptr with *why_not when it does not apply (e.g. channel multiplier != 1).
// KernelArgs: src[0] input, src[3..] post-op inputs (residual in impl.dst layout,
// scale/shift plain [C]); dst[0] output.
std::unique_ptr<Kernel> create_depthwise_kernel(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                                const Tensor& weights, const Tensor* bias,
                                                std::string* why_not);

}  // namespace kiln
