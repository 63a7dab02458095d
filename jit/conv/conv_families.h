// The per-family kernel factories behind create_conv_kernel (conv_kernel.cpp).
#pragma once

#include <memory>

#include "graph/ir.h"
#include "jit/conv/conv_direct_conf.h"
#include "jit/conv/conv_gemm1x1_conf.h"
#include "jit/kernel.h"

namespace kiln::convjit {

// weights: [OC, IC, KH, KW] f32 (already validated); bias: [OC] or nullptr.
std::unique_ptr<Kernel> make_direct_kernel(const DirectConf& c, const Tensor& weights,
                                           const Tensor* bias);
std::unique_ptr<Kernel> make_gemm1x1_kernel(const Gemm1x1Conf& c, const Tensor& weights,
                                            const Tensor* bias);

// "conv_<family>_f32_<src>_to_<dst>_<blocking>__<isa>"
std::string conv_kernel_name(const char* family, Layout src, Layout dst,
                             const std::string& blocking, Isa isa);

}  // namespace kiln::convjit
