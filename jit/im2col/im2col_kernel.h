// The im2col conv family: im2row (NHWC) / im2col (NCHW) + a JIT GEMM microkernel, the general
// fallback for any kernel size, stride, padding and dilation (groups == 1), with the fused
// epilogue. Plan in im2col_conf.h, code in im2col_gen, packing in im2col_pack.
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"
#include "jit/im2col/im2col_conf.h"

namespace kiln {

namespace im2col {
// The kernel of a given conf (create_conv_kernel's row in jit/conv/conv_families.cpp; tests
// and tuning change a conf from init_im2col_conf, e.g. kc). weights: [OC, IC, KH, KW] f32;
// bias: [OC] or nullptr; code_key: jit/shared_code.h.
std::unique_ptr<Kernel> make_im2col_kernel(const Im2colConf& c, const Tensor& weights,
                                           const Tensor* bias, const std::string& code_key = "");
// The same kernel for weights [OC, IC / groups, KH, KW] and a bias [OC] computed every run (a
// Conv whose weights are not constants: CondConv, modulated convs, an STFT's computed window):
// its runtime_packing() packer packs them once per run into the buffer it reads as src[1].
std::unique_ptr<Kernel> make_im2col_kernel_runtime_weights(const Im2colConf& c,
                                                           const std::string& code_key = "");
}  // namespace im2col

}  // namespace kiln
