#include "jit/gemm/fc_conf.h"

#include <algorithm>
#include <cmath>

namespace kiln {

std::string FcProblem::str() const {
  std::string s = "m" + std::to_string(m) + "k" + std::to_string(k) + "n" + std::to_string(n);
  if (!post.empty()) s += "_" + post_ops_str(post);
  return s;
}

namespace fcjit {
namespace {

// Sustained single-core bytes per cycle: weights from DRAM / L3 on first touch, from L2 after.
constexpr double kMemBytesPerCycle = 8;
constexpr double kL2BytesPerCycle = 32;
// Offsets and strides are 32-bit immediates / displacements in the generated code.
constexpr int64_t kMaxImm = (int64_t(1) << 31) - (int64_t(1) << 20);

// Estimated cycles of one k step of a tile of `ur` rows x `nbv` vectors with `ku` accumulator
// sets: 2 FMA pipes, 4-cycle FMA latency shared by ku independent chains, at most 3 loads per
// cycle (2 full vectors), ~6 uops per cycle of front end.
double step_cycles(Isa isa, int ur, int nbv, int ku, bool emb) {
  const double fmas = double(ur) * nbv;
  const double loads = nbv + (emb ? fmas : ur);
  double c = std::max({fmas / 2, loads / 3, nbv / 2.0, 4.0 / ku});
  return std::max(c, (fmas + nbv + (emb ? 0 : ur)) / 6);
}

// Smallest number of accumulator sets that gives 8 independent FMA chains (2 pipes x 4 cycles
// latency), within the register file; 0 when even one set does not fit.
int pick_ku(const FcConf& c, int mr, int nb, int forced) {
  const int regs = convjit::vector_regs(c.isa);
  FcConf t = c;
  t.mr = mr;
  t.nb = nb;
  auto fits = [&](int ku) {
    t.ku = ku;
    return t.loop_regs(mr, nb) <= regs && mr * nb + c.epi_temps <= regs;
  };
  if (forced > 0) return fits(forced) ? forced : 0;
  int ku = std::max(1, std::min(4, (8 + mr * nb - 1) / (mr * nb)));
  ku = int(std::min<int64_t>(ku, c.ksteps()));
  while (ku > 1 && !fits(ku)) --ku;
  return fits(ku) ? ku : 0;
}

// Estimated cycles of the whole problem for a blocking (M > 1).
double gemm_cost(const FcConf& c, int mr, int nb, int ku, bool emb) {
  const double k = double(c.ksteps());
  const int64_t full = c.nvec / nb;
  const int rest = int(c.nvec % nb);
  const int64_t m_full = c.p.m / mr;
  const int m_tail = int(c.p.m % mr);
  auto tile = [&](int ur, int nbv) {
    return k * step_cycles(c.isa, ur, nbv, ku, emb) + ur * nbv * 2 + 20;
  };
  auto block = [&](int nbv) {
    double cyc = double(m_full) * tile(mr, nbv) + (m_tail ? tile(m_tail, nbv) : 0);
    // Weight traffic: the first pass from memory; later row tiles from L2 if the block fits.
    const double bytes = k * nbv * c.simd * 4;
    const double passes = double(m_full + (m_tail ? 1 : 0));
    const double mem =
        bytes / kMemBytesPerCycle +
        (passes - 1) * bytes / (bytes <= c.l2_budget ? kL2BytesPerCycle : kMemBytesPerCycle);
    return std::max(cyc, mem);
  };
  return double(full) * block(nb) + (rest ? block(rest) : 0);
}

}  // namespace

int FcConf::loop_regs(int ur, int nbv) const {
  const int accs = ku * ur * nbv;
  if (gemv() || ur == 1) return accs + 1;  // weights are FMA memory operands; one broadcast
  return accs + nbv + (bcast_emb ? 0 : 1);
}

std::string FcConf::name() const {
  const std::string n = std::to_string(block_outputs());
  const std::string blocking = std::string(gemv() ? "gemv_" : "gemm_") +
                               (int8   ? "int8_"
                                : bf16 ? "bf16_"
                                       : "f32_") +
                               (gemv() ? "n" + n : "m" + std::to_string(mr) + "n" + n);
  return "fc_" + blocking + "__" + isa_name(isa);
}

ConfOr<FcConf> init_fc_conf(const FcProblem& p, Isa isa, const FcImpl& impl) {
  using R = ConfOr<FcConf>;
  if (isa != Isa::avx512 && isa != Isa::avx2) return R::no("needs isa avx2 or avx512");
  if (int(isa) > int(detect_isa()))
    return R::no(std::string("isa ") + isa_name(isa) + " is not supported by this CPU");
  if (p.m < 1 || p.k < 1 || p.n < 1) return R::no("empty problem (m, k or n < 1)");
  if (int(p.post.size()) > kMaxPostOps)
    return R::no("more than " + std::to_string(kMaxPostOps) + " fused post-ops");
  for (const PostOp& op : p.post)
    if (extra_inputs(op.kind) > 0 && op.input < 0)
      return R::no(std::string("post-op '") + post_op_name(op.kind) + "' has no input index");
  if (impl.nb < 0 || impl.mr < 0 || impl.ku < 0 || impl.k_unroll < 0)
    return R::no("negative forced blocking");
  if (impl.bf16 && (isa != Isa::avx512 || !host_cpu().avx512_bf16))
    return R::no("bf16 needs avx512_bf16");
  if (impl.int8) {
    if (isa != Isa::avx512 || !host_cpu().avx512_vnni) return R::no("int8 needs avx512_vnni");
    if (impl.bf16) return R::no("int8 and bf16 both asked for");
    if (int64_t(impl.int8->w_scale.size()) != p.n) return R::no("int8 needs a scale per n");
    // (vpdpbusd takes x, the uint8 operand, from a register: no embedded broadcast.)
    if (impl.bcast_emb == 1) return R::no("int8 broadcasts x into a register");
  }

  FcConf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.bf16 = impl.bf16;
  c.int8 = impl.int8;
  if (c.int8) c.p.bias = true;  // the zero point's share is a bias (fc_kernel)
  c.nvec = (p.n + c.simd - 1) / c.simd;
  c.lane_tail = int(p.n % c.simd);
  c.l2_budget = impl.cache.l2_weights();
  // One scratch register even without post-ops: the AVX2 lane mask of tail stores and of the
  // bias load; the emitter's documented maximum (4) with any post-op. The generator checks
  // the real EpilogueEmitter::temps_needed() against it.
  c.epi_temps = p.post.empty() ? 1 : 4;
  c.bcast_emb = false;
  const int regs = convjit::vector_regs(isa);

  if (c.gemv()) {
    // Memory-bound: each k step reads 256 bytes (4 cache lines) of the stream — 4 zmm or 8 ymm
    // — with enough accumulator sets for 8 FMA chains (narrower rows measured slower cold,
    // wider ones no faster).
    c.nb = int(std::min<int64_t>(c.nvec, impl.nb ? impl.nb : 256 / (c.simd * 4)));
    c.mr = 1;
    c.ku = pick_ku(c, 1, c.nb, impl.ku);
    if (c.ku == 0) return R::no("forced blocking exceeds the vector registers");
  } else {
    if (impl.bcast_emb == 1 && isa != Isa::avx512) return R::no("embedded broadcast needs avx512");
    // Taller tiles touch more rows of x per k step than L1 keeps apart (rows K*4 bytes apart
    // often share a set): measured 28x1 at half the speed of 6x4 / 8x3 on AVX-512, and 6x2
    // ~20% behind 4x3 on AVX2. Forced values are only bounded by the registers.
    const int nb_cap = isa == Isa::avx512 ? 8 : 6, mr_cap = isa == Isa::avx512 ? 8 : 4;
    const int max_nb = int(std::min<int64_t>(c.nvec, impl.nb ? impl.nb : nb_cap));
    const int max_mr = int(std::min<int64_t>(p.m, impl.mr ? impl.mr : mr_cap));
    bool have = false;
    double best = 0;
    for (int emb = 0; emb <= (isa == Isa::avx512 && !c.int8 ? 1 : 0); ++emb) {
      if (impl.bcast_emb >= 0 && emb != impl.bcast_emb) continue;
      for (int nb = 1; nb <= max_nb; ++nb) {
        if (impl.nb && nb != std::min<int64_t>(impl.nb, c.nvec)) continue;
        for (int mr = 1; mr <= max_mr; ++mr) {
          if (impl.mr && mr != std::min<int64_t>(impl.mr, p.m)) continue;
          FcConf t = c;
          t.bcast_emb = emb != 0;
          const int ku = pick_ku(t, mr, nb, impl.ku);
          if (ku == 0) continue;
          // Within 2% of the best estimate, prefer fewer passes over the weights, then bigger
          // tiles (fewer re-reads of x).
          const double cost = gemm_cost(t, mr, nb, ku, emb != 0);
          const int64_t passes = (p.m + mr - 1) / mr, best_passes = (p.m + c.mr - 1) / c.mr;
          const bool better =
              !have || cost < best * 0.98 ||
              (cost <= best * 1.02 &&
               (passes < best_passes || (passes == best_passes && mr * nb > c.mr * c.nb)));
          if (better) {
            best = have ? std::min(best, cost) : cost;
            have = true;
            c.mr = mr;
            c.nb = nb;
            c.ku = ku;
            c.bcast_emb = emb != 0;
          }
        }
      }
    }
    if (!have) return R::no("forced blocking exceeds the vector registers");
  }
  c.n_blocks = (c.nvec + c.nb - 1) / c.nb;
  c.n_last = int(c.nvec - (c.n_blocks - 1) * c.nb);
  c.last_own = c.n_last != c.nb || c.lane_tail != 0;
  c.m_full = p.m / c.mr;
  c.m_tail = int(p.m % c.mr);

  int u = impl.k_unroll ? impl.k_unroll : std::max(4, c.ku);
  u = std::min(u, 64);
  c.k_unroll = (u + c.ku - 1) / c.ku * c.ku;
  // Software prefetch of the weight stream is off by default: kiln_fc_bench --sweep showed no
  // gain over the hardware prefetcher at 256..4096 bytes ahead (some distances were slower).
  c.prefetch = impl.prefetch >= 0 ? impl.prefetch : 0;

  if (c.loop_regs(c.mr, c.nb) > regs) return R::no("blocking exceeds the vector registers");
  const int64_t nbytes = c.block_outputs() * 4;
  if (c.ksteps() * nbytes > kMaxImm || c.x_row_bytes() * c.mr > kMaxImm ||
      p.n * 4 * c.mr > kMaxImm || int64_t(c.k_unroll) * nbytes + c.prefetch > kMaxImm)
    return R::no("k or n too large for 32-bit offsets");
  return c;
}

}  // namespace fcjit
}  // namespace kiln
