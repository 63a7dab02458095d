// Broadcast binary ops and per-channel affine maps (jit/glue/glue.h). Every output layout is
// walked as [outer][rows][lanes]: blocked (n, channel block) x H*W pixels x one vector, nhwc
// n x H*W pixels x C channels, nchw (n, c) x H rows x W (or x one H*W row when every operand
// allows it). Along rows and lanes each operand is then a stream with a compile-time row
// stride and a lane stride of 1 (contiguous) or 0 (broadcast): full tensors, per-channel
// vectors, per-pixel values and scalars are all such streams, so one loop nest serves every
// broadcast. Conf building is plain C++; the generator only emits; run() sets each tile's
// pointers. Binary ops are the reference's single IEEE operation, so they match it exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/error.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

constexpr int kMaxStreams = 3;

// Offset of (n, c, row, lane) in floats: n*on + c*oc + row*sp + lane*(sq ? 1 : 0). `c` is the
// outer channel index of the walk (a channel block, a channel, or always 0 for nhwc).
struct Stream {
  int src = -1;  // KernelArgs::src slot; -1: the kernel's own vector `own`
  const float* own = nullptr;
  int64_t on = 0, oc = 0, sp = 0;
  bool sq = false;
  bool row_invariant() const { return sp == 0; }
};

enum class Expr {
  add,
  sub,
  mul,
  div,
  prelu,
  max,
  min,
  mean,
  fma,
  copy
};  // prelu: s0 < 0 ? s0 * s1 : s0; max / min: NaN if either is; mean: (s0 + s1) / 2; fma:
    // s0 * s1 + s2; copy: s0 (Expand)

struct Conf {
  Expr expr = Expr::add;
  int V = 8;              // floats per vector
  int64_t N = 1, Cd = 1;  // outer walk: N x Cd
  int64_t P = 1, Q = 1;   // rows x lanes per outer index
  int blocked_valid = 0;  // blocked output: real lanes of the last channel block (0: all)
  std::vector<Stream> s;  // operands (1 to 3)
  Stream y;
  std::vector<PostOp> post;
  int64_t nvec() const { return (Q + V - 1) / V; }
  int row_unroll() const { return nvec() <= 4 ? int(std::max<int64_t>(1, 4 / nvec())) : 1; }
};

struct Walk {
  const Shape& y;
  Layout l;
  bool merged;  // nchw: one H*W row per (n, c)
};

// The stream of operand `o` over the walk, or a reason.
std::string plan_stream(const Walk& w, const BcastOperand& o, Stream* st) {
  const Shape& Y = w.y;
  if (o.shape.size() > 4) return "operand of rank > 4";
  if (o.shape.size() < 4 && o.layout != Layout::nchw) return "an operand of rank < 4 is nchw";
  Shape s(4 - o.shape.size(), 1);
  s.insert(s.end(), o.shape.begin(), o.shape.end());
  for (size_t k = 0; k < 4; ++k)
    if (s[k] != Y[k] && s[k] != 1)
      return "operand " + shape_str(o.shape) + " does not broadcast to " + shape_str(Y);
  const int64_t C = Y[1], H = Y[2], W = Y[3];
  const bool fn = s[0] > 1, fc = s[1] > 1, fh = s[2] > 1, fw = s[3] > 1;
  const bool sp_none = !fh && !fw, sp_full = s[2] == H && s[3] == W;
  st->src = o.src;
  const int blk = layout_block(o.layout);
  const bool plain = o.layout == Layout::nchw || o.layout == Layout::nhwc;
  const std::string partial = "operand " + shape_str(o.shape) + " broadcasts over part of " +
                              "the image: only nchw walks that";
  if (w.l == Layout::nchw) {
    if (!plain) return "a blocked operand on an nchw output";
    if (o.layout == Layout::nhwc && fc && !sp_none) return "an nhwc operand on an nchw output";
    const int64_t hst = s[3], cst = s[2] * s[3], nst = s[1] * cst;
    st->on = fn ? nst : 0;
    st->oc = fc ? cst : 0;
    if (w.merged) {
      st->sq = fh || fw;
    } else {
      st->sp = fh ? hst : 0;
      st->sq = fw;
    }
    return "";
  }
  if (!fc) {  // one value per pixel (or per image): broadcast over the lanes
    if (!sp_none && !sp_full) return partial;
    const int64_t plane = (sp_none ? 1 : H * W) * blk;
    st->on = fn ? plane : 0;
    st->sp = sp_none ? 0 : blk;
    return "";
  }
  st->sq = true;
  const int64_t V = layout_block(w.l);
  if (sp_none && plain) {  // [n][c]: nchw and nhwc agree
    st->on = fn ? C : 0;
    st->oc = V > 1 ? V : 0;
    return "";
  }
  if (o.layout != w.l) return "a per-pixel operand in another layout than the output";
  if (!sp_none && !sp_full) return partial;
  const int64_t pixels = sp_none ? 1 : H * W;
  if (V > 1) {  // blocked: a plane of pixels x V per (n, channel block)
    st->on = fn ? round_up(C, V) * pixels : 0;
    st->oc = pixels * V;
    st->sp = sp_none ? 0 : V;
  } else {  // nhwc
    st->on = fn ? pixels * C : 0;
    st->sp = sp_none ? 0 : C;
  }
  return "";
}

// The walk of output Y in layout l over `ops` (merging nchw rows when every operand allows).
std::string plan(const Shape& Y, Layout l, Isa isa, const std::vector<BcastOperand>& ops, Conf* c) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return "needs avx2 or avx512";
  if (Y.size() != 4) return "output is not 4-D";
  if (shape_numel(Y) <= 0) return "empty tensor";
  c->V = simd_width(isa);
  const int64_t N = Y[0], C = Y[1], H = Y[2], W = Y[3];
  const int V = layout_block(l);
  if (V > 1 && V != c->V) return std::string(layout_name(l)) + " needs its ISA's vector width";
  c->N = N;
  c->y.sq = true;
  bool merged = false;
  if (V > 1) {
    c->Cd = (C + V - 1) / V;
    c->P = H * W;
    c->Q = V;
    c->blocked_valid = int(C % V);
    c->y.on = c->Cd * H * W * V;
    c->y.oc = H * W * V;
    c->y.sp = V;
  } else if (l == Layout::nhwc) {
    c->P = H * W;
    c->Q = C;
    c->y.on = H * W * C;
    c->y.sp = C;
  } else {
    // One H*W row per plane when each operand is linear over it; with few planes, rows of W
    // give the threads something to split.
    merged = N * C >= 8 || H == 1 || W == 1;
    for (const BcastOperand& o : ops) {
      const size_t r = o.shape.size();
      const int64_t h = r >= 2 ? o.shape[r - 2] : 1, w = r >= 1 ? o.shape[r - 1] : 1;
      if ((h > 1) != (w > 1) && H > 1 && W > 1) merged = false;
    }
    c->Cd = C;
    c->P = merged ? 1 : H;
    c->Q = merged ? H * W : W;
    c->y.on = C * H * W;
    c->y.oc = H * W;
    c->y.sp = W;
  }
  const Walk w{Y, l, merged};
  for (const BcastOperand& o : ops) {
    Stream st;
    if (std::string why = plan_stream(w, o, &st); !why.empty()) return why;
    c->s.push_back(st);
  }
  // The generated code steps rows by 32-bit displacements (the unrolled group at once).
  const int64_t limit = int64_t(INT32_MAX) / 4 / c->row_unroll() - 16 * c->V;
  for (const Stream& st : c->s)
    if (st.sp > limit) return "a row stride beyond 32-bit displacements";
  if (c->y.sp > limit) return "a row stride beyond 32-bit displacements";
  return "";
}

struct BArgs {
  const float* s[kMaxStreams];
  float* y;
  int64_t rows;
};
using BFn = void (*)(const BArgs*);

class Gen {
 public:
  Gen(AsmBuilder& b, const Conf& c) : b_(b), cc_(b.cc()), c_(c) {}

  // One function; `zero_pads`: the last channel block of a blocked output (its pad lanes are
  // loaded as zero and stored as zero, whatever the op makes of them).
  void build(bool zero_pads) {
    b_.begin_function(asmjit::FuncSignatureT<void, const BArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    const size_t ns = c_.s.size();
    ptr_.assign(ns, x86::Gp());
    for (size_t i = 0; i < ns; ++i) {
      ptr_[i] = b_.gp();
      cc_.mov(ptr_[i], x86::ptr(args, int32_t(offsetof(BArgs, s) + 8 * i)));
    }
    y_ = b_.gp();
    cc_.mov(y_, x86::ptr(args, offsetof(BArgs, y)));
    x86::Gp rows = b_.gp();
    cc_.mov(rows, x86::ptr(args, offsetof(BArgs, rows)));
    const int64_t nvec = c_.nvec();
    const int tail = int(c_.Q % c_.V);
    zero_pads_ = zero_pads;
    has_mask_ = zero_pads || tail;
    if (has_mask_) mask_ = b_.mask(zero_pads ? c_.blocked_valid : tail);
    // Row-invariant operands live in registers: scalars, and per-channel vectors up to 4.
    hoisted_.assign(ns, {});
    for (size_t i = 0; i < ns; ++i) {
      const Stream& s = c_.s[i];
      if (!s.row_invariant()) continue;
      if (!s.sq) {
        hoisted_[i].push_back(b_.vec());
        cc_.vbroadcastss(hoisted_[i][0], x86::dword_ptr(ptr_[i]));
      } else if (nvec <= 4) {
        for (int64_t j = 0; j < nvec; ++j) {
          hoisted_[i].push_back(b_.vec());
          b_.load(hoisted_[i].back(), x86::ptr(ptr_[i], int32_t(j * c_.V * 4)),
                  has_mask_ && j == nvec - 1 ? &mask_ : nullptr);
        }
      }
    }
    const int U = c_.row_unroll();
    asmjit::Label l1 = cc_.newLabel(), done = cc_.newLabel();
    if (U > 1) {
      asmjit::Label lu = cc_.newLabel();
      cc_.bind(lu);
      cc_.cmp(rows, U);
      cc_.jb(l1);
      for (int u = 0; u < U; ++u) row(u);
      advance(U);
      cc_.sub(rows, U);
      cc_.jmp(lu);
    }
    cc_.bind(l1);
    cc_.test(rows, rows);
    cc_.jz(done);
    row(0);
    advance(1);
    cc_.dec(rows);
    cc_.jmp(l1);
    cc_.bind(done);
    b_.end_function();
  }

 private:
  void advance(int rows) {
    for (size_t i = 0; i < c_.s.size(); ++i)
      if (c_.s[i].sp) cc_.add(ptr_[i], int32_t(rows * c_.s[i].sp * 4));
    cc_.add(y_, int32_t(rows * c_.y.sp * 4));
  }

  // Row u of the unrolled group: every lane vector, in a loop of 4 vectors when the row is
  // long (nhwc with many channels, nchw planes).
  void row(int u) {
    const size_t ns = c_.s.size();
    rowb_.assign(ns, x86::Vec());
    for (size_t i = 0; i < ns; ++i)
      if (hoisted_[i].empty() && !c_.s[i].sq) {
        rowb_[i] = b_.vec();
        cc_.vbroadcastss(rowb_[i], x86::dword_ptr(ptr_[i], int32_t(u * c_.s[i].sp * 4)));
      }
    const int64_t nvec = c_.nvec();
    std::vector<x86::Gp> base(ptr_);
    x86::Gp ybase = y_;
    std::vector<int32_t> off(ns);
    for (size_t i = 0; i < ns; ++i) off[i] = int32_t(u * c_.s[i].sp * 4);
    int32_t yoff = int32_t(u * c_.y.sp * 4);
    int64_t first = 0;
    if (nvec > 8) {  // a loop over groups of 4 full vectors with moving copies of the pointers
      const int64_t groups = (c_.Q / c_.V) / 4;
      std::vector<bool> moving(ns, false);
      for (size_t i = 0; i < ns; ++i)
        if (c_.s[i].sq && hoisted_[i].empty()) {
          moving[i] = true;
          base[i] = b_.gp();
          cc_.lea(base[i], x86::ptr(ptr_[i], off[i]));
          off[i] = 0;
        }
      ybase = b_.gp();
      cc_.lea(ybase, x86::ptr(y_, yoff));
      yoff = 0;
      x86::Gp cnt = b_.gp();
      cc_.mov(cnt, groups);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      for (int j = 0; j < 4; ++j) vector(j, false, base, off, ybase, yoff);
      for (size_t i = 0; i < ns; ++i)
        if (moving[i]) cc_.add(base[i], 16 * c_.V);
      cc_.add(ybase, 16 * c_.V);
      cc_.dec(cnt);
      cc_.jnz(top);
      first = groups * 4;
    }
    for (int64_t j = first; j < nvec; ++j)
      vector(int(j - first), has_mask_ && j == nvec - 1, base, off, ybase, yoff, j);
  }

  // Lane vector j (relative to the bases) of the current row; `hj` its absolute index (for
  // hoisted per-channel vectors).
  void vector(int j, bool last, const std::vector<x86::Gp>& base, const std::vector<int32_t>& off,
              const x86::Gp& ybase, int32_t yoff, int64_t hj = 0) {
    const Mask* m = last ? &mask_ : nullptr;
    std::vector<x86::Vec> v(c_.s.size());
    for (size_t i = 0; i < c_.s.size(); ++i) {
      const Stream& s = c_.s[i];
      if (!hoisted_[i].empty()) {
        v[i] = hoisted_[i][s.sq ? size_t(hj) : 0];
      } else if (!s.sq) {
        v[i] = rowb_[i];
      } else {
        v[i] = b_.vec();
        b_.load(v[i], x86::ptr(base[i], off[i] + j * c_.V * 4), m);
      }
    }
    x86::Vec r = b_.vec();
    switch (c_.expr) {
      case Expr::add:
        cc_.vaddps(r, v[0], v[1]);
        break;
      case Expr::sub:
        cc_.vsubps(r, v[0], v[1]);
        break;
      case Expr::mul:
        cc_.vmulps(r, v[0], v[1]);
        break;
      case Expr::div:
        cc_.vdivps(r, v[0], v[1]);
        break;
      case Expr::prelu:  // the product where a < 0 (NaN and -0 keep a), as the reference
        if (b_.avx512()) {
          x86::KReg k = cc_.newKw();
          cc_.vmovaps(r, v[0]);
          cc_.vcmpps(k, v[0], b_.cf32(0.f), 0x11);  // _CMP_LT_OQ
          cc_.k(k).vmulps(r, v[0], v[1]);
        } else {
          x86::Vec m = b_.vec();
          cc_.vmulps(r, v[0], v[1]);
          cc_.vcmpps(m, v[0], b_.cf32(0.f), 0x11);
          cc_.vblendvps(r, v[0], r, m);
        }
        break;
      case Expr::max:
      case Expr::min:  // vmaxps r, a, b gives b when either is NaN; a NaN in a is blended in
        if (c_.expr == Expr::max)
          cc_.vmaxps(r, v[1], v[0]);
        else
          cc_.vminps(r, v[1], v[0]);
        if (b_.avx512()) {
          x86::KReg k = cc_.newKw();
          cc_.vcmpps(k, v[1], v[1], 3);  // _CMP_UNORD_Q
          cc_.k(k).vmovaps(r, v[1]);
        } else {
          x86::Vec m = b_.vec();
          cc_.vcmpps(m, v[1], v[1], 3);
          cc_.vblendvps(r, r, v[1], m);
        }
        break;
      case Expr::mean:  // the reference's sum, then an exact halving
        cc_.vaddps(r, v[0], v[1]);
        cc_.vmulps(r, r, b_.cf32(0.5f));
        break;
      case Expr::fma:
        cc_.vmovaps(r, v[0]);
        cc_.vfmadd213ps(r, v[1], v[2]);
        break;
      case Expr::copy:  // a copy: zero_past below must not clobber a hoisted operand
        cc_.vmovaps(r, v[0]);
        break;
    }
    for (const PostOp& op : c_.post) glue::emit_post_op(b_, r, op);
    const x86::Mem dst = x86::ptr(ybase, yoff + j * c_.V * 4);
    if (last && zero_pads_) {  // whole vector out, pad lanes zero
      b_.zero_past(r, mask_);
      b_.store(dst, r);
    } else {
      b_.store(dst, r, m);
    }
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  const Conf& c_;
  std::vector<x86::Gp> ptr_;
  x86::Gp y_;
  bool zero_pads_ = false, has_mask_ = false;
  Mask mask_;
  std::vector<std::vector<x86::Vec>> hoisted_;
  std::vector<x86::Vec> rowb_;
};

class BcastKernel : public glue::GlueKernel {
 public:
  BcastKernel(Conf c, std::vector<std::vector<float>> own, Isa isa, std::string name)
      : c_(std::move(c)), own_(std::move(own)) {
    name_ = std::move(name);
    size_t k = 0;
    for (Stream& s : c_.s)
      if (s.src < 0) s.own = own_.at(k++).data();
    AsmBuilder b(name_, isa);
    Gen gen(b, c_);
    gen.build(false);
    if (c_.blocked_valid) gen.build(true);
    code_ = b.finish();
    fn_ = b.entry<BFn>(code_, 0);
    tail_fn_ = c_.blocked_valid ? b.entry<BFn>(code_, 1) : fn_;
    // Tiles: (n, outer channel) x row chunks, about 16 in all, none under ~4K floats.
    const int64_t outer = c_.N * c_.Cd;
    rows_ = glue::chunk_size(c_.P, c_.row_unroll(), (16 + outer - 1) / outer,
                             std::max<int64_t>(1, 4096 / c_.Q));
    chunks_ = (c_.P + rows_ - 1) / rows_;
    tiles_ = outer * chunks_;
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / chunks_, p0 = (t % chunks_) * rows_;
      const int64_t n = o / c_.Cd, ch = o % c_.Cd;
      BArgs x{};
      for (size_t i = 0; i < c_.s.size(); ++i) {
        const Stream& s = c_.s[i];
        x.s[i] = (s.src >= 0 ? a.src[s.src] : s.own) + n * s.on + ch * s.oc + p0 * s.sp;
      }
      x.y = a.dst[0] + n * c_.y.on + ch * c_.y.oc + p0 * c_.y.sp;
      x.rows = std::min(rows_, c_.P - p0);
      (ch == c_.Cd - 1 ? tail_fn_ : fn_)(&x);
    }
  }

 private:
  Conf c_;
  std::vector<std::vector<float>> own_;
  BFn fn_ = nullptr, tail_fn_ = nullptr;
  int64_t rows_ = 1, chunks_ = 1;
};

std::unique_ptr<Kernel> no(std::string* why_not, const std::string& r) {
  if (why_not) *why_not = r;
  return nullptr;
}

std::string kernel_name(const std::string& op, const std::string& post, Layout l, Isa isa) {
  return "bcast_" + op + post + "_f32_" + layout_name(l) + "__" + isa_name(isa);
}

}  // namespace

std::unique_ptr<Kernel> create_binary_kernel(BinaryOp op, const Shape& y, Layout l,
                                             const BcastOperand& a, const BcastOperand& b,
                                             const std::vector<PostOp>& post, Isa isa,
                                             std::string* why_not) {
  std::string why;
  const std::string pp = glue::post_part(post, &why);
  if (!why.empty()) return no(why_not, why);
  Conf c;
  if (std::string r = plan(y, l, isa, {a, b}, &c); !r.empty()) return no(why_not, r);
  static const char* const kOps[] = {"add", "sub", "mul", "div", "prelu", "max", "min", "mean"};
  static const Expr kExpr[] = {Expr::add,   Expr::sub, Expr::mul, Expr::div,
                               Expr::prelu, Expr::max, Expr::min, Expr::mean};
  c.expr = kExpr[int(op)];
  c.post = post;
  return std::make_unique<BcastKernel>(std::move(c), std::vector<std::vector<float>>{}, isa,
                                       kernel_name(kOps[int(op)], pp, l, isa));
}

std::unique_ptr<Kernel> create_expand_kernel(const Shape& y, Layout l, const BcastOperand& x,
                                             Isa isa, std::string* why_not) {
  Conf c;
  if (std::string r = plan(y, l, isa, {x}, &c); !r.empty()) return no(why_not, r);
  c.expr = Expr::copy;
  return std::make_unique<BcastKernel>(std::move(c), std::vector<std::vector<float>>{}, isa,
                                       kernel_name("expand", "", l, isa));
}

std::unique_ptr<Kernel> create_affine_kernel(const Shape& y, Layout l,
                                             const std::vector<float>& scale,
                                             const std::vector<float>& shift,
                                             const std::vector<PostOp>& post, Isa isa,
                                             std::string* why_not) {
  std::string why;
  const std::string pp = glue::post_part(post, &why);
  if (!why.empty()) return no(why_not, why);
  if (y.size() != 4 || int64_t(scale.size()) != y[1] || int64_t(shift.size()) != y[1])
    return no(why_not, "scale and shift need one value per channel of a 4-D tensor");
  const Shape per_channel{y[1], 1, 1};
  Conf c;
  std::string r = plan(
      y, l, isa, {{y, l, 0}, {per_channel, Layout::nchw, -1}, {per_channel, Layout::nchw, -1}}, &c);
  if (!r.empty()) return no(why_not, r);
  c.expr = Expr::fma;
  c.post = post;
  return std::make_unique<BcastKernel>(std::move(c), std::vector<std::vector<float>>{scale, shift},
                                       isa, kernel_name("affine", pp, l, isa));
}

}  // namespace kiln
