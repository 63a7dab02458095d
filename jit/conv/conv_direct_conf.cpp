#include "jit/conv/conv_direct_conf.h"

#include <algorithm>

namespace kiln::convjit {
namespace {

// A group's weights above 3/4 of L2 are split along the input channels into chunks of 3/8.
int64_t split_above(const CacheSizes& c) {
  return c.l2 * 3 / 4;
}
int64_t split_chunk(const CacheSizes& c) {
  return c.l2 * 3 / 8;
}
// Groups outer (weights beyond cache.l2_weights()): they come from memory every run in a
// network (ResNet-50's ~100 MB of weights pass through L3 each run), so the next group's are
// prefetched while a group computes (pf_next), as in conv_gemm1x1_conf.cpp.
// Instructions of one unrolled kernel-row body (kw x channels x (weights + FMAs)).
constexpr int64_t kMaxBody = 2048;

bool block_interior(const ConvProblem& p, int64_t ow0, int ur) {
  const int64_t first = ow0 * p.sw - p.pl;
  const int64_t last = (ow0 + ur - 1) * p.sw - p.pl + (p.kw - 1) * p.dw;
  return first >= 0 && last <= p.iw - 1;
}

// Estimated cycles for one output row over all oc groups.
double row_cost(const DirectConf& c, int ur, int ob) {
  const double k = double(c.bf16 ? (c.p.ic + 1) / 2 : c.p.ic) * c.p.kh * c.p.kw;  // steps
  const std::vector<OwBlock> blocks = plan_ow_blocks(c.p, ur);
  const int64_t full = c.ocb / ob, rest = c.ocb % ob;
  double cost = 0;
  for (const OwBlock& b : blocks) {
    auto one = [&](int o) {
      return double(b.count) * (k * block_step_cycles(c.isa, b.ur, o, c.bcast_reg) +
                                b.ur * o /* stores */ + 20 /* block overhead */);
    };
    cost += double(full) * one(ob) + (rest ? one(int(rest)) : 0);
  }
  return cost;
}

// Estimated cycles per output row when rows run in pairs of one full-width block each.
double pair_cost(const DirectConf& c, int ob) {
  const double k = double(c.bf16 ? (c.p.ic + 1) / 2 : c.p.ic) * c.p.kh * c.p.kw;  // steps
  const int ur = int(2 * c.p.ow);
  const int64_t full = c.ocb / ob, rest = c.ocb % ob;
  auto one = [&](int o) { return k * block_step_cycles(c.isa, ur, o, c.bcast_reg) + ur * o + 20; };
  return 0.5 * (double(full) * one(ob) + (rest ? one(int(rest)) : 0));
}

}  // namespace

std::string DirectConf::blocking_str() const {
  return (ur_h > 1 ? "oh" + std::to_string(ur_h) : std::string()) + "ow" + std::to_string(ur_w) +
         "oc" + std::to_string(oc_blocks);
}

DirectConf::KernelRows DirectConf::kernel_rows(int64_t oh) const {
  // ih = oh * sh - pt + kh * dh in [0, ih).
  const int64_t ih0 = oh * p.sh - p.pt;
  KernelRows r{0, p.kh};
  while (r.lo < p.kh && ih0 + r.lo * p.dh < 0) ++r.lo;
  while (r.hi > r.lo && ih0 + (r.hi - 1) * p.dh >= p.ih) --r.hi;
  return r;
}

int DirectConf::row_step(int64_t oh, int64_t end) const {
  auto full = [&](int64_t o) {
    const KernelRows r = kernel_rows(o);
    return r.lo == 0 && r.hi == p.kh;
  };
  return ur_h == 2 && oh + 1 < end && full(oh) && full(oh + 1) ? 2 : 1;
}

std::vector<OwBlock> plan_ow_blocks(const ConvProblem& p, int ur) {
  std::vector<OwBlock> out;
  const int64_t nfull = p.ow / ur, tail = p.ow % ur;
  for (int64_t b = 0; b < nfull; ++b) {
    const int64_t ow0 = b * ur;
    const bool in = block_interior(p, ow0, ur);
    if (in && !out.empty() && out.back().interior && out.back().ur == ur &&
        out.back().start + out.back().count * ur == ow0) {
      ++out.back().count;
    } else {
      out.push_back({ow0, ur, 1, in});
    }
  }
  if (tail) out.push_back({nfull * ur, int(tail), 1, block_interior(p, nfull * ur, int(tail))});
  return out;
}

ConfOr<DirectConf> init_direct_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  using R = ConfOr<DirectConf>;
  if (std::string why = check_common(p, isa); !why.empty()) return R::no(why);
  DirectConf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.src = impl.src;
  c.dst = impl.dst;
  c.bf16 = layout_bf16(impl.src);
  c.bf16_dst = layout_bf16(impl.dst);
  if (c.bf16 || c.bf16_dst) {
    if (std::string why = check_bf16(p, impl.src, impl.dst, isa, true); !why.empty())
      return R::no(why);
  } else if (impl.dst == Layout::nhwc) {
    // Whole channel vectors only: a masked store per pixel for a tail is not worth it here.
    if (p.oc % c.simd) return R::no("nhwc dst needs oc a multiple of " + std::to_string(c.simd));
    c.dst_nhwc = true;
  } else if (std::string why = check_blocked(impl.dst, isa, "dst"); !why.empty()) {
    return R::no(why);
  }
  if (!c.bf16 && impl.src == Layout::nchw) {
    c.src_plain = true;
  } else if (std::string why = c.bf16 ? "" : check_blocked(impl.src, isa, "src"); !why.empty()) {
    return R::no(why + " (direct takes a blocked or nchw src)");
  }
  c.icb_full = p.ic / c.simd;
  c.ic_tail = int(p.ic % c.simd);
  c.ocb = (p.oc + c.simd - 1) / c.simd;
  c.epi_temps = epilogue_temps(p, isa);
  c.bcast_reg = false;

  // Register blocking: the cheapest (ur_w, oc_blocks) by the cost model.
  const int max_ob = int(std::min<int64_t>(c.ocb, isa == Isa::avx512 ? 8 : 6));
  const int max_ur = int(std::min<int64_t>(p.ow, isa == Isa::avx512 ? 28 : 14));
  if (impl.oc_blocks < 0 || impl.ur_w < 0) return R::no("negative forced blocking");
  double best = 0;
  for (int ob = 1; ob <= max_ob; ++ob) {
    if (impl.oc_blocks && ob != std::min<int64_t>(impl.oc_blocks, c.ocb)) continue;
    for (int ur = 1; ur <= max_ur; ++ur) {
      if (impl.ur_w && ur != std::min<int64_t>(impl.ur_w, p.ow)) continue;
      // (bf16 with an odd channel count broadcasts the last channel alone through a register.)
      const bool odd = c.bf16 && p.ic % 2;
      if (!block_fits(isa, ur, ob, c.bcast_reg || odd, c.epi_temps)) continue;
      // Keep the unrolled kernel-row body within ~2K instructions (the uop cache and L1I also
      // hold the edge-block bodies), unless the blocking is forced.
      const int64_t body =
          p.kw * c.k_steps(int(std::min<int64_t>(c.simd, p.ic))) * (ob + int64_t(ur) * ob);
      if (body > kMaxBody && !(impl.ur_w && impl.oc_blocks) && !(ur == 1 && ob == 1)) continue;
      // Plans with pixel / oc-group remainders pay 2% (their partial blocks run below the
      // model's estimate). Ties (1%) go to fewer oc vectors (smaller code, measured faster
      // with embedded broadcasts), then to wider blocks.
      const double cost =
          row_cost(c, ur, ob) * (1 + (p.ow % ur ? 0.02 : 0) + (c.ocb % ob ? 0.02 : 0));
      if (c.ur_w == 0 || cost < best * 0.99 ||
          (cost <= best * 1.01 && ob == c.oc_blocks && ur > c.ur_w)) {
        best = std::min(best == 0 ? cost : best, cost);
        c.ur_w = ur;
        c.oc_blocks = ob;
      }
    }
  }
  if (c.ur_w == 0) {
    if (impl.ur_w > 0 && impl.oc_blocks > 0 && impl.oc_blocks <= max_ob)
      return R::no("forced blocking ow" + std::to_string(impl.ur_w) + "oc" +
                   std::to_string(impl.oc_blocks) + " exceeds the " +
                   std::to_string(vector_regs(isa)) + " vector registers");
    return R::no("no register blocking fits the forced values");
  }

  // Two rows per block for narrow outputs: one block spans the row (ur_w = ow) and pairs of
  // rows share each weight vector (e.g. 7-wide rows: 7 x 2 -> 2 x 7 x 1). Taken when the model
  // says it is >= 5% cheaper; only chosen freely (forced values keep one row).
  if (p.oh >= 4 && 2 * p.ow <= (isa == Isa::avx512 ? 28 : 14) && !impl.ur_w && !impl.oc_blocks) {
    const double one = row_cost(c, c.ur_w, c.oc_blocks);
    const int ur = int(2 * p.ow);
    for (int ob = 1; ob <= max_ob; ++ob) {
      if (!block_fits(isa, ur, ob, c.bcast_reg || (c.bf16 && p.ic % 2), c.epi_temps) ||
          p.kw * c.k_steps(int(std::min<int64_t>(c.simd, p.ic))) * (ob + int64_t(ur) * ob) >
              kMaxBody)
        continue;
      if (pair_cost(c, ob) < one * 0.95) {
        c.ur_h = 2;
        c.ur_w = int(p.ow);
        c.oc_blocks = ob;
        break;
      }
    }
  }

  c.oc_groups = (c.ocb + c.oc_blocks - 1) / c.oc_blocks;
  c.oc_blocks_last = int(c.ocb - (c.oc_groups - 1) * c.oc_blocks);
  c.last_group_own = c.oc_blocks_last != c.oc_blocks || p.oc % c.simd != 0;
  c.ow_blocks = plan_ow_blocks(p, c.ur_w);
  // Loop order: all weights in L2 -> rows outer (the src rows in L1 meet every group); else
  // one group's weights stay in L2 while its output rows sweep.
  const int64_t wei_bytes = c.wei_group_floats(c.oc_blocks) * 4 * c.oc_groups;
  c.rows_outer = wei_bytes <= impl.cache.l2_weights() && c.ur_h == 1;  // row pairs need rows inner
  // K split: a group whose weights overflow L2 would stream them from L3 for every output row;
  // cut the input channels into chunks that stay in L2 across the rows (partial sums in dst).
  const int64_t group_bytes = c.wei_group_floats(c.oc_blocks) * 4;
  c.ic_chunk = c.icb_total();
  if (group_bytes > split_above(impl.cache) && p.oh > 1 && !c.bf16_dst) {  // (no f32 partials)
    c.ic_chunk =
        std::max<int64_t>(1, split_chunk(impl.cache) / (c.wei_icb_floats(c.oc_blocks, c.simd) * 4));
    c.rows_outer = false;
  }
  // Prefetching the next group's weights costs load uops: worth it only when the weights
  // cannot stay in L2 between runs, and one prefetch per pf_every steps (about one pass over
  // the next group per group) beats one per step.
  // Rows outer: the first row's sweep over the groups reads every group's weights from memory
  // (later rows find them in L2), so each row's calls walk the next group's weights too.
  c.pf_next = (c.rows_outer && c.oc_groups > 1 && wei_bytes >= kPfFirstAbove) ||
              (!c.rows_outer && c.oc_groups > 1 && wei_bytes > impl.cache.l2_weights());
  // Each call's register blocks run all reduction steps; the next group has as many steps x
  // oc_blocks lines, which a group's calls (groups outer: all its rows or row pairs) or one
  // row's (rows outer) walk about once.
  int64_t blocks = 0;
  for (const OwBlock& b : c.ow_blocks) blocks += b.count;
  const int64_t calls = c.rows_outer ? blocks : (p.oh + c.ur_h - 1) / c.ur_h * blocks;
  // (At most the steps of one kernel row, so that each row's walk advances.)
  const int max_every = int(std::min<int64_t>(16, p.kw * c.k_steps(c.simd)));
  while (c.pf_every < max_every && calls >= 2 * c.pf_every * c.oc_blocks) c.pf_every *= 2;
  return c;
}

}  // namespace kiln::convjit
