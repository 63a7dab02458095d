// 1x1 convolution as a GEMM over pixels: dst[P, OC] = src[P, IC] x W[IC, OC], with src and
// dst both blocked (nChw16c on avx512, nChw8c on avx2) or both NHWC. The conf and its
// init_conf (plain C++); conv_gemm1x1_gen only emits what this decides.
//
// One JIT call computes one "chunk" of pixels for one group of `ur_n` oc vectors: a runtime
// loop over full register tiles of `ur_m` pixels (plus an optional JIT-time tail tile), each
// accumulating over the input-channel blocks (runtime loop, channels of a block unrolled).
// Stride 1 runs the pixels of an image as one flat line across rows; stride 2 makes each
// output row a line (input pixels 2 apart).
#pragma once

#include <string>

#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_util.h"

namespace kiln::convjit {

struct Gemm1x1Conf {
  ConvProblem p;
  Isa isa = Isa::avx512;
  int simd = 16;
  Layout layout = Layout::nChw16c;  // src and dst
  bool nhwc = false;
  int64_t stride = 1;

  int64_t icb_full = 0;  // full input-channel blocks of `simd` channels
  int ic_tail = 0;       // channels of the last partial block (0: none)
  int64_t ocv = 0;       // oc vectors (oc rounded up / simd)

  int ur_m = 0;                 // register tile: pixels ...
  int ur_n = 0;                 // ... x oc vectors
  int64_t n_groups = 0;         // groups of ur_n vectors
  int n_last = 0;               // vectors in the last group
  bool last_group_own = false;  // last group has its own code (fewer vectors or a lane tail)
  bool bcast_reg = false;       // AVX-512: broadcast into a register instead of {1to16}
  int epi_temps = 0;

  int64_t m_len = 0;         // pixels per line: oh*ow (stride 1) or ow (stride 2)
  int64_t m_lines = 0;       // lines per image: 1 or oh
  int m_tail = 0;            // m_len % ur_m
  int64_t chunk_blocks = 0;  // full tiles per call (the line's last chunk may have fewer)
  int64_t chunks = 0;        // chunks per line
  bool m_outer = true;       // tile order (n, line, chunk, group) vs (n, group, line, chunk)
  int64_t ic_chunk = 0;      // ic blocks per call (K split when < icb_total)

  std::string blocking_str() const;  // "m14oc2"
  int64_t icb_total() const { return icb_full + (ic_tail ? 1 : 0); }
  int64_t full_tiles() const { return m_len / ur_m; }
  // Byte strides for the generator and the kernel.
  int64_t src_pix_bytes() const { return nhwc ? p.ic * 4 : int64_t(simd) * 4; }
  int64_t src_kb_bytes() const {
    return nhwc ? int64_t(simd) * 4 : int64_t(simd) * 4 * p.ih * p.iw;
  }
  int64_t dst_pix_bytes() const { return nhwc ? p.oc * 4 : int64_t(simd) * 4; }
  int64_t dst_vec_bytes() const {
    return nhwc ? int64_t(simd) * 4 : int64_t(simd) * 4 * p.oh * p.ow;
  }
  int64_t wei_kb_floats(int ob) const { return int64_t(simd) * ob * simd; }
};

ConfOr<Gemm1x1Conf> init_gemm1x1_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa);

}  // namespace kiln::convjit
