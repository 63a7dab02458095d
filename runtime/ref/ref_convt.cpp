// 2-D ConvTranspose (NCHW, grouped, strided, dilated, pads of either sign: graph/ops.h's
// canonical form) as the scatter the ONNX spec describes, and SubpixelInterleave, the copy
// that graph/rewrite_convt.cpp's sub-pixel form ends with.
#include "graph/subpixel.h"
#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_window.h"

namespace kiln::ref {

namespace {

std::vector<int64_t> ints_n(const Node& node, const char* name, size_t count) {
  std::vector<int64_t> v = node.attr_ints(name);
  if (v.size() != count)
    node.fail(Code::internal, std::string("attribute ") + name + " was not made explicit");
  return v;
}

}  // namespace

void conv_transpose(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& w = req_input(node, in, 1);
  const Tensor* b = opt_input(in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input X");
  expect_dtype(node, w, DType::f32, "input W");
  expect_rank(node, x, 4, "input X (only 2-D ConvTranspose is supported)");
  expect_rank(node, w, 4, "input W");
  const std::vector<int64_t> s = ints_n(node, "strides", 2), d = ints_n(node, "dilations", 2),
                             p = ints_n(node, "pads", 4);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t G = node.attr_i("group", 1), Mg = w.shape()[1], M = Mg * G;
  const int64_t KH = w.shape()[2], KW = w.shape()[3];
  if (G < 1 || C % G != 0 || w.shape()[0] != C || s[0] < 1 || s[1] < 1 || d[0] < 1 || d[1] < 1)
    node.fail(Code::invalid_model,
              "weights " + shape_str(w.shape()) + " do not fit input " + shape_str(x.shape()));
  const int64_t OH = s[0] * (H - 1) + (KH - 1) * d[0] + 1 - p[0] - p[2];
  const int64_t OW = s[1] * (W - 1) + (KW - 1) * d[1] + 1 - p[1] - p[3];
  expect_shape(node, y, {N, M, OH, OW}, "output");
  if (b) expect_shape(node, *b, {M}, "input B");

  const int64_t Cg = C / G;
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float* plane = yp + (n * M + m) * OH * OW;
      const float bias = b ? b->data<float>()[m] : 0.f;
      for (int64_t i = 0; i < OH * OW; ++i) plane[i] = bias;
    }
  // Every input pixel scatters its kernel-sized patch: y[ih * s - pad + k * d] += x * w.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / Cg;
      const float* xplane = xp + (n * C + c) * H * W;
      for (int64_t mg = 0; mg < Mg; ++mg) {
        const int64_t m = g * Mg + mg;
        float* plane = yp + (n * M + m) * OH * OW;
        const float* wk = wp + (c * Mg + mg) * KH * KW;
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float wv = wk[kh * KW + kw];
            const int64_t offw = kw * d[1] - p[1];           // ow = iw * sw + offw
            const Range r = valid_range(W, OW, s[1], offw);  // iw whose ow is inside
            for (int64_t ih = 0; ih < H; ++ih) {
              const int64_t oh = ih * s[0] + kh * d[0] - p[0];
              if (oh < 0 || oh >= OH) continue;
              float* yrow = plane + oh * OW;
              const float* xrow = xplane + ih * W;
              for (int64_t iw = r.lo; iw < r.hi; ++iw) yrow[iw * s[1] + offw] += wv * xrow[iw];
            }
          }
      }
    }
}

void subpixel_interleave(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& z = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_rank(node, z, 4, "input");
  expect_rank(node, y, 4, "output");
  const std::vector<int64_t> s = ints_n(node, "strides", 2), off = ints_n(node, "offsets", 2);
  const std::vector<int64_t> org_h = node.attr_ints("origins_h", {}),
                             org_w = node.attr_ints("origins_w", {});
  const bool phase_major = node.attr_i("phase_major", 0) != 0;
  const int64_t N = y.shape()[0], C = y.shape()[1], OH = y.shape()[2], OW = y.shape()[3];
  const int64_t UH = z.shape()[2], UW = z.shape()[3], S = s[0] * s[1];
  expect_shape(node, z, {N, C * S, UH, UW}, "input");
  if (!subpixel_reads_inside(OH, s[0], off[0], org_h, UH) ||
      !subpixel_reads_inside(OW, s[1], off[1], org_w, UW))
    node.fail(Code::internal, "output reads past the input");
  const float* zp = z.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t th = oh + off[0], tw = ow + off[1];
          const int64_t rh = th % s[0], rw = tw % s[1], phase = rh * s[1] + rw;
          const int64_t zc = phase_major ? phase * C + c : c * S + phase;
          const int64_t qh = th / s[0] - subpixel_origin(org_h, rh);
          const int64_t qw = tw / s[1] - subpixel_origin(org_w, rw);
          yp[((n * C + c) * OH + oh) * OW + ow] = zp[((n * C * S + zc) * UH + qh) * UW + qw];
        }
}

}  // namespace kiln::ref
