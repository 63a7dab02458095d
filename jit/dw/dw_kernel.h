// Depthwise convolution (group == input channels == output channels): each channel convolved
// with its own kH x kW filter. Memory-bound, so it is judged in GB/s as much as GFLOP/s.
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"

namespace kiln {

// The family's kernels come from create_conv_kernel (its row in jit/conv/conv_families.cpp:
// init_dw_conf, then make_dw_kernel in dw_conf.h). src == dst, one of nChw16c (avx512) /
// nChw8c (avx2) / nhwc. KernelArgs: src[0] input, src[3..] post-op inputs (residual in the dst
// layout, scale/shift plain [C]); dst[0] output.

}  // namespace kiln
