#include "jit/winograd/winograd_gen.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "jit/conv/conv_jit_util.h"

namespace kiln::convjit {

using namespace Xbyak;

namespace {

// out[r] = sum_i mat[r][i] in[i] (registers) for any coefficients (every transform without
// hand-written shared sub-expressions): +-1 terms as adds / subtracts (a leading pair of them
// in one: F(2x2, 3x3)'s rows take one instruction per term), others as FMAs with the
// coefficient from the constant pool.
void emit_matrix(CodeGenerator& g, Isa isa, VecConsts& consts, const double* mat, int rows,
                 int cols, const int* in, const int* out) {
  for (int r = 0; r < rows; ++r) {
    std::vector<std::pair<int, double>> terms;  // (input, coefficient), a +1 one first
    for (int i = 0; i < cols; ++i)
      if (mat[r * cols + i] != 0) terms.push_back({in[i], mat[r * cols + i]});
    if (terms.empty()) fail(Code::internal, "winograd: transform row of zeros");
    std::stable_partition(terms.begin(), terms.end(), [](const auto& t) { return t.second == 1; });
    const Xmm o = vreg(isa, out[r]);
    auto reg = [&](size_t t) { return vreg(isa, terms[t].first); };
    size_t next = 1;
    if (terms[0].second == 1 && terms.size() > 1 && std::fabs(terms[1].second) == 1) {
      if (terms[1].second == 1)
        g.vaddps(o, reg(0), reg(1));
      else
        g.vsubps(o, reg(0), reg(1));
      next = 2;
    } else if (terms[0].second == 1) {
      g.vmovaps(o, reg(0));
    } else {
      g.vmulps(o, reg(0), consts.f32(float(terms[0].second)));
    }
    for (size_t t = next; t < terms.size(); ++t) {
      if (terms[t].second == 1)
        g.vaddps(o, o, reg(t));
      else if (terms[t].second == -1)
        g.vsubps(o, o, reg(t));
      else
        g.vfmadd231ps(o, reg(t), consts.f32(float(terms[t].second)));
    }
  }
}

// Registers of a 1-D transform: inputs in[i], outputs out[i], scratch by number.
struct Regs1d {
  Isa isa;
  const int* in;
  const int* out;
  Xmm d(int i) const { return vreg(isa, in[i]); }
  Xmm o(int i) const { return vreg(isa, out[i]); }
  Xmm r(int i) const { return vreg(isa, i); }
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Input transform

WinoInputGen::WinoInputGen(const WinoConf& c, int64_t col_pixels, const std::string& name)
    : JitGenerator(name, 16384 + size_t(c.a2) * 200),
      c_(c),
      col_pixels_(col_pixels),
      consts_(*this, c.isa) {}

// B^T d on the registers in[0..alpha) into out[0..alpha); registers 6..9 (alpha = 6) are
// scratch. The shared sub-expressions are those of the points 0, +-1, +-2 (winograd_conf.cpp
// kBt4); other alphas (F(2x2, 3x3), stride 2) from the entries.
void WinoInputGen::transform_1d(const int* in, const int* out) {
  // (F(2x2, 5x5) has F(4x4, 3x3)'s points, hence its B^T: tests/jit/test_winograd.cpp.)
  const int A = c_.alpha;
  if (A != 6) return emit_matrix(*this, c_.isa, consts_, c_.matrices().bt, A, A, in, out);
  const Regs1d x{c_.isa, in, out};
  const Xmm t0 = x.r(6), t1 = x.r(7), t2 = x.r(8), t3 = x.r(9);
  vmovaps(t0, x.d(4));
  vfnmadd231ps(t0, x.d(2), consts_.f32(4.f));  // d4 - 4 d2
  vmovaps(t1, x.d(3));
  vfnmadd231ps(t1, x.d(1), consts_.f32(4.f));  // d3 - 4 d1
  vsubps(t2, x.d(4), x.d(2));                  // d4 - d2
  vsubps(t3, x.d(3), x.d(1));                  // d3 - d1
  vsubps(x.o(0), x.d(0), x.d(2));
  vfmadd132ps(x.o(0), t2, consts_.f32(4.f));  // 4 (d0 - d2) + d4 - d2
  vaddps(x.o(1), t0, t1);
  vsubps(x.o(2), t0, t1);
  vaddps(x.o(3), t3, t3);
  vaddps(x.o(3), x.o(3), t2);  // d4 - d2 + 2 (d3 - d1)
  vsubps(x.o(4), t2, t3);
  vsubps(x.o(4), x.o(4), t3);  // d4 - d2 - 2 (d3 - d1)
  vsubps(x.o(5), x.d(5), x.d(3));
  vfnmadd231ps(x.o(5), t3, consts_.f32(4.f));  // d5 - d3 - 4 (d3 - d1)
}

void WinoInputGen::generate() {
  GprPool pool;
  const Reg64 src = pool.take("src"), v = pool.take("v"), tmp = pool.take("tmp"),
              rs = pool.take("row_bytes"), cs = pool.take("icb_bytes"), row = pool.take("row"),
              cnt = pool.take("cnt");
  const int A = c_.alpha;
  const int64_t vb = int64_t(c_.simd) * 4, v_xi = c_.v_xi() * 4;
  preamble();
  mov(src, ptr[abi_param1 + offsetof(WinoInArgs, src)]);
  mov(v, ptr[abi_param1 + offsetof(WinoInArgs, v)]);
  mov(tmp, ptr[abi_param1 + offsetof(WinoInArgs, tmp)]);
  mov(rs, ptr[abi_param1 + offsetof(WinoInArgs, row_bytes)]);
  mov(cs, ptr[abi_param1 + offsetof(WinoInArgs, icb_bytes)]);
  if (c_.one_d) {
    // The patch's alpha pixels along the axis (a row: col_pixels apart; a column: rows
    // row_bytes apart) -> B^T d -> V[xi].
    const WinoMatrices mt = c_.matrices();
    const int in[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out[8] = {8, 9, 10, 11, 12, 13, 14, 15};
    loop_arg(cnt, offsetof(WinoInArgs, blocks), [&] {
      mov(row, src);
      for (int i = 0; i < A; ++i) {
        if (c_.along_w) {
          vmovups(vreg(c_.isa, in[i]), ptr[src + i * col_pixels_ * vb]);
        } else {
          vmovups(vreg(c_.isa, in[i]), ptr[row]);
          if (i + 1 < A) add(row, rs);
        }
      }
      emit_matrix(*this, c_.isa, consts_, mt.bt, A, A, in, out);
      for (int j = 0; j < A; ++j) vmovups(ptr[v + j * v_xi], vreg(c_.isa, out[j]));
      add(src, cs);
      add(v, vb);
    });
    postamble();
    consts_.emit();
    return;
  }
  // (alpha 7: inputs 0..6, outputs 8..14; alpha 6 keeps 6..9 for the shared sub-expressions.)
  const int in[7] = {0, 1, 2, 3, 4, 5, 6};
  const int out6[6] = {10, 11, 12, 13, 14, 15}, out7[7] = {8, 9, 10, 11, 12, 13, 14};
  const int* out = A == 7 ? out7 : out6;
  loop_arg(cnt, offsetof(WinoInArgs, blocks), [&] {
    // Pass 1: each patch row y -> X[y][i] (in tmp).
    mov(row, src);
    for (int y = 0; y < A; ++y) {
      for (int x = 0; x < A; ++x) vmovups(vreg(c_.isa, in[x]), ptr[row + x * col_pixels_ * vb]);
      transform_1d(in, out);
      for (int i = 0; i < A; ++i) vmovups(ptr[tmp + (y * A + i) * vb], vreg(c_.isa, out[i]));
      if (y + 1 < A) add(row, rs);
    }
    // Pass 2: each column i of X -> V[j * alpha + i].
    for (int i = 0; i < A; ++i) {
      for (int y = 0; y < A; ++y) vmovups(vreg(c_.isa, in[y]), ptr[tmp + (y * A + i) * vb]);
      transform_1d(in, out);
      for (int j = 0; j < A; ++j)
        vmovups(ptr[v + c_.xi_of[size_t(j * A + i)] * v_xi], vreg(c_.isa, out[j]));
    }
    add(src, cs);
    add(v, vb);
  });
  postamble();
  consts_.emit();
}

// ---------------------------------------------------------------------------------------
// GEMM

namespace {

// The next call's U streams in behind this call's FMAs: a prefetcht1 every kPfEvery K steps
// walks it linearly across the register blocks (blocks x ic / kPfEvery lines: all of its
// ic x vectors lines once blocks >= vectors x kPfEvery). Without it the first register block
// of every (xi, chunk) waited on U lines from memory (in a network U is flushed between runs).
constexpr int kPfEvery = 2;

// Upper bound of the GEMM code: at most 4 register blocks (2 K-chunk bodies x full / tail
// rows), each with < 2 simd unrolled steps of (weights + broadcasts + FMAs) plus the
// accumulator init and store, at <= 12 bytes per instruction.
size_t gemm_code_bound(const WinoConf& c, int vectors) {
  const size_t step = size_t(vectors) + 1 + size_t(c.mr) * (vectors + 1);  // + a prefetch
  return 16384 + 4 * (2 * size_t(c.simd) * step + 3 * size_t(c.mr) * vectors) * 12;
}

}  // namespace

WinoGemmGen::WinoGemmGen(const WinoConf& c, int vectors, int tail, int64_t k,
                         const std::string& name)
    : JitGenerator(name, gemm_code_bound(c, vectors)), c_(c), nv_(vectors), tail_(tail), k_(k) {
  GprPool().take_all(m_, vc_, uc_, vb_, mb_, vk_, uk_, kc_cnt_, blk_cnt_, k_cnt_, pf_);
  if (c.mr * vectors + vectors + 1 > vector_regs(c.isa))
    fail(Code::internal, "kernel " + name + ": register block does not fit");
}

// `ks` input channels of a register block of `rows` tiles: per channel, the chunk's weight
// vectors once, then per tile one broadcast of V and one FMA per weight vector.
void WinoGemmGen::emit_steps(int rows, int ks) {
  const int w0 = c_.mr * nv_, b0 = w0 + nv_;
  const bool two_b = b0 + 2 <= vector_regs(c_.isa);  // alternate broadcast registers
  const int64_t vrow = c_.v_row() * 4, urow = int64_t(nv_) * c_.simd * 4;
  int bsel = 0;
  for (int k = 0; k < ks; ++k) {
    for (int j = 0; j < nv_; ++j)
      vmovups(vreg(c_.isa, w0 + j), ptr[uk_ + k * urow + j * c_.simd * 4]);
    if (ks == c_.simd && k % kPfEvery == 0) prefetcht1(ptr[pf_ + k / kPfEvery * 64]);
    for (int r = 0; r < rows; ++r) {
      bcast_fmas(c_.isa, true, r * nv_, w0, nv_, b0 + bsel, vk_ + r * vrow + k * 4);
      bsel = two_b ? 1 - bsel : 0;
    }
  }
}

void WinoGemmGen::emit_block(int rows, int64_t k_blocks, int k_tail, Init init) {
  auto acc_mem = [&](int r, int j) {
    return ptr[mb_ + (int64_t(r) * c_.m_row() + int64_t(j) * c_.simd) * 4];
  };
  auto zero = [&] { zero_vregs(c_.isa, rows * nv_); };
  auto load = [&] {
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < nv_; ++j) vmovups(vreg(c_.isa, r * nv_ + j), acc_mem(r, j));
  };
  if (init == Init::zero) {
    zero();
  } else if (init == Init::load) {
    load();
  } else {  // the first K chunk starts from zero, later ones from the partial sums in M
    Label later, done;
    cmp(kc_cnt_, c_.k_chunks(k_) - 1);
    jne(later, T_NEAR);
    zero();
    jmp(done, T_NEAR);
    L(later);
    load();
    L(done);
  }
  mov(vk_, vb_);
  mov(uk_, uc_);
  if (k_blocks > 0) {
    loop_n(k_cnt_, k_blocks, [&] {
      emit_steps(rows, c_.simd);
      add(pf_, c_.simd / kPfEvery * 64);
      add(vk_, c_.simd * 4);
      add(uk_, int64_t(c_.simd) * nv_ * c_.simd * 4);
    });
  }
  // V's pad channels are never read (the image's pad lanes are don't-care).
  if (k_tail) emit_steps(rows, k_tail);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < nv_; ++j) vmovups(acc_mem(r, j), vreg(c_.isa, r * nv_ + j));
}

// All register blocks of the group for one K chunk (V and U chunk pointers in vc_ / uc_).
void WinoGemmGen::emit_blocks(int64_t k_blocks, int k_tail, Init init) {
  mov(vb_, vc_);
  mov(mb_, m_);
  loop_arg(blk_cnt_, offsetof(WinoGemmArgs, blocks), [&] {
    emit_block(c_.mr, k_blocks, k_tail, init);
    add(vb_, c_.mr * c_.v_row() * 4);
    add(mb_, c_.mr * c_.m_row() * 4);
  });
  if (tail_ > 0) emit_block(tail_, k_blocks, k_tail, init);
}

void WinoGemmGen::generate() {
  preamble();
  mov(vc_, ptr[abi_param1 + offsetof(WinoGemmArgs, v)]);
  mov(uc_, ptr[abi_param1 + offsetof(WinoGemmArgs, u)]);
  mov(m_, ptr[abi_param1 + offsetof(WinoGemmArgs, m)]);
  mov(pf_, ptr[abi_param1 + offsetof(WinoGemmArgs, pf)]);
  // K chunks of kc channels (a multiple of simd) keep a chunk of U in L1 while all register
  // blocks of the group use it; the last chunk takes the rest and the channel tail.
  const int64_t nkc = c_.k_chunks(k_), kc_blocks = c_.kc / c_.simd;
  const int64_t last = k_ - (nkc - 1) * c_.kc;
  if (nkc > 1) {
    loop_n(kc_cnt_, nkc - 1, [&] {
      emit_blocks(kc_blocks, 0, nkc > 2 ? Init::first_zero : Init::zero);
      add(vc_, c_.kc * 4);
      add(uc_, c_.kc * nv_ * c_.simd * 4);
    });
  }
  emit_blocks(last / c_.simd, int(last % c_.simd), nkc > 1 ? Init::load : Init::zero);
  postamble();
}

// ---------------------------------------------------------------------------------------
// Output transform

namespace {

size_t out_code_bound(const WinoConf& c, int vectors) {
  // Per vector: two passes of loads / adds / stores, plus per output pixel the epilogue
  // (at most ~60 instructions of <= 12 bytes per post-op) and its store.
  const size_t per_px = 40 + 60 * 12 * (c.p.post.size() + 1);
  return 16384 + size_t(vectors) * (size_t(c.a2) * 40 + size_t(c.m * c.m) * per_px);
}

}  // namespace

WinoOutputGen::WinoOutputGen(const WinoConf& c, int vectors, bool last_chunk, int vh, int vw,
                             const std::string& name)
    : JitGenerator(name, out_code_bound(c, vectors)),
      c_(c),
      nv_(vectors),
      last_(last_chunk),
      vh_(vh),
      vw_(vw),
      consts_(*this, c.isa) {
  epi_ = std::make_unique<EpilogueEmitter>(*this, c.isa, c.p.bias, c.p.post);
  // The outputs live in registers 10..13 (10..11 for m = 2; 1-D: 8..13); ten others are free
  // once they are computed.
  if (epi_->temps_needed() > 10)
    fail(Code::internal, "kernel " + name + ": epilogue needs too many scratch registers");
}

// A^T m on in[0..alpha) into out[0..m); registers 6..9 are scratch (F(4x4, 3x3)).
void WinoOutputGen::transform_1d(const int* in, const int* out) {
  if (c_.alpha != 6 || c_.r != 3)  // F(2x2, 3x3), F(2x2, 5x5), stride 2: from the entries
    return emit_matrix(*this, c_.isa, consts_, c_.matrices().at, c_.m, c_.alpha, in, out);
  const Regs1d x{c_.isa, in, out};
  const Xmm s1 = x.r(6), d1 = x.r(7), s2 = x.r(8), d2 = x.r(9);
  vaddps(s1, x.d(1), x.d(2));
  vsubps(d1, x.d(1), x.d(2));
  vaddps(s2, x.d(3), x.d(4));
  vsubps(d2, x.d(3), x.d(4));
  vaddps(x.o(0), x.d(0), s1);
  vaddps(x.o(0), x.o(0), s2);  // m0 + m1 + m2 + m3 + m4
  vaddps(x.o(1), d2, d2);
  vaddps(x.o(1), x.o(1), d1);  // (m1 - m2) + 2 (m3 - m4)
  vmovaps(x.o(2), s1);
  vfmadd231ps(x.o(2), s2, consts_.f32(4.f));  // (m1 + m2) + 4 (m3 + m4)
  vaddps(x.o(3), d1, x.d(5));
  vfmadd231ps(x.o(3), d2, consts_.f32(8.f));  // (m1 - m2) + 8 (m3 - m4) + m5
}

void WinoOutputGen::generate() {
  GprPool pool;
  const Reg64 msrc = pool.take("m"), dst = pool.take("dst"), tmp = pool.take("tmp"),
              epi_a = pool.take("epi_a"), epi_b = pool.take("epi_b");
  const int A = c_.alpha, m = c_.m;
  const int64_t vb = int64_t(c_.simd) * 4, m_xi = c_.m_xi() * 4;
  const int64_t ocb_bytes = int64_t(c_.simd) * 4 * c_.p.oh * c_.p.ow;
  preamble();
  mov(msrc, ptr[abi_param1 + offsetof(WinoOutArgs, c) + offsetof(ConvCallArgs, src)]);
  mov(dst, ptr[abi_param1 + offsetof(WinoOutArgs, c) + offsetof(ConvCallArgs, dst)]);
  mov(tmp, ptr[abi_param1 + offsetof(WinoOutArgs, tmp)]);
  // The epilogue and store of output register `reg` at dst + disp (oc vector j).
  auto store = [&](int reg, int64_t disp, int j, int lane_tail, const std::vector<int>& temps) {
    if (!epi_->empty()) {
      EpilogueAddressing ea{this, abi_param1, epi_a, epi_b, dst, disp, j * vb};
      epi_->apply(reg, temps, ea.operands(), lane_tail);
    }
    vmovups(ptr[dst + disp], vreg(c_.isa, reg));
  };
  if (c_.one_d) {
    // A^T M on the alpha M vectors -> m outputs along the axis (registers 8 .. 13; the
    // epilogue's scratch: the inputs' 0 .. 7 and 14, 15); the valid ones are stored.
    const WinoMatrices mt = c_.matrices();
    const int in[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out[6] = {8, 9, 10, 11, 12, 13};
    const std::vector<int> temps = {0, 1, 2, 3, 4, 5, 6, 7, 14, 15};
    const int valid = c_.along_w ? vw_ : vh_;
    const int64_t step = c_.along_w ? c_.p.dw : c_.p.dh * c_.p.ow;  // pixels between outputs
    for (int j = 0; j < nv_; ++j) {
      for (int i = 0; i < A; ++i) vmovups(vreg(c_.isa, in[i]), ptr[msrc + i * m_xi + j * vb]);
      emit_matrix(*this, c_.isa, consts_, mt.at, m, A, in, out);
      const int lane_tail = last_ && j == nv_ - 1 ? int(c_.p.oc % c_.simd) : 0;
      for (int o = 0; o < valid; ++o)
        store(out[o], o * step * vb + j * ocb_bytes, j, lane_tail, temps);
    }
  } else {
    const int in[7] = {0, 1, 2, 3, 4, 5, 6}, out[4] = {10, 11, 12, 13};
    const std::vector<int> temps = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int j = 0; j < nv_; ++j) {
      // Pass 1: each row y of M -> Z[y][0..m) (in tmp).
      for (int y = 0; y < A; ++y) {
        for (int i = 0; i < A; ++i)
          vmovups(vreg(c_.isa, in[i]), ptr[msrc + c_.xi_of[size_t(y * A + i)] * m_xi + j * vb]);
        transform_1d(in, out);
        for (int x = 0; x < m; ++x) vmovups(ptr[tmp + (y * m + x) * vb], vreg(c_.isa, out[x]));
      }
      // Pass 2: each valid column x of Z -> output rows; epilogue and store of valid pixels.
      const int lane_tail = last_ && j == nv_ - 1 ? int(c_.p.oc % c_.simd) : 0;
      for (int x = 0; x < vw_; ++x) {
        for (int y = 0; y < A; ++y) vmovups(vreg(c_.isa, in[y]), ptr[tmp + (y * m + x) * vb]);
        transform_1d(in, out);
        for (int r = 0; r < vh_; ++r)
          store(out[r], (r * c_.p.dh * c_.p.ow + x * c_.p.dw) * vb + j * ocb_bytes, j, lane_tail,
                temps);
      }
    }
  }
  postamble();
  epi_->emit_constants();
  consts_.emit();
}

}  // namespace kiln::convjit
