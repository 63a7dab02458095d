#include "jit/dw/dw_conf.h"

#include <algorithm>
#include <set>

namespace kiln::convjit {
namespace {

// A tile should carry at least this many output pixel-vectors (a few microseconds), so the
// per-call cost (~50 cycles: prologue, weight loads, segment bounds) stays around 1%.
constexpr int64_t kMinTileWork = 1024;
// At least this many tiles when the problem allows, so two threads split evenly.
constexpr int64_t kMinTiles = 8;
// NHWC: bytes of input rows (one vector per pixel, for the tile's channel vectors) that should
// stay in L1: half of it (a window that fits beat walking all channels per tile).
int64_t l1_window(const CacheSizes& c) {
  return c.l1d / 2;
}
// NHWC: shortest contiguous run of channels per pixel a tile should walk (4 cache lines).
constexpr int64_t kMinRunBytes = 256;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Cycles of one output row (all its register blocks) under the cost model.
double row_cycles(const DwConf& c, int ur, DwWeights w) {
  double cyc = 0;
  for (const OwBlock& b : plan_ow_blocks(c.p, ur))
    cyc += double(b.count) * dw_block_cycles(c, b.ur, w);
  return cyc;
}

std::string dims(const char* k, int64_t a, int64_t b) {
  std::string r(k);
  r += std::to_string(a);
  if (a != b) {
    r += 'x';
    r += std::to_string(b);
  }
  return r;
}

void plan_tiles(DwConf& c, const CacheSizes& cache) {
  const ConvProblem& p = c.p;
  const int64_t N = p.n, OH = p.oh;
  int64_t per = 1;  // channel vectors per tile
  if (!c.nhwc) {
    // Whole planes: as many channel vectors per tile as the minimum work asks for.
    per = std::clamp<int64_t>(kMinTileWork / std::max<int64_t>(1, OH * p.ow), 1, c.cv);
  } else {
    // As many channel vectors as keep the input rows one output row needs (plus the next
    // row's) in L1: the JIT walks them innermost, then the next row reuses the window.
    const int64_t window = ((p.kh - 1) * p.dh + 1 + p.sh) * p.iw * c.simd * 4;
    const int64_t vec = c.simd * 4, fit = l1_window(cache) / window;
    // Runs shorter than kMinRunBytes per pixel walk memory with too large a stride: round up
    // to it while the window still holds two cache lines per pixel; for wider rows a
    // contiguous walk over all channels wins (bench/NOTES.md, "Figures behind rules in the code").
    if (fit * vec >= 128)
      per = std::max(fit, kMinRunBytes / vec);
    else
      per = c.cv;
    per = std::clamp<int64_t>(per, 1, c.cv);
  }
  c.cv_chunks = ceil_div(c.cv, per);
  if (!c.nhwc && N * c.cv_chunks < kMinTiles)
    c.cv_chunks = std::min(c.cv, std::max(c.cv_chunks, ceil_div(kMinTiles, N)));
  c.row_chunks = 1;
  if (N * c.cv_chunks < kMinTiles)
    c.row_chunks = std::min(OH, ceil_div(kMinTiles, N * c.cv_chunks));
  // An odd tile count splits unevenly over two threads: add a row chunk when rows remain.
  if (c.tiles() % 2 == 1 && c.tiles() < 64 && c.row_chunks < OH) ++c.row_chunks;
}

}  // namespace

int dw_block_inputs(const ConvProblem& p, int ur) {
  std::set<int64_t> cols;
  for (int64_t x = 0; x < ur; ++x)
    for (int64_t k = 0; k < p.kw; ++k) cols.insert(x * p.sw + k * p.dw);
  return int(cols.size());
}

int dw_vector_regs(const DwConf& c, int ur, DwWeights w) {
  const int nw = c.dw_weight_regs(w);
  const int mask = c.mask_reg() ? 1 : 0;
  // All-taps weights stay live across the store, the input register does not; row weights
  // are reloaded per block, so the epilogue may reuse them too.
  if (w == DwWeights::all) return ur + nw + std::max(1, c.epi_temps) + mask;
  return ur + std::max(nw + 1, c.epi_temps) + mask;
}

double dw_block_cycles(const DwConf& c, int ur, DwWeights w) {
  const ConvProblem& p = c.p;
  const bool z = c.isa == Isa::avx512;
  const double taps = double(p.kh * p.kw);
  const double fma = ur * taps;
  // Row weights reload per block; NHWC switches channel vectors per block, so it reloads all;
  // streamed weights are one load per FMA (and a loop step per kernel row).
  const bool reload = w == DwWeights::row || c.nhwc;
  const bool stream = w == DwWeights::stream;
  const double wloads = stream ? fma : reload ? taps : 0;
  const double loads = double(p.kh) * dw_block_inputs(p, ur) + wloads;
  const double stores = ur;
  // int8: each input vector is converted to f32 (and its zero point subtracted) on the FMA
  // pipes; the sums' scaling is one more FMA per pixel.
  const double cvt = c.int8 ? double(p.kh) * dw_block_inputs(p, ur) * (c.sub_zero ? 2 : 1) + ur : 0;
  // Ports: 2 FMA pipes; 2 vector loads per cycle (3 at 256 bits); 1 store per cycle (2 at 256
  // bits); ~5 fused uops per cycle through the front end.
  const double uops = fma + cvt + loads - (stream ? fma : 0) /* folded */ + stores +
                      ur /* zeroing */ + 4 + (stream ? 4.0 * double(p.kh) : 0);
  // Each accumulator is a chain of `taps` dependent FMAs (latency 4). Out-of-order execution
  // overlaps consecutive blocks, but only partly, and less the longer a block is (its window
  // of a few hundred uops reaches the next block only near the end): at most half the chain.
  const double chain = (1 - std::min(0.5, 200 / uops)) * 4 * taps;
  const double epi = ur * double(c.p.post.size() + (c.p.bias ? 1 : 0)) / 2;
  // (Streamed taps: FMAs with a memory operand issue 2 per cycle at either width, measured.)
  const double load_rate = z || stream ? 2 : 3;
  return std::max({(fma + cvt) / 2, loads / load_rate, stores / (z ? 1 : 2), uops / 5, chain}) +
         epi + 4 /* block overhead */;
}

std::vector<DwRowSeg> plan_dw_rows(const ConvProblem& p) {
  std::vector<DwRowSeg> segs;
  for (int64_t oh = 0; oh < p.oh; ++oh) {
    const int64_t ih0 = oh * p.sh - p.pt;
    int lo = 0, hi = int(p.kh);
    while (lo < p.kh && ih0 + lo * p.dh < 0) ++lo;
    while (hi > lo && ih0 + (hi - 1) * p.dh >= p.ih) --hi;
    if (!segs.empty() && segs.back().kh_lo == lo && segs.back().kh_hi == hi)
      ++segs.back().count;
    else
      segs.push_back({oh, 1, lo, hi});
  }
  return segs;
}

DwTile DwConf::tile(int64_t t) const {
  DwTile r;
  r.n = t / (cv_chunks * row_chunks);
  const int64_t ci = t / row_chunks % cv_chunks, ri = t % row_chunks;
  // Balanced chunks: sizes differ by at most one.
  r.cv0 = ci * cv / cv_chunks;
  r.cv1 = (ci + 1) * cv / cv_chunks;
  r.r0 = ri * p.oh / row_chunks;
  r.r1 = (ri + 1) * p.oh / row_chunks;
  return r;
}

std::string DwConf::blocking_str() const {
  std::string s = dims("k", p.kh, p.kw) + dims("s", p.sh, p.sw);
  if (p.dh != 1 || p.dw != 1) s += dims("d", p.dh, p.dw);
  s += "_ow" + std::to_string(ur_w);
  if (weights == DwWeights::row) s += "wr";
  if (weights == DwWeights::stream) s += "ws";
  return s;
}

std::string DwConf::name() const {
  const bool bf16 = bf16_src || bf16_dst;
  return std::string("conv_dw_") +
         (int8   ? "int8_"
          : bf16 ? "bf16_"
                 : "f32_") +
         layout_name(layout) + (bf16 || int8 ? std::string("_to_") + layout_name(dst_layout) : "") +
         "_" + blocking_str() + "__" + isa_name(isa);
}

ConfOr<DwConf> init_dw_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa, DwWeights force) {
  using R = ConfOr<DwConf>;
  if (impl.family != ConvFamily::depthwise) return R::no("not the depthwise family");
  if (p.groups != p.ic) return R::no("not depthwise: groups != input channels");
  if (p.oc != p.ic) return R::no("channel multiplier != 1 (output channels != groups)");
  {
    // The checks every JIT conv shares (isa, shapes, post-ops); `groups` is ours.
    ConvProblem q = p;
    q.groups = 1;
    if (std::string why = check_common(q, isa); !why.empty()) return R::no(why);
  }
  const bool bf16 = layout_bf16(impl.src) || layout_bf16(impl.dst);
  if (impl.int8) {
    if (isa != Isa::avx512) return R::no("int8 depthwise needs avx512");
    if (impl.src != Layout::nChw16c_u8 ||
        (impl.dst != Layout::nChw16c && impl.dst != Layout::nChw16c_u8))
      return R::no("int8 depthwise takes a nChw16c_u8 src and a nChw16c or nChw16c_u8 dst");
    if (std::string why = check_int8(p, impl.dst, *impl.int8); !why.empty()) return R::no(why);
    if (p.kh * p.kw > kDwInt8MaxTaps)
      return R::no("int8 depthwise: more than " + std::to_string(kDwInt8MaxTaps) +
                   " taps (its f32 sums would not be exact)");
  } else if (layout_u8(impl.src) || layout_u8(impl.dst)) {
    return R::no("a nChw16c_u8 side needs int8 arithmetic (ConvImpl::int8)");
  } else if (bf16) {  // (f32 arithmetic: bf16 on either side)
    if (std::string why = check_bf16(p, impl.src, impl.dst, isa, false); !why.empty())
      return R::no(why);
  } else if (impl.src != impl.dst) {
    return R::no("depthwise needs src layout == dst layout");
  }
  if (impl.src != Layout::nhwc && !bf16 && !impl.int8)
    if (std::string why = check_blocked(impl.src, isa, "src"); !why.empty())
      return R::no(why + " (depthwise takes nhwc or the isa's blocked layout)");
  if (impl.oc_blocks > 1)
    return R::no("depthwise computes one channel vector per register block (oc_blocks > 1)");
  if (impl.ur_w < 0 || impl.oc_blocks < 0) return R::no("negative forced blocking");

  DwConf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.layout = impl.src;
  c.dst_layout = impl.dst;
  c.nhwc = impl.src == Layout::nhwc;
  c.bf16_src = layout_bf16(impl.src);
  c.bf16_dst = layout_bf16(impl.dst);
  c.int8 = impl.int8 != nullptr;
  c.int8_params = impl.int8;
  c.u8_dst = impl.dst == Layout::nChw16c_u8;
  c.sub_zero = c.int8 && impl.int8->x_zero != 0;
  c.cv = ceil_div(p.ic, c.simd);
  c.tail = int(p.ic % c.simd);
  bool channel_operands = false;
  for (const PostOp& op : p.post) channel_operands = channel_operands || per_channel(op.kind);
  c.tail_code = c.tail != 0 && (c.nhwc || channel_operands);
  c.epi_temps = epilogue_temps(p, isa);

  // Every displacement the generator emits (kernel rows and columns around a row pointer) and
  // every row step must fit 32 bits.
  const int64_t reach = (p.pt + p.kh * p.dh + p.sh) * c.src_row_bytes() +
                        (p.pl + p.kw * p.dw + p.ow * p.sw) * c.src_pix_bytes();
  if (reach >= (int64_t(1) << 31) || c.src_cv_bytes() >= (int64_t(1) << 31) ||
      c.dst_cv_bytes() >= (int64_t(1) << 31))
    return R::no("rows too large for 32-bit offsets");

  // Register blocking: the cheapest (weights, ur) by the cost model; near-ties (1%) go to
  // all-taps weights, then to wider blocks.
  const int nregs = vector_regs(isa);
  const int max_ur = int(std::min<int64_t>(p.ow, isa == Isa::avx512 ? 24 : 14));
  const int want_ur = impl.ur_w ? int(std::min<int64_t>(impl.ur_w, p.ow)) : 0;
  double best = 0;
  for (DwWeights w : {DwWeights::all, DwWeights::row, DwWeights::stream}) {
    if (force != DwWeights::automatic && w != force) continue;
    for (int ur = want_ur ? want_ur : 1; ur <= (want_ur ? want_ur : max_ur); ++ur) {
      if (dw_vector_regs(c, ur, w) > nregs) continue;
      const double cost = row_cycles(c, ur, w);
      if (c.ur_w == 0 || cost < best * 0.99 ||
          (cost <= best * 1.01 && w == c.weights && ur > c.ur_w)) {
        best = c.ur_w == 0 ? cost : std::min(best, cost);
        c.ur_w = ur;
        c.weights = w;
      }
    }
  }
  if (c.ur_w == 0)
    return R::no("no register blocking fits " + std::to_string(nregs) + " vector registers" +
                 (want_ur ? " with ow" + std::to_string(want_ur) : std::string()) +
                 (force == DwWeights::all ? " with all taps in registers" : ""));
  c.ow_blocks = plan_ow_blocks(p, c.ur_w);
  c.segs = plan_dw_rows(p);
  plan_tiles(c, impl.cache);
  return c;
}

}  // namespace kiln::convjit
