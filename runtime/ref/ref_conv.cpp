// 2-D convolution, NCHW, grouped, with stride, dilation and asymmetric padding.
#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_epilogue.h"
#include "runtime/ref/ref_window.h"

namespace kiln::ref {

namespace {

// y[i] += w * x[i * stride] for i in [0, n). The unit-stride case is split out so the
// compiler vectorises it.
void axpy_row(float* __restrict y, const float* __restrict x, float w, int64_t n, int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] += w * x[i * stride];
  }
}

}  // namespace

void conv(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& w = req_input(node, in, 1);
  const Tensor* b = opt_input(in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input X");
  expect_dtype(node, w, DType::f32, "input W");
  expect_dtype(node, y, DType::f32, "output");
  expect_rank(node, x, 4, "input X (only 2-D convolution is supported)");
  expect_rank(node, w, 4, "input W");

  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t M = w.shape()[0], Cg = w.shape()[1];
  const int64_t G = node.attr_i("group", 1);
  const Window2d win = read_window2d(node, {w.shape()[2], w.shape()[3]});
  if (G < 1 || C % G != 0 || M % G != 0 || Cg != C / G)
    node.fail(Code::invalid_model, "group " + std::to_string(G) + " does not fit input " +
                                       shape_str(x.shape()) + " and weights " +
                                       shape_str(w.shape()));
  const int64_t OH = (H + win.pt + win.pb - (win.dh * (win.kh - 1) + 1)) / win.sh + 1;
  const int64_t OW = (W + win.pl + win.pr - (win.dw * (win.kw - 1) + 1)) / win.sw + 1;
  expect_shape(node, y, {N, M, OH, OW}, "output");
  if (b) {
    expect_dtype(node, *b, DType::f32, "input B");
    expect_shape(node, *b, {M}, "input B");
  }

  const Epilogue epilogue(node, in, 3, y);  // fused post-ops (graph/post_ops.h)
  const int64_t Mg = M / G;
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* bp = b ? b->data<float>() : nullptr;
  float* yp = y.data<float>();

  // For each kernel column kw, the output columns whose input column is inside the image.
  std::vector<Range> ow_range(size_t(win.kw));
  for (int64_t kw = 0; kw < win.kw; ++kw)
    ow_range[size_t(kw)] = valid_range(OW, W, win.sw, kw * win.dw - win.pl);

  // Loop order n, g, oh, oc, ic, kh, kw, ow: one output row is accumulated in L1 while the
  // Cg * kh input rows it needs are reused by every output channel of the group.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t oc = g * Mg; oc < (g + 1) * Mg; ++oc) {
          float* yrow = yp + ((n * M + oc) * OH + oh) * OW;
          const float bias = bp ? bp[oc] : 0.f;
          for (int64_t ow = 0; ow < OW; ++ow) yrow[ow] = bias;
          for (int64_t icg = 0; icg < Cg; ++icg) {
            const float* xplane = xp + (n * C + g * Cg + icg) * H * W;
            const float* wk = wp + (oc * Cg + icg) * win.kh * win.kw;
            for (int64_t kh = 0; kh < win.kh; ++kh) {
              const int64_t ih = oh * win.sh - win.pt + kh * win.dh;
              if (ih < 0 || ih >= H) continue;
              const float* xrow = xplane + ih * W;
              for (int64_t kw = 0; kw < win.kw; ++kw) {
                const Range r = ow_range[size_t(kw)];
                if (r.hi == r.lo) continue;
                const int64_t off = kw * win.dw - win.pl;  // iw = ow * sw + off
                axpy_row(yrow + r.lo, xrow + r.lo * win.sw + off, wk[kh * win.kw + kw], r.hi - r.lo,
                         win.sw);
              }
            }
          }
          if (!epilogue.empty()) epilogue.apply_row(yrow, OW, yrow - yp, oc, 0);
        }
}

}  // namespace kiln::ref
