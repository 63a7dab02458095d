#include "jit/conv/conv_gemm1x1_conf.h"

#include <algorithm>

namespace kiln::convjit {
namespace {

constexpr int64_t kL2Budget = 512 * 1024;  // see conv_direct_conf.cpp
constexpr int64_t kL1Budget = 32 * 1024;   // of a 48 KB L1D

// Lines per L1 set (64 sets of 64 bytes) that `ur` addresses `stride` bytes apart occupy, at
// most; an L1D has 12 ways, and the weights and the other operand need some.
constexpr int kMaxPerSet = 10;
int set_crowding(int64_t stride, int ur) {
  int count[64] = {};
  int worst = 0;
  for (int m = 0; m < ur; ++m) worst = std::max(worst, ++count[(m * stride / 64) % 64]);
  return worst;
}

bool fits(Isa isa, int ur, int ob, bool bcast_reg, int temps) {
  const int live = ob + ((bcast_reg || isa != Isa::avx512) ? 1 : 0);
  return ur * ob + std::max(live, temps) <= vector_regs(isa);
}

// Estimated cycles for one line over all oc groups.
double line_cost(const Gemm1x1Conf& c, int ur, int ob) {
  const double k = double(c.p.ic);
  const int64_t full = c.ocv / ob, rest = c.ocv % ob;
  auto tile = [&](int m, int o) {
    return k * block_step_cycles(c.isa, m, o, c.bcast_reg) + m * o + 20;
  };
  auto group = [&](int o) {
    return double(c.m_len / ur) * tile(ur, o) + (c.m_len % ur ? tile(int(c.m_len % ur), o) : 0);
  };
  return double(full) * group(ob) + (rest ? group(int(rest)) : 0);
}

}  // namespace

std::string Gemm1x1Conf::blocking_str() const {
  return "m" + std::to_string(ur_m) + "oc" + std::to_string(ur_n);
}

ConfOr<Gemm1x1Conf> init_gemm1x1_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  using R = ConfOr<Gemm1x1Conf>;
  if (std::string why = check_common(p, isa); !why.empty()) return R::no(why);
  if (p.kh != 1 || p.kw != 1) return R::no("needs 1x1 kernel");
  if (p.pt || p.pl || p.pb || p.pr) return R::no("needs zero padding");
  if (p.sh != p.sw || (p.sh != 1 && p.sh != 2))
    return R::no("needs stride 1 or 2 (same in h and w)");
  if (impl.src != impl.dst) return R::no("src and dst layouts differ (both nhwc or both blocked)");
  Gemm1x1Conf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.layout = impl.src;
  c.nhwc = impl.src == Layout::nhwc;
  if (!c.nhwc) {
    if (std::string why = check_blocked(impl.src, isa, "src"); !why.empty())
      return R::no(why + " (gemm1x1 takes blocked or nhwc)");
  }
  c.stride = p.sh;
  c.icb_full = p.ic / c.simd;
  c.ic_tail = int(p.ic % c.simd);
  c.ocv = (p.oc + c.simd - 1) / c.simd;
  c.epi_temps = epilogue_temps(p, isa);
  c.m_len = c.stride == 1 ? p.oh * p.ow : p.ow;
  c.m_lines = c.stride == 1 ? 1 : p.oh;

  const int max_ob = int(std::min<int64_t>(c.ocv, isa == Isa::avx512 ? 8 : 6));
  const int max_ur = int(std::min<int64_t>(c.m_len, isa == Isa::avx512 ? 28 : 14));
  if (impl.oc_blocks < 0 || impl.ur_w < 0) return R::no("negative forced blocking");
  double best = 0;
  for (int ob = 1; ob <= max_ob; ++ob) {
    if (impl.oc_blocks && ob != std::min<int64_t>(impl.oc_blocks, c.ocv)) continue;
    for (int ur = 1; ur <= max_ur; ++ur) {
      if (impl.ur_w && ur != std::min<int64_t>(impl.ur_w, c.m_len)) continue;
      if (!fits(isa, ur, ob, c.bcast_reg, c.epi_temps)) continue;
      // NHWC pixels are a channel row apart: with 1024 channels (4 KB) every pixel of a tile
      // falls into the same L1 set, and a 28-pixel tile thrashes it (measured 41% of peak).
      if (c.nhwc && !(impl.ur_w && impl.oc_blocks) &&
          (set_crowding(c.stride * c.src_pix_bytes(), ur) > kMaxPerSet ||
           set_crowding(c.dst_pix_bytes(), ur) > kMaxPerSet))
        continue;
      // Plans with pixel / oc-group remainders pay 2% (their partial blocks run below the
      // model's estimate). Ties (1%) go to fewer oc vectors (smaller code, measured faster
      // with embedded broadcasts), then to wider blocks.
      const double cost =
          line_cost(c, ur, ob) * (1 + (c.m_len % ur ? 0.02 : 0) + (c.ocv % ob ? 0.02 : 0));
      if (c.ur_m == 0 || cost < best * 0.99 ||
          (cost <= best * 1.01 && ob == c.ur_n && ur > c.ur_m)) {
        best = std::min(best == 0 ? cost : best, cost);
        c.ur_m = ur;
        c.ur_n = ob;
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
  const int64_t wei_bytes = c.icb_total() * c.wei_kb_floats(c.ur_n) * 4 * c.n_groups;
  c.m_outer = wei_bytes <= kL2Budget;
  // Chunks of a line: a stride-1 image is cut into pieces of whole tiles — as many as keep the
  // chunk's src in L1 when m_outer, else ~4 — so threads get even work; a stride-2 row is one
  // chunk.
  const int64_t tiles = c.full_tiles();
  const int64_t l1_tiles = kL1Budget / (4 * p.ic * c.ur_m);
  const int64_t want = c.m_outer ? std::max<int64_t>(1, l1_tiles) : 4;
  c.chunk_blocks = c.stride == 1 ? std::clamp<int64_t>(want, 1, tiles) : tiles;
  c.chunks = (tiles + c.chunk_blocks - 1) / c.chunk_blocks;
  // K split: when one tile's src (ur_m pixels x all input channels) overflows the L1 share,
  // the groups of a chunk are swept per slice of input channels instead (partial sums in dst).
  c.ic_chunk = c.icb_total();
  if (c.m_outer && c.n_groups > 1 && int64_t(4) * c.ur_m * p.ic > kL1Budget)
    c.ic_chunk = std::max<int64_t>(1, kL1Budget / (int64_t(4) * c.ur_m * c.simd));
  return c;
}

}  // namespace kiln::convjit
