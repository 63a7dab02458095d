// Conv kernel families and their factory. A family's init_conf (plain C++, no Xbyak) decides
// whether it applies to a problem and how to block it, or says why not; its generator only
// emits code; its Kernel packs the weights once at creation and runs tiles. What the runtime
// knows of each family is its row in the family table (jit/conv/conv_families.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/conv/conv_problem.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

enum class ConvFamily : int {
  direct = 0,       // blocked (nChw16c / nChw8c) direct conv, any kernel/stride/pad/dilation;
                    // src may be NCHW for first layers with few input channels
  gemm1x1 = 1,      // 1x1 conv as a JIT GEMM microkernel over flat pixels, blocked or NHWC,
                    // stride 1 and 2, no padding
  depthwise = 2,    // group == channels, blocked or NHWC (jit/dw/dw_kernel.h)
  winograd2 = 3,    // Winograd F(2x2,3x3), 3x3 stride 1 dilation 1 (jit/winograd/)
  winograd4 = 4,    // Winograd F(4x4,3x3) (jit/winograd/)
  im2col = 5,       // im2col / im2row + JIT GEMM, any conv with groups == 1 (jit/im2col/)
  grouped = 6,      // 1 < groups, not depthwise: block-sparse direct conv, blocked (jit/grouped/)
  winograd1d = 7,   // Winograd F(m, r) along one axis of 1 x r / r x 1 kernels, r = 3, 5, 7
  winograd5x5 = 8,  // Winograd F(2x2,5x5), 5x5 stride 1 (jit/winograd/)
  winograd_s2 = 9,  // Winograd for 3x3 stride 2: F(3, 2) on the even taps, the odd tap as is,
                    // per axis: 3x3 outputs a tile in 49 GEMMs (jit/winograd/)
};
constexpr int kNumConvFamilies = 10;         // the family table has one row per value
const char* conv_family_name(ConvFamily f);  // the row's name: "direct", "gemm1x1", ...

// int8 arithmetic (gemm1x1 on AVX512-VNNI) for a conv of a QDQ model: its input holds values
// x = x_scale * (q - x_zero) of uint8 q (a QuantizeDequantize output, where they are exact) and
// its weights are w[oc] = w_scale[oc] * an integer in [-128, 127] (runtime/int8_conv.h finds
// both). The kernel re-quantizes the input to uint8 (exactly), multiplies with vpdpbusd into
// int32 and scales the sums back to f32 (x_scale * w_scale[oc]), the zero point's share folded
// into the bias: the same function as the f32 kernels, up to float rounding.
// A dst in nChw16c_u8 stores the uint8 q of the chain's last post-op (a QuantizeDequantize);
// its residual (`add`) is then read in nChw16c_u8 too, on the grid `residual`.
struct ConvInt8 {
  float x_scale = 1, x_zero = 0;
  std::vector<float> w_scale;  // [OC]
  std::optional<U8Quant> residual;
};

// One way to run a conv: family + layouts (+ optional forced blocking, 0 = family's choice).
struct ConvImpl {
  ConvFamily family = ConvFamily::direct;
  Layout src = Layout::nChw16c, dst = Layout::nChw16c;
  int ur_w = 0;       // output pixels per register block
  int oc_blocks = 0;  // output-channel vectors per register block
  // The caches the conf sizes its blocks for: the host's; tests pin CacheSizes{} so that
  // budget-dependent choices are the same on every machine.
  CacheSizes cache = host_cpu().cache;
  std::shared_ptr<const ConvInt8> int8;  // set: int8 arithmetic (gemm1x1 only)
};

// Creates the kernel of any family (validating the operands once, then the family row's
// create: jit/conv/conv_families.cpp), or returns nullptr and
// sets *why_not to a reason (e.g. "groups > 1", "needs 1x1 kernel", "AVX-512 blocked layout needs
// isa avx512"). weights: the Conv's [OC, IC/g, KH, KW] f32 constant (packed inside, not retained).
// bias: [OC] or nullptr.
// KernelArgs at run time: src[i] = the Conv node's inputs in the node's order (src[0] the
// activation in impl.src layout; weights/bias entries are ignored; a residual `add` input in
// impl.dst layout; scale/shift inputs as plain [OC] arrays); dst[0] = output in impl.dst.
// Tiles cover the output (e.g. n x oc-block-groups x output rows) so two threads split evenly.
// The kernel name follows "conv_<family>_f32_<src>_to_<dst>_<blocking>__<isa>" and includes
// nothing run-specific, e.g. "conv_direct_f32_nChw16c_ow14oc2__avx512".
std::unique_ptr<Kernel> create_conv_kernel(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                           const Tensor& weights, const Tensor* bias,
                                           std::string* why_not);

// A conv whose weights (and bias) are computed, not constants: the kernel's runtime_packing()
// packer (jit/kernel.h) packs them, [OC, IC/g, KH, KW] and [OC] f32, each run into the buffer
// the kernel reads as src[1] (src[2] unused). The im2col family in f32 (NCHW or NHWC dense,
// NHWC for any groups), the depthwise and the direct (dense) families in f32 pack them per run;
// any other impl is declined with the reason.
std::unique_ptr<Kernel> create_conv_kernel_runtime_weights(const ConvProblem& p,
                                                           const ConvImpl& impl, Isa isa,
                                                           std::string* why_not);
// Whether the family can read p's weights at run time (create_conv_kernel_runtime_weights).
bool conv_family_runtime_weights(ConvFamily f, const ConvProblem& p);

}  // namespace kiln
