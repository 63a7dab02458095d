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
  convjit::GprPool pool;
  a_m_ = pool.take("a_m");
  c_m_ = pool.take("c_m");
  a_k_ = pool.take("a_k");
  b_k_ = pool.take("b_k");
  k_cnt_ = pool.take("k_cnt");
  m_cnt_ = pool.take("m_cnt");
  row_off_ = pool.take("row_off");
  epi_a_ = pool.take("epi_a");
  epi_b_ = pool.take("epi_b");
  pf_ = pool.take("pf");
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, c.p.bias, c.p.post);
  const int live =
      c.mr * vecs + std::max({epi_->temps_needed(), 1, vecs + 1 + (b_masked_ ? 1 : 0)});
  if (live > convjit::vector_regs(c.isa))
    fail(Code::internal, "kernel " + name + ": register tile m" + std::to_string(c.mr) + "n" +
                             std::to_string(vecs) + " with its epilogue needs " +
                             std::to_string(live) + " vector registers");
}

GemmGenerator::~GemmGenerator() = default;

void GemmGenerator::generate() {
  preamble();
  if (lane_tail_ && c_.isa == Isa::avx512) set_tail_opmask(lane_tail_, epi_a_.cvt32());
  mov(a_m_, ptr[abi_param1 + offsetof(CallArgs, a)]);
  mov(c_m_, ptr[abi_param1 + offsetof(CallArgs, c)]);
  if (c_.nhwc) mov(pf_, ptr[abi_param1 + offsetof(CallArgs, pf)]);
  if (!c_.nhwc) xor_(row_off_, row_off_);
  Label loop, tail, done;
  mov(m_cnt_, ptr[abi_param1 + offsetof(CallArgs, m_blocks)]);
  test(m_cnt_, m_cnt_);
  jz(tail, T_NEAR);
  L(loop);
  emit_block(c_.mr);
  add(a_m_, c_.mr * lda_);
  add(c_m_, c_.mr * ldc_);
  if (!c_.nhwc) add(row_off_, c_.mr * c_.simd * 4);
  dec(m_cnt_);
  jnz(loop, T_NEAR);
  L(tail);
  if (c_.m_tail) {
    test(byte[abi_param1 + offsetof(CallArgs, flags)], int(kFlagMTail));
    jz(done, T_NEAR);
    emit_block(c_.m_tail);
  }
  L(done);
  postamble();
  if (lane_tail_ && c_.isa != Isa::avx512) emit_tail_mask_table(mask_table_, lane_tail_);
  epi_->emit_constants();
}

void GemmGenerator::emit_block(int rows) {
  emit_init(rows);
  mov(a_k_, a_m_);
  mov(b_k_, ptr[abi_param1 + offsetof(CallArgs, b)]);
  mov(k_cnt_, ptr[abi_param1 + offsetof(CallArgs, ksteps)]);
  const int u = c_.unroll;
  if (b_masked_ && c_.isa != Isa::avx512)
    vmovups(Ymm(c_.mr * vecs_ + vecs_ + 1), ptr[rip + mask_table_]);
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
  for (int j = 0; j < vecs_; ++j) {
    const Address src = ptr[b_k_ + s * ldb_ + j * c_.simd * 4];
    if (b_masked_ && j == vecs_ - 1) {
      if (c_.isa == Isa::avx512)
        vmovups(Zmm(b0 + j) | k1 | T_z, src);
      else
        vmaskmovps(Ymm(b0 + j), Ymm(bc + 1), src);  // lanes past the plane are never read
    } else {
      vmovups(vreg(c_.isa, b0 + j), src);
    }
  }
  // NHWC: B is the weights, cold in memory on the first tile's sweep (see CallArgs::pf).
  if (c_.nhwc) prefetcht1(ptr[pf_ + s * 64]);
  for (int i = 0; i < rows; ++i) {
    vbroadcastss(vreg(c_.isa, bc), ptr[a_k_ + i * lda_ + s * 4]);
    for (int j = 0; j < vecs_; ++j)
      vfmadd231ps(vreg(c_.isa, acc(i, j)), vreg(c_.isa, b0 + j), vreg(c_.isa, bc));
  }
}

void GemmGenerator::load_c(int a, const Address& addr, bool masked, int mask_reg) {
  if (!masked) return vmovups(vreg(c_.isa, a), addr);
  if (c_.isa == Isa::avx512) return vmovups(Zmm(a) | k1 | T_z, addr);
  vmovups(Ymm(mask_reg), ptr[rip + mask_table_]);
  vmaskmovps(Ymm(a), Ymm(mask_reg), addr);
}

void GemmGenerator::store_c(const Address& addr, int a, bool masked, int mask_reg) {
  if (!masked) return vmovups(addr, vreg(c_.isa, a));
  if (c_.isa == Isa::avx512) return vmovups(addr | k1, Zmm(a));
  vmovups(Ymm(mask_reg), ptr[rip + mask_table_]);
  vmaskmovps(addr, Ymm(mask_reg), Ymm(a));
}

void GemmGenerator::emit_init(int rows) {
  auto zero = [&] {
    for (int i = 0; i < rows * vecs_; ++i)
      vxorps(vreg(c_.isa, i), vreg(c_.isa, i), vreg(c_.isa, i));
  };
  if (c_.kc >= c_.k) return zero();
  Label load, go;
  test(byte[abi_param1 + offsetof(CallArgs, flags)], int(kFlagAccumulate));
  jnz(load, T_NEAR);
  zero();
  jmp(go, T_NEAR);
  L(load);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < vecs_; ++j)
      load_c(acc(i, j), ptr[c_m_ + i * ldc_ + j * c_.simd * 4], lane_tail_ && j == vecs_ - 1,
             rows * vecs_);
  L(go);
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
  auto store_all = [&](bool final) {
    std::vector<int> temps;
    for (int t = 0; t < epi_->temps_needed(); ++t) temps.push_back(rows * vecs_ + t);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < vecs_; ++j) {
        const bool tail = lane_tail_ && j == vecs_ - 1;
        if (final && !epi_->empty())
          epi_->apply(acc(i, j), temps, operands(i, j), tail ? lane_tail_ : 0);
        store_c(ptr[c_m_ + i * ldc_ + j * c_.simd * 4], acc(i, j), tail, rows * vecs_);
      }
  };
  if (c_.kc >= c_.k) return store_all(true);
  Label raw, done;
  test(byte[abi_param1 + offsetof(CallArgs, flags)], int(kFlagFinal));
  jz(raw, T_NEAR);
  store_all(true);
  jmp(done, T_NEAR);
  L(raw);
  store_all(false);
  L(done);
}

}  // namespace kiln::im2col
