#include "jit/grouped/grouped_conf.h"

#include <algorithm>
#include <numeric>

#include "jit/conv/conv_families.h"

namespace kiln::convjit {
namespace {

// Input-block steps (x output vectors) all register blocks of `ob` vectors execute.
int64_t block_work(const ConvProblem& p, int simd, int ob) {
  const int64_t ocb = (p.oc + simd - 1) / simd, groups = (ocb + ob - 1) / ob;
  int64_t w = 0;
  for (int64_t g = 0; g < groups; ++g)
    w += grouped_range(p, simd, ob, g).blocks() * std::min<int64_t>(ob, ocb - g * ob);
  return w;
}

}  // namespace

std::string GroupedConf::name() const {
  const std::string blocking =
      shuffle ? "shuf" + std::to_string(icg) + "ow" + std::to_string(ur_w) : d.blocking_str();
  return conv_kernel_name("grouped", d.src, d.dst, blocking, d.isa);
}

namespace {

// Output vectors per pattern of input blocks: lcm(simd, c) / simd.
int64_t shuffle_period(int64_t c, int simd) {
  return c / std::gcd(c, int64_t(simd));
}

}  // namespace

std::optional<std::vector<ShuffleSource>> grouped_shuffle_sources(const ConvProblem& p, int simd,
                                                                  int64_t j, bool bounded) {
  const int64_t c = p.ic / p.groups, base = j - j % shuffle_period(c, simd);
  std::vector<ShuffleSource> out(static_cast<size_t>(c));
  for (int64_t r = 0; r < c; ++r) {
    ShuffleSource& s = out[size_t(r)];
    s.lanes.assign(size_t(simd), 0);  // lanes past oc (bounded) read lane 0 of block a
    std::vector<int64_t> blocks;
    for (int l = 0; l < simd; ++l) {
      const int64_t o = j * simd + l;
      if (bounded && o >= p.oc) continue;
      const int64_t ch = o / c * c + r, blk = ch / simd - base;
      if (std::find(blocks.begin(), blocks.end(), blk) == blocks.end()) blocks.push_back(blk);
      if (blocks.size() > (simd == 16 && p.sw == 1 ? 2u : 1u)) return std::nullopt;
    }
    s.a = *std::min_element(blocks.begin(), blocks.end());
    s.b = *std::max_element(blocks.begin(), blocks.end());
    for (int l = 0; l < simd; ++l) {
      const int64_t o = j * simd + l;
      if (bounded && o >= p.oc) continue;
      const int64_t ch = o / c * c + r;
      s.lanes[size_t(l)] = int(ch % simd + (ch / simd - base == s.a ? 0 : simd));
    }
  }
  return out;
}

bool grouped_shuffle_fits(const ConvProblem& p, int simd) {
  if (p.groups < 1 || p.ic % p.groups || p.oc % p.groups || p.ic != p.oc) return false;
  const int64_t c = p.ic / p.groups, period = shuffle_period(c, simd);
  if (c % simd == 0 || period > 8) return false;  // whole vectors: the sparse mode is exact
  for (int64_t j = 0; j < period; ++j)
    if (!grouped_shuffle_sources(p, simd, j, false)) return false;
  return true;
}

double grouped_efficiency(const ConvProblem& p, int simd, bool bf16) {
  // bf16: the sparse mode at vdpbf16ps's ~1.6x the FMA's multiply-adds.
  if (bf16) return 0.75 * 1.6 * grouped_lane_use(p, simd);
  // shuffle: measured ~0.6 of the FMA peak at stride 1 on RegNet / ResNeXt shapes, less at
  // stride 2 (a permuted vector serves fewer taps).
  if (grouped_shuffle_fits(p, simd)) return p.sw == 1 ? 0.6 : 0.45;
  return 0.75 * grouped_lane_use(p, simd);
}

GroupedRange grouped_range(const ConvProblem& p, int simd, int ob, int64_t g) {
  const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;
  const int64_t oc_lo = g * ob * simd, oc_hi = std::min(p.oc, oc_lo + int64_t(ob) * simd);
  const int64_t ic_lo = oc_lo / ocg * icg, ic_hi = ((oc_hi - 1) / ocg + 1) * icg;
  const int64_t icb_full = p.ic / simd, ib_hi = (ic_hi + simd - 1) / simd;  // exclusive
  GroupedRange r;
  r.ib_lo = ic_lo / simd;
  r.ic_tail = ib_hi > icb_full;  // reaches the partial last block (only when ic % simd != 0)
  r.k_blocks = std::min(ib_hi, icb_full) - r.ib_lo;
  return r;
}

double grouped_lane_use(const ConvProblem& p, int simd) {
  if (p.groups < 1 || p.ic % p.groups || p.oc % p.groups) return 0;
  const int64_t ocb = (p.oc + simd - 1) / simd;
  double executed = 0;  // lanes x input channels
  for (int64_t j = 0; j < ocb; ++j) {
    const GroupedRange r = grouped_range(p, simd, 1, j);
    executed += double(r.k_blocks * simd + (r.ic_tail ? p.ic % simd : 0)) * simd;
  }
  return double(p.oc) * double(p.ic / p.groups) / executed;
}

ConfOr<GroupedConf> init_grouped_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  return init_grouped_conf_mode(p, impl, isa, GroupedMode::automatic);
}

ConfOr<GroupedConf> init_grouped_conf_mode(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                           GroupedMode mode) {
  using R = ConfOr<GroupedConf>;
  if (p.groups <= 1) return R::no("groups == 1 (a dense conv)");
  if (p.ic % p.groups || p.oc % p.groups) return R::no("groups do not divide the channels");
  ConvProblem dense = p;  // the direct conf's stand-in (its oc set below)
  dense.groups = 1;
  if (std::string why = check_common(dense, isa); !why.empty()) return R::no(why);
  // bf16 (src nChw16c_bf16): the direct family's bf16 code over each block's range, sparse
  // mode only (a permuted vector would hold one channel, not a pair).
  const bool bf16 = layout_bf16(impl.src) || layout_bf16(impl.dst);
  if (bf16) {
    if (std::string why = check_bf16(p, impl.src, impl.dst, isa, true); !why.empty())
      return R::no(why);
  } else {
    for (auto [l, what] : {std::pair{impl.src, "src"}, std::pair{impl.dst, "dst"}})
      if (std::string why = check_blocked(l, isa, what); !why.empty())
        return R::no(why + " (grouped takes blocked src and dst)");
  }
  const int simd = simd_width(isa);
  const int64_t ocb = (p.oc + simd - 1) / simd;

  // Output vectors per register block: the most that share their input blocks exactly (no
  // more work than one at a time), e.g. 2 for 32 channels per group on 16 lanes. The direct
  // conf of a dense stand-in problem with that many output vectors picks the register block
  // (pixels, vectors, row pairs); a choice that would widen the input range is retried
  // smaller. A forced oc_blocks is taken as it is.
  const int64_t least = block_work(p, simd, 1);
  int share = 1;
  for (int ob = 2; ob <= std::min<int64_t>(ocb, isa == Isa::avx512 ? 8 : 6); ++ob)
    if (block_work(p, simd, ob) == least) share = ob;
  std::optional<DirectConf> d;
  for (int try_ob = impl.oc_blocks > 0 ? int(ocb) : share; try_ob >= 1 && !d; --try_ob) {
    dense.oc = impl.oc_blocks > 0 ? p.oc : int64_t(try_ob) * simd;
    auto dc = init_direct_conf(dense, impl, isa);
    if (!dc) return R::no(dc.reason);
    if (impl.oc_blocks > 0 || block_work(p, simd, dc.conf->oc_blocks) == least) d = dc.conf;
  }

  GroupedConf c;
  c.p = p;
  c.icg = p.ic / p.groups;
  c.ocg = p.oc / p.groups;
  d->p = p;
  d->ocb = ocb;
  d->oc_groups = (ocb + d->oc_blocks - 1) / d->oc_blocks;
  d->oc_blocks_last = int(ocb - (d->oc_groups - 1) * d->oc_blocks);
  d->last_group_own = d->oc_blocks_last != d->oc_blocks || p.oc % simd != 0;
  // No K split and no weight prefetch: a register block's range is a few groups' channels.
  d->ic_chunk = d->icb_total();
  d->pf_next = false;
  for (int64_t g = 0; g < d->oc_groups; ++g)
    c.ranges.push_back(grouped_range(p, simd, d->oc_blocks, g));
  d->rows_outer = false;  // the kernel's tiles run rows inner (grouped_kernel.cpp)
  c.d = *d;

  const bool fits = grouped_shuffle_fits(p, simd) && impl.oc_blocks <= 0 && !bf16;
  if (mode == GroupedMode::shuffle && !fits)
    return R::no("shuffle needs f32, equal channels per group in and out, not whole vectors of " +
                 std::to_string(simd) +
                 ", at most two input blocks per permute and no forced "
                 "oc_blocks");
  if (mode == GroupedMode::sparse || !fits) return c;
  // Accumulators: the registers left (the epilogue reuses the dead shuffle registers); rows
  // cut into equal blocks.
  const int cap =
      std::min(28, vector_regs(isa) - std::max(c.shuffle_regs(), epilogue_temps(p, isa)));
  if (cap < 1) {  // wide kernels on AVX2
    if (mode == GroupedMode::shuffle) return R::no("shuffle: no register left for accumulators");
    return c;
  }
  c.shuffle = true;
  c.epi_temps = epilogue_temps(p, isa);
  if (impl.ur_w > cap)
    return R::no("forced ur_w " + std::to_string(impl.ur_w) + " exceeds the " +
                 std::to_string(cap) + " accumulators left");
  const int64_t nblocks = (p.ow + cap - 1) / cap;
  c.ur_w =
      impl.ur_w > 0 ? int(std::min<int64_t>(impl.ur_w, p.ow)) : int((p.ow + nblocks - 1) / nblocks);
  c.ow_blocks = plan_ow_blocks(p, c.ur_w);
  c.ranges.clear();
  // Tiles as the sparse mode's with one vector per register block, rows inner (each vector's
  // weights are c x kh x kw vectors).
  c.phases = shuffle_period(c.icg, simd);
  for (int64_t j = 0; j < c.phases; ++j)
    c.sources.push_back(*grouped_shuffle_sources(p, simd, j, false));
  if (p.oc % simd) c.sources.push_back(*grouped_shuffle_sources(p, simd, ocb - 1, true));
  c.d.oc_blocks = c.d.oc_blocks_last = 1;
  c.d.oc_groups = ocb;
  c.d.last_group_own = p.oc % simd != 0;
  c.d.ur_h = 1;
  return c;
}

}  // namespace kiln::convjit
