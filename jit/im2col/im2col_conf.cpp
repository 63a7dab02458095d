#include "jit/im2col/im2col_conf.h"

#include <algorithm>

namespace kiln::im2col {
namespace {

using convjit::ConfOr;
using convjit::vector_regs;

// Cache budgets. Sweeps of K chunks and tile sizes found K chunks of 64..K and tiles of a
// few row blocks up to ~1000 pixels within noise of each other; these are middle values.
// The B chunk (kc x nr vectors), reused by every row block: two thirds of L1d.
int64_t chunk_bytes(const CacheSizes& c) {
  return c.l1d * 2 / 3;
}
// A tile's packed operand, which stays in L2: a quarter of it.
int64_t pack_bytes(const CacheSizes& c) {
  return c.l2 / 4;
}
constexpr int64_t kMaxTilePix = 1024;  // pixels per tile (tiles are the unit of threading)
constexpr int64_t kMinTiles = 8;       // tiles per conv worth keeping for 2 threads

// Vector registers a register tile needs besides its accumulators while accumulating: the nr
// B vectors, one broadcast register, and on AVX2 a lane mask for masked B loads. At the store
// the epilogue's scratch (and AVX2's store mask) reuse them.
bool fits(Isa isa, int mr, int nr, int temps, bool b_mask) {
  const int live = nr + 1 + (b_mask ? 1 : 0);
  return mr * nr + std::max({live, temps, 1}) <= vector_regs(isa);
}

// Estimated cycles of one K step of an m x v register tile: 2 FMA pipes, the FMA latency
// (each accumulator takes one FMA per step) and the loads — v B vectors and m broadcasts.
// The load rate is what the sweeps (`kiln_micro_bench im2col-sweep`) showed on the shared
// 2-vCPU machine: tiles with more loads per FMA fell behind by about this model (m14n1 ~45%
// and m14n2 ~80% vs m6n4 ~85% on AVX-512; m6n2 ahead of m4n3 and m14n1 on AVX2), so it is
// lower than the core's nominal 2-3 loads per cycle.
double step_cycles(Isa isa, int m, int v) {
  const double loads_per_cycle = isa == Isa::avx512 ? 1.0 : 1.33;
  return std::max({m * v / 2.0, (m + v) / loads_per_cycle, 4.0});
}

// Estimated cycles of one image's GEMM with an mr x nr register tile.
double gemm_cost(const Im2colConf& c, int mr, int nr) {
  const double k = double(c.k);
  auto block = [&](int m, int v) { return k * step_cycles(c.isa, m, v) + m * v + 20; };
  auto group = [&](int v) {
    return double(c.rows / mr) * block(mr, v) + (c.rows % mr ? block(int(c.rows % mr), v) : 0);
  };
  const int64_t full = c.cvecs / nr, rest = c.cvecs % nr;
  return double(full) * group(nr) + (rest ? group(int(rest)) : 0);
}

// How many of `count` rows `stride` bytes apart share one L1 set (64 sets of 64 bytes).
int set_crowding(int64_t stride, int count) {
  int per_set[64] = {};
  int worst = 0;
  for (int i = 0; i < count; ++i) worst = std::max(worst, ++per_set[(i * stride / 64) % 64]);
  return worst;
}

}  // namespace

int64_t spread_stride(int64_t len, int count) {
  int64_t s = round_up(std::max<int64_t>(len, 1), 16);
  for (int i = 0; i < 64 && set_crowding(s * 4, count) > 2; ++i) s += 16;
  return s;
}

std::string Im2colConf::blocking_str() const {
  return "m" + std::to_string(mr) + "n" + std::to_string(nr) + (no_copy ? "_nocopy" : "");
}

ConfOr<Im2colConf> init_im2col_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  using R = ConfOr<Im2colConf>;
  ConvProblem dense = p;  // the common checks but groups (checked here)
  dense.groups = 1;
  if (std::string why = convjit::check_common(dense, isa); !why.empty()) return R::no(why);
  if (p.groups < 1 || p.ic % p.groups || p.oc % p.groups)
    return R::no("groups do not divide the channels");
  if (p.groups > 1 && impl.src != Layout::nhwc)
    return R::no("groups > 1 need nhwc (one GEMM per group over its channels)");
  if (impl.src != impl.dst)
    return R::no(std::string("src layout ") + layout_name(impl.src) + " differs from dst " +
                 layout_name(impl.dst) + " (im2col takes nchw -> nchw or nhwc -> nhwc)");
  if (impl.src != Layout::nchw && impl.src != Layout::nhwc)
    return R::no(std::string("layout ") + layout_name(impl.src) +
                 " is blocked (im2col takes nchw or nhwc)");
  if (impl.ur_w < 0 || impl.oc_blocks < 0) return R::no("negative forced blocking");
  Im2colConf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.nhwc = impl.src == Layout::nhwc;
  c.no_copy = p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && !p.pt && !p.pl && !p.pb && !p.pr;
  c.icg = p.ic / p.groups;
  c.ocg = p.oc / p.groups;
  c.k = p.kh * p.kw * c.icg;
  c.pix = p.oh * p.ow;
  c.rows = c.nhwc ? c.pix : p.oc;
  c.cols = c.nhwc ? c.ocg : c.pix;
  c.cvecs = (c.cols + c.simd - 1) / c.simd;
  c.lane_tail = int(c.cols % c.simd);
  c.epi_temps = convjit::epilogue_temps(p, isa);
  // NCHW reading the input planes directly loads the last pixel vector under a mask.
  const bool b_mask = !c.nhwc && c.no_copy && c.lane_tail && isa == Isa::avx2;

  const int max_nr = int(std::min<int64_t>(c.cvecs, isa == Isa::avx512 ? 8 : 6));
  const int max_mr = int(std::min<int64_t>(c.rows, isa == Isa::avx512 ? 28 : 14));
  double best = 0;
  for (int nr = 1; nr <= max_nr; ++nr) {
    if (impl.oc_blocks && nr != std::min<int64_t>(impl.oc_blocks, c.cvecs)) continue;
    for (int mr = 1; mr <= max_mr; ++mr) {
      if (impl.ur_w && mr != std::min<int64_t>(impl.ur_w, c.rows)) continue;
      if (!fits(isa, mr, nr, c.epi_temps, b_mask)) continue;
      // Within 1%, more accumulators win (more FMA chains in flight, fewer passes over A or
      // B); remainder blocks are in the cost.
      const double cost = gemm_cost(c, mr, nr);
      if (c.mr == 0 || cost < best * 0.99 || (cost <= best * 1.01 && mr * nr > c.mr * c.nr)) {
        best = c.mr == 0 ? cost : std::min(best, cost);
        c.mr = mr;
        c.nr = nr;
      }
    }
  }
  if (c.mr == 0) {
    if (impl.ur_w > 0 && impl.oc_blocks > 0)
      return R::no("forced blocking m" + std::to_string(impl.ur_w) + "n" +
                   std::to_string(impl.oc_blocks) + " exceeds the " +
                   std::to_string(vector_regs(isa)) + " vector registers");
    return R::no("no register blocking fits the forced values");
  }
  c.m_tail = int(c.rows % c.mr);
  c.n_groups = (c.cvecs + c.nr - 1) / c.nr;
  c.n_last = int(c.cvecs - (c.n_groups - 1) * c.nr);
  c.last_own = c.n_last != c.nr || c.lane_tail != 0;

  // Leading dimensions (NCHW's packed tile row stride ldb is set with the tile below).
  if (c.nhwc) {
    c.lda = c.no_copy ? p.ic : spread_stride(c.k, c.mr);
    c.ldb = c.group_cols();
    c.ldc = p.oc;
  } else {
    c.lda = spread_stride(c.k, c.mr);
    c.ldb = c.no_copy ? p.ih * p.iw : 0;
    c.ldc = c.pix;
  }

  // K chunk: the B chunk of one call stays in L1 while all row blocks pass over it. Chunks
  // are evened out so the last one is not a sliver.
  const int64_t step_bytes = c.group_cols() * 4;
  int64_t kc =
      std::max<int64_t>(c.unroll, chunk_bytes(impl.cache) / step_bytes / c.unroll * c.unroll);
  // NCHW reading input planes of >= 4 KB directly: every K step of the strip is on its own
  // page, and a strip of more pages than the 64-entry L1 DTLB holds measured slower.
  if (!c.nhwc && c.no_copy && c.ldb * 4 >= 4096) kc = std::min<int64_t>(kc, 32);
  if (kc >= c.k) {
    c.kc = c.k;
  } else {
    const int64_t chunks = (c.k + kc - 1) / kc;
    c.kc = std::min(c.k, round_up((c.k + chunks - 1) / chunks, c.unroll));
  }

  // Tiles: a whole number of row blocks (NHWC) or pixel panels (NCHW) whose packed operand
  // fits the L2 budget, cut smaller when the conv would have fewer than kMinTiles tiles.
  const int64_t unit = c.nhwc ? c.mr : c.group_cols();
  const int64_t unit_bytes = c.no_copy ? 0 : 4 * (c.nhwc ? c.mr * c.lda : c.k * c.group_cols());
  int64_t units = std::max<int64_t>(1, kMaxTilePix / unit);
  if (unit_bytes) units = std::clamp<int64_t>(pack_bytes(impl.cache) / unit_bytes, 1, units);
  const int64_t image_units = (c.pix + unit - 1) / unit;
  units = std::min(units, image_units);
  const int64_t want_per_image = (kMinTiles + p.n - 1) / p.n;
  if ((image_units + units - 1) / units < want_per_image)
    units = std::max<int64_t>(1, image_units / want_per_image);
  c.tile_pix = units * unit;
  c.tiles_per_image = (c.pix + c.tile_pix - 1) / c.tile_pix;
  if (!c.nhwc && !c.no_copy) {
    // The packed [K x tile] rows: an odd number of cache lines apart, so a panel's kc rows
    // cycle through all 64 L1 sets.
    c.ldb = c.tile_pix;
    if (c.ldb / 16 % 2 == 0) c.ldb += 16;
  }
  c.pack_floats = c.no_copy ? 0 : (c.nhwc ? c.tile_pix * c.lda : c.k * c.ldb);

  // Row and K-step strides become 32-bit displacements in the generated code.
  const int64_t big = int64_t(1) << 30;
  if (c.mr * c.lda * 4 >= big || c.mr * c.ldc * 4 >= big || c.unroll * c.ldb * 4 >= big)
    return R::no("rows too far apart for 32-bit displacements");
  return c;
}

}  // namespace kiln::im2col
