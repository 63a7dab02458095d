// The fully-connected family's conf and its init_conf (plain C++, no Xbyak); fc_gen only emits
// what this decides, fc_kernel packs the weights and runs tiles.
//
// Weights are packed once as alpha * W in N blocks of `nb` vectors (nb * simd outputs), each
// block [K][nb * simd] contiguous, blocks back to back, the N tail zero-padded; the last block
// holds only the vectors it needs (`n_last`). The whole packed matrix is one sequential stream.
//
// One JIT call runs `n_blocks` consecutive blocks; per block a runtime loop over full tiles of
// `mr` rows of x (plus an optional JIT-time tail tile of `m_tail` rows), each tile accumulating
// over K in `ku` independent accumulator sets (summed before the epilogue). M == 1 (GEMV)
// streams the weights as FMA memory operands; M > 1 loads each weight vector once per k and
// reuses it across the tile's rows.
//
// bf16 (AVX512-BF16): weights packed as bf16 pairs of k ([K/2][nb * simd][2] per block: one
// 4-byte word per pair), x converted to bf16 pairs in the kernel's scratch first, and every k
// step is one vdpbf16ps over a pair (f32 accumulators and epilogue): half the weight stream.
//
// int8 (AVX512-VNNI, a QDQ model's Gemm / MatMul: FcImpl::int8): weights packed as the int8
// quads of k ([K/4][nb * simd][4] per block, w / w_scale[n]), x quantized to uint8 quads in the
// scratch first (its values sit on the grid: exact), every k step one vpdpbusd into int32
// sums, converted and scaled by x_scale * w_scale[n] at the store; the bias less the zero
// point's share (the sums multiply uint8 q, not q - zero) joins as the bias: a quarter of the
// weight stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"  // ConvInt8
#include "jit/conv/conv_util.h"    // ConfOr, vector_regs, block_step_cycles
#include "jit/cpu.h"
#include "jit/gemm/fc_kernel.h"
#include "jit/kernel.h"
#include "jit/post_op_args.h"

namespace kiln::fcjit {

using convjit::ConfOr;

// What an FC JIT function receives (one pointer in rdi). Offsets are read with offsetof.
struct FcCallArgs {
  const float* x = nullptr;     // first row of the call, k = 0
  const float* w = nullptr;     // packed weights of the call's first block
  float* y = nullptr;           // first row of the call, first output of the first block
  const float* bias = nullptr;  // packed, zero-padded bias at the first block's first output
  int64_t n_blocks = 0;         // consecutive N blocks in this call
  int64_t m_tiles = 0;          // full row tiles per block
  int64_t flags = 0;
  PostOpArgs post;                // fused post-ops' operands, at the first block's output
  const float* qscale = nullptr;  // int8: the sums' scale per output, at the first block's
};

// Forced choices for tests and the benchmark (0 / -1 = the conf's own choice).
struct FcImpl {
  int nb = 0;          // vectors per N block
  int mr = 0;          // rows per register tile
  int ku = 0;          // accumulator sets (K unroll with separate sums)
  int k_unroll = 0;    // k steps per loop iteration (rounded up to a multiple of ku)
  int prefetch = -1;   // prefetcht0 distance ahead of the weight stream in bytes, 0 = none
  int bcast_emb = -1;  // AVX-512, M > 1: embedded {1to16} broadcast instead of a register
  CacheSizes cache = host_cpu().cache;   // as ConvImpl::cache
  bool bf16 = false;                     // bf16 weights and x (AVX-512 with AVX512-BF16)
  std::shared_ptr<const ConvInt8> int8;  // int8 weights and x (AVX512-VNNI); w_scale per n
};

struct FcConf {
  FcProblem p;
  Isa isa = Isa::avx512;
  int simd = 16;

  int64_t nvec = 0;       // output vectors: ceil(N / simd)
  int nb = 0;             // vectors per N block
  int64_t n_blocks = 0;   // N blocks (the last may have fewer vectors)
  int n_last = 0;         // vectors in the last block
  int lane_tail = 0;      // real lanes of the very last vector (0: full)
  bool last_own = false;  // the last block needs its own code (fewer vectors or a lane tail)
  int64_t l2_budget = 0;  // packed weight blocks up to this size stay in L2 between row tiles

  int mr = 1;          // rows per register tile
  int64_t m_full = 0;  // full row tiles: M / mr
  int m_tail = 0;      // rows of the tail tile: M % mr

  int ku = 1;                            // accumulator sets
  int k_unroll = 1;                      // k steps per loop iteration (multiple of ku)
  int prefetch = 0;                      // bytes ahead, 0 = no software prefetch
  bool bcast_emb = false;                // M > 1 on AVX-512: {1to16} memory broadcast in every FMA
  bool bf16 = false;                     // k steps over bf16 pairs (see above)
  std::shared_ptr<const ConvInt8> int8;  // set: k steps over int8 quads (see above)
  int epi_temps = 0;  // vector registers reserved for the epilogue (and AVX2 tail mask)

  bool gemv() const { return p.m == 1; }
  // k steps (k, bf16 pairs or int8 quads of k) and the bytes of one row of x as the JIT reads
  // it (f32 x, or the converted pairs / quads, the last one zero-padded).
  int64_t ksteps() const { return int8 ? (p.k + 3) / 4 : bf16 ? (p.k + 1) / 2 : p.k; }
  int64_t x_row_bytes() const { return ksteps() * 4; }
  int64_t row_tiles() const { return m_full + (m_tail ? 1 : 0); }
  int64_t full_code_blocks() const { return last_own ? n_blocks - 1 : n_blocks; }
  int64_t block_outputs() const { return int64_t(nb) * simd; }  // NB of a full block
  // Packed weights in 4-byte words (a float, a bf16 pair or an int8 quad).
  int64_t packed_floats() const { return ksteps() * ((n_blocks - 1) * nb + n_last) * simd; }
  // Accumulator registers of a tile of `ur` rows with `nbv` vectors, and the other registers the
  // K loop holds (weights, broadcast).
  int loop_regs(int ur, int nbv) const;
  // "fc_gemv_f32_n64__avx512" / "fc_gemm_f32_m4n32__avx2"
  std::string name() const;
};

ConfOr<FcConf> init_fc_conf(const FcProblem& p, Isa isa, const FcImpl& impl = {});

// The kernel of a conf (create_fc_kernel without the checks of w and bias; tests and the
// benchmark use it to force a blocking). w: [K, N], or [N, K] when w_transposed.
std::unique_ptr<Kernel> make_fc_kernel(const FcConf& c, const Tensor& w, bool w_transposed,
                                       float alpha, const Tensor* bias);

}  // namespace kiln::fcjit
