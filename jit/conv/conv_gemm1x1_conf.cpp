#include "jit/conv/conv_gemm1x1_conf.h"

#include <algorithm>

namespace kiln::convjit {
namespace {

// With groups outer, a group's weights (re-read by each of its tiles) and the next group's
// (prefetched meanwhile) share L2 with the src: groups of at most a quarter of L2 (figures:
// bench/NOTES.md, "Figures behind rules in the code").
int64_t group_l2(const CacheSizes& c) {
  return c.l2 / 4;
}
// Weights beyond the L2 share come from L3 / memory every run: prefetch the next group's
// (pf_next), one prefetch per pf_every K steps. A hot kernel benchmark gains little from it,
// but in a network every layer's weights are cold (ResNet-50's ~100 MB pass through L3 each
// run), and there the prefetches win (bench/NOTES.md, "Figures behind rules in the code").
// Blocked src: how many K blocks ahead a tile prefetches its src lines (Gemm1x1Conf::pf_ahead;
// 1 and 2 did equally well with the input in the other core's L2 or in memory).
constexpr int kPfAheadBlocks = 2;
// The src lines of one K chunk's tiles: two thirds of L1d (the weights stream through the rest).
int64_t l1_budget(const CacheSizes& c) {
  return c.l1d * 2 / 3;
}

// Lines per L1 set (64 sets of 64 bytes) that `ur` addresses `stride` bytes apart occupy, at
// most; an L1D has 12 ways, and the weights and the other operand need some.
constexpr int kMaxPerSet = 10;
int set_crowding(int64_t stride, int ur) {
  int count[64] = {};
  int worst = 0;
  for (int m = 0; m < ur; ++m) worst = std::max(worst, ++count[(m * stride / 64) % 64]);
  return worst;
}

// Cycles of one K step of an m x o tile: the shared model (FMA / load ports, latency, front
// end) plus a charge for load pressure: of tiles with equal FMA-bound cost, those with fewer
// loads per FMA measured faster, most where the other hyperthread also loads (it shares the
// load ports and L1).
constexpr double kLoadCharge = 0.2;
double step_cycles(Isa isa, int m, int o, bool bcast_reg) {
  const bool reg = bcast_reg || isa != Isa::avx512;
  const double fmas = double(m) * o, loads = o + (reg ? m : fmas);
  return block_step_cycles(isa, m, o, bcast_reg) * (1 + kLoadCharge * loads / fmas);
}

// AVX-512 broadcasts src into a register once a pixel feeds >= 2 oc vectors (fewer load uops
// than one embedded broadcast per FMA); with one vector the embedded form has fewer uops.
bool use_bcast_reg(Isa isa, int ob, const Gemm1x1Force& force) {
  if (isa != Isa::avx512) return false;
  return force.bcast_reg >= 0 ? force.bcast_reg != 0 : ob >= 2;
}

// Estimated cycles for one line over all oc groups.
double line_cost(const Gemm1x1Conf& c, int ur, int ob, bool bcast_reg) {
  const double k = double(c.k_steps(int(c.k_channels())));  // K steps
  const int64_t full = c.ocv / ob, rest = c.ocv % ob;
  auto tile = [&](int m, int o) { return k * step_cycles(c.isa, m, o, bcast_reg) + m * o + 20; };
  auto group = [&](int o) {
    return double(c.m_len / ur) * tile(ur, o) + (c.m_len % ur ? tile(int(c.m_len % ur), o) : 0);
  };
  return double(full) * group(ob) + (rest ? group(int(rest)) : 0);
}

}  // namespace

std::string Gemm1x1Conf::blocking_str() const {
  return "m" + std::to_string(ur_m) + "oc" + std::to_string(ur_n);
}

int64_t int8_group_merge(const ConvProblem& p) {
  if (p.groups <= 1 || p.ic % p.groups || p.oc % p.groups) return 0;
  const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;
  for (int64_t m = 1; m <= 4; ++m)
    if ((m * icg) % 16 == 0 && (m * ocg) % 16 == 0) return m <= p.groups ? m : 0;
  return 0;
}

ConfOr<Gemm1x1Conf> init_gemm1x1_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                      const Gemm1x1Force& force) {
  using R = ConfOr<Gemm1x1Conf>;
  // (int8 windows also take grouped convs: see grp_icb.)
  ConvProblem dense_p = p;
  if (impl.int8) dense_p.groups = 1;
  if (std::string why = check_common(dense_p, isa); !why.empty()) return R::no(why);
  const bool plain_1x1 = p.kh == 1 && p.kw == 1 && !(p.pt || p.pl || p.pb || p.pr) &&
                         p.sh == p.sw && (p.sh == 1 || p.sh == 2);
  if (!impl.int8) {
    if (p.kh != 1 || p.kw != 1) return R::no("needs 1x1 kernel");
    if (p.pt || p.pl || p.pb || p.pr) return R::no("needs zero padding");
    if (!plain_1x1) return R::no("needs stride 1 or 2 (same in h and w)");
  }
  Gemm1x1Conf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.layout = impl.src;
  c.dst_layout = impl.dst;
  c.nhwc = impl.src == Layout::nhwc;
  c.bf16 = layout_bf16(impl.src);
  c.bf16_dst = layout_bf16(impl.dst);
  c.int8 = impl.int8 != nullptr;
  c.int8_params = impl.int8;
  c.im2row = c.int8 && !plain_1x1;
  if (c.int8) {
    if (isa != Isa::avx512 || !host_cpu().avx512_vnni) return R::no("int8 needs avx512_vnni");
    if (p.groups > 1) {
      const int64_t m = int8_group_merge(p);
      if (plain_1x1 || m == 0)
        return R::no(
            "int8 grouped convs need a window and groups that fill whole 16-channel blocks, "
            "alone or at most 4 together");
      c.grp_merge = m;
      c.grp_icb = m * p.ic / p.groups / c.simd;
      c.grp_ocv = m * p.oc / p.groups / c.simd;
    }
    // (NCHW: the dense-K im2row of a conv of at most 4 input channels.)
    c.dense_k = c.im2row && impl.src == Layout::nchw && p.ic <= 4;
    c.u8_src = impl.src == Layout::nChw16c_u8;
    c.u8_dst = impl.dst == Layout::nChw16c_u8;
    const bool blocked = impl.src == Layout::nChw16c || c.u8_src;
    if ((!blocked && !c.dense_k) || (impl.dst != Layout::nChw16c && !c.u8_dst))
      return R::no(
          "int8 takes nChw16c or nChw16c_u8 on both sides (or nchw src with at most 4 "
          "channels, not 1x1)");
    if (std::string why = check_int8(p, impl.dst, *impl.int8); !why.empty()) return R::no(why);
    c.p.bias = true;  // the zero point's share is a bias (kernel: pack_weights_int8)
  } else if (c.bf16 || c.bf16_dst) {
    if (std::string why = check_bf16(p, impl.src, impl.dst, isa, true); !why.empty())
      return R::no(why);
  } else if (impl.src != impl.dst) {
    return R::no("src and dst layouts differ (both nhwc or both blocked)");
  }
  if (!c.nhwc && !c.bf16 && !c.dense_k && !c.u8_src) {
    if (std::string why = check_blocked(impl.src, isa, "src"); !why.empty())
      return R::no(why + " (gemm1x1 takes blocked or nhwc)");
  }
  c.windows = c.im2row && !c.dense_k;
  // (dense K: the packing does the window's geometry; windows: pixels sw apart in the cache)
  c.stride = c.windows ? p.sw : c.im2row ? 1 : p.sh;
  // Stride 2 read in place uses half of every cache line it touches (NHWC: whole pixels, but
  // a row per call) and tiles end at each short output row; packing costs a copy of the
  // pixels read, once per chunk that every oc group then reuses from L1.
  // (int8 1x1 and dense K always pack: the pixels are quantized on the way; a uint8 src only
  // strided, as f32 does by default.)
  c.pack = c.u8_src ? !c.windows && c.stride == 2
           : c.int8 ? !c.windows
                    : c.stride == 2 && force.pack != 0;
  c.icb_full = c.dense_k  ? (p.kh * p.kw * 4 + c.simd - 1) / c.simd
               : c.im2row ? p.kh * p.kw * c.k_icb()
                          : p.ic / c.simd;
  c.ic_tail = c.im2row ? 0 : int(p.ic % c.simd);
  c.ocv = (p.oc + c.simd - 1) / c.simd;
  c.epi_temps = epilogue_temps(p, isa);
  c.m_len = c.gemm_stride() == 1 && !c.windows ? p.oh * p.ow : p.ow;
  c.m_lines = c.gemm_stride() == 1 && !c.windows ? 1 : p.oh;
  if (c.pack && c.nhwc) {
    // Narrow rows stay dense; wider ones span an odd number of cache lines (see the header).
    const int64_t bytes = p.ic * 4, lines = (bytes + 63) / 64;
    c.pack_pix_bytes = bytes <= 64 ? bytes : (lines | 1) * 64;
  }

  const int max_ob = int(std::min<int64_t>(c.ocv, isa == Isa::avx512 ? 8 : 6));
  // All weights (whatever the grouping) beyond the L2 share -> groups outer (see below).
  const int64_t kb_vec_bytes = c.wei_kb_bytes(1);  // one ic block x one oc vector
  const bool groups_outer = c.icb_total() * c.ocv * kb_vec_bytes > impl.cache.l2_weights();
  const int max_ur = int(std::min<int64_t>(c.m_len, isa == Isa::avx512 ? 28 : 14));
  if (impl.oc_blocks < 0 || impl.ur_w < 0) return R::no("negative forced blocking");
  double best = 0;
  for (int ob = 1; ob <= max_ob; ++ob) {
    if (impl.oc_blocks && ob != std::min<int64_t>(impl.oc_blocks, c.ocv)) continue;
    if (c.grp_ocv % ob) continue;  // (grouped: an oc group inside one conv group)
    for (int ur = 1; ur <= max_ur; ++ur) {
      if (impl.ur_w && ur != std::min<int64_t>(impl.ur_w, c.m_len)) continue;
      if (groups_outer && ob > 1 && c.icb_total() * ob * kb_vec_bytes > group_l2(impl.cache) &&
          !impl.oc_blocks)
        continue;
      // (int8: vpdpbusd takes the uint8 operand from a register.)
      const bool reg = c.int8 || use_bcast_reg(isa, ob, force);
      // (bf16 with an odd channel count broadcasts the last channel alone through a register.)
      if (!block_fits(isa, ur, ob, reg || (c.bf16 && p.ic % 2), c.epi_temps)) continue;
      // NHWC pixels are a channel row apart: with 1024 channels (4 KB) every pixel of a tile
      // falls into the same L1 set, and a 28-pixel tile thrashes it.
      if (c.nhwc && !(impl.ur_w && impl.oc_blocks) &&
          (set_crowding(c.gemm_stride() * c.src_pix_bytes(), ur) > kMaxPerSet ||
           set_crowding(c.dst_pix_bytes(), ur) > kMaxPerSet))
        continue;
      // Plans with an oc-group remainder pay 2% (its partial blocks run below the model's
      // estimate). Ties (1%) go to fewer oc vectors (smaller code), then to wider blocks.
      const double cost = line_cost(c, ur, ob, reg) * (1 + (c.ocv % ob ? 0.02 : 0));
      if (c.ur_m == 0 || cost < best * 0.99 ||
          (cost <= best * 1.01 && ob == c.ur_n && ur > c.ur_m)) {
        best = std::min(best == 0 ? cost : best, cost);
        c.ur_m = ur;
        c.ur_n = ob;
        c.bcast_reg = reg;
      }
    }
  }
  if (c.ur_m == 0) {
    if (impl.ur_w > 0 && impl.oc_blocks > 0 && impl.oc_blocks <= max_ob)
      return R::no("forced blocking m" + std::to_string(impl.ur_w) + "oc" +
                   std::to_string(impl.oc_blocks) + " exceeds the " +
                   std::to_string(vector_regs(isa)) + " vector registers");
    return R::no("no register blocking fits the forced values");
  }
  c.n_groups = (c.ocv + c.ur_n - 1) / c.ur_n;
  c.n_last = int(c.ocv - (c.n_groups - 1) * c.ur_n);
  c.last_group_own = c.n_last != c.ur_n || p.oc % c.simd != 0;
  c.m_tail = int(c.m_len % c.ur_m);

  // Loop order: with all weights in L2, sweep every oc group over one pixel chunk whose src
  // stays in L1 (m_outer); else one group's weights stay while the pixels stream past.
  c.m_outer = force.m_outer >= 0 ? force.m_outer != 0 : !groups_outer;
  // Chunks of a line: a stride-1 (or packed) image is cut into pieces of whole tiles — as
  // many as keep the chunk's src in L1 when m_outer, else ~4 — so threads get even work; an
  // unpacked stride-2 row is one chunk.
  const int64_t tiles = c.full_tiles();
  const int64_t l1_tiles = l1_budget(impl.cache) / (c.src_esize() * c.k_channels() * c.ur_m);
  const int64_t want = c.m_outer ? std::max<int64_t>(1, l1_tiles) : 4;
  c.chunk_blocks = c.gemm_stride() == 1 && !c.windows ? std::clamp<int64_t>(want, 1, tiles) : tiles;
  if (force.chunk_blocks > 0 && c.gemm_stride() == 1 && !c.windows)
    c.chunk_blocks = std::min(force.chunk_blocks, tiles);
  c.chunks = (tiles + c.chunk_blocks - 1) / c.chunk_blocks;
  // K split: when one tile's src (ur_m pixels x all input channels) overflows the L1 share,
  // the groups of a chunk are swept per slice of input channels instead (partial sums in dst).
  c.ic_chunk = c.icb_total();
  // (A bf16 dst holds no partial sums: it never splits.)
  const int64_t es = c.src_esize();
  if (c.m_outer && c.n_groups > 1 && es * c.ur_m * c.k_channels() > l1_budget(impl.cache))
    c.ic_chunk = std::max<int64_t>(1, l1_budget(impl.cache) / (es * c.ur_m * c.simd));
  if (force.ic_chunk > 0) c.ic_chunk = std::min(force.ic_chunk, c.icb_total());
  if (c.bf16_dst || c.int8) c.ic_chunk = c.icb_total();  // (int8: int32 sums, no partials)
  // The packed buffer holds one chunk (m_outer: packed once, read by every group) or the
  // whole image (groups outer: packed once per image and call).
  if (c.pack) c.pack_pix = c.m_outer ? c.chunk_blocks * c.ur_m + c.m_tail : c.m_len;
  // windows: bands whose rows are quantized once for all their lines and oc groups. Groups
  // outer take the whole image (quantized once per call, as 1x1 packs it); else enough lines
  // that the halo (rows shared with the next band) adds at most half, and bands enough for 8
  // tiles a thread of two.
  if (c.windows) {
    const int64_t halo = (p.kh - 1) * p.dh;
    c.band = std::clamp<int64_t>((2 * halo + p.sh - 1) / p.sh, 1, p.oh);
    while (c.band > 1 && p.n * ((p.oh + c.band - 1) / c.band) * c.n_groups < 16) c.band /= 2;
    if (!c.m_outer) c.band = p.oh;
  }
  if (force.pf_src >= 0) c.pf_src = force.pf_src != 0;
  if (force.pf_dst >= 0) c.pf_dst = force.pf_dst != 0;
  // (The address is a 32-bit displacement from the block's. f32 only: bf16, whose pixel's
  // block is half a line, measured no gain.)
  if (!c.bf16 && !c.int8 && !c.nhwc && !c.pack && !c.windows && c.icb_total() > 1 &&
      kPfAheadBlocks * c.src_kb_bytes() < (int64_t(1) << 30))
    c.pf_ahead = kPfAheadBlocks;
  if (force.pf_ahead >= 0) c.pf_ahead = force.pf_ahead;
  const int64_t wei_bytes = c.icb_total() * c.ocv * kb_vec_bytes;
  // m_outer: the first chunk's sweep reads every group's weights from memory (later chunks
  // find them in L2), so each call walks the next group's weights too.
  const bool pf_first = c.m_outer && c.n_groups > 1 && wei_bytes >= kPfFirstAbove;
  c.pf_next = force.pf_next >= 0 ? force.pf_next != 0
                                 : pf_first || (!c.m_outer && c.n_groups > 1 &&
                                                wei_bytes > impl.cache.l2_weights());
  // Every tile runs all K steps; the next group has K x ur_n lines, which (pf_every) a group's
  // tiles (groups outer) or one call's (m_outer: a chunk's) walk about once.
  const int64_t tiles_per_group = c.m_lines * (c.full_tiles() + (c.m_tail ? 1 : 0));
  const int64_t tiles_per_pass = c.m_outer ? c.chunk_blocks : tiles_per_group;
  // (One prefetch per pf_every K steps of a block: bf16 blocks have simd / 2 steps.)
  const int max_every = c.k_steps(c.simd);
  while (c.pf_every < max_every && tiles_per_pass >= 2 * c.pf_every * c.ur_n) c.pf_every *= 2;
  if (force.pf_every > 0) {
    if (force.pf_every > max_every || (force.pf_every & (force.pf_every - 1)))
      return R::no("pf_every must be a power of two up to the K steps of a block (" +
                   std::to_string(max_every) + ")");
    c.pf_every = force.pf_every;
  }
  return c;
}

}  // namespace kiln::convjit
