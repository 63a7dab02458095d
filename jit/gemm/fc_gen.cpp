#include "jit/gemm/fc_gen.h"

#include <algorithm>
#include <cstddef>

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"  // GprPool, vreg

namespace kiln::fcjit {

using namespace Xbyak;
using convjit::vreg;

namespace {

size_t code_size_bound(const FcConf& c, int nb) {
  const size_t lines = size_t(nb) * c.simd * 4 / 64 + 1;
  const size_t step = size_t(nb) * 12 + size_t(c.mr) * (size_t(nb) * 12 + 12) + lines * 12;
  const size_t k_code = 2 * size_t(c.k_unroll) * step + 256;
  const size_t store = size_t(c.mr) * nb * (80 + 500 * (c.p.post.size() + 1));
  return 2 * (k_code + store) + 16384;
}

}  // namespace

FcGenerator::FcGenerator(const FcConf& c, int nb, bool last_block, const std::string& name)
    : JitGenerator(name, code_size_bound(c, nb)),
      c_(c),
      nb_(nb),
      lane_tail_(last_block ? c.lane_tail : 0),
      blk_bytes_(int64_t(nb) * c.simd * 4) {
  convjit::GprPool().take_all(x_tile_, x_k_, w_blk_, w_k_, y_blk_, y_tile_, n_off_, blk_cnt_,
                              row_cnt_, k_cnt_, epi_a_, epi_b_);
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, c.p.bias, c.p.post);
  const int need = std::max(epi_->temps_needed(lane_tail_ > 0), lane_tail_ ? 1 : 0);
  if (need > c.epi_temps || c.mr * nb + need > convjit::vector_regs(c.isa) ||
      c.loop_regs(c.mr, nb) > convjit::vector_regs(c.isa))
    fail(Code::internal, "kernel " + name + ": blocking m" + std::to_string(c.mr) + "n" +
                             std::to_string(nb) + " with " + std::to_string(need) +
                             " epilogue registers exceeds the register file");
}

void FcGenerator::generate() {
  preamble(c_.isa, lane_tail_, epi_a_.cvt32());
  mov(w_blk_, ptr[abi_param1 + offsetof(FcCallArgs, w)]);
  mov(y_blk_, ptr[abi_param1 + offsetof(FcCallArgs, y)]);
  xor_(n_off_, n_off_);
  loop_arg(blk_cnt_, offsetof(FcCallArgs, n_blocks), [&] {
    emit_block();
    add(w_blk_, uint32_t(c_.ksteps() * blk_bytes_));
    add(y_blk_, uint32_t(blk_bytes_));
    add(n_off_, uint32_t(blk_bytes_));
  });
  postamble(c_.isa, lane_tail_);
  epi_->emit_constants();
}

// One N block: the full row tiles (runtime count), then the optional tail tile.
void FcGenerator::emit_block() {
  mov(x_tile_, ptr[abi_param1 + offsetof(FcCallArgs, x)]);
  mov(y_tile_, y_blk_);
  if (c_.m_full == 1 && c_.m_tail == 0) return emit_tile(c_.mr);  // every call has all rows
  loop_arg(row_cnt_, offsetof(FcCallArgs, m_tiles), [&] {
    emit_tile(c_.mr);
    add(x_tile_, uint32_t(c_.mr * c_.x_row_bytes()));
    add(y_tile_, uint32_t(c_.mr * c_.p.n * 4));
  });
  if (c_.m_tail) if_flag(offsetof(FcCallArgs, flags), kFlagMTail, [&] { emit_tile(c_.m_tail); });
}

void FcGenerator::emit_tile(int ur) {
  zero_vregs(c_.isa, c_.ku * ur * nb_);
  mov(x_k_, x_tile_);
  mov(w_k_, w_blk_);
  const int64_t u = c_.k_unroll, iters = c_.ksteps() / u;
  const int rem = int(c_.ksteps() % u);
  if (iters > 0) {
    Label loop;
    if (iters > 1) {
      mov(k_cnt_, iters);
      L(loop);
    }
    emit_k_steps(ur, int(u));
    if (iters > 1 || rem) {
      add(x_k_, uint32_t(u * 4));
      add(w_k_, uint32_t(u * blk_bytes_));
    }
    if (iters > 1) {
      dec(k_cnt_);
      jnz(loop, T_NEAR);
    }
  }
  emit_k_steps(ur, rem);
  // Sum the accumulator sets pairwise into set 0.
  for (int step = 1; step < c_.ku; step *= 2)
    for (int s = 0; s + step < c_.ku; s += 2 * step)
      for (int i = 0; i < ur * nb_; ++i) {
        Xmm d = vreg(c_.isa, s * ur * nb_ + i), o = vreg(c_.isa, (s + step) * ur * nb_ + i);
        if (c_.int8)
          vpaddd(Zmm(d.getIdx()), Zmm(d.getIdx()), Zmm(o.getIdx()));  // (int32 sums)
        else
          vaddps(d, d, o);
      }
  emit_store(ur);
}

// `steps` k steps from x_k / w_k; step t accumulates into set t % ku.
void FcGenerator::emit_k_steps(int ur, int steps) {
  const Isa isa = c_.isa;
  const int64_t vbytes = int64_t(c_.simd) * 4, xrow = c_.x_row_bytes();
  const int w0 = c_.ku * ur * nb_;         // weight registers (ur > 1)
  const int bc = ur == 1 ? w0 : w0 + nb_;  // broadcast register
  for (int t = 0; t < steps; ++t) {
    const int s = t % c_.ku;
    const int64_t wo = t * blk_bytes_, xo = t * 4;
    if (c_.int8) {
      // One vpdpbusd per int8 quad: x's uint8 quad broadcast as a dword (the uint8 operand
      // must be the register one).
      vpbroadcastd(Zmm(bc), ptr[x_k_ + xo]);
      if (ur == 1) {
        for (int j = 0; j < nb_; ++j)
          vpdpbusd(Zmm(acc(s, 0, j, ur)), Zmm(bc), ptr[w_k_ + wo + j * vbytes]);
      } else {
        for (int j = 0; j < nb_; ++j) vmovups(Zmm(w0 + j), ptr[w_k_ + wo + j * vbytes]);
        for (int m = 0; m < ur; ++m) {
          if (m > 0) vpbroadcastd(Zmm(bc), ptr[x_k_ + m * xrow + xo]);
          for (int j = 0; j < nb_; ++j) vpdpbusd(Zmm(acc(s, m, j, ur)), Zmm(bc), Zmm(w0 + j));
        }
      }
    } else if (c_.bf16) {
      // One vdpbf16ps per bf16 pair: x's pair broadcast as a dword.
      if (ur == 1) {
        vpbroadcastd(Zmm(bc), ptr[x_k_ + xo]);
        for (int j = 0; j < nb_; ++j)
          vdpbf16ps(Zmm(acc(s, 0, j, ur)), Zmm(bc), ptr[w_k_ + wo + j * vbytes]);
      } else {
        for (int j = 0; j < nb_; ++j) vmovups(Zmm(w0 + j), ptr[w_k_ + wo + j * vbytes]);
        for (int m = 0; m < ur; ++m) {
          const RegExp x = x_k_ + m * xrow + xo;
          if (c_.bcast_emb) {
            for (int j = 0; j < nb_; ++j) vdpbf16ps(Zmm(acc(s, m, j, ur)), Zmm(w0 + j), ptr_b[x]);
          } else {
            vpbroadcastd(Zmm(bc), ptr[x]);
            for (int j = 0; j < nb_; ++j) vdpbf16ps(Zmm(acc(s, m, j, ur)), Zmm(w0 + j), Zmm(bc));
          }
        }
      }
    } else if (ur == 1) {
      // Each weight is used once: FMA memory operands, x[k] broadcast once.
      vbroadcastss(vreg(isa, bc), ptr[x_k_ + xo]);
      for (int j = 0; j < nb_; ++j)
        vfmadd231ps(vreg(isa, acc(s, 0, j, ur)), vreg(isa, bc), ptr[w_k_ + wo + j * vbytes]);
    } else {
      for (int j = 0; j < nb_; ++j) vmovups(vreg(isa, w0 + j), ptr[w_k_ + wo + j * vbytes]);
      for (int m = 0; m < ur; ++m)
        bcast_fmas(isa, !c_.bcast_emb, acc(s, m, 0, ur), w0, nb_, bc, x_k_ + m * xrow + xo);
    }
    if (c_.prefetch > 0) {
      // One prefetch per cache line of this k row, `prefetch` bytes ahead in the stream.
      for (int64_t o = (wo + 63) / 64 * 64; o < wo + blk_bytes_; o += 64)
        prefetcht0(ptr[w_k_ + o + c_.prefetch]);
    }
  }
}

void FcGenerator::emit_store(int ur) {
  const int64_t vbytes = int64_t(c_.simd) * 4, yrow = c_.p.n * 4;
  const int t0 = ur * nb_;
  const std::vector<int> temps = vreg_range(t0, c_.epi_temps);
  for (int m = 0; m < ur; ++m) {
    for (int j = 0; j < nb_; ++j) {
      const int a = acc(0, m, j, ur);
      const int tail = j == nb_ - 1 ? lane_tail_ : 0;
      const int64_t dofs = m * yrow + j * vbytes, cofs = j * vbytes;
      if (c_.int8) {  // int32 sums -> f32 x (x_scale * w_scale[n]); the bias follows
        mov(epi_a_, ptr[abi_param1 + offsetof(FcCallArgs, qscale)]);
        vcvtdq2ps(Zmm(a), Zmm(a));
        vmulps(Zmm(a), Zmm(a), ptr[epi_a_ + n_off_ + cofs]);
      }
      if (!epi_->empty()) {
        EpilogueEmitter::Operands o;
        const Reg64 param = abi_param1, ea = epi_a_, eb = epi_b_, yt = y_tile_, no = n_off_;
        o.bias = [this, param, ea, no, cofs]() {
          mov(ea, ptr[param + offsetof(FcCallArgs, bias)]);
          return ptr[ea + no + cofs];
        };
        o.residual = [this, param, ea, yt, dofs](int i) {
          mov(ea, ptr[param + offsetof(FcCallArgs, post) + PostOpArgs::res_delta_at(i)]);
          return ptr[yt + ea + dofs];
        };
        o.scale = [this, param, ea, no, cofs](int i) {
          mov(ea, ptr[param + offsetof(FcCallArgs, post) + PostOpArgs::scale_at(i)]);
          return ptr[ea + no + cofs];
        };
        o.shift = [this, param, eb, no, cofs](int i) {
          mov(eb, ptr[param + offsetof(FcCallArgs, post) + PostOpArgs::shift_at(i)]);
          return ptr[eb + no + cofs];
        };
        epi_->apply(a, temps, o, tail);
      }
      store_vec(c_.isa, ptr[y_tile_ + dofs], a, tail != 0, t0, true);
    }
  }
}

}  // namespace kiln::fcjit
