#include "jit/conv/conv_direct_gen.h"

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"
#include "jit/shared_code.h"

namespace kiln::convjit {

using namespace Xbyak;

namespace {

// Upper bound of the emitted bytes (instructions are at most ~12 bytes; the epilogue chain at
// most ~60 instructions per accumulator).
size_t code_size_bound(const DirectConf& c, int ob, int rows) {
  const size_t step = size_t(ob) * 12 + size_t(rows * c.ur_w) * (size_t(ob) * 12 + 10);
  const size_t body = size_t(c.p.kw) * size_t(c.simd) * step + 256;
  const size_t bodies = c.ow_blocks.size() * (c.ic_tail ? 2 : 1);
  const size_t store = size_t(rows * c.ur_w) * ob * (60 + 60 * 12 * (c.p.post.size() + 1));
  return bodies * body + c.ow_blocks.size() * 3 * store + 16384;
}

}  // namespace

DirectGenerator::DirectGenerator(const DirectConf& c, int ob, bool last_group, int rows,
                                 const std::string& name)
    : JitGenerator(name, code_size_bound(c, ob, rows)),
      c_(c),
      ob_(ob),
      rows_(rows),
      last_(last_group),
      k_split_(c.ic_chunk < c.icb_total()) {
  GprPool().take_all(src_row_, dst_row_, src_blk_, dst_blk_, src_ic_, wei_ic_, src_k_, wei_k_,
                     kh_cnt_, icb_cnt_, ow_cnt_, epi_a_, epi_b_, pf_);
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, c.p.bias, c.p.post);
  if (rows * c.ur_w * ob + epi_->temps_needed() > vector_regs(c.isa))
    fail(Code::internal, "kernel " + name + ": epilogue needs " +
                             std::to_string(epi_->temps_needed()) + " scratch registers");
}

int64_t DirectGenerator::dst_off(int ur, int px, int j) const {
  const int r = px / ur, x = px % ur;
  return (int64_t(r) * c_.p.ow + x) * c_.dst_pix_bytes() + j * c_.dst_ocb_bytes();
}

bool DirectGenerator::tap_valid(int64_t ow0, int p, int kw) const {
  if (ow0 < 0) return true;  // interior block: every tap is inside the image
  const int64_t iw = (ow0 + p) * c_.p.sw - c_.p.pl + int64_t(kw) * c_.p.dw;
  return iw >= 0 && iw < c_.p.iw;
}

void DirectGenerator::generate() {
  preamble();
  mov(src_row_, ptr[abi_param1 + offsetof(ConvCallArgs, src)]);
  mov(dst_row_, ptr[abi_param1 + offsetof(ConvCallArgs, dst)]);
  if (c_.pf_next) mov(pf_, ptr[abi_param1 + offsetof(ConvCallArgs, pf_wei)]);
  const int64_t pix = c_.src_pix_bytes();
  for (const OwBlock& b : c_.ow_blocks) {
    lea(src_blk_, ptr[src_row_ + (b.start * c_.p.sw - c_.p.pl) * pix]);
    lea(dst_blk_, ptr[dst_row_ + b.start * c_.dst_pix_bytes()]);
    if (b.count > 1) {
      loop_n(ow_cnt_, b.count, [&] {
        emit_block(b.ur, -1);
        add(src_blk_, b.ur * c_.p.sw * pix);
        add(dst_blk_, b.ur * c_.dst_pix_bytes());
      });
    } else {
      emit_block(b.ur, b.interior ? -1 : b.start);
    }
  }
  postamble();
  epi_->emit_constants();
}

void DirectGenerator::emit_block(int ur, int64_t ow0) {
  init_accumulators(
      k_split_, offsetof(ConvCallArgs, flags), [&] { zero_vregs(c_.isa, rows_ * ur * ob_); },
      [&] {
        for (int j = 0; j < ob_; ++j)
          for (int px = 0; px < rows_ * ur; ++px)
            vmovups(vreg(c_.isa, acc(px, j)), ptr[dst_blk_ + dst_off(ur, px, j)]);
      });
  mov(wei_ic_, ptr[abi_param1 + offsetof(ConvCallArgs, wei)]);
  mov(src_ic_, src_blk_);
  if (c_.icb_full > 0) {
    loop_arg(icb_cnt_, offsetof(ConvCallArgs, k_blocks), [&] {
      emit_kh_loop(ur, ow0, c_.simd);
      add(src_ic_, c_.src_icb_bytes());
      add(wei_ic_, c_.wei_icb_floats(ob_, c_.simd) * 4);
    });
  }
  if (c_.ic_tail) {
    if_flag(offsetof(ConvCallArgs, flags), kFlagIcTail, [&] {
      // The tail block's kernel rows are shorter: move the first-valid-row offset accordingly.
      add(wei_ic_, ptr[abi_param1 + offsetof(ConvCallArgs, wei_tail_adj)]);
      emit_kh_loop(ur, ow0, c_.ic_tail);
    });
  }
  emit_store(ur);
}

void DirectGenerator::emit_kh_loop(int ur, int64_t ow0, int nic) {
  const ConvProblem& p = c_.p;
  const bool reg_bcast = c_.bcast_reg || c_.isa != Isa::avx512;
  const int w0 = rows_ * ur * ob_;  // first weight register
  const int bc = w0 + ob_;          // broadcast register (AVX2 / bcast_reg)
  const int64_t pix = c_.src_pix_bytes(), icb = c_.src_ic_bytes();
  // Reduction steps per tap: a channel each, or (bf16) a pair of channels each.
  const int steps = c_.k_steps(nic);
  mov(src_k_, src_ic_);
  mov(wei_k_, wei_ic_);
  loop_arg(kh_cnt_, offsetof(ConvCallArgs, kh_cnt), [&] {
    for (int kw = 0; kw < p.kw; ++kw) {
      bool any = false;
      for (int px = 0; px < ur; ++px) any = any || tap_valid(ow0, px, kw);  // same in every row
      if (!any) continue;  // the whole block reads padding for this column
      for (int ic = 0; ic < steps; ++ic) {
        const int step = kw * steps + ic;
        if (c_.pf_next && nic == c_.simd && step % c_.pf_every == 0)
          prefetcht1(ptr[pf_ + step / c_.pf_every * 64]);
        const int64_t wofs = ((int64_t(kw) * steps + ic) * ob_) * c_.simd * 4;
        for (int j = 0; j < ob_; ++j)
          vmovups(vreg(c_.isa, w0 + j), ptr[wei_k_ + wofs + j * c_.simd * 4]);
        // bf16: the last step of an odd channel count pairs the last channel with a pad lane,
        // which may hold anything (NaN x 0 is NaN): that channel is broadcast alone.
        const bool single = c_.bf16 && nic % 2 && ic == steps - 1;
        for (int px = 0; px < rows_ * ur; ++px) {
          const int r = px / ur, x = px % ur;  // row in the call, pixel in the row
          if (!tap_valid(ow0, x, kw)) continue;
          const int64_t sofs = r * p.sh * c_.src_row_bytes() +
                               (int64_t(x) * p.sw + int64_t(kw) * p.dw) * pix + ic * icb;
          if (!c_.bf16) {
            bcast_fmas(c_.isa, reg_bcast, acc(px, 0), w0, ob_, bc, src_k_ + sofs);
          } else if (single || reg_bcast) {
            if (single) {
              movzx(epi_a_.cvt32(), word[src_k_ + sofs]);
              vpbroadcastd(Zmm(bc), epi_a_.cvt32());
            } else {
              vpbroadcastd(Zmm(bc), ptr[src_k_ + sofs]);
            }
            for (int j = 0; j < ob_; ++j) vdpbf16ps(Zmm(acc(px, j)), Zmm(w0 + j), Zmm(bc));
          } else {
            for (int j = 0; j < ob_; ++j)
              vdpbf16ps(Zmm(acc(px, j)), Zmm(w0 + j), ptr_b[src_k_ + sofs]);
          }
        }
      }
    }
    add(src_k_, p.dh * c_.src_row_bytes());
    add(wei_k_, c_.wei_kh_floats(ob_, nic) * 4);
    if (c_.pf_next && nic == c_.simd) add(pf_, p.kw * steps / c_.pf_every * 64);
  });
}

void DirectGenerator::emit_store(int ur) {
  const int lane_tail = last_ ? int(c_.p.oc % c_.simd) : 0;
  const std::vector<int> temps = vreg_range(rows_ * ur * ob_, epi_->temps_needed());
  store_accumulators(k_split_, offsetof(ConvCallArgs, flags), [&](bool final) {
    for (int j = 0; j < ob_; ++j)
      for (int px = 0; px < rows_ * ur; ++px) {
        const int64_t dofs = dst_off(ur, px, j);
        if (final && !epi_->empty()) {
          EpilogueAddressing ea{
              this, abi_param1, epi_a_, epi_b_, dst_blk_, dofs, int64_t(j) * c_.simd * 4};
          epi_->apply(acc(px, j), temps, ea.operands(), j == ob_ - 1 ? lane_tail : 0);
        }
        if (c_.bf16_dst) {
          vcvtneps2bf16(Ymm(acc(px, j)), Zmm(acc(px, j)));
          vmovdqu16(ptr[dst_blk_ + dofs], Ymm(acc(px, j)));
        } else {
          vmovups(ptr[dst_blk_ + dofs], vreg(c_.isa, acc(px, j)));
        }
      }
  });
}

DirectGenerators direct_generators(const DirectConf& c, const std::string& code_key,
                                   const std::string& name) {
  DirectGenerators g;
  for (int rows = 1; rows <= c.ur_h; ++rows) {
    const std::string suffix = rows > 1 ? "_rows" + std::to_string(rows) : "";
    g[size_t(rows - 1)][0] = shared_generator<DirectGenerator>(code_key, suffix, c, c.oc_blocks,
                                                               false, rows, name + suffix);
    if (c.last_group_own)
      g[size_t(rows - 1)][1] = shared_generator<DirectGenerator>(
          code_key, suffix + "_lastoc", c, c.oc_blocks_last, true, rows, name + suffix + "_lastoc");
  }
  return g;
}

}  // namespace kiln::convjit
