// Softmax attention in one kernel: Y[b] = Softmax(scale * A[b] x B[b] [+ bias[b]]) x V[b] (graph
// op SoftmaxAttention, made by graph/rewrites.cpp fuse_attention from MatMul -> [scalar Mul /
// Div] -> [Add of a bias: relative positions, a mask] -> Softmax(last axis) -> MatMul). The unfused
// ops write the [M, N] scores to memory, read them back for the softmax, write the probabilities
// and read them again for the second product: four passes over a tensor that for a long sequence is
// hundreds of MB (4,096 tokens x 16 heads: 1 GiB). Here a tile is R rows of one batch entry: their
// scores go to the thread's scratch (R rows, sized to stay in L2), become exp(s - max) in place,
// and the second product reads them from there; its R output rows are then scaled by 1 / the rows'
// sums (D multiplies a row instead of N), so no score leaves the cache - except for rows short
// enough to stay in registers (kRegisterRowVectors), which the exp function scales, biases and
// normalises on its own (a short row is mostly call and fold latency). The products are the batched
// MatMul kernel's row blocks (jit/glue/matmul_rows.h); R is the second product's row block,
// as tall as its registers allow (a narrow V - a head of 16 to 64 values - makes it the longer
// loop). Score rows are a cache line longer than a multiple of 16 floats: rows 2^k floats
// apart would put the second product's R broadcast streams in one L1 set (4,096 keys: 3x
// slower).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"
#include "jit/glue/matmul_rows.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;
using RowsFn = void (*)(const float* a, const float* b, float* c);
using ExpFn = void (*)(float* rows, float* sums, const float* bias, int64_t count);

// Vectors of a row that stays in registers between the max and the exp pass (AVX-512; AVX2's 16
// registers: half as many).
constexpr int kRegisterRowVectors = 8;
bool row_in_registers(int64_t n, Isa isa) {
  const int V = simd_width(isa);
  return (n + V - 1) / V <= (isa == Isa::avx512 ? kRegisterRowVectors : kRegisterRowVectors / 2);
}

// fn(rows, sums, bias, count): for each of `count` rows (ld floats apart, sums[i] its sum):
// row[0, n) = exp(row - max(row)) in place, sums[i] = their sum; with_bias: bias[0, n) (the
// row's, bias_ld floats after the previous row's) is first added to the row. One call per
// tile, not per row: a short row (Swin's 49 keys) is mostly the two horizontal folds' latency,
// which the next row's independent work now overlaps. A row of at most kRegisterRowVectors
// vectors (a quarter of the registers) stays in registers between the passes; a longer one is
// written back after the first pass (the bias added) and read again. A row in registers is
// also scaled first (by `scale`: A is then not) and divided by its sum before it is stored (the
// probabilities themselves: the output needs no division); a longer one keeps exp(s - max).
int build_exp_rows(AsmBuilder& b, int64_t n, int64_t ld, int64_t bias_ld, bool with_bias,
                   float scale) {
  auto& cc = b.cc();
  const int V = b.width();
  b.begin_function(asmjit::FuncSignatureT<void, float*, float*, const float*, int64_t>());
  x86::Gp row = b.gp(), out = b.gp(), bias = b.gp(), count = b.gp();
  b.func()->setArg(0, row);
  b.func()->setArg(1, out);
  b.func()->setArg(2, bias);
  b.func()->setArg(3, count);
  const int64_t full = n / V, nv = (n + V - 1) / V;
  const Mask tail = b.mask(int(n % V));
  const bool in_regs = row_in_registers(n, b.isa());
  auto max_fold = [&](const x86::Vec& d, const x86::Vec& a) { cc.vmaxps(d, d, a); };
  auto add_fold = [&](const x86::Vec& d, const x86::Vec& a) { cc.vaddps(d, d, a); };
  // t = the row's vector at m times `s` plus the bias's at c (u: scratch); -inf past n when
  // `last` (after the scale: -inf times a negative one would be +inf).
  auto load_biased = [&](const x86::Vec& t, const x86::Vec& u, const x86::Mem& m, const x86::Mem& c,
                         bool last, float s) {
    const Mask* mk = last ? &tail : nullptr;
    b.load(t, m, mk);
    if (with_bias) b.load(u, c, mk);
    if (s != 1.f && with_bias)
      cc.vfmadd132ps(t, u, b.cf32(s));  // t = t * s + u
    else if (s != 1.f)
      cc.vmulps(t, t, b.cf32(s));
    else if (with_bias)
      cc.vaddps(t, t, u);
    if (last) b.fill_past(t, tail, -INFINITY);
  };
  asmjit::Label top = cc.newLabel();
  cc.bind(top);
  x86::Vec mx = b.vec(), sum = b.vec(), u = b.vec();
  if (in_regs) {
    std::vector<x86::Vec> v;
    for (int64_t j = 0; j < nv; ++j) {
      v.push_back(b.vec());
      const int32_t off = int32_t(j * V * 4);
      load_biased(v.back(), u, x86::ptr(row, off), x86::ptr(bias, off), j == full, scale);
    }
    cc.vmovaps(mx, v[0]);
    for (int64_t j = 1; j < nv; ++j) cc.vmaxps(mx, mx, v[size_t(j)]);
    b.fold_lanes(mx, max_fold);
    cc.vbroadcastss(mx, mx.xmm());
    cc.vxorps(sum, sum, sum);
    for (int64_t j = 0; j < nv; ++j) {
      const x86::Vec& t = v[size_t(j)];
      cc.vsubps(t, t, mx);
      glue::emit_exp(b, t, t);
      if (j == full) b.zero_past(t, tail);
      cc.vaddps(sum, sum, t);
    }
    b.fold_lanes(sum, add_fold);
    cc.vmovss(x86::ptr(out), sum.xmm());
    cc.vbroadcastss(sum, sum.xmm());  // then 1 / sum in every lane
    cc.vmovups(u, b.cf32(1.f));
    cc.vdivps(sum, u, sum);
    for (int64_t j = 0; j < nv; ++j) {
      cc.vmulps(v[size_t(j)], v[size_t(j)], sum);
      b.store(x86::ptr(row, int32_t(j * V * 4)), v[size_t(j)], j == full ? &tail : nullptr);
    }
  } else {
    // Pass 1: [the bias added and stored back,] the max; lanes past n count as -inf.
    x86::Vec t = b.vec();
    cc.vmovaps(mx, b.bcast(-INFINITY));
    x86::Gp p = b.gp(), q = b.gp(), k = b.gp();
    auto over_row = [&](const std::function<void(const x86::Mem&, const x86::Mem&, bool)>& body) {
      cc.mov(p, row);
      cc.mov(q, bias);
      if (full > 0) {
        cc.mov(k, full);
        asmjit::Label loop = cc.newLabel();
        cc.bind(loop);
        body(x86::ptr(p), x86::ptr(q), false);
        cc.add(p, V * 4);
        if (with_bias) cc.add(q, V * 4);
        cc.dec(k);
        cc.jnz(loop);
      }
      if (n % V) body(x86::ptr(p), x86::ptr(q), true);
    };
    over_row([&](const x86::Mem& m, const x86::Mem& c, bool last) {
      load_biased(t, u, m, c, last, 1.f);
      if (with_bias) b.store(m, t, last ? &tail : nullptr);
      cc.vmaxps(mx, mx, t);
    });
    b.fold_lanes(mx, max_fold);
    cc.vbroadcastss(mx, mx.xmm());
    // Pass 2: e = exp(x - max) in place, summed; lanes past n neither summed nor stored.
    cc.vxorps(sum, sum, sum);
    over_row([&](const x86::Mem& m, const x86::Mem&, bool last) {
      b.load(t, m, last ? &tail : nullptr);
      cc.vsubps(t, t, mx);
      glue::emit_exp(b, t, t);
      if (last) b.zero_past(t, tail);
      cc.vaddps(sum, sum, t);
      b.store(m, t, last ? &tail : nullptr);
    });
    b.fold_lanes(sum, add_fold);
    cc.vmovss(x86::ptr(out), sum.xmm());
  }
  cc.add(row, ld * 4);
  cc.add(out, 4);
  if (with_bias && bias_ld) cc.add(bias, bias_ld * 4);
  cc.dec(count);
  cc.jnz(top);
  b.end_function();
  return b.function_count() - 1;
}

// Scores per tile at most this many bytes: with the second product's V rows they stay in L2.
constexpr int64_t kScoreBytes = 256 << 10;

class AttentionKernel : public glue::GlueKernel {
 public:
  // bias_off: per batch entry, the offset of its bias matrix (empty: no bias), whose rows are
  // bias_row floats apart (0: one row for every query).
  AttentionKernel(int64_t m, int64_t k, int64_t n, int64_t d, float scale, glue::BatchOffsets qk,
                  std::vector<int64_t> v_off, std::vector<int64_t> bias_off, int64_t bias_row,
                  Isa isa)
      : m_(m),
        k_(k),
        n_(n),
        d_(d),
        scale_(scale),
        a_off_(std::move(qk.a)),
        b_off_(std::move(qk.b)),
        v_off_(std::move(v_off)),
        bias_off_(std::move(bias_off)),
        bias_row_(bias_row) {
    const int V = simd_width(isa), regs = glue::vector_registers(isa);
    const glue::MatMulBlocking bl = glue::matmul_blocking(isa);
    // Second product: nr vectors of V's row (its d columns, up to the usual 4 / 2), and as
    // many rows as the accumulators leave registers for (one for the broadcast), up to 24.
    const int nr = int(std::min<int64_t>(bl.nr, (d + V - 1) / V));
    ld_ = round_up(n, 16) + 16;
    const int64_t fit = std::max<int64_t>(1, kScoreBytes / (ld_ * 4));
    rows_ = int(std::clamp<int64_t>(std::min<int64_t>((regs - nr - 1) / nr, 24), 1, fit));
    rows_ = int(std::min<int64_t>(rows_, m));
    mr_ = std::min(bl.mr, rows_);
    m_tiles_ = (m + rows_ - 1) / rows_;
    tiles_ = int64_t(a_off_.size()) * m_tiles_;
    name_ = std::string("glue_attention_") + isa_name(isa) + "_m" + std::to_string(m) + "k" +
            std::to_string(k) + "n" + std::to_string(n) + "d" + std::to_string(d) +
            (bias_off_.empty() ? "" : "_bias");
    AsmBuilder b(name_, isa);
    // Scores: row blocks of 1..mr_ rows (a tile's rows in blocks of mr_, then the rest).
    for (int r = 1; r <= mr_; ++r) glue::build_matmul_rows(b, r, bl.nr, k, n, 0, ld_);
    const int full = glue::build_matmul_rows(b, rows_, nr, n, d, ld_, 0);
    const int tail = int(m % rows_);
    const int part = tail ? glue::build_matmul_rows(b, tail, nr, n, d, ld_, 0) : full;
    // (A row in registers is scaled and normalised by the exp function itself.)
    in_regs_ = row_in_registers(n, isa);
    const int exp =
        build_exp_rows(b, n, ld_, bias_row_, !bias_off_.empty(), in_regs_ ? scale : 1.f);
    code_ = b.finish();
    for (int r = 0; r < mr_; ++r) scores_.push_back(b.entry<RowsFn>(code_, r));
    out_full_ = b.entry<RowsFn>(code_, full);
    out_tail_ = b.entry<RowsFn>(code_, part);
    exp_ = b.entry<ExpFn>(code_, exp);
  }

  double macs() const override {
    return double(a_off_.size()) * double(m_) * double(n_) * double(k_ + d_);
  }
  // The tile's scores, its rows' sums and (a scale) its rows of A times the scale.
  int64_t scratch_bytes() const override {
    return 4 * (rows_ * ld_ + round_up(rows_, 16) + (prescale() ? rows_ * k_ : 0));
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    const float* a = args.src[0];
    const float* bm = args.src[1];
    const float* v = args.src[2];
    const float* bias = bias_off_.empty() ? nullptr : args.src[3];
    float* y = args.dst[0];
    float* s = scratch_floats(args);
    float* sums = s + rows_ * ld_;
    float* scaled = sums + round_up(rows_, 16);
    for (int64_t t = std::max<int64_t>(begin, 0); t < std::min(end, tiles_); ++t) {
      const int64_t batch = t / m_tiles_, r0 = (t % m_tiles_) * rows_;
      const int rows = int(std::min<int64_t>(rows_, m_ - r0));
      const float* at = a + a_off_[size_t(batch)] + r0 * k_;
      if (prescale()) {  // scale * (A x B) as (scale * A) x B: K products, not N
        for (int64_t i = 0; i < rows * k_; ++i) scaled[i] = at[i] * scale_;
        at = scaled;
      }
      for (int i = 0; i < rows; i += mr_) {
        const int r = std::min(mr_, rows - i);
        scores_[size_t(r - 1)](at + i * k_, bm + b_off_[size_t(batch)], s + i * ld_);
      }
      exp_(s, sums, bias ? bias + bias_off_[size_t(batch)] + r0 * bias_row_ : nullptr, rows);
      float* yt = y + (batch * m_ + r0) * d_;
      (rows == rows_ ? out_full_ : out_tail_)(s, v + v_off_[size_t(batch)], yt);
      if (!in_regs_)
        for (int i = 0; i < rows; ++i) {  // (a multiply per value, not a division: vectorised)
          const float inv = 1.f / sums[i];
          for (int64_t j = 0; j < d_; ++j) yt[i * d_ + j] *= inv;
        }
    }
  }

 private:
  int64_t m_, k_, n_, d_;
  float scale_;
  std::vector<int64_t> a_off_, b_off_, v_off_, bias_off_;  // per batch entry, in floats
  int64_t bias_row_ = 0;
  bool in_regs_ = false;  // rows short enough for the exp function to finish the softmax
  bool prescale() const { return scale_ != 1.f && !in_regs_; }
  int rows_ = 1, mr_ = 1;
  int64_t ld_ = 0;  // floats between score rows in scratch
  int64_t m_tiles_ = 1;
  std::vector<RowsFn> scores_;  // scores_[r - 1]: r rows of scores
  RowsFn out_full_ = nullptr, out_tail_ = nullptr;
  ExpFn exp_ = nullptr;
};

}  // namespace

std::unique_ptr<Kernel> create_attention_kernel(const Shape& a, const Shape& b, const Shape& v,
                                                float scale, Isa isa, std::string* why_not,
                                                const Shape* bias) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (a.size() < 2 || b.size() < 2 || v.size() < 2) return decline(why_not, "a 1-D operand");
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back(), d = v.back();
  if (b[b.size() - 2] != k || v[v.size() - 2] != n) return decline(why_not, "inner dims differ");
  if (m < 1 || k < 1 || n < 1 || d < 1) return decline(why_not, "empty operand");
  // Row displacements are 32-bit immediates (build_matmul_rows).
  if (k > (int64_t(1) << 24) || n > (int64_t(1) << 24) || d > (int64_t(1) << 24))
    return decline(why_not, "K, N or D over 2^24");
  if (!std::isfinite(scale) || scale == 0.f)
    return decline(why_not, "scale not finite and non-zero");
  std::optional<glue::BatchOffsets> qk = glue::matmul_batch_offsets(a, b);
  if (!qk) return decline(why_not, "batch dims do not broadcast or exceed 2^24 entries");
  // The scores' batch dims must already be the output's: V may broadcast, not widen them.
  Shape scores = qk->batch;
  scores.push_back(m);
  scores.push_back(n);
  std::optional<glue::BatchOffsets> pv = glue::matmul_batch_offsets(scores, v);
  if (!pv || pv->batch != qk->batch) return decline(why_not, "V widens the batch dims");
  std::vector<int64_t> bias_off;
  int64_t bias_row = 0;
  if (bias) {
    // A bias of rank < 2 is one row; its last dim must be the keys' (a per-query constant would
    // not change the softmax: the pass leaves it alone), its rows the queries' or one.
    Shape bs = *bias;
    while (bs.size() < 2) bs.insert(bs.begin(), 1);
    const int64_t rows = bs[bs.size() - 2];
    if (bs.back() != n || (rows != m && rows != 1))
      return decline(why_not, "the bias is not [.., M or 1, N]");
    bias_row = rows == 1 ? 0 : n;
    // (matmul_batch_offsets' B matrix, [N, rows], has the bias matrix's size.)
    Shape as_b(bs.begin(), bs.end() - 2);
    as_b.push_back(n);
    as_b.push_back(rows);
    std::optional<glue::BatchOffsets> bo = glue::matmul_batch_offsets(scores, as_b);
    if (!bo || bo->batch != qk->batch) return decline(why_not, "the bias widens the batch dims");
    bias_off = std::move(bo->b);
  }
  return std::make_unique<AttentionKernel>(m, k, n, d, scale, std::move(*qk), std::move(pv->b),
                                           std::move(bias_off), bias_row, isa);
}

}  // namespace kiln
