// 2-D MaxPool and AveragePool, NCHW, with explicit kernel/strides/pads/dilations.
#include <cmath>
#include <limits>

#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_window.h"

namespace kiln::ref {

namespace {

struct Pool2d {
  int64_t N, C, H, W, OH, OW;
  Window2d win;
};

// Validates the node and returns its geometry. The output size is read from the output tensor
// (ceil_mode only changes it); it must lie between the floor- and ceil-mode sizes.
Pool2d read_pool(const Node& node, const Tensor& x, const Tensor& y) {
  expect_dtype(node, x, DType::f32, "input");
  expect_dtype(node, y, DType::f32, "output");
  expect_rank(node, x, 4, "input (only 2-D pooling is supported)");
  expect_rank(node, y, 4, "output");
  Pool2d p;
  p.N = x.shape()[0], p.C = x.shape()[1], p.H = x.shape()[2], p.W = x.shape()[3];
  p.OH = y.shape()[2], p.OW = y.shape()[3];
  p.win = read_window2d(node, {});
  const bool ceil_mode = node.attr_i("ceil_mode", 0) != 0;
  auto check = [&](int64_t in, int64_t pads, int64_t k, int64_t s, int64_t d, int64_t o) {
    const int64_t span = in + pads - (d * (k - 1) + 1);
    const int64_t lo = floor_div(span, s) + 1;
    const int64_t hi = ceil_mode ? ceil_div(span, s) + 1 : lo;
    if (span < 0 || o < lo || o > hi)
      node.fail(Code::internal, "output shape " + shape_str(y.shape()) + " does not match input " +
                                    shape_str(x.shape()) + " and the window attributes");
  };
  const Window2d& w = p.win;
  check(p.H, w.pt + w.pb, w.kh, w.sh, w.dh, p.OH);
  check(p.W, w.pl + w.pr, w.kw, w.sw, w.dw, p.OW);
  if (y.shape()[0] != p.N || y.shape()[1] != p.C)
    node.fail(Code::internal, "output shape " + shape_str(y.shape()) + " does not match input " +
                                  shape_str(x.shape()));
  return p;
}

// Number of window taps start + k * d (k in [0, n)) that fall inside [lo, hi).
int64_t taps_inside(int64_t start, int64_t n, int64_t d, int64_t lo, int64_t hi) {
  int64_t c = 0;
  for (int64_t k = 0; k < n; ++k) c += (start + k * d >= lo && start + k * d < hi) ? 1 : 0;
  return c;
}

}  // namespace

void max_pool(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  forbid_output(node, out, 1, "Indices");
  const Pool2d p = read_pool(node, x, y);
  const Window2d& w = p.win;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t nc = 0; nc < p.N * p.C; ++nc) {
    const float* plane = xp + nc * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        // Padded cells are ignored (they are not zeros). A window with no real cell gives
        // -inf, which valid output sizes never produce.
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t kh = 0; kh < w.kh; ++kh) {
          const int64_t ih = oh * w.sh - w.pt + kh * w.dh;
          if (ih < 0 || ih >= p.H) continue;
          for (int64_t kw = 0; kw < w.kw; ++kw) {
            const int64_t iw = ow * w.sw - w.pl + kw * w.dw;
            if (iw < 0 || iw >= p.W) continue;
            const float v = plane[ih * p.W + iw];
            if (v > m || std::isnan(v)) m = v;  // NaN propagates, as in PyTorch
          }
        }
        yp[(nc * p.OH + oh) * p.OW + ow] = m;
      }
  }
}

void average_pool(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  const Pool2d p = read_pool(node, x, y);
  const Window2d& w = p.win;
  const bool include_pad = node.attr_i("count_include_pad", 0) != 0;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t nc = 0; nc < p.N * p.C; ++nc) {
    const float* plane = xp + nc * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh) {
      const int64_t h0 = oh * w.sh - w.pt;
      // count_include_pad=1 counts the taps inside the padded extent [-pad_begin, H+pad_end)
      // (PyTorch's rule: ceil-mode taps past the explicit padding are not counted);
      // count_include_pad=0 counts only the real input cells.
      const int64_t nh = include_pad ? taps_inside(h0, w.kh, w.dh, -w.pt, p.H + w.pb)
                                     : taps_inside(h0, w.kh, w.dh, 0, p.H);
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const int64_t w0 = ow * w.sw - w.pl;
        const int64_t nw = include_pad ? taps_inside(w0, w.kw, w.dw, -w.pl, p.W + w.pr)
                                       : taps_inside(w0, w.kw, w.dw, 0, p.W);
        double s = 0;
        for (int64_t kh = 0; kh < w.kh; ++kh) {
          const int64_t ih = h0 + kh * w.dh;
          if (ih < 0 || ih >= p.H) continue;
          for (int64_t kw = 0; kw < w.kw; ++kw) {
            const int64_t iw = w0 + kw * w.dw;
            if (iw >= 0 && iw < p.W) s += plane[ih * p.W + iw];
          }
        }
        const int64_t count = nh * nw;
        // An empty window (impossible for valid output sizes) gives 0 rather than NaN.
        yp[(nc * p.OH + oh) * p.OW + ow] = count ? float(s / double(count)) : 0.f;
      }
    }
  }
}

}  // namespace kiln::ref
