#include "jit/dw/dw_gen.h"

#include <map>
#include <utility>

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"

namespace kiln::convjit {

using namespace Xbyak;

namespace {

// Upper bound of the emitted bytes: instructions are at most ~12 bytes, the epilogue chain at
// most ~60 instructions per op and accumulator.
size_t code_size_bound(const DwConf& c) {
  const size_t ur = size_t(c.ur_w), taps = size_t(c.taps());
  const size_t loads = size_t(c.p.kh) * size_t(dw_block_inputs(c.p, c.ur_w)) + taps;
  const size_t store = ur * (40 + 60 * 12 * (c.p.post.size() + 1));
  const size_t block = (ur * taps + loads + ur) * 12 + store + 64;
  const size_t row = c.ow_blocks.size() * block + 64;
  const size_t vec = c.segs.size() * (row + 96) + taps * 12 + 64;
  return vec * (c.tail_code ? 2 : 1) + 16384;
}

}  // namespace

DwGenerator::DwGenerator(const DwConf& c, const std::string& name)
    : JitGenerator(name, code_size_bound(c)), c_(c) {
  GprPool().take_all(src_cv_, dst_cv_, wei_, bias_, c_off_, cv_cnt_, src_row_, dst_row_, row_cnt_,
                     src_blk_, dst_blk_, ow_cnt_, epi_a_, epi_b_);
  // The bias initialises the accumulators (as in the reference: bias first, then the taps), so
  // the epilogue only runs the post-op chain.
  // (int8: the bias joins the sums' scaling at the store, emit_block.)
  EpilogueU8 u8;
  u8.store_q = c.u8_dst;
  u8.residual = c.u8_dst && c.int8_params->residual;
  if (u8.residual) u8.res = *c.int8_params->residual;
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, false, c.p.post, u8);
  const int need = epi_->temps_needed();
  if (need > c.epi_temps)
    fail(Code::internal, "kernel " + name + ": epilogue needs " + std::to_string(need) +
                             " scratch registers, conf reserved " + std::to_string(c.epi_temps));
  w0_ = c.ur_w;
  in_ = w0_ + c.weight_regs();
  // Registers dead at the store: the input register, and the row weights (reloaded per block).
  const int first_temp = c.weights == DwWeights::all ? in_ : w0_;
  for (int t = 0; t < need; ++t) temps_.push_back(first_temp + t);
  int used = c.weights == DwWeights::all ? in_ + std::max(1, c.epi_temps)
                                         : w0_ + std::max(c.weight_regs() + 1, c.epi_temps);
  if (c.mask_reg()) mask_ = used++;
  if (used > vector_regs(c.isa) || used != dw_vector_regs(c, c.ur_w, c.weights))
    fail(Code::internal, "kernel " + name + ": register plan does not match the conf");
}

int DwGenerator::wreg(int kh, int kw) const {
  return c_.weights == DwWeights::all ? w0_ + kh * int(c_.p.kw) + kw : w0_ + kw;
}

bool DwGenerator::tap_valid(int64_t ow0, int px, int kw) const {
  if (ow0 < 0) return true;  // interior block: every tap is inside the image
  const int64_t iw = (ow0 + px) * c_.p.sw - c_.p.pl + int64_t(kw) * c_.p.dw;
  return iw >= 0 && iw < c_.p.iw;
}

void DwGenerator::generate() {
  const Reg64 param = abi_param1;
  // NHWC: the partial channel vector's loads and stores are masked.
  const int masked_lanes = c_.tail_code && c_.nhwc ? c_.tail : 0;
  preamble(c_.isa, masked_lanes, epi_a_.cvt32());
  if (c_.mask_reg()) vmovups(Ymm(mask_), ptr[rip + tail_mask_]);
  mov(wei_, ptr[param + offsetof(DwCallArgs, c.wei)]);
  mov(bias_, ptr[param + offsetof(DwCallArgs, c.bias)]);
  xor_(c_off_, c_off_);
  if (c_.nhwc) {
    // Channel vectors innermost (per register block, emit_vectors): the pointers stay at the
    // call's first vector and c_off indexes every operand.
    mov(src_row_, ptr[param + offsetof(DwCallArgs, c.src)]);
    mov(dst_row_, ptr[param + offsetof(DwCallArgs, c.dst)]);
    for (const DwRowSeg& s : c_.segs) emit_segment(s, false);
  } else {
    // One plane per channel vector: its taps load once, then all its rows.
    mov(src_cv_, ptr[param + offsetof(DwCallArgs, c.src)]);
    mov(dst_cv_, ptr[param + offsetof(DwCallArgs, c.dst)]);
    each_vector([&](bool tail) {
      emit_plane(tail);
      if (tail) return;
      add(src_cv_, c_.src_cv_bytes());
      add(dst_cv_, c_.dst_cv_bytes());
      add(wei_, c_.wei_cv_bytes());
      add(bias_, c_.simd * 4);
      add(c_off_, c_.simd * 4);
    });
  }
  postamble(c_.isa, masked_lanes);
  epi_->emit_constants();
}

void DwGenerator::load_weights(int kh_lo, int kh_hi, const std::vector<bool>& cols) {
  for (int kh = kh_lo; kh < kh_hi; ++kh)
    for (int kw = 0; kw < c_.p.kw; ++kw)
      if (cols[size_t(kw)])
        vmovups(vreg(c_.isa, wreg(kh, kw)),
                at(wei_, (int64_t(kh) * c_.p.kw + kw) * c_.wei_tap_bytes()));
}

Address DwGenerator::at(const Reg64& base, int64_t disp) const {
  if (c_.nhwc) return ptr[base + c_off_ + disp];
  return ptr[base + disp];
}

void DwGenerator::emit_plane(bool tail) {
  if (c_.weights == DwWeights::all)
    load_weights(0, int(c_.p.kh), std::vector<bool>(size_t(c_.p.kw), true));
  mov(src_row_, src_cv_);
  mov(dst_row_, dst_cv_);
  for (const DwRowSeg& s : c_.segs) emit_segment(s, tail);
}

void DwGenerator::each_vector(const std::function<void(bool tail)>& vector) {
  loop_arg(cv_cnt_, offsetof(DwCallArgs, cv_full), [&] { vector(false); });
  if (c_.tail_code) if_flag(offsetof(DwCallArgs, c.flags), kFlagIcTail, [&] { vector(true); });
}

void DwGenerator::emit_vectors(int ur, int64_t ow0, const DwRowSeg& s, const Reg64& src,
                               int64_t sdisp, const Reg64& dst, int64_t ddisp) {
  // NHWC: the call's channel vectors of one register block, full ones in a loop, then the
  // partial one with masked loads and stores.
  xor_(c_off_, c_off_);
  each_vector([&](bool tail) {
    emit_block(ur, ow0, s, tail, src, sdisp, dst, ddisp);
    if (!tail) add(c_off_, c_.simd * 4);
  });
}

void DwGenerator::emit_segment(const DwRowSeg& s, bool tail) {
  const Reg64 param = abi_param1;
  // The segment's rows inside the call's [r0, r1): [max(r0, start), min(r1, end)). Rows run
  // in order, so the row pointers already sit at the first of them.
  Label loop, skip;
  mov(row_cnt_, ptr[param + offsetof(DwCallArgs, r1)]);
  mov(ow_cnt_, s.start + s.count);
  cmp(row_cnt_, ow_cnt_);
  cmovg(row_cnt_, ow_cnt_);
  mov(ow_cnt_, ptr[param + offsetof(DwCallArgs, r0)]);
  mov(epi_a_, s.start);
  cmp(ow_cnt_, epi_a_);
  cmovl(ow_cnt_, epi_a_);
  sub(row_cnt_, ow_cnt_);
  jle(skip, T_NEAR);
  L(loop);
  emit_row(s, tail);
  add(src_row_, c_.p.sh * c_.src_row_bytes());
  add(dst_row_, c_.dst_row_bytes());
  dec(row_cnt_);
  jnz(loop, T_NEAR);
  L(skip);
}

void DwGenerator::emit_row(const DwRowSeg& s, bool tail) {
  const ConvProblem& p = c_.p;
  const int64_t pix = c_.src_pix_bytes(), dpix = c_.dst_pix_bytes();
  for (const OwBlock& b : c_.ow_blocks) {
    // src_row points at input row r * sh, column 0; the block's window starts pt rows and pl
    // columns before that.
    const int64_t scol = (b.start * p.sw - p.pl) * pix - p.pt * c_.src_row_bytes();
    const int64_t dcol = b.start * dpix;
    if (b.count > 1) {
      lea(src_blk_, ptr[src_row_ + scol]);
      lea(dst_blk_, ptr[dst_row_ + dcol]);
      loop_n(ow_cnt_, b.count, [&] {
        if (c_.nhwc)
          emit_vectors(b.ur, -1, s, src_blk_, 0, dst_blk_, 0);
        else
          emit_block(b.ur, -1, s, tail, src_blk_, 0, dst_blk_, 0);
        add(src_blk_, b.ur * p.sw * pix);
        add(dst_blk_, b.ur * dpix);
      });
    } else if (c_.nhwc) {
      emit_vectors(b.ur, b.interior ? -1 : b.start, s, src_row_, scol, dst_row_, dcol);
    } else {
      emit_block(b.ur, b.interior ? -1 : b.start, s, tail, src_row_, scol, dst_row_, dcol);
    }
  }
}

void DwGenerator::emit_block(int ur, int64_t ow0, const DwRowSeg& s, bool tail, const Reg64& src,
                             int64_t sdisp, const Reg64& dst, int64_t ddisp) {
  const ConvProblem& p = c_.p;
  const int64_t pix = c_.src_pix_bytes(), dpix = c_.dst_pix_bytes();
  const bool io_tail = tail && c_.nhwc;
  // The taps (pixel, kernel column) reading each input column, per kernel row; which kernel
  // columns the block uses at all.
  std::vector<std::map<int64_t, std::vector<std::pair<int, int>>>> uses(size_t(p.kh));
  std::vector<bool> cols(size_t(p.kw), false);
  for (int kh = s.kh_lo; kh < s.kh_hi; ++kh)
    for (int px = 0; px < ur; ++px)
      for (int kw = 0; kw < p.kw; ++kw)
        if (tap_valid(ow0, px, kw)) {
          uses[size_t(kh)][int64_t(px) * p.sw + int64_t(kw) * p.dw].push_back({px, kw});
          cols[size_t(kw)] = true;
        }
  // NHWC switches channel vectors per block, so even all-taps weights load here.
  if (c_.nhwc && c_.weights == DwWeights::all) load_weights(s.kh_lo, s.kh_hi, cols);
  for (int px = 0; px < ur; ++px) {
    Xmm a = vreg(c_.isa, px);
    if (p.bias && !c_.int8)
      vmovups(a, at(bias_, 0));
    else
      vxorps(a, a, a);
  }
  // One kernel row's taps: input row `row` + rdisp, weights of kernel row kh (streamed: at
  // `wrow` + the column's offset).
  auto kernel_row = [&](int kh, const Reg64& row, int64_t rdisp, const Reg64& wrow) {
    const bool stream = c_.weights == DwWeights::stream;
    for (const auto& [x, taps] : uses[size_t(kh)]) {
      const Address in = at(row, rdisp + x * pix);
      if (c_.int8) {
        // 16 bytes -> f32 integers, less the zero point: exact.
        vpmovzxbd(Zmm(in_), xword[row + rdisp + x * pix]);
        vcvtdq2ps(Zmm(in_), Zmm(in_));
        if (c_.sub_zero)
          vsubps(Zmm(in_), Zmm(in_), ptr_b[abi_param1 + offsetof(DwCallArgs, x_zero)]);
      } else if (c_.bf16_src) {
        // bf16 -> f32: the 16 halves zero-extended to dwords, shifted into the upper half.
        vpmovzxwd(Zmm(in_), yword[row + rdisp + x * pix]);
        vpslld(Zmm(in_), Zmm(in_), 16);
      } else if (taps.size() == 1 && !io_tail && !stream) {
        // Read by one tap only: the load folds into the FMA.
        vfmadd231ps(vreg(c_.isa, taps[0].first), vreg(c_.isa, wreg(kh, taps[0].second)), in);
        continue;
      } else {
        load_vec(c_.isa, in_, in, io_tail, mask_);
      }
      for (const auto& [px, kw] : taps)
        if (stream)
          vfmadd231ps(vreg(c_.isa, px), vreg(c_.isa, in_), at(wrow, kw * c_.wei_tap_bytes()));
        else
          vfmadd231ps(vreg(c_.isa, px), vreg(c_.isa, wreg(kh, kw)), vreg(c_.isa, in_));
    }
  };
  if (c_.weights != DwWeights::stream) {
    for (int kh = s.kh_lo; kh < s.kh_hi; ++kh) {
      if (c_.weights == DwWeights::row) load_weights(kh, kh + 1, cols);
      kernel_row(kh, src, sdisp + int64_t(kh) * p.dh * c_.src_row_bytes(), wei_);
    }
  } else if (s.kh_lo < s.kh_hi) {
    // The segment's kernel rows as a loop (every row reads the same columns): epi_a walks the
    // input rows, epi_b the weight rows (both free until the store), row_cnt (saved) counts.
    lea(epi_a_, ptr[src + sdisp + int64_t(s.kh_lo) * p.dh * c_.src_row_bytes()]);
    lea(epi_b_, ptr[wei_ + int64_t(s.kh_lo) * p.kw * c_.wei_tap_bytes()]);
    push(row_cnt_);
    mov(row_cnt_, s.kh_hi - s.kh_lo);
    Label kh_loop;
    L(kh_loop);
    kernel_row(s.kh_lo, epi_a_, 0, epi_b_);
    add(epi_a_, p.dh * c_.src_row_bytes());
    add(epi_b_, p.kw * c_.wei_tap_bytes());
    dec(row_cnt_);
    jnz(kh_loop, T_NEAR);
    pop(row_cnt_);
  }
  if (c_.int8) {  // the integer sums x (x_scale * w_scale[c]) + bias (the input register is free)
    vmovups(Zmm(in_), ptr[bias_ + c_.c_pad() * 4]);
    for (int px = 0; px < ur; ++px) vfmadd213ps(Zmm(px), Zmm(in_), ptr[bias_]);
  }
  for (int px = 0; px < ur; ++px) {
    const int64_t d = ddisp + px * dpix;
    if (!epi_->empty()) epi_->apply(px, temps_, operands(dst, d), tail ? c_.tail : 0);
    if (c_.u8_dst) {  // the integers q in [0, 255] (blocked: no masked tail)
      vcvtps2dq(Zmm(px), Zmm(px));
      vpmovusdb(xword[dst + d], Zmm(px));
    } else if (c_.bf16_dst) {  // (blocked: no masked tail)
      vcvtneps2bf16(Ymm(px), Zmm(px));
      vmovdqu16(yword[dst + d], Ymm(px));
    } else {
      store_vec(c_.isa, at(dst, d), px, io_tail, mask_);
    }
  }
}

EpilogueEmitter::Operands DwGenerator::operands(const Reg64& dst, int64_t ddisp) {
  // Each lambda loads its pointer right before the address is used (the emitter asks for an
  // operand immediately before the instruction that reads it). Per-channel arrays are plain
  // [C] at the call's first channel; c_off is the current vector's byte offset from it.
  const Reg64 param = abi_param1;
  EpilogueEmitter::Operands o;
  o.residual = [this, param, dst, ddisp](int i) {
    mov(epi_a_, ptr[param + offsetof(DwCallArgs, c.post) + PostOpArgs::res_delta_at(i)]);
    if (c_.nhwc) add(epi_a_, c_off_);
    return ptr[dst + epi_a_ + ddisp];
  };
  o.scale = [this, param](int i) {
    mov(epi_a_, ptr[param + offsetof(DwCallArgs, c.post) + PostOpArgs::scale_at(i)]);
    return ptr[epi_a_ + c_off_];
  };
  o.shift = [this, param](int i) {
    mov(epi_b_, ptr[param + offsetof(DwCallArgs, c.post) + PostOpArgs::shift_at(i)]);
    return ptr[epi_b_ + c_off_];
  };
  return o;
}

}  // namespace kiln::convjit
