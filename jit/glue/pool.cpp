// Max / average pooling and their global forms over nhwc and nChw8c/16c, where a pixel's
// channels are contiguous so every tap is a full-vector load. Geometry is baked in: output
// columns whose window crosses the left/right border are unrolled with their own clipped tap
// list, the interior columns share one loop with all kw taps; the valid kernel rows of an
// output row (a tile) come in as a pointer and a count. Average divisors come from a small
// per-row table of 1/count (count per the count_include_pad rule, as the reference).
// Max pooling propagates NaN like the reference (and PyTorch): MAXPS alone would drop it, so
// a per-lane "saw a NaN" flag is kept beside each accumulator and merged at the store.
// Blocked outputs get zeroed pad lanes (the inputs' are garbage that could sum to inf).
// nChw16c_bf16 (AVX-512): each tap widened to f32 exactly; a max stored by truncation (it is
// one of the inputs), an average rounded to nearest even (vcvtneps2bf16). nChw16c_u8 (max
// only, a QDQ model's uint8 grid): the bytes' max (vpmaxub), 0 its identity.
// A row's interior columns run several output pixels per iteration: a blocked pixel is one
// vector, and one window's taps are a serial chain of max / add (and NaN-flag) updates.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "graph/error.h"
#include "jit/cpu.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {

std::string PoolProblem::str() const {
  std::string s = std::string(max ? "max" : "avg") + (global ? "_global" : "");
  if (!global) {
    s += " k" + std::to_string(kh) + "x" + std::to_string(kw) + " s" + std::to_string(sh) + "x" +
         std::to_string(sw) + " d" + std::to_string(dh) + "x" + std::to_string(dw) + " p" +
         std::to_string(pt) + "," + std::to_string(pl) + "," + std::to_string(pb) + "," +
         std::to_string(pr);
    if (!max) s += count_include_pad ? " cip1" : " cip0";
  }
  return s + " " + shape_str(src) + "->" + shape_str(dst);
}

namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

constexpr uint8_t kOrdQ = 7, kUnordQ = 3;

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}
// Taps start + k*d (k < n) inside [lo, hi).
int64_t taps_inside(int64_t start, int64_t n, int64_t d, int64_t lo, int64_t hi) {
  int64_t c = 0;
  for (int64_t k = 0; k < n; ++k) c += start + k * d >= lo && start + k * d < hi;
  return c;
}
// Valid taps [j0, j1) of a window starting at w0 over [0, W).
std::pair<int64_t, int64_t> valid_taps(int64_t w0, int64_t k, int64_t d, int64_t W) {
  const int64_t j0 = std::max<int64_t>(0, ceil_div(-w0, d));
  const int64_t j1 = std::min<int64_t>(k, floor_div(W - 1 - w0, d) + 1);
  return {j0, std::max(j0, j1)};
}

struct PoolArgs {
  const char* src;  // first valid kernel row (windowed) or the tile's first pixel (global)
  char* dst;
  const float* inv;  // average: 1/count per output column of this row
  int64_t nrows;     // valid kernel rows
};
using PoolFn = void (*)(const PoolArgs*);

// How the kernel reads and writes an element (from the layout).
enum class Elem { f32, bf16, u8 };

// One vector of a pixel's channels: byte offset in the pixel, lanes, valid lanes.
struct Slot {
  int32_t off;
  int lanes, valid;
  int keep = 16;  // lanes >= keep are stored as 0 (pad channels of a blocked layout's last block)
};

// Accumulators of one group of slots: the value and the NaN flag per slot.
struct Acc {
  std::vector<x86::Vec> v;
  std::vector<x86::KReg> ord;  // AVX-512: lanes that saw only ordered values
  std::vector<x86::Vec> nan;   // AVX2: all-ones lanes that saw a NaN
};

class PoolGen {
 public:
  PoolGen(AsmBuilder& b, const PoolProblem& p, Elem e) : b_(b), cc_(b.cc()), p_(p), e_(e) {}

  std::vector<Mask> masks(const std::vector<Slot>& g) {
    std::vector<Mask> m;
    for (const Slot& s : g) m.push_back(b_.mask(s.valid, s.lanes));
    return m;
  }

  Acc init(const std::vector<Slot>& g) {
    Acc a;
    for (const Slot& s : g) {
      if (e_ == Elem::u8) {  // (16 bytes: an xmm)
        x86::Vec v = cc_.newXmm();
        cc_.vpxor(v, v, v);
        a.v.push_back(v);
        continue;
      }
      x86::Vec v = b_.vec(s.lanes);
      if (p_.max) {
        cc_.vmovups(v, b_.cf32(-std::numeric_limits<float>::infinity(), s.lanes));
        if (b_.avx512()) {
          x86::KReg k = cc_.newKw();
          cc_.kxnorw(k, k, k);
          a.ord.push_back(k);
        } else {
          x86::Vec n = b_.vec(s.lanes);
          cc_.vxorps(n, n, n);
          a.nan.push_back(n);
        }
      } else {
        cc_.vxorps(v, v, v);
      }
      a.v.push_back(v);
    }
    return a;
  }

  // acc[i] (op)= [base + disp + slot offset].
  void tap(Acc& a, const std::vector<Slot>& g, const std::vector<Mask>& m, const x86::Gp& base,
           int64_t disp) {
    for (size_t i = 0; i < g.size(); ++i) {
      const x86::Mem mem = x86::ptr(base, int32_t(disp + g[i].off));
      const bool part = g[i].valid < g[i].lanes;
      if (e_ == Elem::u8) {
        cc_.vpmaxub(a.v[i], a.v[i], x86::xmmword_ptr(base, int32_t(disp + g[i].off)));
        continue;
      }
      if (e_ == Elem::f32 && !p_.max && !part) {
        cc_.vaddps(a.v[i], a.v[i], mem);
        continue;
      }
      x86::Vec v = b_.vec(g[i].lanes);
      if (e_ == Elem::bf16) {  // (whole 16-lane slots: bf16 is AVX-512 and blocked only)
        cc_.vpmovzxwd(v, x86::ymmword_ptr(base, int32_t(disp + g[i].off)));
        cc_.vpslld(v, v, 16);
      } else {
        b_.load(v, mem, part ? &m[i] : nullptr);
      }
      if (!p_.max) {
        cc_.vaddps(a.v[i], a.v[i], v);
        continue;
      }
      // v > acc ? v : acc keeps the earlier of equal values, as the reference does.
      cc_.vmaxps(a.v[i], v, a.v[i]);
      if (b_.avx512()) {
        cc_.k(a.ord[i]).vcmpps(a.ord[i], v, v, kOrdQ);
      } else {
        x86::Vec u = b_.vec(g[i].lanes);
        cc_.vcmpps(u, v, v, kUnordQ);
        cc_.vorps(a.nan[i], a.nan[i], u);
      }
    }
  }

  // a = a (op) o, slot by slot (global pooling's partial accumulators, a first).
  void merge(Acc& a, const Acc& o) {
    for (size_t i = 0; i < a.v.size(); ++i) {
      if (e_ == Elem::u8) {
        cc_.vpmaxub(a.v[i], a.v[i], o.v[i]);
        continue;
      }
      if (!p_.max) {
        cc_.vaddps(a.v[i], a.v[i], o.v[i]);
        continue;
      }
      cc_.vmaxps(a.v[i], o.v[i], a.v[i]);
      if (b_.avx512())
        cc_.kandw(a.ord[i], a.ord[i], o.ord[i]);
      else
        cc_.vorps(a.nan[i], a.nan[i], o.nan[i]);
    }
  }

  // Max: NaN where a NaN was seen; average: times `scale` (a broadcast register).
  void finish(Acc& a, const std::vector<Slot>& g, const std::vector<Mask>& m, const x86::Gp& dst,
              int64_t disp, const x86::Vec* scale) {
    for (size_t i = 0; i < g.size(); ++i) {
      if (e_ == Elem::u8) {
        if (g[i].keep < g[i].lanes) {  // (AVX-512BW: a byte mask)
          Mask k = b_.mask(g[i].keep, 16);
          cc_.k(k.k).z().vmovdqu8(a.v[i], a.v[i]);
        }
        cc_.vmovdqu(x86::xmmword_ptr(dst, int32_t(disp + g[i].off)), a.v[i]);
        continue;
      }
      if (p_.max) {
        if (b_.avx512()) {
          x86::KReg seen = cc_.newKw();
          cc_.knotw(seen, a.ord[i]);
          cc_.k(seen).vmovups(a.v[i], b_.cu32(0x7fc00000u, g[i].lanes));
        } else
          cc_.vorps(a.v[i], a.v[i], a.nan[i]);
      } else if (scale) {
        x86::Vec s = *scale;
        if (g[i].lanes != b_.width()) s = s.ymm();  // 8-lane slots on AVX-512: the low half
        cc_.vmulps(a.v[i], a.v[i], s);
      }
      if (g[i].keep < g[i].lanes) {  // zero pad lanes: finite garbage could add up to inf
        if (b_.avx512()) {
          Mask k = b_.mask(g[i].keep, g[i].lanes);
          cc_.k(k.k).z().vmovaps(a.v[i], a.v[i]);
        } else {
          std::vector<uint32_t> ones(size_t(std::max(g[i].keep, 0)), 0xffffffffu);
          cc_.vandps(a.v[i], a.v[i], b_.clanes(ones, g[i].lanes));
        }
      }
      if (e_ == Elem::bf16) {
        if (p_.max) {  // a max is an input's value: its high half exactly
          cc_.vpsrld(a.v[i], a.v[i], 16);
          cc_.vpmovdw(x86::ymmword_ptr(dst, int32_t(disp + g[i].off)), a.v[i]);
        } else {
          x86::Vec h = cc_.newYmm();
          cc_.vcvtneps2bf16(h, a.v[i]);
          cc_.vmovdqu(x86::ymmword_ptr(dst, int32_t(disp + g[i].off)), h);
        }
        continue;
      }
      const bool part = g[i].valid < g[i].lanes;
      b_.store(x86::ptr(dst, int32_t(disp + g[i].off)), a.v[i], part ? &m[i] : nullptr);
    }
  }

 protected:
  AsmBuilder& b_;
  x86::Compiler& cc_;
  const PoolProblem& p_;
  Elem e_;
};

// ---------------------------------------------------------------------------------------------
// Windowed pooling: one function per kernel (two for a blocked layout with a partial last
// block), one call per output row.

struct ChannelPlan {
  std::vector<Slot> full;  // a group repeated `reps` times by a loop (reps > 1)
  int64_t reps = 0, rep_bytes = 0;
  std::vector<std::vector<Slot>> rest;  // static groups after the loop (offsets from its end)
  // Output pixels the interior loop takes at once (reps <= 1): independent windows, so their
  // max / add chains overlap.
  int unroll = 1;
};

class WindowGen : public PoolGen {
 public:
  WindowGen(AsmBuilder& b, const PoolProblem& p, Elem e, const ChannelPlan& plan, int64_t pix_bytes)
      : PoolGen(b, p, e), plan_(plan), pix_(pix_bytes) {}

  void build(int64_t W, int64_t OW) {
    b_.begin_function(asmjit::FuncSignatureT<void, const PoolArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    src_ = b_.gp();
    dst_ = b_.gp();
    inv_ = b_.gp();
    nrows_ = b_.gp();
    cc_.mov(src_, x86::ptr(args, offsetof(PoolArgs, src)));
    cc_.mov(dst_, x86::ptr(args, offsetof(PoolArgs, dst)));
    cc_.mov(inv_, x86::ptr(args, offsetof(PoolArgs, inv)));
    cc_.mov(nrows_, x86::ptr(args, offsetof(PoolArgs, nrows)));
    row_step_ = p_.dh * W * pix_;
    // Interior columns: every tap inside [0, W).
    int64_t lo = OW, hi = OW;
    for (int64_t ow = 0; ow < OW; ++ow) {
      auto [j0, j1] = valid_taps(ow * p_.sw - p_.pl, p_.kw, p_.dw, W);
      if (j0 == 0 && j1 == p_.kw) {
        if (lo == OW) lo = ow;
        hi = ow + 1;
      }
    }
    for (int64_t ow = 0; ow < OW; ++ow) {
      if (ow == lo) {
        interior(lo, hi);
        ow = hi - 1;
        continue;
      }
      const int64_t w0 = ow * p_.sw - p_.pl;
      auto [j0, j1] = valid_taps(w0, p_.kw, p_.dw, W);
      pixels(src_, w0 * pix_, j0, j1, dst_, ow * pix_, inv_, ow * 4, 1);
    }
    b_.end_function();
  }

 private:
  // Columns [lo, hi): `unroll` pixels per loop iteration, the rest one by one after it.
  void interior(int64_t lo, int64_t hi) {
    const int U = plan_.reps > 1 ? 1 : plan_.unroll;
    const int64_t iters = (hi - lo) / U, rest = (hi - lo) % U;
    x86::Gp s = b_.gp(), d = b_.gp(), iv = b_.gp();
    cc_.lea(s, x86::ptr(src_, int32_t((lo * p_.sw - p_.pl) * pix_)));
    cc_.lea(d, x86::ptr(dst_, int32_t(lo * pix_)));
    cc_.lea(iv, x86::ptr(inv_, int32_t(lo * 4)));
    if (iters > 0) {
      x86::Gp n = b_.gp();
      cc_.mov(n, iters);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      pixels(s, 0, 0, p_.kw, d, 0, iv, 0, U);
      cc_.add(s, U * p_.sw * pix_);
      cc_.add(d, U * pix_);
      cc_.add(iv, 4 * U);
      cc_.dec(n);
      cc_.jnz(top);
    }
    for (int64_t r = 0; r < rest; ++r)
      pixels(s, r * p_.sw * pix_, 0, p_.kw, d, r * pix_, iv, r * 4, 1);
  }

  // Output pixels u < U (columns sw apart): each one's window columns [j0, j1) from column
  // base sbase + sdisp + u * sw * pix.
  void pixels(const x86::Gp& sbase, int64_t sdisp, int64_t j0, int64_t j1, const x86::Gp& dbase,
              int64_t ddisp, const x86::Gp& ibase, int64_t idisp, int U) {
    x86::Gp s = sbase, d = dbase;
    if (plan_.reps > 1) {  // (U == 1)
      std::tie(s, d) =
          b_.loop_ptrs(sbase, dbase, plan_.reps, plan_.rep_bytes, plan_.rep_bytes,
                       [&](const x86::Gp& ls, const x86::Gp& ld) {
                         window(plan_.full, ls, sdisp, j0, j1, ld, ddisp, ibase, idisp, 1);
                       });
    }
    for (const auto& g : plan_.rest) window(g, s, sdisp, j0, j1, d, ddisp, ibase, idisp, U);
  }

  void window(const std::vector<Slot>& g, const x86::Gp& sbase, int64_t sdisp, int64_t j0,
              int64_t j1, const x86::Gp& dbase, int64_t ddisp, const x86::Gp& ibase, int64_t idisp,
              int U) {
    std::vector<Mask> m = masks(g);
    std::vector<Acc> a;
    for (int u = 0; u < U; ++u) a.push_back(init(g));
    const int64_t col = p_.sw * pix_;  // between the pixels' windows
    if (j1 > j0) {
      x86::Gp rp = b_.gp(), r = b_.gp();
      cc_.mov(rp, sbase);
      cc_.mov(r, nrows_);
      asmjit::Label top = cc_.newLabel(), done = cc_.newLabel();
      cc_.test(r, r);
      cc_.jz(done);
      cc_.bind(top);
      for (int64_t j = j0; j < j1; ++j)
        for (int u = 0; u < U; ++u) tap(a[size_t(u)], g, m, rp, sdisp + u * col + j * p_.dw * pix_);
      cc_.add(rp, row_step_);
      cc_.dec(r);
      cc_.jnz(top);
      cc_.bind(done);
    }
    for (int u = 0; u < U; ++u) {
      x86::Vec scale;
      if (!p_.max) {
        scale = b_.vec();
        cc_.vbroadcastss(scale, x86::dword_ptr(ibase, int32_t(idisp + 4 * u)));
      }
      finish(a[size_t(u)], g, m, dbase, ddisp + u * pix_, p_.max ? nullptr : &scale);
    }
  }

  const ChannelPlan& plan_;
  int64_t pix_, row_step_ = 0;
  x86::Gp src_, dst_, inv_, nrows_;
};

// ---------------------------------------------------------------------------------------------
// Global pooling: one call per group of channels, all H*W pixels.

class GlobalGen : public PoolGen {
 public:
  using PoolGen::PoolGen;

  int build(const std::vector<Slot>& g, int64_t HW, int64_t pix) {
    const int idx = b_.begin_function(asmjit::FuncSignatureT<void, const PoolArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    x86::Gp s = b_.gp(), d = b_.gp();
    cc_.mov(s, x86::ptr(args, offsetof(PoolArgs, src)));
    cc_.mov(d, x86::ptr(args, offsetof(PoolArgs, dst)));
    std::vector<Mask> m = masks(g);
    // Independent partial accumulators over interleaved pixels hide the add/max latency.
    const int A = g.size() >= 4 ? 1 : g.size() >= 2 ? 2 : 4;
    std::vector<Acc> acc;
    for (int a = 0; a < A; ++a) acc.push_back(init(g));
    const int64_t loops = HW / A;
    if (loops > 0) {
      x86::Gp n = b_.gp();
      cc_.mov(n, loops);
      asmjit::Label top = cc_.newLabel();
      cc_.bind(top);
      for (int a = 0; a < A; ++a) tap(acc[size_t(a)], g, m, s, a * pix);
      cc_.add(s, A * pix);
      cc_.dec(n);
      cc_.jnz(top);
    }
    for (int a = 0; a < int(HW % A); ++a) tap(acc[size_t(a)], g, m, s, a * pix);
    for (int a = 1; a < A; ++a) merge(acc[0], acc[size_t(a)]);
    x86::Vec scale;
    if (!p_.max) scale = b_.bcast(float(1.0 / double(HW)));
    finish(acc[0], g, m, d, 0, p_.max ? nullptr : &scale);
    b_.end_function();
    return idx;
  }
};

// ---------------------------------------------------------------------------------------------

struct Job {
  int fn;
  int64_t src_off, dst_off;  // bytes
  int64_t oh;                // windowed: output row (-1 for global)
};

class PoolKernel : public glue::GlueKernel {
 public:
  PoolKernel(std::string name, glue::ExecCode code, std::vector<PoolFn> fns, std::vector<Job> jobs)
      : fns_(std::move(fns)), jobs_(std::move(jobs)) {
    name_ = std::move(name);
    code_ = std::move(code);
    tiles_ = int64_t(jobs_.size());
  }
  // Windowed: per output row, the valid kernel rows and the 1/count row.
  void set_rows(std::vector<int64_t> first_row_off, std::vector<int64_t> nrows,
                std::vector<std::vector<float>> inv_rows, std::vector<int> inv_of_oh) {
    row_off_ = std::move(first_row_off);
    nrows_ = std::move(nrows);
    inv_rows_ = std::move(inv_rows);
    inv_of_oh_ = std::move(inv_of_oh);
  }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    for (int64_t t = b; t < e; ++t) {
      const Job& j = jobs_[size_t(t)];
      PoolArgs args{};
      args.src = reinterpret_cast<const char*>(a.src[0]) + j.src_off;
      args.dst = reinterpret_cast<char*>(a.dst[0]) + j.dst_off;
      if (j.oh >= 0) {
        args.src += row_off_[size_t(j.oh)];
        args.nrows = nrows_[size_t(j.oh)];
        args.inv = inv_rows_.empty() ? nullptr : inv_rows_[size_t(inv_of_oh_[size_t(j.oh)])].data();
      }
      fns_[size_t(j.fn)](&args);
    }
  }

 private:
  std::vector<PoolFn> fns_;
  std::vector<Job> jobs_;
  std::vector<int64_t> row_off_, nrows_;  // (row_off_: bytes)
  std::vector<std::vector<float>> inv_rows_;
  std::vector<int> inv_of_oh_;
};

std::string pool_name(const PoolProblem& p, Layout l, Isa isa) {
  std::string s = std::string("pool_") + (p.max ? "max" : "avg");
  if (p.global) {
    s += "_global";
  } else {
    s += "_k" + std::to_string(p.kh) + (p.kh == p.kw ? "" : "x" + std::to_string(p.kw));
    s += "s" + std::to_string(p.sh) + (p.sh == p.sw ? "" : "x" + std::to_string(p.sw));
  }
  return s + "_" + layout_elem_name(l) + "_" + layout_name(l) + "__" + isa_name(isa);
}

// Slots of `count` channels starting at channel `c0`, `V`-lane vectors, the last one partial,
// of `esize`-byte elements.
std::vector<Slot> slots(int64_t c0, int64_t count, int V, int esize = 4) {
  std::vector<Slot> g;
  for (int64_t c = 0; c < count; c += V)
    g.push_back({int32_t((c0 + c) * esize), V, int(std::min<int64_t>(V, count - c))});
  return g;
}

// One blocked-layout pixel (B lanes) of which the first `real` channels exist.
std::vector<Slot> block_slots(int B, int V, int64_t real, int esize) {
  std::vector<Slot> g = slots(0, B, std::min(B, V), esize);
  for (Slot& sl : g) sl.keep = int(std::clamp<int64_t>(real - sl.off / esize, 0, sl.lanes));
  return g;
}

}  // namespace

std::unique_ptr<Kernel> create_pool_kernel(const PoolProblem& p, Layout l, Isa isa,
                                           std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (l == Layout::nchw)
    return decline(why_not,
                   "nchw pooling would reduce along vector lanes; use nhwc or a blocked layout");
  if (p.src.size() != 4 || p.dst.size() != 4) return decline(why_not, "needs 4-D shapes");
  for (int64_t d : p.src)
    if (d <= 0) return decline(why_not, "empty input " + shape_str(p.src));
  for (int64_t d : p.dst)
    if (d <= 0) return decline(why_not, "empty output " + shape_str(p.dst));
  if (p.src[0] != p.dst[0] || p.src[1] != p.dst[1])
    return decline(why_not, "batch/channels differ: " + p.str());
  const Elem e = layout_bf16(l) ? Elem::bf16 : layout_u8(l) ? Elem::u8 : Elem::f32;
  if (e != Elem::f32 && isa != Isa::avx512)
    return decline(why_not, "bf16 / u8 pooling needs avx512");
  if (e == Elem::u8 && !p.max)
    return decline(why_not, "u8 pooling is max only (an average leaves the grid)");
  if (e == Elem::bf16 && !p.max && !host_cpu().avx512_bf16)
    return decline(why_not, "a bf16 average needs avx512_bf16 (vcvtneps2bf16)");
  const int64_t N = p.src[0], C = p.src[1], H = p.src[2], W = p.src[3];
  const int64_t OH = p.dst[2], OW = p.dst[3];
  if (p.global && (OH != 1 || OW != 1))
    return decline(why_not, "global pooling needs a 1x1 output");
  if (!p.global && (p.kh < 1 || p.kw < 1 || p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1 ||
                    p.pt < 0 || p.pl < 0 || p.pb < 0 || p.pr < 0))
    return decline(why_not, "bad window attributes: " + p.str());
  const int B = layout_block(l), esize = layout_esize(l);
  const int64_t pix = (B == 1 ? C : B) * esize;  // bytes per pixel
  // Every displacement the code computes lies within the window's reach of the input
  // (strides, pads and dilations included): it must fit 32 bits (a stride of 2^31-1 did not;
  // fuzz_session). within(): a sum of products, overflow-checked, is at most INT32_MAX / 2.
  auto within = [](std::initializer_list<std::initializer_list<int64_t>> terms) {
    int64_t sum = 0;
    for (auto t : terms) {
      int64_t v = 1;
      for (int64_t x : t)
        if (x < 0 || __builtin_mul_overflow(v, x, &v)) return false;
      if (__builtin_add_overflow(sum, v, &sum) || sum > INT32_MAX / 2) return false;
    }
    return true;
  };
  const bool fits =
      within({{H, W, pix}}) &&
      (p.global || (within({{p.kh, p.dh, W, pix}, {p.dh, W, pix}}) &&
                    within({{OW, p.sw, pix}, {p.kw, p.dw, pix}, {p.pl, pix}}) &&
                    within({{OH, p.sh, W, pix}, {p.kh, p.dh, W, pix}, {p.pt, W, pix}})));
  if (!fits)
    return decline(why_not, "tensor or window too large for 32-bit displacements: " + p.str());

  const std::string name = pool_name(p, l, isa);
  AsmBuilder b(name, isa);
  const int V = b.width();
  const int64_t CB = round_up(C, B) / B;
  std::vector<Job> jobs;

  if (p.global) {
    GlobalGen gen(b, p, e);
    if (B > 1) {  // the last block (if partial) gets zeroed pad lanes
      const int full = gen.build(block_slots(B, V, B, esize), H * W, pix);
      const int last = C % B ? gen.build(block_slots(B, V, C % B, esize), H * W, pix) : full;
      for (int64_t nc = 0; nc < N * CB; ++nc)
        jobs.push_back({nc % CB == CB - 1 ? last : full, nc * H * W * pix, nc * pix, -1});
    } else {
      const int64_t chunk = 4 * V;  // channels per call
      const int full = C >= chunk ? gen.build(slots(0, chunk, V), H * W, pix) : -1;
      const int tail = C % chunk ? gen.build(slots(0, C % chunk, V), H * W, pix) : -1;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; c += chunk)
          jobs.push_back(
              {c + chunk <= C ? full : tail, (n * H * W * C + c) * 4, (n * C + c) * 4, -1});
    }
    glue::ExecCode code = b.finish();
    std::vector<PoolFn> fns;
    for (int i = 0; i < b.function_count(); ++i) fns.push_back(b.entry<PoolFn>(code, i));
    return std::make_unique<PoolKernel>(name, std::move(code), std::move(fns), std::move(jobs));
  }

  ChannelPlan plan, last_plan;  // last_plan: a blocked layout's partial last block
  if (B > 1) {
    plan.rest.push_back(block_slots(B, V, B, esize));
    last_plan.rest.push_back(block_slots(B, V, C % B ? C % B : B, esize));
  } else {
    const int64_t chunk = 4 * V, reps = C / chunk;
    if (reps > 1) {
      plan.full = slots(0, chunk, V);
      plan.reps = reps;
      plan.rep_bytes = chunk * 4;
    } else if (reps == 1) {
      plan.rest.push_back(slots(0, chunk, V));
    }
    if (C % chunk) plan.rest.push_back(slots(reps == 1 ? chunk : 0, C % chunk, V));
  }
  // Four accumulators in flight a window (measured: a blocked 3x3 / 2 max pool over 64
  // channels at 111x111, one vector a pixel, ran 3.2x slower than nhwc's four vectors a pixel).
  size_t per_pixel = 0;
  for (const auto& g : plan.rest) per_pixel += g.size();
  plan.unroll = last_plan.unroll = int(std::max<size_t>(1, 4 / std::max<size_t>(1, per_pixel)));
  // Code size guard: border columns are unrolled.
  int64_t border_taps = 0;
  for (int64_t ow = 0; ow < OW; ++ow) {
    auto [j0, j1] = valid_taps(ow * p.sw - p.pl, p.kw, p.dw, W);
    if (!(j0 == 0 && j1 == p.kw)) border_taps += j1 - j0 + 1;
  }
  if (border_taps > 4096) return decline(why_not, "too many border columns to unroll: " + p.str());
  WindowGen(b, p, e, plan, pix).build(W, OW);
  const bool partial = B > 1 && C % B != 0;
  if (partial) WindowGen(b, p, e, last_plan, pix).build(W, OW);

  // Per output row: valid kernel rows and the divisors.
  std::vector<int64_t> row_off(static_cast<size_t>(OH)), nrows(static_cast<size_t>(OH));
  std::vector<std::vector<float>> inv_rows;
  std::vector<int> inv_of_oh(static_cast<size_t>(OH), 0);
  std::map<int64_t, int> by_count;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = oh * p.sh - p.pt;
    auto [i0, i1] = valid_taps(h0, p.kh, p.dh, H);
    nrows[size_t(oh)] = i1 - i0;
    row_off[size_t(oh)] = i1 > i0 ? (h0 + i0 * p.dh) * W * pix : 0;
    if (p.max) continue;
    const int64_t rc = p.count_include_pad ? taps_inside(h0, p.kh, p.dh, -p.pt, H + p.pb) : i1 - i0;
    auto it = by_count.find(rc);
    if (it == by_count.end()) {
      std::vector<float> inv(static_cast<size_t>(OW));
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = ow * p.sw - p.pl;
        auto [j0, j1] = valid_taps(w0, p.kw, p.dw, W);
        const int64_t cc =
            p.count_include_pad ? taps_inside(w0, p.kw, p.dw, -p.pl, W + p.pr) : j1 - j0;
        inv[size_t(ow)] = rc * cc != 0 ? 1.f / float(rc * cc) : 0.f;
      }
      it = by_count.emplace(rc, int(inv_rows.size())).first;
      inv_rows.push_back(std::move(inv));
    }
    inv_of_oh[size_t(oh)] = it->second;
  }
  const int64_t planes = B > 1 ? N * CB : N;
  const int64_t plane_in = H * W * pix, plane_out = OH * OW * pix;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      jobs.push_back({partial && pl % CB == CB - 1 ? 1 : 0, pl * plane_in,
                      pl * plane_out + oh * OW * pix, oh});
  glue::ExecCode code = b.finish();
  std::vector<PoolFn> fns;
  for (int i = 0; i < b.function_count(); ++i) fns.push_back(b.entry<PoolFn>(code, i));
  auto k = std::make_unique<PoolKernel>(name, std::move(code), std::move(fns), std::move(jobs));
  k->set_rows(std::move(row_off), std::move(nrows), std::move(inv_rows), std::move(inv_of_oh));
  return k;
}

}  // namespace kiln
