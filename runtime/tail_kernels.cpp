#include "runtime/tail_kernels.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "jit/conv/conv_kernel.h"
#include "jit/gemm/fc_kernel.h"
#include "jit/pack.h"
#include "runtime/arenas.h"
#include "runtime/ref/ref_kernels.h"
#include "runtime/ref/ref_window.h"

namespace kiln {
namespace {

// Rows an FC kernel is made for: small counts exactly, others rounded up to 32 (the rows past
// M are zeros, their outputs dropped), so that a varying number of proposals reuses a few.
int64_t row_bucket(int64_t m) {
  return m <= 8 ? m : (m + 31) / 32 * 32;
}

}  // namespace

TailKernels::TailKernels(Isa isa, int threads, std::set<std::string> jit_nodes)
    : isa_(isa), threads_(threads), jit_nodes_(std::move(jit_nodes)) {}

std::shared_ptr<const Kernel> TailKernels::kernel_for(
    const std::string& node, int64_t rows,
    const std::function<std::unique_ptr<Kernel>()>& make) const {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = kernels_[{node, rows}];
  e.used = ++clock_;
  if (e.tried) return e.kernel;  // made (or found not to apply) before
  e.tried = true;
  e.kernel = make();
  std::shared_ptr<const Kernel> made = e.kernel;
  if (kernels_.size() > kMaxKernels) {  // drop the least recently used (never this one)
    auto oldest = kernels_.begin();
    for (auto it = kernels_.begin(); it != kernels_.end(); ++it)
      if (it->second.used < oldest->second.used) oldest = it;
    kernels_.erase(oldest);
  }
  return made;
}

void TailKernels::run_tiles(const Kernel& k, const float* src, float* dst, bool spread) const {
  const float* s[] = {src, nullptr, nullptr};  // a conv kernel's: x, (w, b: not read)
  float* d[] = {dst};
  KernelArgs args;
  args.src = s;
  args.dst = d;
  const int64_t tiles = k.tiles();
  auto piece = [&](int64_t b, int64_t e) {
    ScratchBuffer scratch(k.scratch_bytes());
    k.run(scratch.with(args), b, e);
  };
  if (spread && threads_ > 1 && tiles > 1)
    shared_arena(threads_).execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, tiles),
                        [&](const tbb::blocked_range<int64_t>& r) { piece(r.begin(), r.end()); });
    });
  else
    piece(0, tiles);
}

void TailKernels::for_images(int64_t n,
                             const std::function<void(int64_t, int64_t, bool)>& body) const {
  if (threads_ > 1 && n >= threads_)
    shared_arena(threads_).execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<int64_t>(0, n),
          [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end(), false); });
    });
  else
    body(0, n, true);
}

bool TailKernels::run_fc(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const {
  const Tensor& a = *in[0];
  const Tensor& w = *in[1];
  if (a.shape().size() != 2 || w.shape().size() != 2 || y.shape().size() != 2 || a.shape()[0] == 0)
    return false;
  if (n.op == "Gemm" && n.attr_i("transA", 0) != 0) return false;
  const int64_t m = a.shape()[0], rows = row_bucket(m);
  const std::shared_ptr<const Kernel> k =
      kernel_for(n.name, rows, [&]() -> std::unique_ptr<Kernel> {
        const bool gemm = n.op == "Gemm";
        const bool tb = gemm && n.attr_i("transB", 0) != 0;
        FcProblem p;
        p.m = rows;
        p.k = a.shape()[1];
        p.n = w.shape()[tb ? 0 : 1];
        std::optional<Tensor> bias;
        if (gemm && in.size() > 2 && in[2]) {  // C of [N] or [1, N], times beta
          const Tensor& c = *in[2];
          if (c.numel() != p.n || c.shape().empty() || c.shape().back() != p.n) return nullptr;
          bias.emplace(DType::f32, Shape{p.n});
          const float beta = n.attr_f("beta", 1.f);
          for (int64_t j = 0; j < p.n; ++j) bias->data<float>()[j] = c.data<float>()[j] * beta;
          p.bias = true;
        }
        std::string why_not;
        const float alpha = gemm ? n.attr_f("alpha", 1.f) : 1.f;
        return create_fc_kernel(p, isa_, w, tb, alpha, bias ? &*bias : nullptr, &why_not);
      });
  if (!k) return false;
  const int64_t kk = a.shape()[1], nn = y.shape()[1];
  // Rows past M: a zero-padded copy of A, and an output buffer of the bucket's rows.
  Tensor xa = rows == m ? a : Tensor(DType::f32, {rows, kk});
  Tensor ya = rows == m ? y : Tensor(DType::f32, {rows, nn});
  if (rows != m) std::memcpy(xa.raw(), a.raw(), a.nbytes());
  run_tiles(*k, xa.data<float>(), ya.data<float>(), true);
  if (rows != m) std::memcpy(y.raw(), ya.raw(), y.nbytes());
  return true;
}

namespace {

// Checks shared by Conv and ConvTranspose: x [N, C, H, W] and w 4-D f32, one group, a bias of
// M values or none, no fused post-ops (the tail's nodes have none; a model may not add them).
bool conv_form(const Node& n, const std::vector<const Tensor*>& in, const Tensor& y, int64_t m) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  return x.shape().size() == 4 && w.shape().size() == 4 && y.shape().size() == 4 &&
         y.dtype() == DType::f32 && n.attr_i("group", 1) == 1 && x.numel() > 0 && y.numel() > 0 &&
         !n.has("post_ops") && (!b || (b->dtype() == DType::f32 && b->numel() == m));
}

Tensor matrix_view(const Tensor& w, int64_t rows, int64_t cols) {
  return Tensor::wrap(DType::f32, {rows, cols},
                      const_cast<void*>(static_cast<const void*>(w.raw())));
}

}  // namespace

bool TailKernels::run_conv(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  if (!conv_form(n, in, y, w.shape()[0])) return false;
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t M = w.shape()[0], KH = w.shape()[2], KW = w.shape()[3];
  const ref::Window2d win = ref::read_window2d(n, {KH, KW});
  const int64_t OH = y.shape()[2], OW = y.shape()[3];
  if (w.shape()[1] != C || y.shape() != Shape{N, M, OH, OW} ||
      OH != (H + win.pt + win.pb - (win.dh * (KH - 1) + 1)) / win.sh + 1 ||
      OW != (W + win.pl + win.pr - (win.dw * (KW - 1) + 1)) / win.sw + 1)
    return false;  // the reference kernel names what is wrong
  // Made for one image (the images are as many as the detections, different every run): a
  // 3x3 stride-1 conv of whole 16-channel blocks on Winograd F(2x2, 3x3) in nChw16c (2.25x fewer
  // multiplies, small transform constants: its error stays near the direct conv's), each image
  // reordered in and out; any other on the im2col family over plain NCHW.
  auto make = [&](bool winograd) {
    ConvProblem p;
    p.ic = C, p.ih = H, p.iw = W, p.oc = M, p.oh = OH, p.ow = OW;
    p.kh = KH, p.kw = KW, p.sh = win.sh, p.sw = win.sw, p.dh = win.dh, p.dw = win.dw;
    p.pt = win.pt, p.pl = win.pl, p.pb = win.pb, p.pr = win.pr;
    p.bias = b != nullptr;
    ConvImpl impl;
    impl.family = winograd ? ConvFamily::winograd2 : ConvFamily::im2col;
    impl.src = impl.dst = winograd ? Layout::nChw16c : Layout::nchw;
    std::string why_not;
    return create_conv_kernel(p, impl, isa_, w, b, &why_not);
  };
  // Kept under "rows" 2 (Winograd) and 1 (im2col).
  std::shared_ptr<const Kernel> k;
  const bool wino = isa_ == Isa::avx512 && KH == 3 && KW == 3 && win.sh == 1 && win.sw == 1 &&
                    win.dh == 1 && win.dw == 1 && C % 16 == 0 && M % 16 == 0 &&
                    (k = kernel_for(n.name, 2, [&] { return make(true); }));
  if (!wino) k = kernel_for(n.name, 1, [&] { return make(false); });
  if (!k) return false;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t HW = H * W, OHW = OH * OW;
  for_images(N, [&](int64_t begin, int64_t end, bool spread) {
    std::vector<float> xb(size_t(wino ? C * HW : 0)), yb(size_t(wino ? M * OHW : 0));
    for (int64_t i = begin; i < end; ++i) {
      if (!wino) {
        run_tiles(*k, xp + i * C * HW, yp + i * M * OHW, spread);
        continue;
      }
      // nChw16c: each 16-channel block [16, HW] stored as [HW, 16], and back.
      for (int64_t cb = 0; cb < C; cb += 16)
        pack_transposed(ModelFloats(xp + (i * C + cb) * HW), HW, 1, 16, HW, xb.data() + cb * HW,
                        16);
      run_tiles(*k, xb.data(), yb.data(), spread);
      for (int64_t mb = 0; mb < M; mb += 16)
        pack_transposed(ModelFloats(yb.data() + mb * OHW), 16, 1, OHW, 16, yp + (i * M + mb) * OHW,
                        OHW);
    }
  });
  return true;
}

bool TailKernels::run_conv_transpose(const Node& n, const std::vector<const Tensor*>& in,
                                     Tensor& y) const {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  if (!conv_form(n, in, y, w.shape()[1])) return false;
  const std::vector<int64_t> s = n.attr_ints("strides"), d = n.attr_ints("dilations"),
                             pad = n.attr_ints("pads");
  if (s.size() != 2 || d.size() != 2 || pad.size() != 4) return false;
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t M = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  const int64_t OH = y.shape()[2], OW = y.shape()[3], P = H * W, J = M * KH * KW;
  if (w.shape()[0] != C || y.shape() != Shape{N, M, OH, OW} ||
      OH != s[0] * (H - 1) + (KH - 1) * d[0] + 1 - pad[0] - pad[2] ||
      OW != s[1] * (W - 1) + (KW - 1) * d[1] + 1 - pad[1] - pad[3])
    return false;  // the reference kernel names what is wrong
  const std::shared_ptr<const Kernel> k = kernel_for(n.name, P, [&] {
    FcProblem p;
    p.m = P;
    p.k = C;
    p.n = J;
    std::string why_not;
    return create_fc_kernel(p, isa_, matrix_view(w, C, J), false, 1.f, nullptr, &why_not);
  });
  if (!k) return false;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for_images(N, [&](int64_t begin, int64_t end, bool spread) {
    std::vector<float> pixels(size_t(P * C)), cols(size_t(P * J));
    for (int64_t i = begin; i < end; ++i) {
      pack_transposed(ModelFloats(xp + i * C * P), P, 1, C, P, pixels.data(), C);  // [P, C]
      run_tiles(*k, pixels.data(), cols.data(), spread);
      // y[m, ih * s - pad + kh * d, ...] += cols[ih * W + iw][(m * KH + kh) * KW + kw]
      float* dst = yp + i * M * OH * OW;
      for (int64_t m = 0; m < M; ++m) {
        const float bias = b ? b->data<float>()[m] : 0.f;
        std::fill(dst + m * OH * OW, dst + (m + 1) * OH * OW, bias);
      }
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw) {
          const float* col = cols.data() + (ih * W + iw) * J;
          for (int64_t m = 0; m < M; ++m)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t oh = ih * s[0] - pad[0] + kh * d[0];
              if (oh < 0 || oh >= OH) continue;
              float* row = dst + (m * OH + oh) * OW;
              const float* c = col + (m * KH + kh) * KW;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ow = iw * s[1] - pad[1] + kw * d[1];
                if (ow >= 0 && ow < OW) row[ow] += c[kw];
              }
            }
        }
    }
  });
  return true;
}

bool TailKernels::run_by_rows(const Node& n, const std::vector<const Tensor*>& in,
                              const std::vector<Tensor*>& out, const RefKernel& k,
                              const std::vector<size_t>& row_inputs) const {
  if (threads_ < 2 || out.size() != 1 || !out[0] || out[0]->shape().empty()) return false;
  const int64_t rows = out[0]->shape()[0];
  if (rows < 2 * threads_) return false;
  for (size_t i : row_inputs)
    if (i >= in.size() || !in[i] || in[i]->shape().empty() || in[i]->shape()[0] != rows)
      return false;  // the kernel names what is wrong
  // Row r of the output from row r of the row inputs: the kernel on views of a range of rows.
  auto view = [](const Tensor& t, int64_t b, int64_t e) {
    Shape s = t.shape();
    const int64_t row = s[0] ? int64_t(t.nbytes()) / s[0] : 0;
    s[0] = e - b;
    return Tensor::wrap(t.dtype(), s, static_cast<char*>(const_cast<void*>(t.raw())) + b * row);
  };
  shared_arena(threads_).execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        std::vector<Tensor> views;
                        views.reserve(row_inputs.size() + 1);
                        std::vector<const Tensor*> vin(in);
                        for (size_t i : row_inputs)
                          vin[i] = &views.emplace_back(view(*in[i], r.begin(), r.end()));
                        Tensor* vout = &views.emplace_back(view(*out[0], r.begin(), r.end()));
                        k(n, vin, {vout});
                      });
  });
  return true;
}

void TailKernels::operator()(const Node& n, const std::vector<const Tensor*>& in,
                             const std::vector<Tensor*>& out) const {
  const bool jit = jit_nodes_.count(n.name) && isa_ != Isa::scalar && in.size() >= 2 && in[0] &&
                   in[1] && in[0]->dtype() == DType::f32 && in[1]->dtype() == DType::f32 &&
                   out.size() == 1 && out[0];
  if (jit && (n.op == "Gemm" || n.op == "MatMul") && run_fc(n, in, *out[0])) return;
  if (jit && n.op == "Conv" && run_conv(n, in, *out[0])) return;
  if (jit && n.op == "ConvTranspose" && run_conv_transpose(n, in, *out[0])) return;
  RefKernel k = find_ref_kernel(n.op);
  if (!k) n.fail(Code::unsupported, "no kernel implements operator " + n.op);
  // RoiAlign: each region's output from its box and batch index (inputs 1, 2).
  if (n.op == "RoiAlign" && run_by_rows(n, in, out, k, {1, 2})) return;
  k(n, in, out);
}

}  // namespace kiln
