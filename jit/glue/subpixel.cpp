// SubpixelInterleave (graph/subpixel.h) in nchw: the sub-pixel Conv's phase planes interleaved
// into y[n, c] (with the ConvTranspose's crop as an offset). An output row takes one phase row
// rh; along it, output w reads phase (w + off) % sw at column (w + off) / sw - org_w. The phase
// planes of one rh are a constant stride apart, so a vector of outputs is one gather whose index
// pattern repeats every sw vectors: sw index tables, the base advancing V floats per sw
// vectors. sw == 1 is a plain row copy.
// One call is a run of output rows of the same phase (oh, oh + sh, ...); tiles are planes.
#include "graph/subpixel.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

class SubpixelKernel : public glue::GlueKernel {
 public:
  SubpixelKernel(const SubpixelProblem& p, Isa isa, std::string name)
      : p_(p), phase_(p.uh * p.uw * (p.phase_major ? p.c : 1)) {
    name_ = std::move(name);
    AsmBuilder b(name_, isa);
    build_rows(b);
    code_ = b.finish();
    rows_ = b.entry<glue::CopyFn>(code_, 0);
    planes_ = p.n * p.c;
    const int64_t plane = p.oh * p.ow;
    chunk_ = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, plane));
    tiles_ = (planes_ + chunk_ - 1) / chunk_;
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const int64_t S = p_.sh * p_.sw, zplane = p_.uh * p_.uw;
    for (int64_t t = begin; t < end; ++t)
      for (int64_t q = t * chunk_; q < std::min(planes_, (t + 1) * chunk_); ++q) {
        float* dst = a.dst[0] + q * p_.oh * p_.ow;
        // Plane (n, c)'s phase 0: channel c * S, or (phase-major) n * S * C + c.
        const int64_t n = q / p_.c, c = q % p_.c;
        const float* z = a.src[0] + (p_.phase_major ? n * S * p_.c + c : q * S) * zplane;
        for (int64_t rh = 0; rh < p_.sh; ++rh) {
          // First output row of this phase: (oh + off_h) % sh == rh.
          const int64_t oh0 = ((rh - p_.off_h) % p_.sh + p_.sh) % p_.sh;
          if (oh0 >= p_.oh) continue;
          const int64_t qh0 = (oh0 + p_.off_h) / p_.sh - p_.origin_h(rh);
          rows_(z + rh * p_.sw * phase_ + qh0 * p_.uw, dst + oh0 * p_.ow,
                (p_.oh - oh0 + p_.sh - 1) / p_.sh);
        }
      }
  }

 private:
  // Gathers `valid` lanes of [base + idx[i] * 4] into dst (the index table is a constant).
  void gather(AsmBuilder& b, const x86::Vec& dst, const x86::Gp& base,
              const std::vector<uint32_t>& idx, int valid) {
    auto& cc = b.cc();
    x86::Vec vi = b.vec();
    cc.vmovups(vi, b.clanes(idx));
    if (b.avx512()) {
      x86::KReg k = cc.newKw();
      x86::Gp m = cc.newGpd();
      cc.mov(m, valid >= 16 ? 0xffffu : (1u << valid) - 1u);
      cc.kmovw(k, m);
      cc.k(k).vgatherdps(dst, x86::ptr(base, vi, 2));
    } else {
      x86::Vec m = b.vec();
      if (valid >= b.width())
        cc.vpcmpeqd(m, m, m);
      else
        cc.vmovups(m, b.clanes(std::vector<uint32_t>(size_t(valid), 0xffffffffu)));
      cc.vgatherdps(dst, x86::ptr(base, vi, 2), m);
    }
  }

  // fn(src, dst, n): n output rows of one phase; src = phase (rh, rw = 0) row, advancing one
  // phase row (uw floats) per output row, dst sh output rows.
  void build_rows(AsmBuilder& b) {
    auto& cc = b.cc();
    const int V = b.width();
    const glue::CopyArgs a = glue::begin_copy_function(b);
    const x86::Gp &s = a.src, &d = a.dst, &n = a.n;
    const int64_t sw = p_.sw, off = p_.off_w, W = p_.ow;
    asmjit::Label top = cc.newLabel();
    cc.bind(top);
    if (sw == 1) {
      x86::Gp src = b.gp();
      cc.lea(src, x86::ptr(s, int32_t((off - p_.origin_w(0)) * 4)));
      b.copy_static(d, src, W);
    } else {
      // Vector j of a period (sw vectors, sw * V outputs, V columns of each phase plane).
      auto table = [&](int64_t j) {
        std::vector<uint32_t> idx(static_cast<size_t>(V));
        for (int i = 0; i < V; ++i) {
          const int64_t t = j * V + i + off;
          idx[size_t(i)] = uint32_t((t % sw) * phase_ + t / sw - p_.origin_w(t % sw));
        }
        return idx;
      };
      const int64_t periods = W / (sw * V), rest = W - periods * sw * V;
      x86::Gp src = b.gp(), dst = b.gp();
      cc.mov(src, s);
      cc.mov(dst, d);
      x86::Vec v = b.vec();
      if (periods > 0) {
        x86::Gp k = b.gp();
        cc.mov(k, periods);
        asmjit::Label loop = cc.newLabel();
        cc.bind(loop);
        for (int64_t j = 0; j < sw; ++j) {
          gather(b, v, src, table(j), V);
          cc.vmovups(x86::ptr(dst, int32_t(j * V * 4)), v);
        }
        cc.add(src, V * 4);
        cc.add(dst, int32_t(sw * V * 4));
        cc.dec(k);
        cc.jnz(loop);
      }
      for (int64_t j = 0; j * V < rest; ++j) {
        const int valid = int(std::min<int64_t>(V, rest - j * V));
        gather(b, v, src, table(j), valid);
        const Mask m = b.mask(valid);
        b.store(x86::ptr(dst, int32_t(j * V * 4)), v, &m);
      }
    }
    cc.add(s, int32_t(p_.uw * 4));
    cc.add(d, int32_t(p_.sh * W * 4));
    cc.dec(n);
    cc.jnz(top);
    b.end_function();
  }

  SubpixelProblem p_;
  int64_t phase_;  // floats between the planes of consecutive phases
  glue::CopyFn rows_ = nullptr;
  int64_t planes_ = 0, chunk_ = 1;
};

}  // namespace

std::unique_ptr<Kernel> create_subpixel_kernel(const SubpixelProblem& p, Isa isa,
                                               std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (p.n < 1 || p.c < 1 || p.oh < 1 || p.ow < 1 || p.sh < 1 || p.sw < 1 || p.off_h < 0 ||
      p.off_w < 0)
    return decline(why_not, "empty or invalid interleave");
  if (!subpixel_reads_inside(p.oh, p.sh, p.off_h, p.org_h, p.uh) ||
      !subpixel_reads_inside(p.ow, p.sw, p.off_w, p.org_w, p.uw))
    return decline(why_not, "output reads past the phase planes");
  // Gather indices are 32-bit; row strides and offsets are 32-bit displacements.
  const int64_t phase = p.uh * p.uw * (p.phase_major ? p.c : 1);
  if (p.sw * phase >= (int64_t(1) << 30) || p.sh * p.ow >= (int64_t(1) << 28) || p.sw > 64)
    return decline(why_not, "planes too large");
  const std::string name = std::string("subpixel_f32_nchw__") + isa_name(isa);
  return std::make_unique<SubpixelKernel>(p, isa, name);
}

}  // namespace kiln
