// Fully connected layers (Gemm with a constant B, MatMul with a constant right operand):
// y[M, N] = x[M, K] * W[K, N] + bias[N], then the node's fused post-ops. At batch 1 this is a
// GEMV, bound by memory: the packed weights are streamed exactly once per run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/post_ops.h"
#include "jit/conv/conv_kernel.h"  // ConvInt8
#include "jit/cpu.h"
#include "jit/kernel.h"

namespace kiln {

struct FcProblem {
  int64_t m = 1, k = 0, n = 0;
  bool bias = false;
  std::vector<PostOp> post;  // input indices refer to the node's inputs
  std::string str() const;   // "m1k2048n1000_relu"
  double macs() const { return double(m) * double(k) * double(n); }
};

// w: the constant weight, [K, N] (w_transposed = false) or [N, K] (true, Gemm's transB=1).
// alpha scales the product (folded into the packed weights); bias: [N] or nullptr (already
// multiplied by Gemm's beta by the caller).
// KernelArgs: src[0] = x, row-major [M, K]; src[i] for post-op inputs at the node's indices
// (residual: row-major [M, N]); dst[0] = y, row-major [M, N].
// Returns nullptr and sets *why_not when it does not apply. bf16: weights and x rounded to
// bf16, f32 accumulation (AVX512-BF16 only; fc_conf.h). int8: x on the grid (x_scale,
// x_zero) and alpha * W[:, n] on w_scale[n]'s, int32 sums (AVX512-VNNI only; fc_conf.h).
std::unique_ptr<Kernel> create_fc_kernel(const FcProblem& p, Isa isa, const Tensor& w,
                                         bool w_transposed, float alpha, const Tensor* bias,
                                         std::string* why_not, bool bf16 = false,
                                         std::shared_ptr<const ConvInt8> int8 = nullptr);

}  // namespace kiln
