#include "jit/im2col/im2col_gen.h"

#include <cstddef>

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"

namespace kiln::im2col {

using namespace Xbyak;
using convjit::vreg;

namespace {

size_t code_size_bound(const Im2colConf& c, int vecs) {
  const size_t step =
      size_t(vecs) * 12 + 12 + size_t(c.mr) * (12 + size_t(vecs) * 8);  // + prefetch
  const size_t body = size_t(c.unroll + 1) * step + 256;
  const size_t acc = size_t(c.mr) * size_t(vecs);
  const size_t store = acc * (48 + 128 * (c.p.post.size() + 1));
  return 2 * (body + 2 * store + acc * 24) + 16384;
}

}  // namespace

GemmGenerator::GemmGenerator(const Im2colConf& c, int vecs, bool last, int64_t ldb,
                             const std::string& name)
    : JitGenerator(name, code_size_bound(c, vecs)),
      c_(c),
      vecs_(vecs),
      lane_tail_(last ? c.lane_tail : 0),
      b_masked_(last && c.lane_tail && !c.nhwc && c.no_copy),
      ldb_(ldb * 4),
      lda_(c.lda * 4),
      ldc_(c.ldc * 4) {
  convjit::GprPool().take_all(a_m_, c_m_, a_k_, b_k_, k_cnt_, m_cnt_, row_off_, epi_a_, epi_b_,
                              pf_);
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, c.p.bias, c.p.post);
  const int live =
      c.mr * vecs + std::max({epi_->temps_needed(), 1, vecs + 1 + (b_masked_ ? 1 : 0)});
  if (live > convjit::vector_regs(c.isa))
    fail(Code::internal, "kernel " + name + ": register tile m" + std::to_string(c.mr) + "n" +
                             std::to_string(vecs) + " with its epilogue needs " +
                             std::to_string(live) + " vector registers");
}

void GemmGenerator::generate() {
  preamble(c_.isa, lane_tail_, epi_a_.cvt32());
  mov(a_m_, ptr[abi_param1 + offsetof(CallArgs, a)]);
  mov(c_m_, ptr[abi_param1 + offsetof(CallArgs, c)]);
  if (c_.nhwc) mov(pf_, ptr[abi_param1 + offsetof(CallArgs, pf)]);
  if (!c_.nhwc) xor_(row_off_, row_off_);
  loop_arg(m_cnt_, offsetof(CallArgs, m_blocks), [&] {
    emit_block(c_.mr);
    add(a_m_, c_.mr * lda_);
    add(c_m_, c_.mr * ldc_);
    if (!c_.nhwc) add(row_off_, c_.mr * c_.simd * 4);
  });
  if (c_.m_tail) if_flag(offsetof(CallArgs, flags), kFlagMTail, [&] { emit_block(c_.m_tail); });
  postamble(c_.isa, lane_tail_);
  epi_->emit_constants();
}

void GemmGenerator::emit_block(int rows) {
  init_accumulators(
      c_.kc < c_.k, offsetof(CallArgs, flags), [&] { zero_vregs(c_.isa, rows * vecs_); },
      [&] {
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < vecs_; ++j)
            load_vec(c_.isa, acc(i, j), ptr[c_m_ + i * ldc_ + j * c_.simd * 4],
                     lane_tail_ && j == vecs_ - 1, rows * vecs_, true);
      });
  mov(a_k_, a_m_);
  mov(b_k_, ptr[abi_param1 + offsetof(CallArgs, b)]);
  mov(k_cnt_, ptr[abi_param1 + offsetof(CallArgs, ksteps)]);
  const int u = c_.unroll;
  if (b_masked_ && c_.isa != Isa::avx512)
    vmovups(Ymm(c_.mr * vecs_ + vecs_ + 1), ptr[rip + tail_mask_]);
  Label main, rem, rem_loop, end;
  cmp(k_cnt_, u);
  jl(rem, T_NEAR);
  L(main);
  for (int s = 0; s < u; ++s) emit_kstep(rows, s);
  if (c_.nhwc) add(pf_, u * 64);
  add(a_k_, u * 4);
  add(b_k_, u * ldb_);
  sub(k_cnt_, u);
  cmp(k_cnt_, u);
  jge(main, T_NEAR);
  L(rem);
  test(k_cnt_, k_cnt_);
  jz(end, T_NEAR);
  L(rem_loop);
  emit_kstep(rows, 0);
  if (c_.nhwc) add(pf_, 64);
  add(a_k_, 4);
  add(b_k_, ldb_);
  dec(k_cnt_);
  jnz(rem_loop, T_NEAR);
  L(end);
  emit_store(rows);
}

// One K step: load the B vectors, then per row broadcast A's element and FMA it into them.
void GemmGenerator::emit_kstep(int rows, int s) {
  const int b0 = c_.mr * vecs_, bc = b0 + vecs_;
  // A masked last vector never reads lanes past the plane (AVX2 mask loaded by emit_block).
  for (int j = 0; j < vecs_; ++j)
    load_vec(c_.isa, b0 + j, ptr[b_k_ + s * ldb_ + j * c_.simd * 4], b_masked_ && j == vecs_ - 1,
             bc + 1);
  // NHWC: B is the weights, cold in memory on the first tile's sweep (see CallArgs::pf).
  if (c_.nhwc) prefetcht1(ptr[pf_ + s * 64]);
  for (int i = 0; i < rows; ++i)
    bcast_fmas(c_.isa, true, acc(i, 0), b0, vecs_, bc, a_k_ + i * lda_ + s * 4);
}

EpilogueEmitter::Operands GemmGenerator::operands(int i, int j) const {
  // Per-channel operands: NHWC channels run along the vectors (offset j), NCHW channels along
  // the rows ([oc][simd] copies at the block's row_off + row i). Pointers are loaded from the
  // call's arguments right before the instruction that uses them.
  CodeGenerator* g = const_cast<GemmGenerator*>(this);
  const Reg64 param = abi_param1, ta = epi_a_, tb = epi_b_, cm = c_m_, ro = row_off_;
  const bool rows_are_oc = !c_.nhwc;
  const int64_t chan = rows_are_oc ? int64_t(i) * c_.simd * 4 : int64_t(j) * c_.simd * 4;
  const int64_t cdisp = i * ldc_ + j * c_.simd * 4;
  auto at = [g, rows_are_oc, ro, chan](const Reg64& base) {
    return rows_are_oc ? g->ptr[base + ro + chan] : g->ptr[base + chan];
  };
  EpilogueEmitter::Operands o;
  o.bias = [=]() {
    g->mov(ta, g->ptr[param + offsetof(CallArgs, bias)]);
    return at(ta);
  };
  o.residual = [=](int k) {
    g->mov(ta, g->ptr[param + offsetof(CallArgs, post) + PostOpArgs::res_delta_at(k)]);
    return g->ptr[cm + ta + cdisp];
  };
  o.scale = [=](int k) {
    g->mov(ta, g->ptr[param + offsetof(CallArgs, post) + PostOpArgs::scale_at(k)]);
    return at(ta);
  };
  o.shift = [=](int k) {
    g->mov(tb, g->ptr[param + offsetof(CallArgs, post) + PostOpArgs::shift_at(k)]);
    return at(tb);
  };
  return o;
}

void GemmGenerator::emit_store(int rows) {
  const std::vector<int> temps = vreg_range(rows * vecs_, epi_->temps_needed());
  store_accumulators(c_.kc < c_.k, offsetof(CallArgs, flags), [&](bool final) {
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < vecs_; ++j) {
        const bool tail = lane_tail_ && j == vecs_ - 1;
        if (final && !epi_->empty())
          epi_->apply(acc(i, j), temps, operands(i, j), tail ? lane_tail_ : 0);
        store_vec(c_.isa, ptr[c_m_ + i * ldc_ + j * c_.simd * 4], acc(i, j), tail, rows * vecs_,
                  true);
      }
  });
}

}  // namespace kiln::im2col
