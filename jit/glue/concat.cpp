// Concat along channels. In nchw and in blocked layouts (every input but the last a whole
// number of blocks) each input is one contiguous run per image at a known offset of the
// output: a vector copy. In nhwc each input fills C_i floats of every output pixel: a strided
// copy per input with the C_i-float row unrolled at generation time. With a fused affine map
// (a BatchNormalization and its activations, graph/fuse.cpp) each row goes through one FMA and
// the post-ops on its way: the concat and the BN are one pass over the tensor.
#include <algorithm>
#include <climits>
#include <string>

#include "graph/error.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
namespace x86 = asmjit::x86;

using glue::CopyFn;
// n rows of the affine map; ss: the row's scale then its shift (each padded to whole vectors).
using AffineFn = void (*)(const float* src, float* dst, int64_t n, const float* ss);
using AffineSig = asmjit::FuncSignatureT<void, const float*, float*, int64_t, const float*>;

struct Tile {
  int input, fn;
  int64_t src_off, dst_off;  // floats from the input's / output's image base
  int64_t n;                 // floats (flat copy) or pixels (nhwc)
  int64_t ss = -1;           // affine: offset of the row's scale and shift in coef_
};

class ConcatKernel : public glue::GlueKernel {
 public:
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    const int64_t per = int64_t(group_.size()) - 1;
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / per, gi = t % per;
      for (int64_t j = group_[size_t(gi)]; j < group_[size_t(gi + 1)]; ++j) {
        const Tile& w = per_image_[size_t(j)];
        const float* src = a.src[w.input] + n * src_img_[size_t(w.input)] + w.src_off;
        float* dst = a.dst[0] + n * dst_img_ + w.dst_off;
        if (w.ss >= 0)
          afns_[size_t(w.fn)](src, dst, w.n, coef_.data() + w.ss);
        else
          fns_[size_t(w.fn)](src, dst, w.n);
      }
    }
  }

  // A kernel tile runs the copies per_image_[group_[g], group_[g + 1]) of one image.
  void end_group() { group_.push_back(int64_t(per_image_.size())); }

  std::vector<CopyFn> fns_;
  std::vector<AffineFn> afns_;
  std::vector<float> coef_;
  std::vector<Tile> per_image_;
  std::vector<int64_t> group_{0};
  std::vector<int64_t> src_img_;
  int64_t dst_img_ = 0;

  void set_tiles(int64_t N) { tiles_ = N * (int64_t(group_.size()) - 1); }
  void set_name(std::string n) { name_ = std::move(n); }
  void set_code(glue::ExecCode c) { code_ = std::move(c); }
};

// n rows of `row` floats: [dst] = post([src] * scale + shift); src += sstride, dst += dstride
// floats per row. `blocked`: the row is one whole vector whose lanes past `row` are pad lanes
// (read whole, written as zero); else lanes past `row` are neither read nor written.
int build_row_affine(AsmBuilder& b, int64_t row, int64_t sstride, int64_t dstride, bool blocked,
                     const std::vector<PostOp>& post) {
  auto& cc = b.cc();
  const int V = b.width();
  const int64_t nvec = (row + V - 1) / V;
  const int tail = int(row % V);
  const int idx = b.begin_function(AffineSig());
  x86::Gp src = b.gp(), dst = b.gp(), n = b.gp(), ss = b.gp();
  b.func()->setArg(0, src);
  b.func()->setArg(1, dst);
  b.func()->setArg(2, n);
  b.func()->setArg(3, ss);
  const glue::Mask m = b.mask(tail ? tail : V);
  // Scale and shift stay in registers for rows of up to 6 vectors, else are read per use.
  const bool in_regs = nvec <= 6;
  std::vector<x86::Vec> sc, sh;
  for (int64_t v = 0; in_regs && v < nvec; ++v) {
    sc.push_back(b.vec());
    sh.push_back(b.vec());
    b.load(sc.back(), x86::ptr(ss, int32_t(v * V * 4)));
    b.load(sh.back(), x86::ptr(ss, int32_t((nvec + v) * V * 4)));
  }
  auto pixel = [&](int64_t p) {
    for (int64_t v = 0; v < nvec; ++v) {
      const bool last = tail && v == nvec - 1;
      x86::Vec r = b.vec();
      b.load(r, x86::ptr(src, int32_t((p * sstride + v * V) * 4)), last && !blocked ? &m : nullptr);
      if (in_regs) {
        cc.vfmadd213ps(r, sc[size_t(v)], sh[size_t(v)]);
      } else {
        x86::Vec s = b.vec();
        b.load(s, x86::ptr(ss, int32_t(v * V * 4)));
        cc.vfmadd213ps(r, s, x86::ptr(ss, int32_t((nvec + v) * V * 4)));
      }
      for (const PostOp& op : post) glue::emit_post_op(b, r, op);
      const x86::Mem to = x86::ptr(dst, int32_t((p * dstride + v * V) * 4));
      if (last && blocked) {  // the whole vector, pad lanes zero
        b.zero_past(r, m);
        b.store(to, r);
      } else {
        b.store(to, r, last ? &m : nullptr);
      }
    }
  };
  // Rows of one or two vectors: four / two per iteration, then one at a time.
  const int64_t unroll = std::max<int64_t>(1, 4 / nvec);
  asmjit::Label wide = cc.newLabel(), single = cc.newLabel(), top = cc.newLabel(),
                done = cc.newLabel();
  if (unroll > 1) {
    cc.bind(wide);
    cc.cmp(n, unroll);
    cc.jl(single);
    for (int64_t p = 0; p < unroll; ++p) pixel(p);
    cc.add(src, int32_t(unroll * sstride * 4));
    cc.add(dst, int32_t(unroll * dstride * 4));
    cc.sub(n, unroll);
    cc.jmp(wide);
  }
  cc.bind(single);
  cc.test(n, n);
  cc.jz(done);
  cc.bind(top);
  pixel(0);
  cc.add(src, int32_t(sstride * 4));
  cc.add(dst, int32_t(dstride * 4));
  cc.dec(n);
  cc.jnz(top);
  cc.bind(done);
  b.end_function();
  return idx;
}

}  // namespace

std::unique_ptr<Kernel> create_concat_kernel(const Shape& out, const std::vector<int64_t>& channels,
                                             Layout l, Isa isa, std::string* why_not,
                                             const ConcatAffine* affine) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (out.size() != 4) return decline(why_not, "needs a 4-D output shape");
  if (channels.empty()) return decline(why_not, "no inputs");
  int64_t total = 0;
  for (int64_t c : channels) {
    if (c < 0) return decline(why_not, "negative channel count");
    total += c;
  }
  if (total != out[1])
    return decline(why_not, "input channels add up to " + std::to_string(total) + ", output has " +
                                std::to_string(out[1]));
  for (int64_t d : out)
    if (d <= 0) return decline(why_not, "empty output " + shape_str(out));
  const int B = layout_block(l);
  if (B > 1)
    for (size_t i = 0; i + 1 < channels.size(); ++i)
      if (channels[i] % B != 0)
        return decline(why_not, "input " + std::to_string(i) + " has " +
                                    std::to_string(channels[i]) +
                                    " channels, not a multiple of the " + std::to_string(B) +
                                    "-channel block");
  const int64_t N = out[0], HW = out[2] * out[3];
  Shape one = out;
  one[0] = 1;
  if (layout_elems(l, one) * 4 > INT32_MAX) return decline(why_not, "tensor too large");
  std::string kind = "concat";
  if (affine) {
    if (l == Layout::nchw)
      return decline(why_not, "the fused affine map runs in nhwc and blocked layouts");
    if (int64_t(affine->scale.size()) != total || affine->shift.size() != affine->scale.size())
      return decline(why_not, "affine map needs " + std::to_string(total) + " scales and shifts");
    std::string why;
    const std::string pp = glue::post_part(affine->post, &why);
    if (!why.empty()) return decline(why_not, why);
    kind += "_affine" + pp;
  }

  const std::string name = kind + "_f32_" + layout_name(l) + "__" + isa_name(isa);
  auto k = std::make_unique<ConcatKernel>();
  k->set_name(name);
  AsmBuilder b(name, isa);
  const int V = b.width();
  k->dst_img_ = layout_elems(l, one);
  // The affine rows' coefficients: scale then shift of channels [c, c + row), each padded to
  // whole vectors with zeros. Returns their offset in coef_.
  auto coefs = [&](int64_t c, int64_t row) {
    const int64_t padded = (row + V - 1) / V * V, at = int64_t(k->coef_.size());
    k->coef_.resize(size_t(at + 2 * padded), 0.f);
    for (int64_t j = 0; j < row && c + j < total; ++j) {
      k->coef_[size_t(at + j)] = affine->scale[size_t(c + j)];
      k->coef_[size_t(at + padded + j)] = affine->shift[size_t(c + j)];
    }
    return at;
  };
  int64_t c0 = 0;
  if (l == Layout::nhwc) {
    // A tile writes whole output pixels (every input's channels of a pixel range): tiles of
    // equal work (per-input tiles were as unequal as the inputs' channel counts, leaving one
    // thread with the big input) and each thread's output one contiguous range. ~32 KiB read
    // and written per tile.
    std::vector<int> fn(channels.size(), -1);
    std::vector<int64_t> ss(channels.size(), -1);
    for (size_t i = 0; i < channels.size(); ++i) {
      const int64_t C = channels[i];
      k->src_img_.push_back(C * HW);
      if (C > 0) {
        for (size_t j = 0; j < i && fn[i] < 0; ++j)
          if (channels[j] == C) fn[i] = fn[j];
        if (fn[i] < 0)
          fn[i] = affine ? build_row_affine(b, C, C, out[1], false, affine->post)
                         : glue::build_strided_copy(b, C, C, out[1]);
        if (affine) ss[i] = coefs(c0, C);
      }
      c0 += C;
    }
    const int64_t pc = glue::chunk_size(HW, 1, 64, std::max<int64_t>(1, 4096 / out[1]));
    for (int64_t p = 0; p < HW; p += pc) {
      c0 = 0;
      for (size_t i = 0; i < channels.size(); ++i) {
        const int64_t C = channels[i];
        if (C > 0)
          k->per_image_.push_back(
              {int(i), fn[i], p * C, p * out[1] + c0, std::min(pc, HW - p), ss[i]});
        c0 += C;
      }
      k->end_group();
    }
  } else if (affine) {
    // One row per pixel and block: whole blocks, and the last input's partial one (pad lanes
    // written as zero).
    const int full = build_row_affine(b, B, B, B, true, affine->post);
    const int part = total % B ? build_row_affine(b, total % B, B, B, true, affine->post) : full;
    const int64_t pc = glue::chunk_size(HW, 1, 4, 256);
    for (size_t i = 0; i < channels.size(); ++i) {
      const int64_t C = channels[i];
      k->src_img_.push_back(round_up(C, B) * HW);
      for (int64_t j = 0; j < C; j += B) {
        const int64_t ss = coefs(c0 + j, B);
        const int fn = c0 + j + B > total ? part : full;
        for (int64_t p = 0; p < HW; p += pc) {
          k->per_image_.push_back(
              {int(i), fn, j * HW + p * B, (c0 + j) * HW + p * B, std::min(pc, HW - p), ss});
          k->end_group();
        }
      }
      c0 += C;
    }
  } else {
    glue::build_flat_copy(b);
    for (size_t i = 0; i < channels.size(); ++i) {
      const int64_t C = channels[i];
      const int64_t elems = round_up(C, B) * HW;  // only the last input can be padded
      k->src_img_.push_back(elems);
      const int64_t chunk = glue::chunk_size(elems, 4 * b.width(), 16, 16384);
      for (int64_t o = 0; o < elems; o += chunk) {
        k->per_image_.push_back({int(i), 0, o, c0 * HW + o, std::min(chunk, elems - o)});
        k->end_group();
      }
      c0 += C;
    }
  }
  glue::ExecCode code = b.finish();
  for (int i = 0; i < b.function_count(); ++i) {
    if (affine)
      k->afns_.push_back(b.entry<AffineFn>(code, i));
    else
      k->fns_.push_back(b.entry<CopyFn>(code, i));
  }
  k->set_code(std::move(code));
  k->set_tiles(N);
  return k;
}

}  // namespace kiln
