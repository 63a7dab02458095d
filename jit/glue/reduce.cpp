// Reductions (graph/post_ops.h ReduceOp) of a row-major f32 tensor viewed as [outer, c, inner]
// over c: y[o, i] = reduce_k x[o, k, i]. Two shapes of loop:
// - rows (inner == 1): a row of c contiguous floats is reduced in one vector accumulator, its
//   last vector masked (lanes past c read as the op's identity), then across the lanes;
// - columns (inner > 1): each vector of V consecutive i accumulates over the c rows, lane-wise
//   (no horizontal step); the last vector of a row of inner is masked.
// ReduceLogSumExp makes two passes (the maximum, then the sum of exp(x - max)), as the
// reference. Max / Min propagate NaN (vmaxps alone would drop a NaN in its first operand).
#include <cmath>
#include <cstddef>
#include <string>

#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

struct RdArgs {
  const float* x;
  float* y;
  int64_t n;     // rows: rows to reduce; columns: full vectors of one row of inner
  int64_t tail;  // columns: 1 to reduce the masked last vector after them
};
using RdFn = void (*)(const RdArgs*);

struct RdConf {
  ReduceOp op = ReduceOp::sum;
  int64_t c = 0, inner = 1;
  bool rows() const { return inner == 1; }
};

const char* reduce_op_name(ReduceOp op) {
  static const char* const kNames[] = {"sum", "mean", "max",     "min",         "prod",
                                       "l1",  "l2",   "log_sum", "log_sum_exp", "sum_square"};
  return kNames[int(op)];
}

// What lanes past the row read as: the op's identity (ReduceLogSumExp: -inf, whose exp is 0).
float identity(ReduceOp op) {
  return op == ReduceOp::max || op == ReduceOp::log_sum_exp ? -INFINITY
         : op == ReduceOp::min                              ? INFINITY
         : op == ReduceOp::prod                             ? 1.f
                                                            : 0.f;
}

class RdGen {
 public:
  RdGen(AsmBuilder& b, const RdConf& c) : b_(b), cc_(b.cc()), c_(c), V_(b.width()) {}

  void build() {
    b_.begin_function(asmjit::FuncSignatureT<void, const RdArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    x86::Gp x = b_.gp(), y = b_.gp(), n = b_.gp();
    cc_.mov(x, x86::ptr(args, offsetof(RdArgs, x)));
    cc_.mov(y, x86::ptr(args, offsetof(RdArgs, y)));
    cc_.mov(n, x86::ptr(args, offsetof(RdArgs, n)));
    const int64_t len = c_.rows() ? c_.c : c_.inner;
    tail_ = b_.mask(int(len - (len + V_ - 1) / V_ * V_ + V_));  // valid lanes of the last vector
    asmjit::Label loop = cc_.newLabel(), done = cc_.newLabel();
    cc_.test(n, n);
    cc_.jz(done);
    cc_.bind(loop);
    if (c_.rows()) {
      row(x, y);
      cc_.add(x, c_.c * 4);
      cc_.add(y, 4);
    } else {
      column(x, y, false);
      cc_.add(x, V_ * 4);
      cc_.add(y, V_ * 4);
    }
    cc_.dec(n);
    cc_.jnz(loop);
    cc_.bind(done);
    if (!c_.rows()) {
      asmjit::Label end = cc_.newLabel();
      x86::Gp tail = b_.gp();
      cc_.mov(tail, x86::ptr(args, offsetof(RdArgs, tail)));
      cc_.test(tail, tail);
      cc_.jz(end);
      column(x, y, true);
      cc_.bind(end);
    }
    b_.end_function();
  }

 private:
  // One row of c floats at [x] -> one float at [y].
  void row(const x86::Gp& x, const x86::Gp& y) {
    x86::Vec s;
    if (c_.op == ReduceOp::log_sum_exp) {
      x86::Vec m = b_.bcast(-INFINITY);
      over_row(x, [&](const x86::Vec& t) { nan_extremum(m, t, true); });
      horizontal(m, ReduceOp::max);
      s = shift(m, true);
    }
    x86::Vec acc = b_.bcast(c_.op == ReduceOp::log_sum_exp ? 0.f : identity(c_.op));
    over_row(x, [&](const x86::Vec& t) { accumulate(acc, t, s); });
    horizontal(acc, c_.op);
    finalize(acc, s);
    cc_.vmovss(x86::ptr(y), acc.xmm());
  }

  // body(t) for each vector of the row at [x]; the last one's lanes past c hold the identity
  // (for ReduceLogSumExp's sum: -inf, whose exp is 0).
  template <class F>
  void over_row(const x86::Gp& x, F body) {
    x86::Gp p = b_.gp();
    cc_.mov(p, x);
    x86::Vec t = b_.vec();
    const int64_t full = (c_.c + V_ - 1) / V_ - 1;
    if (full > 0) {
      x86::Gp k = b_.gp();
      cc_.mov(k, full);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      cc_.vmovups(t, x86::ptr(p));
      body(t);
      cc_.add(p, V_ * 4);
      cc_.dec(k);
      cc_.jnz(top);
    }
    b_.load_fill(t, x86::ptr(p), tail_, identity(c_.op));  // lanes past c: the op's identity
    body(t);
  }

  // One vector of columns at [x] (c rows, inner * 4 bytes apart) -> [y]; masked when `last`.
  void column(const x86::Gp& x, const x86::Gp& y, bool last) {
    const Mask* mk = last ? &tail_ : nullptr;
    x86::Vec t = b_.vec(), s;
    auto over_k = [&](auto body) {
      x86::Gp p = b_.gp(), k = b_.gp();
      cc_.mov(p, x);
      cc_.mov(k, c_.c);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      b_.load(t, x86::ptr(p), mk);  // masked lanes read 0: their results are not stored
      body();
      cc_.add(p, c_.inner * 4);
      cc_.dec(k);
      cc_.jnz(top);
    };
    if (c_.op == ReduceOp::log_sum_exp) {
      x86::Vec m = b_.bcast(-INFINITY);
      over_k([&] { nan_extremum(m, t, true); });
      s = shift(m, false);
    }
    x86::Vec acc = b_.bcast(c_.op == ReduceOp::log_sum_exp ? 0.f : identity(c_.op));
    over_k([&] { accumulate(acc, t, s); });
    finalize(acc, s);
    b_.store(x86::ptr(y), acc, mk);
  }

  // acc = op(acc, t) lane-wise; s: ReduceLogSumExp's shift (t is clobbered).
  void accumulate(const x86::Vec& acc, const x86::Vec& t, const x86::Vec& s) {
    switch (c_.op) {
      case ReduceOp::max:
      case ReduceOp::min:
        nan_extremum(acc, t, c_.op == ReduceOp::max);
        return;
      case ReduceOp::prod:
        cc_.vmulps(acc, acc, t);
        return;
      case ReduceOp::l1:
        cc_.vandps(t, t, b_.cu32(0x7fffffffu));
        cc_.vaddps(acc, acc, t);
        return;
      case ReduceOp::l2:
      case ReduceOp::sum_square:
        cc_.vfmadd231ps(acc, t, t);
        return;
      case ReduceOp::log_sum_exp:
        cc_.vsubps(t, t, s);
        glue::emit_exp(b_, t, t);
        cc_.vaddps(acc, acc, t);
        return;
      default:
        cc_.vaddps(acc, acc, t);
        return;
    }
  }

  // What ReduceLogSumExp subtracts: the maximum m where finite, else 0 (the reference's
  // shift); from lane 0 of m in every lane when `lane0` (rows: after horizontal()).
  x86::Vec shift(const x86::Vec& m, bool lane0) {
    if (lane0) cc_.vbroadcastss(m, m.xmm());
    x86::Vec s = b_.vec(), d = b_.vec();
    cc_.vsubps(d, m, m);  // 0 where finite, NaN where inf / NaN
    if (b_.avx512()) {
      x86::KReg k = cc_.newKw();
      cc_.vcmpps(k, d, d, 7);  // ordered
      cc_.k(k).z().vmovaps(s, m);
    } else {
      cc_.vcmpps(d, d, d, 7);
      cc_.vandps(s, m, d);
    }
    return s;
  }

  // acc = max(acc, t) (or min), NaN if either lane is NaN.
  void nan_extremum(const x86::Vec& acc, const x86::Vec& t, bool max) {
    // vmaxps d, a, b returns b when either is NaN: acc's NaN stays; t's is blended in.
    if (max)
      cc_.vmaxps(acc, t, acc);
    else
      cc_.vminps(acc, t, acc);
    if (b_.avx512()) {
      x86::KReg k = cc_.newKw();
      cc_.vcmpps(k, t, t, 3);  // unordered
      cc_.k(k).vmovaps(acc, t);
    } else {
      x86::Vec u = b_.vec(8);  // ymm; xmm for the last steps of horizontal()
      if (acc.isXmm()) u = u.xmm();
      cc_.vcmpps(u, t, t, 3);
      cc_.vblendvps(acc, acc, t, u);
    }
  }

  // Lane 0 of v = op over v's lanes (v is clobbered).
  void horizontal(const x86::Vec& v, ReduceOp op) {
    auto combine = [&](const x86::Vec& d, const x86::Vec& a) {
      switch (op) {
        case ReduceOp::max:
        case ReduceOp::min:
          nan_extremum(d, a, op == ReduceOp::max);
          return;
        case ReduceOp::prod:
          cc_.vmulps(d, d, a);
          return;
        default:
          cc_.vaddps(d, d, a);
      }
    };
    b_.fold_lanes(v, combine);
  }

  // acc = the op's result from its accumulated value (lane-wise).
  void finalize(const x86::Vec& acc, const x86::Vec& s) {
    switch (c_.op) {
      case ReduceOp::mean:
        cc_.vmulps(acc, acc, b_.cf32(float(1.0 / double(c_.c))));
        return;
      case ReduceOp::l2:
        cc_.vsqrtps(acc, acc);
        return;
      case ReduceOp::log_sum:
        glue::emit_log(b_, acc);
        return;
      case ReduceOp::log_sum_exp:
        glue::emit_log(b_, acc);
        cc_.vaddps(acc, acc, s);
        return;
      default:
        return;
    }
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  const RdConf& c_;
  const int V_;
  Mask tail_;
};

class ReduceKernel : public glue::GlueKernel {
 public:
  ReduceKernel(const RdConf& conf, int64_t outer, Isa isa, std::string name)
      : conf_(conf), outer_(outer), V_(simd_width(isa)) {
    name_ = std::move(name);
    AsmBuilder b(name_, isa);
    RdGen(b, conf_).build();
    code_ = b.finish();
    fn_ = b.entry<RdFn>(code_, 0);
    // About 8 KiB of input per tile.
    if (conf_.rows()) {
      chunk_ = std::max<int64_t>(1, 2048 / conf_.c);
      per_outer_ = (outer_ + chunk_ - 1) / chunk_;
      tiles_ = per_outer_;
    } else {
      const int64_t vecs = (conf_.inner + V_ - 1) / V_;
      chunk_ = std::max<int64_t>(1, 2048 / (conf_.c * V_));
      per_outer_ = (vecs + chunk_ - 1) / chunk_;
      tiles_ = outer_ * per_outer_;
    }
  }
  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    for (int64_t t = begin; t < end; ++t) {
      if (conf_.rows()) {
        const int64_t r0 = t * chunk_;
        RdArgs args{a.src[0] + r0 * conf_.c, a.dst[0] + r0, std::min(chunk_, outer_ - r0), 0};
        fn_(&args);
        continue;
      }
      const int64_t o = t / per_outer_, v0 = (t % per_outer_) * chunk_ * V_;
      const int64_t cols = std::min(chunk_ * V_, conf_.inner - v0);
      RdArgs args{a.src[0] + o * conf_.c * conf_.inner + v0, a.dst[0] + o * conf_.inner + v0,
                  cols / V_, cols % V_ ? 1 : 0};
      fn_(&args);
    }
  }

 private:
  RdConf conf_;
  int64_t outer_, V_, chunk_ = 1, per_outer_ = 1;
  RdFn fn_ = nullptr;
};

}  // namespace

std::unique_ptr<Kernel> create_reduce_kernel(ReduceOp op, int64_t outer, int64_t c, int64_t inner,
                                             Isa isa, std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (outer <= 0 || c <= 0 || inner <= 0) return decline(why_not, "empty tensor");
  if (outer * c * inner > (int64_t(1) << 40) || c * inner > (int64_t(1) << 28))
    return decline(why_not, "too large for 32-bit offsets");
  RdConf conf;
  conf.op = op;
  conf.c = c;
  conf.inner = inner;
  const std::string name = std::string("reduce_") + reduce_op_name(op) + "_f32_" +
                           (conf.rows() ? "rows" : "cols") + "__" + isa_name(isa);
  return std::make_unique<ReduceKernel>(conf, outer, isa, name);
}

}  // namespace kiln
