#include "runtime/glue_kernels.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "graph/half.h"
#include "runtime/ref/ref_kernels.h"

namespace kiln {
namespace {

class RefOpKernel : public Kernel {
 public:
  RefOpKernel(const Node& n, std::vector<Shape> is, std::vector<DType> it, std::vector<Shape> os,
              std::vector<DType> ot)
      : node_(n),
        name_("ref_" + n.op),
        in_shapes_(std::move(is)),
        in_types_(std::move(it)),
        out_shapes_(std::move(os)),
        out_types_(std::move(ot)),
        fn_(find_ref_kernel(n.op)) {
    if (!fn_) n.fail(Code::unsupported, "no kernel implements operator " + n.op);
  }
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return 1; }
  void run(const KernelArgs& a, int64_t, int64_t) const override {
    std::vector<Tensor> in(in_shapes_.size()), out(out_shapes_.size());
    std::vector<const Tensor*> ip(in.size());
    std::vector<Tensor*> op(out.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (!a.src[i]) continue;
      in[i] = Tensor::wrap(in_types_[i], in_shapes_[i], const_cast<float*>(a.src[i]));
      ip[i] = &in[i];
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (!a.dst[i]) continue;
      out[i] = Tensor::wrap(out_types_[i], out_shapes_[i], a.dst[i]);
      op[i] = &out[i];
    }
    fn_(node_, ip, op);
  }

 private:
  Node node_;
  std::string name_;
  std::vector<Shape> in_shapes_;
  std::vector<DType> in_types_;
  std::vector<Shape> out_shapes_;
  std::vector<DType> out_types_;
  RefKernel fn_;
};

class ReorderKernel : public Kernel {
 public:
  ReorderKernel(Shape s, Layout from, Layout to, const U8Quant* q)
      : s_(std::move(s)),
        from_(from),
        to_(to),
        q_(q ? std::optional<U8Quant>(*q) : std::nullopt),
        name_(std::string("reorder_") + layout_name(from) + "_to_" + layout_name(to) + "__cpp") {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return s_[0]; }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    Shape one = s_;
    one[0] = 1;
    const int64_t in_n = layout_bytes(from_, one), out_n = layout_bytes(to_, one);
    for (int64_t n = b; n < e; ++n)
      convert_layout(reinterpret_cast<const char*>(a.src[0]) + n * in_n, from_,
                     reinterpret_cast<char*>(a.dst[0]) + n * out_n, to_, one, q_ ? &*q_ : nullptr);
  }

 private:
  Shape s_;
  Layout from_, to_;
  std::optional<U8Quant> q_;
  std::string name_;
};

// Pooling over nChw<b>c: each (n, channel block, output row) is a tile; the innermost loop
// runs over the b lanes of one block, which the compiler vectorises.
class BlockedPoolKernel : public Kernel {
 public:
  BlockedPoolKernel(const Node& n, Shape src, Shape dst, Layout l)
      : src_(std::move(src)), dst_(std::move(dst)), b_(layout_block(l)) {
    global_ = n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
    max_ = n.op == "MaxPool" || n.op == "GlobalMaxPool";
    if (global_) {
      kh_ = src_[2], kw_ = src_[3];
    } else {
      auto k = n.attr_ints("kernel_shape"), s = n.attr_ints("strides"), p = n.attr_ints("pads");
      auto d = n.attr_ints("dilations", {1, 1});
      kh_ = k[0], kw_ = k[1], sh_ = s[0], sw_ = s[1], pt_ = p[0], pl_ = p[1];
      ph_end_ = p[2], pw_end_ = p[3], dh_ = d[0], dw_ = d[1];
      include_pad_ = n.attr_i("count_include_pad", 0) != 0;
    }
    bf16_ = layout_bf16(l);
    u8_ = layout_u8(l);
    name_ = std::string(max_ ? "pool_max" : "pool_avg") + (global_ ? "_global" : "") + "_" +
            layout_elem_name(l) + "_" + layout_name(l) + "__cpp";
  }
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return dst_[0] * cblocks() * dst_[2]; }
  // (u8: one row of column maxes, run_max_u8.)
  int64_t scratch_bytes() const override { return u8_ ? src_[3] * 16 : 0; }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    if (bf16_)
      run_as<uint16_t>(a, b, e);
    else if (u8_)
      run_max_u8(a, b, e);
    else
      run_as<float>(a, b, e);
  }

 private:
  // f(pixel index h * W + w) for each tap of the window from (h0, w0) inside the image.
  template <class F>
  void for_each_tap(int64_t h0, int64_t w0, F f) const {
    const int64_t H = src_[2], W = src_[3];
    for (int64_t i = 0; i < kh_; ++i) {
      const int64_t h = h0 + i * dh_;
      if (h < 0 || h >= H) continue;
      for (int64_t j = 0; j < kw_; ++j) {
        const int64_t w = w0 + j * dw_;
        if (w >= 0 && w < W) f(h * W + w);
      }
    }
  }

  // Max pooling of the bytes of a uint8 grid (nChw16c_u8: make_blocked_pool_kernel takes
  // MaxPool only): a block's 16 bytes at once (SSE2 pmaxub), separably: per output row, the max
  // over the window's rows of every input column, then over the window's columns (kh + kw
  // maxes an output instead of kh x kw). 0 is the identity of a max of bytes, and every window
  // holds an element (graph/passes.h maxpool_keeps_grid).
  void run_max_u8(const KernelArgs& a, int64_t b, int64_t e) const {
    const int64_t H = src_[2], W = src_[3], OH = dst_[2], OW = dst_[3];
    auto* col = reinterpret_cast<__m128i*>(scratch_floats(a));
    for (int64_t t = b; t < e; ++t) {
      const int64_t oh = t % OH, nc = t / OH;
      const auto* src = reinterpret_cast<const __m128i*>(a.src[0]) + nc * H * W;
      auto* dst = reinterpret_cast<__m128i*>(a.dst[0]) + (nc * OH + oh) * OW;
      std::fill(col, col + W, _mm_setzero_si128());
      for (int64_t i = 0; i < kh_; ++i) {
        const int64_t h = oh * sh_ - pt_ + i * dh_;
        if (h < 0 || h >= H) continue;
        const __m128i* row = src + h * W;
        for (int64_t w = 0; w < W; ++w) col[w] = _mm_max_epu8(col[w], row[w]);
      }
      for (int64_t ow = 0; ow < OW; ++ow) {
        __m128i acc = _mm_setzero_si128();
        const int64_t w0 = ow * sw_ - pl_;
        for (int64_t j = 0; j < kw_; ++j) {
          const int64_t w = w0 + j * dw_;
          if (w >= 0 && w < W) acc = _mm_max_epu8(acc, col[w]);
        }
        _mm_storeu_si128(dst + ow, acc);
      }
    }
  }

  // T: float, or uint16_t (bf16: widened exactly; a max is a bf16 value already, so it is
  // stored by truncation, an average rounded to nearest even).
  template <class T>
  void run_as(const KernelArgs& a, int64_t b, int64_t e) const {
    const int64_t H = src_[2], W = src_[3], OH = dst_[2], OW = dst_[3], B = b_;
    auto get = [](T v) {
      if constexpr (std::is_same_v<T, float>)
        return v;
      else
        return bits_to_float(uint32_t(v) << 16);
    };
    for (int64_t t = b; t < e; ++t) {
      const int64_t oh = t % OH, nc = t / OH;
      const T* src = reinterpret_cast<const T*>(a.src[0]) + nc * H * W * B;
      T* dst = reinterpret_cast<T*>(a.dst[0]) + (nc * OH + oh) * OW * B;
      for (int64_t ow = 0; ow < OW; ++ow) {
        float acc[16];
        std::fill(acc, acc + B, max_ ? -std::numeric_limits<float>::infinity() : 0.f);
        const int64_t h0 = oh * sh_ - pt_, w0 = ow * sw_ - pl_;
        int64_t count = 0;
        for_each_tap(h0, w0, [&](int64_t pix) {
          const T* s = src + pix * B;
          ++count;
          if (max_)
            for (int64_t c = 0; c < B; ++c) acc[c] = std::max(acc[c], get(s[c]));
          else
            for (int64_t c = 0; c < B; ++c) acc[c] += get(s[c]);
        });
        if (!max_) {
          if (include_pad_) {  // window clipped to the padded extent (PyTorch's rule)
            const int64_t hs = std::max<int64_t>(h0, -pt_), ws = std::max<int64_t>(w0, -pl_);
            const int64_t he = std::min(h0 + kh_, H + ph_end_),
                          we = std::min(w0 + kw_, W + pw_end_);
            count = (he - hs) * (we - ws);
          }
          const float inv = count ? 1.f / float(count) : 0.f;
          for (int64_t c = 0; c < B; ++c) acc[c] *= inv;
        }
        if constexpr (std::is_same_v<T, float>) {
          std::memcpy(dst + ow * B, acc, size_t(B) * sizeof(float));
        } else {
          for (int64_t c = 0; c < B; ++c)
            dst[ow * B + c] = max_ ? uint16_t(float_to_bits(acc[c]) >> 16) : float_to_bf16(acc[c]);
        }
      }
    }
  }

  int64_t cblocks() const { return round_up(src_[1], b_) / b_; }
  Shape src_, dst_;
  int64_t b_;
  bool global_ = false, max_ = false, include_pad_ = false, bf16_ = false, u8_ = false;
  int64_t kh_ = 1, kw_ = 1, sh_ = 1, sw_ = 1, pt_ = 0, pl_ = 0, ph_end_ = 0, pw_end_ = 0;
  int64_t dh_ = 1, dw_ = 1;
  std::string name_;
};

// In nChw<b>c with whole blocks, one image's channels are contiguous per input: concat along
// C is one memcpy per input per image.
class BlockedConcatKernel : public Kernel {
 public:
  BlockedConcatKernel(std::vector<Shape> srcs, Layout l)
      : srcs_(std::move(srcs)),
        esize_(layout_esize(l)),
        name_(std::string("concat_") + layout_elem_name(l) + "_" + layout_name(l) + "__cpp") {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return srcs_[0][0]; }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    int64_t total = 0;
    for (const auto& s : srcs_) total += s[1] * s[2] * s[3];
    // Whole channel blocks: an image of the output is its inputs' images back to back.
    for (int64_t n = b; n < e; ++n) {
      char* dst = reinterpret_cast<char*>(a.dst[0]) + n * total * esize_;
      for (size_t i = 0; i < srcs_.size(); ++i) {
        const int64_t per = srcs_[i][1] * srcs_[i][2] * srcs_[i][3] * esize_;
        std::memcpy(dst, reinterpret_cast<const char*>(a.src[i]) + n * per, size_t(per));
        dst += per;
      }
    }
  }

 private:
  std::vector<Shape> srcs_;
  int64_t esize_;  // bytes per element: f32, or bf16 in a bf16 layout
  std::string name_;
};

}  // namespace

std::unique_ptr<Kernel> make_ref_kernel(const Node& node, std::vector<Shape> in_shapes,
                                        std::vector<DType> in_types, std::vector<Shape> out_shapes,
                                        std::vector<DType> out_types) {
  return std::make_unique<RefOpKernel>(node, std::move(in_shapes), std::move(in_types),
                                       std::move(out_shapes), std::move(out_types));
}

std::unique_ptr<Kernel> make_reorder_kernel(const Shape& nchw, Layout from, Layout to,
                                            const U8Quant* q) {
  return std::make_unique<ReorderKernel>(nchw, from, to, q);
}

std::unique_ptr<Kernel> make_blocked_pool_kernel(const Node& node, const Shape& src,
                                                 const Shape& dst, Layout l) {
  static const char* ops[] = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"};
  if (std::none_of(std::begin(ops), std::end(ops), [&](const char* o) { return node.op == o; }))
    return nullptr;
  if (src.size() != 4 || layout_block(l) == 1) return nullptr;
  if (layout_u8(l) && node.op != "MaxPool") return nullptr;  // (an average leaves the grid)
  return std::make_unique<BlockedPoolKernel>(node, src, dst, l);
}

bool concat_blocked_ok(const std::vector<Shape>& srcs, Layout l) {
  for (const auto& s : srcs)
    if (s.size() != 4 || s[1] % layout_block(l) != 0) return false;
  return layout_block(l) > 1 && !srcs.empty();
}

std::unique_ptr<Kernel> make_blocked_concat_kernel(const std::vector<Shape>& srcs, Layout l) {
  return std::make_unique<BlockedConcatKernel>(srcs, l);
}

}  // namespace kiln
