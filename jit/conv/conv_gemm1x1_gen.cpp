#include "jit/conv/conv_gemm1x1_gen.h"

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"

namespace kiln::convjit {

using namespace Xbyak;

namespace {

size_t code_size_bound(const Gemm1x1Conf& c, int ob) {
  const size_t step = size_t(ob) * 12 + size_t(c.ur_m) * (size_t(ob) * 12 + 10) + 16;
  const size_t body = size_t(c.simd) * step + 256;
  const size_t bodies = 2 * (c.ic_tail ? 2 : 1);
  const size_t store = size_t(c.ur_m) * ob * (80 + 60 * 12 * (c.p.post.size() + 1));
  return bodies * body + 2 * 3 * store + 16384;
}

}  // namespace

Gemm1x1Generator::Gemm1x1Generator(const Gemm1x1Conf& c, int ob, bool last_group,
                                   const std::string& name)
    : JitGenerator(name, code_size_bound(c, ob)),
      c_(c),
      ob_(ob),
      lane_tail_(last_group && c.nhwc ? int(c.p.oc % c.simd) : 0),
      epi_tail_(last_group ? int(c.p.oc % c.simd) : 0),
      k_split_(c.ic_chunk < c.icb_total()) {
  GprPool().take_all(src_m_, dst_m_, src_k_, wei_k_, k_cnt_, m_cnt_, epi_a_, epi_b_, pf_, koff_);
  EpilogueU8 u8;
  u8.store_q = c.u8_dst;
  u8.residual = c.u8_dst && c.int8_params->residual;
  if (u8.residual) u8.res = *c.int8_params->residual;
  // (int8: the bias joins the sums' scaling, one FMA: emit_store.)
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, c.p.bias && !c.int8, c.p.post, u8);
  if (c.ur_m * ob + std::max(epi_->temps_needed(), 1) > vector_regs(c.isa))
    fail(Code::internal, "kernel " + name + ": epilogue needs " +
                             std::to_string(epi_->temps_needed()) + " scratch registers");
}

void Gemm1x1Generator::generate() {
  preamble(c_.isa, lane_tail_, epi_a_.cvt32());
  mov(src_m_, ptr[abi_param1 + offsetof(ConvCallArgs, src)]);
  mov(dst_m_, ptr[abi_param1 + offsetof(ConvCallArgs, dst)]);
  if (c_.pf_next) mov(pf_, ptr[abi_param1 + offsetof(ConvCallArgs, pf_wei)]);
  loop_arg(m_cnt_, offsetof(ConvCallArgs, m_blocks), [&] {
    emit_tile(c_.ur_m);
    add(src_m_, c_.ur_m * c_.gemm_stride() * c_.src_pix_bytes());
    add(dst_m_, c_.ur_m * c_.dst_pix_bytes());
  });
  if (c_.m_tail) if_flag(offsetof(ConvCallArgs, flags), kFlagMTail, [&] { emit_tile(c_.m_tail); });
  postamble(c_.isa, lane_tail_);
  epi_->emit_constants();
}

void Gemm1x1Generator::emit_tile(int ur) {
  init_accumulators(
      k_split_, offsetof(ConvCallArgs, flags), [&] { zero_vregs(c_.isa, ur * ob_); },
      [&] {
        for (int j = 0; j < ob_; ++j)
          for (int m = 0; m < ur; ++m)
            load_vec(c_.isa, acc(m, j),
                     ptr[dst_m_ + m * c_.dst_pix_bytes() + j * c_.dst_vec_bytes()],
                     lane_tail_ && j == ob_ - 1, ur * ob_, true);
      });
  mov(src_k_, src_m_);
  mov(wei_k_, ptr[abi_param1 + offsetof(ConvCallArgs, wei)]);
  if (c_.windows) mov(koff_, ptr[abi_param1 + offsetof(ConvCallArgs, koff)]);
  if (c_.icb_full > 0) {
    loop_arg(k_cnt_, offsetof(ConvCallArgs, k_blocks), [&] {
      if (c_.windows) {  // this K block's taps: the table's offset from the tile's first pixel
        mov(src_k_, ptr[koff_]);
        add(src_k_, src_m_);
        add(koff_, 8);
      }
      emit_k_body(ur, c_.simd);
      if (c_.pf_next)
        add(pf_, c_.k_steps(c_.simd) / c_.pf_every * 64);  // a line per pf_every K steps
      if (!c_.windows) add(src_k_, c_.src_kb_bytes());
      add(wei_k_, c_.wei_kb_bytes(ob_));
    });
  }
  if (c_.ic_tail)
    if_flag(offsetof(ConvCallArgs, flags), kFlagIcTail, [&] { emit_k_body(ur, c_.ic_tail); });
  emit_store(ur);
}

void Gemm1x1Generator::emit_k_body(int ur, int nic) {
  const bool reg_bcast = c_.bcast_reg || c_.isa != Isa::avx512;
  const int w0 = ur * ob_, bc = w0 + ob_;
  const int64_t pix = c_.gemm_stride() * c_.src_pix_bytes();
  // Prefetches spread over the channel steps: this tile's src lines pf_ahead blocks ahead
  // (full blocks), and of the next tile (full tiles only) its src lines of this ic block (one
  // per pixel) and its dst lines (one per pixel and oc vector).
  // K steps: one per channel, or (bf16) one vdpbf16ps per channel pair (a 4-byte broadcast of
  // the pixel's two channels against a vector of 16 oc x 2 ic weights).
  const int steps = c_.k_steps(nic);
  std::vector<std::vector<std::pair<Address, bool>>> pf(
      static_cast<size_t>(steps));  // (addr, write)
  int n = 0;
  if (c_.pf_ahead && nic == c_.simd)
    for (int m = 0; m < ur; ++m)
      pf[size_t(n++ % steps)].push_back(
          {ptr[src_k_ + m * pix + c_.pf_ahead * c_.src_kb_bytes()], false});
  if (ur == c_.ur_m) {
    if (c_.pf_src)
      for (int m = 0; m < ur; ++m)
        pf[size_t(n++ % steps)].push_back({ptr[src_k_ + (ur + m) * pix], false});
    if (c_.pf_dst)
      for (int j = 0; j < ob_; ++j)
        for (int m = 0; m < ur; ++m)
          pf[size_t(n++ % steps)].push_back(
              {ptr[dst_m_ + (ur + m) * c_.dst_pix_bytes() + j * c_.dst_vec_bytes()], true});
  }
  for (int s = 0; s < steps; ++s) {
    if (c_.pf_next && nic == c_.simd && s % c_.pf_every == 0)
      prefetcht1(ptr[pf_ + s / c_.pf_every * 64]);
    for (const auto& [a, write] : pf[size_t(s)]) {
      if (write)
        prefetchw(a);
      else
        prefetcht0(a);
    }
    for (int j = 0; j < ob_; ++j)
      vmovups(vreg(c_.isa, w0 + j), ptr[wei_k_ + (int64_t(s) * ob_ + j) * c_.simd * 4]);
    // The last step of an odd channel count pairs the last channel with a pad lane, which may
    // hold anything (NaN x 0 would be NaN): it broadcasts that channel alone, zero-extended.
    const bool single = c_.bf16 && nic % 2 && s == steps - 1;
    for (int m = 0; m < ur; ++m) {
      const RegExp src = src_k_ + m * pix + s * 4;
      if (c_.int8) {  // 4 uint8 channels (pad lanes meet zero weights: integers, no NaN)
        vpbroadcastd(Zmm(bc), ptr[src]);
        for (int j = 0; j < ob_; ++j) vpdpbusd(Zmm(acc(m, j)), Zmm(bc), Zmm(w0 + j));
      } else if (!c_.bf16) {
        bcast_fmas(c_.isa, reg_bcast, acc(m, 0), w0, ob_, bc, src);
      } else if (single) {
        movzx(epi_a_.cvt32(), word[src]);
        vpbroadcastd(Zmm(bc), epi_a_.cvt32());
        for (int j = 0; j < ob_; ++j) vdpbf16ps(Zmm(acc(m, j)), Zmm(w0 + j), Zmm(bc));
      } else if (reg_bcast) {
        vpbroadcastd(Zmm(bc), ptr[src]);
        for (int j = 0; j < ob_; ++j) vdpbf16ps(Zmm(acc(m, j)), Zmm(w0 + j), Zmm(bc));
      } else {
        for (int j = 0; j < ob_; ++j) vdpbf16ps(Zmm(acc(m, j)), Zmm(w0 + j), ptr_b[src]);
      }
    }
  }
}

void Gemm1x1Generator::emit_store(int ur) {
  const std::vector<int> temps = vreg_range(ur * ob_, epi_->temps_needed());
  store_accumulators(k_split_, offsetof(ConvCallArgs, flags), [&](bool final) {
    if (c_.int8) {  // int32 sums -> f32 x (x_scale * w_scale[oc]) + bias; the K loop's registers
                    // are free
      const Zmm qs(ur * ob_);
      mov(wei_k_, ptr[abi_param1 + offsetof(ConvCallArgs, qscale)]);
      mov(epi_b_, ptr[abi_param1 + offsetof(ConvCallArgs, bias)]);
      for (int j = 0; j < ob_; ++j) {
        vmovups(qs, ptr[wei_k_ + j * c_.simd * 4]);
        for (int m = 0; m < ur; ++m) {
          vcvtdq2ps(Zmm(acc(m, j)), Zmm(acc(m, j)));
          vfmadd213ps(Zmm(acc(m, j)), qs, ptr[epi_b_ + j * c_.simd * 4]);
        }
      }
    }
    // The epilogue runs on groups of accumulators at once (apply_group), as many as the free
    // registers give each its scratch; tails one by one.
    const int need = std::max(epi_->temps_needed(false), 1);
    const std::vector<int> free = vreg_range(ur * ob_, vector_regs(c_.isa) - ur * ob_);
    const size_t group = std::max<size_t>(1, free.size() / size_t(need));
    std::vector<int> accs;
    std::vector<EpilogueEmitter::Operands> where;
    auto flush = [&] {
      if (!accs.empty()) epi_->apply_group(accs, free, where);
      accs.clear();
      where.clear();
    };
    for (int j = 0; j < ob_; ++j) {
      for (int m = 0; m < ur && final && !epi_->empty(); ++m) {
        const int64_t dofs = m * c_.dst_pix_bytes() + j * c_.dst_vec_bytes();
        EpilogueAddressing ea{
            this, abi_param1, epi_a_, epi_b_, dst_m_, dofs, int64_t(j) * c_.simd * 4};
        // A lane tail in a blocked layout only matters for the plain [OC] scale/shift arrays.
        const int tail = j == ob_ - 1 ? epi_tail_ : 0;
        if (tail) {
          epi_->apply(acc(m, j), temps, ea.operands(), tail);
          continue;
        }
        accs.push_back(acc(m, j));
        where.push_back(ea.operands());
        if (accs.size() == group) flush();
      }
    }
    flush();
    for (int j = 0; j < ob_; ++j) {
      const bool masked = lane_tail_ && j == ob_ - 1;
      for (int m = 0; m < ur; ++m) {
        const int64_t dofs = m * c_.dst_pix_bytes() + j * c_.dst_vec_bytes();
        if (c_.bf16_dst) {  // (blocked: no lane tail)
          vcvtneps2bf16(Ymm(acc(m, j)), Zmm(acc(m, j)));
          vmovdqu16(ptr[dst_m_ + dofs], Ymm(acc(m, j)));
        } else if (c_.u8_dst) {  // the integers q in [0, 255] (blocked: no lane tail)
          vcvtps2dq(Zmm(acc(m, j)), Zmm(acc(m, j)));
          vpmovusdb(ptr[dst_m_ + dofs], Zmm(acc(m, j)));
        } else {
          store_vec(c_.isa, ptr[dst_m_ + dofs], acc(m, j), masked, ur * ob_, true);
        }
      }
    }
  });
}

}  // namespace kiln::convjit
