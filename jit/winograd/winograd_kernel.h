// Winograd convolution F(2x2, 3x3) (ConvFamily::winograd2) and F(4x4, 3x3)
// (ConvFamily::winograd4) for 3x3 stride-1 convs, and F(m, r) along one axis
// (ConvFamily::winograd1d) for 1 x r / r x 1 ones, with any padding, src and dst both nChw16c
// (avx512) or both nChw8c (avx2). The scheme and its blocking:
// winograd_conf.h.
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"
#include "jit/winograd/winograd_conf.h"

namespace kiln {

// The kernel of a conf from init_wino_conf (create_conv_kernel: the family's row in
// jit/conv/conv_families.cpp); code_key: jit/shared_code.h. The kernel keeps the weights
// transformed (U = G g G^T, alpha^2 / 9 times the conv's weights: 4x for F(4x4), 16/9 for
// F(2x2)) and declares its scratch (Kernel::scratch_bytes). Tiles: (group of output tiles, chunk of
// output channels). Numerics: F(4x4, 3x3) is less exact than a direct sum (its transforms scale
// values by up to ~10x before they cancel); see tests/jit/test_winograd.cpp for the measured error.
std::unique_ptr<Kernel> make_wino_kernel(const convjit::WinoConf& c, const Tensor& weights,
                                         const Tensor* bias, const std::string& code_key = "");

}  // namespace kiln
