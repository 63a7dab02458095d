// Concat along channels. In nchw and in blocked layouts (every input but the last a whole
// number of blocks) each input is one contiguous run per image at a known offset of the
// output: a vector copy. In nhwc each input fills C_i floats of every output pixel: a strided
// copy per input with the C_i-float row unrolled at generation time.
#include <algorithm>
#include <climits>
#include <string>

#include "graph/error.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
namespace x86 = asmjit::x86;

using CopyFn = void (*)(const float* src, float* dst, int64_t n);
using Sig = asmjit::FuncSignatureT<void, const float*, float*, int64_t>;

struct Tile {
  int input, fn;
  int64_t src_off, dst_off;  // floats from the input's / output's image base
  int64_t n;                 // floats (flat copy) or pixels (nhwc)
};

class ConcatKernel : public glue::GlueKernel {
 public:
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    const int64_t per = int64_t(per_image_.size());
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / per;
      const Tile& w = per_image_[size_t(t % per)];
      fns_[size_t(w.fn)](a.src[w.input] + n * src_img_[size_t(w.input)] + w.src_off,
                         a.dst[0] + n * dst_img_ + w.dst_off, w.n);
    }
  }

  std::vector<CopyFn> fns_;
  std::vector<Tile> per_image_;
  std::vector<int64_t> src_img_;
  int64_t dst_img_ = 0;

  void set_tiles(int64_t N) { tiles_ = N * int64_t(per_image_.size()); }
  void set_name(std::string n) { name_ = std::move(n); }
  void set_code(glue::ExecCode c) { code_ = std::move(c); }
};

void build_flat_copy(AsmBuilder& b) {
  b.begin_function(Sig());
  x86::Gp src = b.gp(), dst = b.gp(), n = b.gp();
  b.func()->setArg(0, src);
  b.func()->setArg(1, dst);
  b.func()->setArg(2, n);
  b.copy_dynamic(dst, src, n);
  b.end_function();
}

// n pixels: [dst] = C floats of [src]; src += C, dst += Ctot per pixel.
int build_pixel_copy(AsmBuilder& b, int64_t C, int64_t Ctot) {
  auto& cc = b.cc();
  const int idx = b.begin_function(Sig());
  x86::Gp src = b.gp(), dst = b.gp(), n = b.gp();
  b.func()->setArg(0, src);
  b.func()->setArg(1, dst);
  b.func()->setArg(2, n);
  asmjit::Label top = cc.newLabel(), done = cc.newLabel();
  cc.test(n, n);
  cc.jz(done);
  cc.bind(top);
  b.copy_static(dst, src, C);
  cc.add(src, C * 4);
  cc.add(dst, Ctot * 4);
  cc.dec(n);
  cc.jnz(top);
  cc.bind(done);
  b.end_function();
  return idx;
}

}  // namespace

std::unique_ptr<Kernel> create_concat_kernel(const Shape& out, const std::vector<int64_t>& channels,
                                             Layout l, Isa isa, std::string* why_not) {
  auto no = [&](const std::string& r) -> std::unique_ptr<Kernel> {
    if (why_not) *why_not = r;
    return nullptr;
  };
  if (isa != Isa::avx2 && isa != Isa::avx512) return no("needs avx2 or avx512");
  if (out.size() != 4) return no("needs a 4-D output shape");
  if (channels.empty()) return no("no inputs");
  int64_t total = 0;
  for (int64_t c : channels) {
    if (c < 0) return no("negative channel count");
    total += c;
  }
  if (total != out[1])
    return no("input channels add up to " + std::to_string(total) + ", output has " +
              std::to_string(out[1]));
  for (int64_t d : out)
    if (d <= 0) return no("empty output " + shape_str(out));
  const int B = layout_block(l);
  if (B > 1)
    for (size_t i = 0; i + 1 < channels.size(); ++i)
      if (channels[i] % B != 0)
        return no("input " + std::to_string(i) + " has " + std::to_string(channels[i]) +
                  " channels, not a multiple of the " + std::to_string(B) + "-channel block");
  const int64_t N = out[0], HW = out[2] * out[3];
  Shape one = out;
  one[0] = 1;
  if (layout_elems(l, one) * 4 > INT32_MAX) return no("tensor too large");

  const std::string name = std::string("concat_f32_") + layout_name(l) + "__" + isa_name(isa);
  auto k = std::make_unique<ConcatKernel>();
  k->set_name(name);
  AsmBuilder b(name, isa);
  k->dst_img_ = layout_elems(l, one);
  int64_t c0 = 0;
  if (l == Layout::nhwc) {
    std::vector<std::pair<int64_t, int>> fn_of_c;
    const int64_t pc = glue::chunk_size(HW, 1, std::max<int64_t>(1, 16 / int64_t(channels.size())),
                                        std::max<int64_t>(1, 16384 / out[1]));
    for (size_t i = 0; i < channels.size(); ++i) {
      const int64_t C = channels[i];
      k->src_img_.push_back(C * HW);
      if (C > 0) {
        auto it =
            std::find_if(fn_of_c.begin(), fn_of_c.end(), [&](auto& p) { return p.first == C; });
        int fn = it != fn_of_c.end() ? it->second : build_pixel_copy(b, C, out[1]);
        if (it == fn_of_c.end()) fn_of_c.push_back({C, fn});
        for (int64_t p = 0; p < HW; p += pc)
          k->per_image_.push_back({int(i), fn, p * C, p * out[1] + c0, std::min(pc, HW - p)});
      }
      c0 += C;
    }
  } else {
    build_flat_copy(b);
    for (size_t i = 0; i < channels.size(); ++i) {
      const int64_t C = channels[i];
      const int64_t elems = round_up(C, B) * HW;  // only the last input can be padded
      k->src_img_.push_back(elems);
      const int64_t chunk = glue::chunk_size(elems, 4 * b.width(), 16, 16384);
      for (int64_t o = 0; o < elems; o += chunk)
        k->per_image_.push_back({int(i), 0, o, c0 * HW + o, std::min(chunk, elems - o)});
      c0 += C;
    }
  }
  glue::ExecCode code = b.finish();
  for (int i = 0; i < b.function_count(); ++i) k->fns_.push_back(b.entry<CopyFn>(code, i));
  k->set_code(std::move(code));
  k->set_tiles(N);
  return k;
}

}  // namespace kiln
