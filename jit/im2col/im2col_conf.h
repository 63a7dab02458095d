// The im2col conv family's conf and init_conf (plain C++, no Xbyak): a convolution as one GEMM
// per image, C = A x B, computed in tiles of output pixels by a register-blocked JIT
// microkernel (im2col_gen) that broadcasts elements of A and multiplies them into vectors of B.
//
//   NHWC (im2row): C[pixels x OC] = patches[pixels x K] x W[K x OC], K = (kh, kw, ic).
//     A = a per-thread copy of the tile's patch rows (row-major, row stride lda), or the input
//     itself for a 1x1 stride-1 unpadded conv (no copy: a pixel's channels are its row);
//     B = the weights packed at creation in groups of nr oc vectors, [group][K][nr * simd];
//     C = dst, one row per pixel. Bias / scale / shift vary along the vectors (per column).
//   NCHW (im2col, roles swapped): C[OC x pixels] = W[OC x K] x col[K x pixels], K = (ic, kh,
//     kw) — the ONNX weight order, so A is the weights (rows padded to lda at creation);
//     B = the tile's columns packed per thread, [K][tile pixels] (row stride ldb), read in
//     panels of nr * simd pixels, or the input planes themselves for a 1x1 stride-1 unpadded
//     conv (row stride ih * iw); C = dst, one row per output channel, pixels in vectors.
//     Bias / scale / shift vary along the rows: they are read as [oc][simd] copies (bias
//     expanded at creation, scale / shift per run).
//   Swapping roles keeps both layouts' stores contiguous vectors; the alternative (NHWC-style
//   GEMM plus a transpose at the store) would scatter every NCHW store over `simd` planes.
//
// A tile is (image, run of output pixels). Per tile the kernel packs its A (NHWC) or B (NCHW)
// into the thread's scratch once, then per K chunk of kc steps sweeps the column groups
// (NHWC: oc groups; NCHW: pixel panels), each call looping over all row blocks of mr rows so
// the chunk of B (kc x nr vectors) stays in L1 while the rows pass. Partial sums of a K split
// are kept in dst (not when an in-place residual is dst: then one chunk); bias and post-ops
// are applied at the last chunk's store. Blocked layouts are not supported.
//
// Grouped convs (NHWC only): one GEMM per conv group, C[:, group's oc] = A_g x W_g, A_g the
// patches of the group's input channels (K = kh * kw * ic / groups, packed per group; no copy:
// the input pixels at the group's channel offset, row stride ic), W_g packed like a dense
// conv's of oc / groups columns, C's row stride still oc. ORT's per-group MLAS GEMMs do the
// same; the grouped family's block-sparse direct conv wastes lanes where groups are not whole
// 16-channel blocks (RegNetY-8GF's 56) and reuses each broadcast for one vector only.
//
// Forced blocking through ConvImpl: ur_w = mr (rows of the register tile: pixels in NHWC,
// output channels in NCHW), oc_blocks = nr (vectors: oc vectors in NHWC, pixel vectors in NCHW).
#pragma once

#include <cstdint>
#include <string>

#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_util.h"

namespace kiln::im2col {

struct Im2colConf {
  ConvProblem p;
  Isa isa = Isa::avx512;
  int simd = 16;
  bool nhwc = true;          // src and dst both NHWC (else both NCHW)
  bool no_copy = false;      // 1x1, stride 1, no padding: A (NHWC) or B (NCHW) is the input itself
  int64_t icg = 0, ocg = 0;  // channels per conv group (ic, oc when dense)

  int64_t k = 0;    // reduction length kh * kw * icg
  int64_t pix = 0;  // output pixels per image (oh * ow)

  // GEMM shape of one image: rows x columns; columns come in vectors of simd.
  int64_t rows = 0;   // NHWC: pix; NCHW: oc
  int64_t cols = 0;   // NHWC: ocg; NCHW: pix
  int64_t cvecs = 0;  // column vectors (cols rounded up / simd)

  int mr = 0;             // register tile: rows ...
  int nr = 0;             // ... x column vectors
  int m_tail = 0;         // rows of the last row block of an image (rows % mr; 0: none)
  int64_t n_groups = 0;   // column groups of nr vectors per image
  int n_last = 0;         // vectors of the last group
  int lane_tail = 0;      // real lanes of the last vector (cols % simd; 0: full)
  bool last_own = false;  // the last group has its own code (fewer vectors or a lane tail)

  // Leading dimensions in floats: A row stride, B row (K step) stride, C row stride. NHWC's
  // last column group has its own B stride (nhwc_group_ldb).
  int64_t lda = 0, ldb = 0, ldc = 0;

  int64_t tile_pix = 0;  // output pixels per tile (a multiple of mr, NHWC, or of nr * simd)
  int64_t tiles_per_image = 0;
  int64_t kc = 0;  // K steps per call (== k: no split)
  int unroll = 4;  // K steps per loop iteration in the microkernel
  int epi_temps = 0;

  // Per-thread scratch: the tile's packed operand (floats, 0 when no_copy) plus the NCHW
  // expanded scale / shift arrays.
  int64_t pack_floats = 0;

  std::string blocking_str() const;  // "m6n4" (+ "_nocopy")
  int64_t tiles() const { return p.n * tiles_per_image; }
  int64_t group_cols() const { return int64_t(nr) * simd; }
  // Packed weight floats of one conv group (NHWC): its column groups back to back.
  int64_t conv_group_floats() const { return k * ((n_groups - 1) * nr + n_last) * simd; }
  // Packed weight floats of group g (NHWC) — the last group is n_last vectors wide.
  int64_t nhwc_group_ldb(int64_t g) const {
    return int64_t(g == n_groups - 1 ? n_last : nr) * simd;
  }
};

// `impl` must have src == dst == nchw or nhwc; reasons name what does not fit.
convjit::ConfOr<Im2colConf> init_im2col_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa);

// Row stride (floats) of `count` rows of `len` floats read together by the microkernel: a
// whole number of cache lines, bumped until the rows spread over the L1 sets (so a row block's
// broadcast streams do not evict each other).
int64_t spread_stride(int64_t len, int count);

}  // namespace kiln::im2col
