// Winograd convolution on blocked layouts: F(m x m, 3 x 3), m = 2 or 4 (alpha = m + 2), and
// F(2 x 2, 5 x 5) (alpha = 6, the points of F(4x4, 3x3)) for 3x3 / 5x5 stride-1 convs, and the
// 1-D form F(m, r) for 1 x r and r x 1 kernels (r = 3, 5, 7: Inception's factorised 1x7 / 7x1
// convs, 1-D convs lifted to 1 x r), and a stride-2 form for 3x3 stride-2 convs (below): the
// conf and its init_conf. Plain C++ — the generators (winograd_gen) only emit what this decides.
//
// 1-D (ConvFamily::winograd1d): alpha = 8 points (0, +-1, +-2, +-1/2, infinity), m = 9 - r
// outputs a tile along the kernel's axis (7 taps: 4 multiplies an output instead of 7; 3 taps:
// 1.33 instead of 3), or alpha = 6 (F(4, 3), F(2, 5): 0, +-1, +-2, infinity) where the axis is
// covered by fewer transformed values (short axes); a tile is 1 x m outputs (m x 1 for r x 1),
// its patch 1 x alpha. Everything below holds with tiles of mh x mw outputs and patches of
// ah x aw pixels (a2 = ah * aw GEMMs).
//
// The output is cut into mh x mw tiles (tiles_h x tiles_w per image); all tiles of all images
// are numbered and cut into groups of `tpg` consecutive tiles. Output channels are cut into
// chunks of `nr` vectors (one GEMM register block wide) and the chunks into `slices`. A kernel
// tile is (group, slice):
//   1. input transform: V[xi][t][ic] = (B^T d B)[xi] (1-D: (B^T d)[xi]) of each tile's ah x aw
//      input patch, one channel-block vector at a time (tiles touching the padding or the
//      image edge are first copied into a zero-padded patch); a run keeps V while consecutive
//      kernel tiles share a group, so a thread transforms each group's input once;
//   2. per xi and chunk of the slice, one GEMM M[xi][t][oc] = sum_ic V[xi][t][ic] U[xi][ic][oc]
//      (U = G g G^T packed at creation), register blocks of `mr` tiles x `nr` vectors,
//      the input channels cut into L1-sized K chunks of `kc`;
//   3. per tile and chunk, the output transform A^T M A (1-D: A^T M), the fused epilogue and
//      the store of the tile's valid pixels (right/bottom tiles may be partial).
// Dilated convs (DeepLab's backbones: d = 2, 4) run as their d_h x d_w phases (WinoConf).
// Stride 2 (ConvFamily::winograd_s2, 3x3 kernels): along each axis, output i reads inputs
// 2i, 2i + 1, 2i + 2 of its patch; the even ones against taps 0 and 2 are a stride-1 F(3, 2)
// over the patch's even pixels (points 0, 1, -1, inf), the odd one against tap 1 is a product
// as is. A tile is 3 x 3 outputs, its patch 7 x 7 inputs (tiles 6 apart) and alpha = 7
// transformed values per axis: the F(3, 2) ones of the even pixels, then the 3 odd pixels
// (wino_matrices(3, 3, 2)): 49 multiplies a tile instead of 81.
// Grouped convs: a chunk's GEMM runs over the input channels of the conv groups its output
// channels belong to (its columns of V: whole vectors from the first group's, clamped to ic),
// U holding zeros where an output channel's own group does not reach; the transforms are the
// dense ones. Where groups are whole vectors on both sides (RegNetX's 48) a chunk lies inside
// one group and reads exactly its channels; narrower ones (RegNet's 24) read some channels
// of the neighbouring groups against zero weights.
// Each U element is used once per tile of a group, so groups are as large as the scratch
// budget allows (U is 4x the conv's weights for F4 and streams from L3 in late layers); a
// slice's chunks run back to back per xi so V[xi] is read from L2 once per slice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_util.h"

namespace kiln::convjit {

struct WinoMatrices;

struct WinoConf {
  ConvProblem p;
  Isa isa = Isa::avx512;
  int simd = 16;
  Layout layout = Layout::nChw16c;  // src and dst

  int m = 4;           // output tile (2 or 4; 1-D: alpha + 1 - r; stride 2: 3)
  int alpha = 6;       // input patch, m + r - 1 (stride 2: 2 m + 1)
  bool one_d = false;  // winograd1d: F(m, r) along W (1 x r kernel) or H (r x 1)
  bool along_w = true;
  bool s2 = false;     // winograd_s2: stride 2 (m = 3, alpha = 7)
  int r = 3;           // kernel taps along each transformed axis
  int mh = 4, mw = 4;  // tile: output rows x columns (1-D: 1 x m or m x 1)
  int ah = 6, aw = 6;  // patch: input rows x columns
  int a2 = 36;         // ah * aw: number of GEMMs
  int64_t icb = 0;     // input-channel vectors (ic rounded up / simd)
  int64_t ocb = 0;     // output-channel vectors
  // Dilation d: the output splits into d_h x d_w phases (rows a, a + d_h, ..., columns b,
  // b + d_w, ...), each an undilated 3x3 conv over the input pixels of the same phase; a tile
  // is m x m outputs of one phase, its patch alpha x alpha inputs d apart. The tile grid of a
  // phase: that of the largest one (phase 0); tiles past a smaller phase's last row store
  // nothing. d = 1: one phase, the plain tile grid.
  int64_t tiles_h = 0, tiles_w = 0;  // tile grid of one phase
  int64_t phase_tiles() const { return tiles_h * tiles_w; }
  int64_t image_tiles() const { return p.dh * p.dw * phase_tiles(); }
  // Valid output rows (columns) of tile row (column) t of phase a: 0 .. m.
  int valid_rows(int64_t a, int64_t t) const { return valid(p.oh, p.dh, mh, a, t); }
  int valid_cols(int64_t b, int64_t t) const { return valid(p.ow, p.dw, mw, b, t); }
  static int valid(int64_t o, int64_t d, int tm, int64_t a, int64_t t) {
    return int(std::clamp<int64_t>((o - a + d - 1) / d - t * tm, 0, tm));
  }

  int64_t tpg = 0;  // tiles per group (the last group may have fewer)
  int64_t groups = 0;
  int mr = 0;          // GEMM register block: tiles ...
  int nr = 0;          // ... x oc vectors (= one chunk)
  int64_t chunks = 0;  // oc chunks: ceil(ocb / nr)
  int nr_last = 0;     // vectors in the last chunk
  int64_t slice = 0;   // chunks per kernel tile (the last slice may have fewer)
  int64_t slices = 0;
  // Per oc chunk c, its GEMM's K: input channels [chunk_k0[c], chunk_k0[c] + chunk_k[c])
  // (chunk_k0 a multiple of simd; all ic channels when dense).
  std::vector<int64_t> chunk_k0, chunk_k;
  std::vector<int64_t> u_chunk;  // U floats of one xi before chunk c (chunks + 1 entries)
  // GEMM K chunk: input channels (a multiple of simd) whose U rows of one chunk stay in L1
  // while every register block of the group uses them; >= a chunk's K: no split.
  int64_t kc = 0;

  int64_t tiles_total() const { return p.n * image_tiles(); }
  int64_t kernel_tiles() const { return groups * slices; }
  int64_t last_group_tiles() const { return tiles_total() - (groups - 1) * tpg; }
  int chunk_vectors(int64_t c) const { return c == chunks - 1 ? nr_last : nr; }
  int64_t k_max() const { return *std::max_element(chunk_k.begin(), chunk_k.end()); }
  int64_t k_chunks(int64_t k) const { return kc >= k ? 1 : (k + kc - 1) / kc; }
  // Input-channel blocks [first, last) the GEMMs of chunks [c0, c1) read.
  std::pair<int64_t, int64_t> chunk_blocks(int64_t c0, int64_t c1) const;

  // "conv_winograd4_f32_nChw16c_to_nChw16c_t49mr5nr4s2kc64__avx512"
  std::string name() const;
  ConvFamily family() const {
    return one_d    ? ConvFamily::winograd1d
           : s2     ? ConvFamily::winograd_s2
           : r == 5 ? ConvFamily::winograd5x5
           : m == 2 ? ConvFamily::winograd2
                    : ConvFamily::winograd4;
  }
  std::string blocking_str() const;  // "t49mr5nr4s2kc64" (s: chunks per slice, kc: K chunk)
  WinoMatrices matrices() const;     // this conf's B^T, G, A^T
  // Input pixels between the patches of neighbouring tiles (and to a tile's first patch row /
  // column from its first output's window): the stride.
  int64_t stride() const { return s2 ? 2 : 1; }

  // Transformed values that share their U: where two rows of G are equal (stride 2: the three
  // odd pixels of an axis all meet tap 1 alone), U(y, x) is the same for them, 25 distinct of
  // 49. A plane of U serves `count` consecutive xi from xi0 (the V / M index; xi_of maps the
  // transform's (y, x) to it), whose V and M rows of a full tile group are one GEMM of
  // count x tpg rows. Without equal rows: a2 planes of one xi each, xi = y * aw + x.
  struct Plane {
    int xi0 = 0, count = 1;
  };
  std::vector<Plane> planes;
  std::vector<int> xi_of;     // [y * aw + x] -> xi
  std::vector<int> plane_of;  // [xi] -> its plane
  int64_t u_planes() const { return int64_t(planes.size()); }

  // Scratch layout (floats). V: [xi][tpg][icb * simd]; M: [xi][tpg][slice * nr * simd].
  int64_t v_row() const { return icb * simd; }
  int64_t v_xi() const { return tpg * v_row(); }
  int64_t v_floats() const { return a2 * v_xi(); }
  int64_t m_row() const { return slice * nr * simd; }
  int64_t m_xi() const { return tpg * m_row(); }
  int64_t m_floats() const { return a2 * m_xi(); }
  // Zero-padded input patch of one tile: [icb][ah][aw][simd].
  int64_t patch_floats() const { return icb * a2 * simd; }
  // Pass-1 intermediate of a 2-D transform: alpha x alpha vectors.
  int64_t tmp_floats() const { return int64_t(a2) * simd; }
  // Packed U: [plane][chunk][its K][chunk vectors * simd] (a slice's chunks adjacent per plane).
  int64_t u_xi() const { return u_chunk.back(); }
  int64_t u_offset(int64_t plane, int64_t chunk) const {
    return plane * u_xi() + u_chunk[size_t(chunk)];
  }
  int64_t u_floats() const { return u_planes() * u_xi(); }
};

ConfOr<WinoConf> init_wino_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa);

// The transform matrices of F(m, r), row-major: B^T [alpha x alpha], G [alpha x r], A^T
// [m x alpha], alpha = m + r - 1, on the points 0, 1, -1, 2, -2, 1/2, -1/2 (the first
// alpha - 1) and infinity. F(2, 3) and F(4, 3) are Lavin & Gray's, whose B^T and A^T the
// generators hard-code with their shared sub-expressions (F(2, 5)'s B^T is F(4, 3)'s: the
// same points); the others (F(2, 5), and F(6, 3), F(4, 5), F(2, 7) of the 1-D family) are
// built by Toom-Cook (A^T and G evaluate polynomials of degree m - 1 and r - 1 at the points,
// B^T is the inverse transpose of the degree alpha - 1 evaluation, each of its rows scaled to
// its smallest entry 1 and G's row inversely) and applied from their entries. G is applied at
// creation (U = G g G^T). Stride 2 (m = 3, r = 3, alpha = 7): rows 0..3 of B^T are F(3, 2)'s
// on the even patch pixels, rows 4..6 pick the odd pixels 1, 3, 5; G's rows F(3, 2)'s G on taps
// 0 and 2, then tap 1 three times; A^T = [F(3, 2)'s A^T | I3].
struct WinoMatrices {
  int m = 0, alpha = 0, r = 3;
  const double* bt = nullptr;
  const double* g = nullptr;
  const double* at = nullptr;
};
WinoMatrices wino_matrices(int m, int r = 3, int stride = 1);
constexpr int kWino1dAlpha = 8;

}  // namespace kiln::convjit
