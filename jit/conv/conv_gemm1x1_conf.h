// 1x1 convolution as a GEMM over pixels: dst[P, OC] = src[P, IC] x W[IC, OC], with src and
// dst both blocked (nChw16c on avx512, nChw8c on avx2) or both NHWC. The conf and its
// init_conf (plain C++); conv_gemm1x1_gen only emits what this decides.
//
// One JIT call computes one "chunk" of pixels for one group of `ur_n` oc vectors: a runtime
// loop over full register tiles of `ur_m` pixels (plus an optional JIT-time tail tile), each
// accumulating over the input-channel blocks (runtime loop, channels of a block unrolled).
// Stride 1 runs the pixels of an image as one flat line across rows. Stride 2 either packs
// ("rtus", as oneDNN calls it) the input pixels it reads into a dense per-thread buffer first
// and then runs exactly like stride 1 over the oh*ow packed pixels (the default: full cache
// lines, tiles across rows), or makes each output row a line (input pixels 2 apart).
//
// bf16 (src nChw16c_bf16, AVX512-BF16): the weights are packed as bf16 pairs of input
// channels and every K step is one vdpbf16ps over two channels (f32 accumulators); dst is
// nChw16c (f32) or nChw16c_bf16 (rounded to nearest even at the store).
//
// int8 (ConvImpl::int8, AVX512-VNNI; src and dst nChw16c f32 or nChw16c_u8): every chunk is
// packed, its f32 pixels re-quantized to uint8 on the way ([icb][pack_pix][16] bytes; a
// nChw16c_u8 src already is that layout: stride 1 reads it in place, stride 2 copies the
// pixels); a nChw16c_u8 dst stores the chain's last quantize-dequantize as its bytes and reads
// the residual of its `add` as bytes too (EpilogueU8); the weights are packed as
// int8 quads of input channels and every K step is one vpdpbusd over four channels (int32
// accumulators), scaled back to f32 (ConvCallArgs::qscale) before the epilogue. Any other
// conv (groups 1: kernel size, padding, stride, dilation; "im2row") is the im2col family's int8
// kernel (its name says im2col): the GEMM's K is KH x KW x the padded IC, in (kh, kw, input
// channel block) order, and the windows are not expanded ("windows"): a band of output rows'
// input rows is quantized once into a padded [icb][row][column][16] byte cache (outside the
// image: the zero point, a real 0) and the microkernel reads the taps in place, K block (kh, kw,
// icb) at a table offset from the tile's first pixel (ConvCallArgs::koff); tiles stay within an
// output row. Grouped convs run so too (grp_icb, grp_ocv), each oc group's K the blocks of its
// conv group; groups narrower than a block (RegNetY's 8 channels, ResNeXt's 4) as merged groups
// of grp_merge conv groups that fill whole blocks on both sides, the weights between their
// different conv groups zero (a 1 / grp_merge share of the vpdpbusd lanes is useful, but the
// activations stay in uint8, and vpdpbusd does four times an FMA's multiply-adds). A conv of
// at most 4 input channels (an image's first conv) reads NCHW instead and packs K densely
// ("dense_k"): the chunk's input rows are quantized into [row][column][4 channels] bytes (padding:
// the zero point) and each pixel's window is KH runs of KW x 4 bytes, K = KH x KW x 4 rounded up to
// 16, pixel-major ([pack_pix][K] bytes): 3 channels padded to 16 would multiply K by 5.3.
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_util.h"

namespace kiln::convjit {

// Overrides of init_gemm1x1_conf's own choices, for tuning and tests (-1: its choice).
struct Gemm1x1Force {
  int bcast_reg = -1;         // AVX-512: broadcast src into a register instead of {1to16}
  int pack = -1;              // stride 2: pack the strided input pixels first
  int m_outer = -1;           // loop order (see Gemm1x1Conf::m_outer)
  int64_t chunk_blocks = -1;  // full tiles per pixel chunk
  int64_t ic_chunk = -1;      // ic blocks per call (K split)
  int pf_src = -1;            // prefetch the next tile's src lines during a tile
  int pf_dst = -1;            // prefetchw the next tile's dst lines during a tile
  int pf_next = -1;           // groups outer: prefetch the next group's weights into L2
  int pf_every = -1;          // K steps per such prefetch (1, 2, 4, 8 or 16)
  int pf_ahead = -1;          // K blocks ahead the tile's src lines are prefetched (0: none)
};

struct Gemm1x1Conf {
  ConvProblem p;
  Isa isa = Isa::avx512;
  int simd = 16;
  Layout layout = Layout::nChw16c;  // src
  Layout dst_layout = Layout::nChw16c;
  bool nhwc = false;
  bool bf16 = false;      // src and weights bf16 (src nChw16c_bf16), vdpbf16ps
  bool bf16_dst = false;  // dst nChw16c_bf16
  bool int8 = false;      // uint8 src (packed from f32) x int8 weights, vpdpbusd
  bool u8_src = false;    // int8 with src nChw16c_u8: its bytes are read (or copied) as they are
  bool u8_dst = false;    // int8 with dst nChw16c_u8: the last post-op's uint8 q stored
  bool im2row = false;    // int8 of a conv other than 1x1 without padding, stride 1 or 2 ...
  bool dense_k = false;   // ... from NCHW, K = (kh, kw, 4 channels) (see the header), or
  bool windows = false;   // ... read in place from a band of quantized rows (see the header)
  int64_t band = 0;       // windows: output rows per band (tiles: image, band, oc group)
  int64_t grp_icb = 0;    // windows of a grouped conv: input channel blocks ...
  int64_t grp_ocv = 0;    // ... and oc vectors per (merged) conv group (0: not grouped)
  int64_t grp_merge = 1;  // conv groups per merged group (int8_group_merge)
  std::shared_ptr<const ConvInt8> int8_params;
  int64_t stride = 1;  // of the conv
  bool pack = false;   // stride 2 packed into a dense buffer: the microkernel runs stride 1

  int64_t icb_full = 0;  // full input-channel blocks of `simd` channels
  int ic_tail = 0;       // channels of the last partial block (0: none)
  int64_t ocv = 0;       // oc vectors (oc rounded up / simd)

  int ur_m = 0;                 // register tile: pixels ...
  int ur_n = 0;                 // ... x oc vectors
  int64_t n_groups = 0;         // groups of ur_n vectors
  int n_last = 0;               // vectors in the last group
  bool last_group_own = false;  // last group has its own code (fewer vectors or a lane tail)
  bool bcast_reg = false;       // AVX-512: broadcast into a register instead of {1to16}
  bool pf_src = false;          // prefetcht0 the next tile's src lines, spread over the K steps
  bool pf_dst = false;          // prefetchw the next tile's dst lines, spread over the K steps
  // Groups outer (weights beyond L2): a prefetcht1 every pf_every K steps walks the next
  // group's weights, so that their stream from L3 / memory overlaps all of this group's tiles
  // instead of stalling the next group's first tile (which needs ur_n lines per K step);
  // pf_every (a power of two <= 16) makes the group's tiles cover the next group about once.
  bool pf_next = false;
  int pf_every = 1;
  // Blocked f32 src, unpacked: each K block of a tile is ur_m lines a channel plane apart, a
  // stride the hardware prefetcher does not follow, so a tile stalls on every block's lines
  // when they are not in L2 — in a network, at two threads half the input was just written by
  // the other core, or it is in L3 / memory. A prefetcht0 per pixel, spread over the block's
  // K steps, fetches the lines pf_ahead blocks ahead (bench/NOTES.md, session 28).
  int pf_ahead = 0;
  int epi_temps = 0;

  int64_t m_len = 0;         // pixels per line: oh*ow (stride 1, packed) or ow (stride 2)
  int64_t m_lines = 0;       // lines per image: 1 or oh
  int m_tail = 0;            // m_len % ur_m
  int64_t chunk_blocks = 0;  // full tiles per call (the line's last chunk may have fewer)
  int64_t chunks = 0;        // chunks per line
  bool m_outer = true;       // tile order (n, line, chunk, group) vs (n, group, line, chunk)
  int64_t ic_chunk = 0;      // ic blocks per call (K split when < icb_total)
  // Packed buffer: pixels it holds (a chunk when m_outer, else the whole image) and, NHWC, the
  // bytes between its pixels (the row of channels padded to an odd number of cache lines, so
  // that the pixels of a tile spread over the L1 sets whatever the channel count).
  int64_t pack_pix = 0;
  int64_t pack_pix_bytes = 0;

  std::string blocking_str() const;  // "m14oc2"
  int64_t icb_total() const { return icb_full + (ic_tail ? 1 : 0); }
  int64_t in_icb() const { return (p.ic + simd - 1) / simd; }     // the input's channel blocks
  int64_t k_icb() const { return grp_icb ? grp_icb : in_icb(); }  // ... an oc group reads
  int64_t k_channels() const { return im2row ? icb_full * simd : p.ic; }  // the GEMM's K
  int in_esize() const { return bf16 ? 2 : u8_src ? 1 : 4; }  // the input tensor's elements
  int src_esize() const { return int8 ? 1 : in_esize(); }     // what the microkernel reads
  int dst_esize() const { return bf16_dst ? 2 : u8_dst ? 1 : 4; }
  // Instructions per K block of nic channels: one per channel, bf16 one per pair, int8 one
  // per quad.
  int k_steps(int nic) const { return int8 ? (nic + 3) / 4 : bf16 ? (nic + 1) / 2 : nic; }
  int64_t full_tiles() const { return m_len / ur_m; }
  int64_t gemm_stride() const { return pack ? 1 : stride; }  // pixel step of the microkernel
  // Byte strides of the input tensor.
  int64_t in_pix_bytes() const { return nhwc ? p.ic * 4 : int64_t(simd) * in_esize(); }
  int64_t in_kb_bytes() const {
    return nhwc ? int64_t(simd) * 4 : int64_t(simd) * in_esize() * p.ih * p.iw;
  }
  // Byte strides of what the microkernel reads (the input, or the packed buffer).
  int64_t src_pix_bytes() const {
    return pack && nhwc ? pack_pix_bytes
           : dense_k    ? icb_full * simd
           : int8       ? int64_t(simd)
                        : in_pix_bytes();
  }
  int64_t src_kb_bytes() const {
    return !pack             ? in_kb_bytes()
           : nhwc || dense_k ? int64_t(simd) * src_esize()
                             : int64_t(simd) * src_esize() * pack_pix;
  }
  int64_t pack_bytes() const {
    return nhwc ? pack_pix * pack_pix_bytes : pack_pix * icb_total() * simd * src_esize();
  }
  int64_t dst_pix_bytes() const { return nhwc ? p.oc * 4 : int64_t(simd) * dst_esize(); }
  int64_t dst_vec_bytes() const {
    return nhwc ? int64_t(simd) * 4 : int64_t(simd) * dst_esize() * p.oh * p.ow;
  }
  // Packed weights of one ic block for ob oc vectors (f32, bf16 or int8 elements).
  int64_t wei_kb_bytes(int ob) const { return int64_t(simd) * ob * simd * src_esize(); }
};

// The int8 grouped conv's merge: the fewest conv groups (at most 4) whose channels fill whole
// 16-channel blocks on both sides (1 for groups of whole blocks), or 0 when there is none (or
// it is more than there are). The groups need not divide into merged groups: the last one then
// has fewer conv groups, and its blocks past the input's read the input's last block against
// zero weights.
int64_t int8_group_merge(const ConvProblem& p);

ConfOr<Gemm1x1Conf> init_gemm1x1_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                      const Gemm1x1Force& force = {});

}  // namespace kiln::convjit
