// MatMul of two f32 activations (attention's Q x K^T and P x V, or a MatMul whose constant
// right operand is not a 2-D weight matrix): C[b] = A[b] x B[b] over numpy-broadcast batch
// dims. No packing: a tile is MR rows of one batch entry across all of N; its K loop
// broadcasts one A element per row and multiplies it with NR vectors of B's row k, loaded
// straight from B (rows are contiguous), into MR x NR register accumulators. B's K x N panel
// is re-read by every row tile, which is fine for the shapes this serves (a batch entry's B
// is at most a few hundred KB and stays in L2); big constant 2-D weights go to the FC family.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"
#include "jit/glue/matmul_rows.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace aj = asmjit;
namespace x86 = asmjit::x86;

using TileFn = void (*)(const float* a, const float* b, float* c);

class MatMulKernel : public glue::GlueKernel {
 public:
  MatMulKernel(int64_t m, int64_t k, int64_t n, std::vector<int64_t> a_off,
               std::vector<int64_t> b_off, Isa isa)
      : m_(m), k_(k), n_(n), a_off_(std::move(a_off)), b_off_(std::move(b_off)) {
    const glue::MatMulBlocking bl = glue::matmul_blocking(isa);
    mr_ = bl.mr;
    m_tiles_ = (m + mr_ - 1) / mr_;
    tiles_ = int64_t(a_off_.size()) * m_tiles_;
    name_ = std::string("glue_matmul_") + isa_name(isa) + "_m" + std::to_string(m) + "k" +
            std::to_string(k) + "n" + std::to_string(n);
    AsmBuilder b(name_, isa);
    glue::build_matmul_rows(b, mr_, bl.nr, k_, n_);
    const int tail = int(m % mr_);
    if (tail) glue::build_matmul_rows(b, tail, bl.nr, k_, n_);
    code_ = b.finish();
    full_ = b.entry<TileFn>(code_, 0);
    tail_ = tail ? b.entry<TileFn>(code_, 1) : full_;
  }

  double macs() const override {
    return double(a_off_.size()) * double(m_) * double(k_) * double(n_);
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    const float* a = args.src[0];
    const float* b = args.src[1];
    float* c = args.dst[0];
    for (int64_t t = std::max<int64_t>(begin, 0); t < std::min(end, tiles_); ++t) {
      const int64_t batch = t / m_tiles_, row = (t % m_tiles_) * mr_;
      const TileFn fn = row + mr_ <= m_ ? full_ : tail_;
      fn(a + a_off_[size_t(batch)] + row * k_, b + b_off_[size_t(batch)],
         c + (batch * m_ + row) * n_);
    }
  }

 private:
  int64_t m_, k_, n_;
  std::vector<int64_t> a_off_, b_off_;  // per output batch entry, in floats
  int mr_ = 1;
  int64_t m_tiles_ = 1;
  TileFn full_ = nullptr, tail_ = nullptr;
};

}  // namespace

namespace glue {

MatMulBlocking matmul_blocking(Isa isa) {
  return isa == Isa::avx512 ? MatMulBlocking{6, 4} : MatMulBlocking{6, 2};
}

int vector_registers(Isa isa) {
  return isa == Isa::avx512 ? 32 : 16;
}

int build_matmul_rows(AsmBuilder& b, int rows, int nr, int64_t k_, int64_t n_, int64_t lda,
                      int64_t ldc) {
  if (lda == 0) lda = k_;
  if (ldc == 0) ldc = n_;
  auto& cc = b.cc();
  const int V = b.width();
  b.begin_function(aj::FuncSignatureT<void, const float*, const float*, float*>());
  x86::Gp a = b.gp(), bb = b.gp(), c = b.gp();
  b.func()->setArg(0, a);
  b.func()->setArg(1, bb);
  b.func()->setArg(2, c);
  const int64_t block = int64_t(nr) * V, full_blocks = n_ / block, rest = n_ % block;
  // One column block of `vecs` vectors, the last one `last_valid` lanes wide.
  auto column_block = [&](const x86::Gp& bcol, const x86::Gp& ccol, int vecs, int last_valid) {
    const Mask last = b.mask(last_valid);
    const Mask* lm = last.full() ? nullptr : &last;
    std::vector<std::vector<x86::Vec>> acc(static_cast<size_t>(rows),
                                           std::vector<x86::Vec>(static_cast<size_t>(vecs)));
    for (auto& r : acc)
      for (auto& v : r) {
        v = b.vec();
        cc.vxorps(v, v, v);
      }
    std::vector<x86::Vec> bv(static_cast<size_t>(vecs));
    for (auto& v : bv) v = b.vec();
    x86::Vec av = b.vec();
    x86::Gp ap = b.gp(), bp = b.gp(), kk = b.gp();
    cc.mov(ap, a);
    cc.mov(bp, bcol);
    cc.mov(kk, k_);
    aj::Label loop = cc.newLabel();
    cc.bind(loop);
    for (int j = 0; j < vecs; ++j)
      b.load(bv[size_t(j)], x86::ptr(bp, j * V * 4), j + 1 == vecs ? lm : nullptr);
    for (int i = 0; i < rows; ++i) {
      cc.vbroadcastss(av, x86::ptr(ap, int32_t(i * lda * 4)));
      for (int j = 0; j < vecs; ++j) cc.vfmadd231ps(acc[size_t(i)][size_t(j)], bv[size_t(j)], av);
    }
    cc.add(ap, 4);
    cc.add(bp, n_ * 4);
    cc.dec(kk);
    cc.jnz(loop);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < vecs; ++j)
        b.store(x86::ptr(ccol, int32_t((i * ldc + j * V) * 4)), acc[size_t(i)][size_t(j)],
                j + 1 == vecs ? lm : nullptr);
  };
  x86::Gp bcol = b.gp(), ccol = b.gp();
  cc.mov(bcol, bb);
  cc.mov(ccol, c);
  if (full_blocks > 0) {
    x86::Gp nb = b.gp();
    cc.mov(nb, full_blocks);
    aj::Label loop = cc.newLabel();
    cc.bind(loop);
    column_block(bcol, ccol, nr, V);
    cc.add(bcol, block * 4);
    cc.add(ccol, block * 4);
    cc.dec(nb);
    cc.jnz(loop);
  }
  if (rest > 0) {
    const int vecs = int((rest + V - 1) / V), last_valid = int(rest - int64_t(vecs - 1) * V);
    column_block(bcol, ccol, vecs, last_valid);
  }
  b.end_function();
  return b.function_count() - 1;
}

std::optional<BatchOffsets> matmul_batch_offsets(const Shape& a, const Shape& b) {
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  // Batch dims, right-aligned; each operand's stride is 0 where it broadcasts.
  const size_t r = std::max(a.size(), b.size()) - 2;
  BatchOffsets o;
  o.batch.assign(r, 1);
  std::vector<int64_t> sa(r, 0), sb(r, 0);
  int64_t stride_a = m * k, stride_b = k * n;
  for (size_t i = r; i-- > 0;) {
    const int64_t da = i + a.size() >= r + 2 ? a[i + a.size() - 2 - r] : 1;
    const int64_t db = i + b.size() >= r + 2 ? b[i + b.size() - 2 - r] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    o.batch[i] = std::max(da, db);
    sa[i] = da == 1 ? 0 : stride_a;
    sb[i] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  int64_t batches = 1;
  for (int64_t d : o.batch)
    if ((batches *= d) > kMaxMatMulBatches) return std::nullopt;
  o.a.assign(size_t(batches), 0);
  o.b.assign(size_t(batches), 0);
  for (int64_t e = 0; e < batches; ++e) {
    int64_t rem = e;
    for (size_t i = r; i-- > 0;) {
      const int64_t idx = rem % o.batch[i];
      rem /= o.batch[i];
      o.a[size_t(e)] += idx * sa[i];
      o.b[size_t(e)] += idx * sb[i];
    }
  }
  return o;
}

}  // namespace glue

std::unique_ptr<Kernel> create_matmul_kernel(const Shape& a, const Shape& b, Isa isa,
                                             std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (a.size() < 2 || b.size() < 2) return decline(why_not, "a 1-D operand");
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k) return decline(why_not, "inner dims differ");
  if (m < 1 || k < 1 || n < 1) return decline(why_not, "empty operand");
  // Displacements (row i of A: i * K floats; row i of C: i * N) are 32-bit immediates, and a
  // batch's operands are addressed from 64-bit pointers.
  if (k > (int64_t(1) << 24) || n > (int64_t(1) << 24)) return decline(why_not, "K or N over 2^24");
  std::optional<glue::BatchOffsets> off = glue::matmul_batch_offsets(a, b);
  if (!off) return decline(why_not, "batch dims do not broadcast or exceed 2^24 entries");
  return std::make_unique<MatMulKernel>(m, k, n, std::move(off->a), std::move(off->b), isa);
}

}  // namespace kiln
