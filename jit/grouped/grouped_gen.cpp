#include "jit/grouped/grouped_gen.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"

namespace kiln::convjit {

using namespace Xbyak;

namespace {

// Upper bound of the emitted bytes (instructions are at most ~12 bytes; the epilogue chain at
// most ~60 instructions per accumulator).
size_t code_size_bound(const GroupedConf& c) {
  const size_t cols = size_t(c.p.cols_read(c.ur_w));
  const size_t body =
      size_t(c.icg) * (cols * 20 + size_t(c.ur_w * c.p.kw) * 8 + size_t(c.p.kw + 1) * 12) + 512;
  const size_t store = size_t(c.ur_w) * (40 + 60 * 12 * (c.p.post.size() + 1));
  return c.ow_blocks.size() * (body + store) + size_t(c.icg) * 64 + 16384;  // + index table
}

// Vector register i as the Ymm operand vpermps takes (a zmm on AVX-512).
Ymm yz(Isa isa, int i) {
  return isa == Isa::avx512 ? Ymm(Zmm(i)) : Ymm(i);
}

}  // namespace

GroupedShuffleGenerator::GroupedShuffleGenerator(const GroupedConf& c,
                                                 std::vector<ShuffleSource> src, int tail,
                                                 const std::string& name)
    : JitGenerator(name, code_size_bound(c)), c_(c), src_(std::move(src)), tail_(tail) {
  GprPool().take_all(src_row_, dst_row_, src_blk_, dst_blk_, src_k_, wei_k_, kh_cnt_, ow_cnt_,
                     epi_a_, epi_b_);
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.d.isa, c.p.bias, c.p.post);
  if (c.ur_w + std::max(epi_->temps_needed(), c.shuffle_regs()) > vector_regs(c.d.isa))
    fail(Code::internal, "kernel " + name + ": " + std::to_string(c.ur_w) +
                             " accumulators leave too few registers");
}

void GroupedShuffleGenerator::generate() {
  const int64_t pix = int64_t(c_.d.simd) * 4;
  preamble(c_.d.isa, tail_, src_blk_.cvt32());
  mov(src_row_, ptr[abi_param1 + offsetof(ConvCallArgs, src)]);
  mov(dst_row_, ptr[abi_param1 + offsetof(ConvCallArgs, dst)]);
  for (const OwBlock& b : c_.ow_blocks) {
    lea(src_blk_, ptr[src_row_ + (b.start * c_.p.sw - c_.p.pl) * pix]);
    lea(dst_blk_, ptr[dst_row_ + b.start * pix]);
    if (b.count > 1) {
      loop_n(ow_cnt_, b.count, [&] {
        emit_block(b, true);
        add(src_blk_, b.ur * c_.p.sw * pix);
        add(dst_blk_, b.ur * pix);
      });
    } else {
      emit_block(b, b.interior);
    }
  }
  postamble(c_.d.isa, tail_);
  // Index vector r: lane l takes channel r of l's group.
  align(64);
  L(idx_);
  for (const ShuffleSource& s : src_)
    for (int lane : s.lanes) dd(uint32_t(lane));
  epi_->emit_constants();
}

void GroupedShuffleGenerator::emit_block(const OwBlock& b, bool interior) {
  const ConvProblem& p = c_.p;
  const Isa isa = c_.d.isa;
  const int S = c_.d.simd, c = int(c_.icg), ur = b.ur;
  const int64_t pix = int64_t(S) * 4;
  // Accumulators, then the permute index, the permuted vector, the kw weights of (kh, r), and
  // the mask and the masked input (AVX2 with a lane tail).
  const int idx = ur, t = ur + 1, w0 = ur + 2, mask = w0 + int(p.kw), v = mask + 1;
  const int64_t icb = int64_t(S) * 4 * p.ih * p.iw;
  const bool avx2_tail = tail_ && isa != Isa::avx512;
  zero_vregs(isa, ur);
  if (avx2_tail) vmovups(Ymm(mask), ptr[rip + tail_mask_]);
  mov(src_k_, src_blk_);
  mov(wei_k_, ptr[abi_param1 + offsetof(ConvCallArgs, wei)]);
  const int64_t cols = p.cols_read(ur);
  loop_arg(kh_cnt_, offsetof(ConvCallArgs, kh_cnt), [&] {
    for (int r = 0; r < c; ++r) {
      vmovups(vreg(isa, idx), ptr[rip + idx_ + r * S * 4]);
      for (int kw = 0; kw < p.kw; ++kw)
        vmovups(vreg(isa, w0 + kw), ptr[wei_k_ + (int64_t(kw) * c + r) * S * 4]);
      for (int64_t col = 0; col < cols; ++col) {
        // Edge blocks leave out the columns in the padding.
        const int64_t iw = b.start * p.sw - p.pl + col;
        if (!interior && (iw < 0 || iw >= p.iw)) continue;
        std::vector<std::pair<int, int>> taps;  // (output pixel, kernel column) reading col
        for (int kw = 0; kw < p.kw; ++kw) {
          const int64_t rem = col - kw * p.dw;
          if (rem >= 0 && rem % p.sw == 0 && rem / p.sw < ur)
            taps.emplace_back(int(rem / p.sw), kw);
        }
        if (taps.empty()) continue;
        // The last vector's pad lanes (they may hold anything, NaN included) reach no lane of
        // the permuted vector that is kept.
        const ShuffleSource& src = src_[size_t(r)];
        const Address in = ptr[src_k_ + src.a * icb + col * pix];
        if (src.b != src.a) {  // AVX-512 only (grouped_shuffle_sources): t = block a, permuted
          vmovups(Zmm(t), in);
          const Address in_b = ptr[src_k_ + src.b * icb + col * pix];
          if (tail_)
            vpermt2ps(Zmm(t) | k1 | T_z, Zmm(idx), in_b);
          else
            vpermt2ps(Zmm(t), Zmm(idx), in_b);
        } else if (!tail_) {
          vpermps(yz(isa, t), yz(isa, idx), in);
        } else if (isa == Isa::avx512) {
          vpermps(Zmm(t) | k1 | T_z, Zmm(idx), in);
        } else {
          vmaskmovps(Ymm(v), Ymm(mask), in);
          vpermps(Ymm(t), Ymm(idx), Ymm(v));
        }
        for (auto [x, kw] : taps) vfmadd231ps(vreg(isa, x), vreg(isa, t), vreg(isa, w0 + kw));
      }
    }
    add(src_k_, p.dh * p.iw * pix);
    add(wei_k_, p.kw * c * S * 4);
  });
  const std::vector<int> temps = vreg_range(ur, epi_->temps_needed());
  for (int x = 0; x < ur; ++x) {
    if (!epi_->empty()) {
      EpilogueAddressing ea{this, abi_param1, epi_a_, epi_b_, dst_blk_, x * pix, 0};
      epi_->apply(x, temps, ea.operands(), tail_);
    }
    vmovups(ptr[dst_blk_ + x * pix], vreg(isa, x));
  }
}

}  // namespace kiln::convjit
