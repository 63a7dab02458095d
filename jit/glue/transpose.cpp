// Transpose of a row-major f32 tensor (rank <= 6) by any permutation. The permutation is first
// simplified (size-1 dims dropped, output dims that stay adjacent in the input merged), then:
// - rows: the innermost dim stays innermost: contiguous rows of L floats are copied, the JIT
//   walking the second-innermost output dim, C++ the outer ones;
// - tiles: the innermost dim moves: the output's last dim (input stride sa) against the
//   output dim holding the input's contiguous one (output stride sb) is a 2-D transpose done
//   in V x V register tiles (AsmBuilder::transpose), masked at both edges; one call is a band
//   of V output rows across the whole last dim;
// - copy: nothing moves (a flat copy in 16K-float chunks).
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace x86 = asmjit::x86;

using glue::CopyFn;

// Output dims and the input stride (floats) of each, after simplification.
struct Perm {
  std::vector<int64_t> dims, src_stride;
};

Perm simplify(const Shape& in, const std::vector<int64_t>& perm) {
  std::vector<int64_t> stride(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) stride[d - 1] = stride[d] * in[d];
  Perm p;
  for (int64_t a : perm) {
    const int64_t n = in[size_t(a)], s = stride[size_t(a)];
    if (n == 1) continue;
    if (!p.dims.empty() && p.src_stride.back() == s * n) {  // contiguous with the previous
      p.dims.back() *= n;
      p.src_stride.back() = s;
      continue;
    }
    p.dims.push_back(n);
    p.src_stride.push_back(s);
  }
  return p;
}

enum class Mode { copy, rows, tiles };

class TransposeKernel : public glue::GlueKernel {
 public:
  TransposeKernel(const Perm& p, Isa isa) : p_(p) {
    const int V = simd_width(isa);
    const size_t r = p.dims.size();
    mode_ = r <= 1 ? Mode::copy : p.src_stride.back() == 1 ? Mode::rows : Mode::tiles;
    out_stride_.assign(r, 1);
    for (size_t d = r; d-- > 1;) out_stride_[d - 1] = out_stride_[d] * p.dims[d];
    AsmBuilder b(std::string("transpose_f32_") +
                     (mode_ == Mode::copy   ? "copy"
                      : mode_ == Mode::rows ? "rows"
                                            : "tiles") +
                     "__" + isa_name(isa),
                 isa);
    name_ = b.name();
    const int64_t numel = r ? p.dims[0] * out_stride_[0] : 1;
    if (mode_ == Mode::copy) {
      glue::build_flat_copy(b);
      chunk_ = 16384;
      tiles_ = (numel + chunk_ - 1) / chunk_;
    } else if (mode_ == Mode::rows) {
      // fn(src, dst, n): n rows of L floats along output dim r-2.
      const int64_t L = p.dims[r - 1];
      glue::build_strided_copy(b, L, p.src_stride[r - 2], L);
      inner_ = p.dims[r - 2];
      chunk_ = std::max<int64_t>(1, std::min(inner_, 4096 / L));  // ~16 KiB per tile
      per_outer_ = (inner_ + chunk_ - 1) / chunk_;
      outer_dims_ = r - 2;
      tiles_ = numel / (L * inner_) * per_outer_;
    } else {
      // The output dim b whose input stride is 1 (the input's innermost non-1 dim).
      bdim_ = size_t(std::find(p.src_stride.begin(), p.src_stride.end(), 1) - p.src_stride.begin());
      const int64_t M = p.dims[r - 1], K = p.dims[bdim_];
      const int64_t sa = p.src_stride[r - 1], sb = out_stride_[bdim_];
      build_band(b, M, V, sa, sb);
      if (K % V) build_band(b, M, int(K % V), sa, sb);
      bands_ = (K + V - 1) / V;
      V_ = V;
      // A tile: several bands (~16 KiB) of one outer index.
      chunk_ = std::max<int64_t>(1, std::min(bands_, 4096 / std::max<int64_t>(1, V * M)));
      per_outer_ = (bands_ + chunk_ - 1) / chunk_;
      tiles_ = numel / (M * K) * per_outer_;
    }
    code_ = b.finish();
    for (int f = 0; f < b.function_count(); ++f) fns_.push_back(b.entry<CopyFn>(code_, f));
    numel_ = numel;
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const float* src = a.src[0];
    float* dst = a.dst[0];
    for (int64_t t = begin; t < end; ++t) {
      if (mode_ == Mode::copy) {
        const int64_t off = t * chunk_;
        fns_[0](src + off, dst + off, std::min(chunk_, numel_ - off));
        continue;
      }
      const int64_t outer = t / per_outer_, part = t % per_outer_;
      if (mode_ == Mode::rows) {
        // outer: the index over dims [0, r-2); part: a chunk of dim r-2.
        int64_t s = 0, d = 0, rem = outer;
        for (size_t k = outer_dims_; k-- > 0;) {
          const int64_t i = rem % p_.dims[k];
          rem /= p_.dims[k];
          s += i * p_.src_stride[k];
          d += i * out_stride_[k];
        }
        const size_t r = p_.dims.size();
        const int64_t i0 = part * chunk_;
        s += i0 * p_.src_stride[r - 2];
        d += i0 * out_stride_[r - 2];
        fns_[0](src + s, dst + d, std::min(chunk_, inner_ - i0));
        continue;
      }
      // tiles: outer indexes every dim but b and the last.
      const size_t r = p_.dims.size();
      int64_t s = 0, d = 0, rem = outer;
      for (size_t k = r - 1; k-- > 0;) {
        if (k == bdim_) continue;
        const int64_t i = rem % p_.dims[k];
        rem /= p_.dims[k];
        s += i * p_.src_stride[k];
        d += i * out_stride_[k];
      }
      const int64_t b_end = std::min(bands_, (part + 1) * chunk_);
      for (int64_t band = part * chunk_; band < b_end; ++band) {
        const int64_t j = band * V_;  // first row (index along dim b)
        const bool tail = j + V_ > p_.dims[bdim_];
        fns_[tail ? 1 : 0](src + s + j, dst + d + j * out_stride_[bdim_], 0);
      }
    }
  }

 private:
  // fn(src, dst, -): kv output rows (the input's contiguous dim) across the M columns (input
  // rows sa floats apart), in V x V tiles; output rows sb floats apart.
  void build_band(AsmBuilder& b, int64_t M, int kv, int64_t sa, int64_t sb) {
    auto& cc = b.cc();
    const int V = b.width();
    const glue::CopyArgs a = glue::begin_copy_function(b);  // n unused
    const x86::Gp &s = a.src, &d = a.dst;
    const Mask rows = b.mask(kv);
    auto tile = [&](const x86::Gp& ts, const x86::Gp& td, int mv) {
      const Mask cols = b.mask(mv);
      std::vector<x86::Vec> v(static_cast<size_t>(V));
      x86::Gp p = b.gp();
      cc.mov(p, ts);
      for (int i = 0; i < V; ++i) {
        v[size_t(i)] = b.vec();
        if (i >= mv) {
          cc.vxorps(v[size_t(i)], v[size_t(i)], v[size_t(i)]);
          continue;
        }
        b.load(v[size_t(i)], x86::ptr(p), rows.full() ? nullptr : &rows);
        if (i + 1 < mv) cc.add(p, sa * 4);
      }
      b.transpose(v);
      cc.mov(p, td);
      for (int j = 0; j < kv; ++j) {
        b.store(x86::ptr(p), v[size_t(j)], cols.full() ? nullptr : &cols);
        if (j + 1 < kv) cc.add(p, sb * 4);
      }
    };
    const int64_t full = M / V;
    x86::Gp ts = s, td = d;
    if (full > 0)
      std::tie(ts, td) =
          b.loop_ptrs(s, d, full, V * sa * 4, V * 4,
                      [&](const x86::Gp& ls, const x86::Gp& ld) { tile(ls, ld, V); });
    if (M % V) tile(ts, td, int(M % V));
    b.end_function();
  }

  Perm p_;
  Mode mode_ = Mode::copy;
  std::vector<int64_t> out_stride_;
  std::vector<CopyFn> fns_;
  int64_t numel_ = 0, chunk_ = 1, inner_ = 1, per_outer_ = 1, bands_ = 1;
  size_t outer_dims_ = 0, bdim_ = 0;
  int V_ = 8;
};

}  // namespace

std::unique_ptr<Kernel> create_transpose_kernel(const Shape& in, const std::vector<int64_t>& perm,
                                                Isa isa, std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (in.size() > 6) return decline(why_not, "rank over 6");
  if (perm.size() != in.size()) return decline(why_not, "perm does not match the rank");
  std::vector<char> seen(in.size(), 0);
  for (int64_t a : perm) {
    if (a < 0 || a >= int64_t(in.size()) || seen[size_t(a)])
      return decline(why_not, "perm is not a permutation");
    seen[size_t(a)] = 1;
  }
  int64_t numel = 1;
  for (int64_t n : in) {
    if (n <= 0) return decline(why_not, "empty tensor");
    numel *= n;
  }
  // Strides (x 4 bytes, x V for a tile step, V x sa <= numel) are 32-bit immediates.
  if (numel > (int64_t(1) << 28)) return decline(why_not, "over 2^28 elements");
  return std::make_unique<TransposeKernel>(simplify(in, perm), isa);
}

}  // namespace kiln
