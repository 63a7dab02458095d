// Resize (any rank, separable: one pass per resized axis over the taps of graph/resize.h),
// DepthToSpace / SpaceToDepth (a Transpose of a 6-D view) and GridSample (the taps of
// graph/grid_sample.h, summed in double).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/grid_sample.h"
#include "graph/resize.h"
#include "runtime/ref/ref_common.h"

namespace kiln::ref {

void resize(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  const ResizeSpec s =
      resize_spec(node, x.shape(), opt_input(in, 1), opt_input(in, 2), opt_input(in, 3));
  expect_shape(node, y, s.out, "output");
  // cur holds the tensor resized along the axes done so far.
  Shape shape = x.shape();
  std::vector<float> cur(x.data<float>(), x.data<float>() + x.numel()), next;
  std::vector<ResizeTaps> taps;
  for (size_t d = 0; d < shape.size(); ++d) {
    taps.push_back(resize_taps(s, d));
    const ResizeTaps& t = taps.back();
    if (t.identity()) continue;
    const int64_t outer = prod(shape, 0, d), inner = prod(shape, d + 1, shape.size());
    const int64_t n_in = shape[d], n_out = s.out[d];
    next.assign(size_t(outer * n_out * inner), 0.f);
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t o = 0; o < n_out; ++o) {
        float* dst = next.data() + (a * n_out + o) * inner;
        for (int k = 0; k < t.taps; ++k) {
          const size_t j = size_t(o * t.taps + k);
          const float w = t.w[j];
          const float* src = cur.data() + (a * n_in + t.idx[j]) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        }
      }
    shape[d] = n_out;
    cur.swap(next);
  }
  float* yp = y.data<float>();
  std::copy(cur.begin(), cur.end(), yp);
  if (s.coord != "tf_crop_and_resize") return;
  // Outputs whose coordinate on any axis falls outside the input take the extrapolation value.
  const std::vector<int64_t> st = strides_of(s.out);
  for (int64_t e = 0; e < y.numel(); ++e)
    for (size_t d = 0; d < s.out.size(); ++d)
      if (taps[d].outside[size_t(e / st[d] % s.out[d])]) {
        yp[e] = s.extrapolation;
        break;
      }
}

void space_depth(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input");
  expect_rank(node, x, 4, "input");
  const SpaceDepthView v = space_depth_view(node, x.shape());
  Shape o6(6);
  for (size_t i = 0; i < 6; ++i) o6[i] = v.in6[size_t(v.perm[i])];
  if (prod(v.in6, 0, 6) != x.numel() || prod(o6, 0, 6) != y.numel())
    node.fail(Code::internal, "block view does not match the tensor");
  const Tensor x6 = Tensor::wrap(DType::f32, v.in6, const_cast<void*>(x.raw()));
  Tensor y6 = Tensor::wrap(DType::f32, o6, y.raw());
  Node t = node;
  t.attrs.clear();
  t.attrs["perm"] = attr_ints(v.perm);
  transpose(t, {&x6}, {&y6});
}

void grid_sample(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& grid = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input X");
  expect_dtype(node, grid, DType::f32, "grid");
  if (x.shape().size() != 4 || grid.shape().size() != 4 || grid.shape()[0] != x.shape()[0] ||
      grid.shape()[3] != 2)
    node.fail(Code::invalid_model, "X " + shape_str(x.shape()) + " / grid " +
                                       shape_str(grid.shape()) +
                                       " are not [N, C, H, W] / [N, Ho, Wo, 2]");
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t P = grid.shape()[1] * grid.shape()[2];
  expect_shape(node, y, {N, C, grid.shape()[1], grid.shape()[2]}, "output");
  const GridSampleSpec s = grid_sample_spec(node);
  GridTap taps[16];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < P; ++p) {
      const float* g = grid.data<float>() + (n * P + p) * 2;
      grid_taps(s, g[0], g[1], H, W, taps);
      for (int64_t c = 0; c < C; ++c) {
        const float* xc = x.data<float>() + (n * C + c) * H * W;
        double acc = 0;
        for (int t = 0; t < s.taps(); ++t)
          if (taps[t].pixel >= 0) acc += double(taps[t].w) * xc[taps[t].pixel];
        y.data<float>()[(n * C + c) * P + p] = float(acc);
      }
    }
}

// RoiAlign (opset 16; torchvision's roi_align): per region and bin, the mean of
// sampling_ratio^2 bilinear samples (adaptive: ceil(region / bins) per axis when 0); samples
// more than a pixel outside the image count as 0, others are clamped to it.
// output_half_pixel (opset 10, aligned=False): no half-pixel shift, regions at least 1 x 1.
void roi_align(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& rois = req_input(node, in, 1);
  const Tensor& bidx = req_input(node, in, 2);
  Tensor& y = req_output(node, out, 0);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t R = rois.shape()[0];
  const int64_t oh = node.attr_i("output_height", 1), ow = node.attr_i("output_width", 1);
  expect_shape(node, y, {R, C, oh, ow}, "output");
  const int64_t ratio = node.attr_i("sampling_ratio", 0);
  const float scale = node.attr_f("spatial_scale", 1.f);
  const bool half = node.attr_s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const float* xp = x.data<float>();
  const float* rp = rois.data<float>();
  float* yp = y.data<float>();
  // A sample's four neighbours and weights (all zero outside the image), the same for every
  // channel: computed once per region (ORT's and torchvision's pre-calculation).
  struct Tap {
    int64_t at[4] = {0, 0, 0, 0};
    float w[4] = {0, 0, 0, 0};
  };
  auto tap = [&](float sy, float sx) {
    Tap t;
    if (sy < -1.f || sy > float(H) || sx < -1.f || sx > float(W)) return t;
    sy = std::max(sy, 0.f), sx = std::max(sx, 0.f);
    int64_t y0 = int64_t(sy), x0 = int64_t(sx), y1 = y0 + 1, x1 = x0 + 1;
    if (y0 >= H - 1) y0 = y1 = H - 1, sy = float(y0);
    if (x0 >= W - 1) x0 = x1 = W - 1, sx = float(x0);
    const float ly = sy - float(y0), lx = sx - float(x0), hy = 1.f - ly, hx = 1.f - lx;
    t = {{y0 * W + x0, y0 * W + x1, y1 * W + x0, y1 * W + x1},
         {hy * hx, hy * lx, ly * hx, ly * lx}};
    return t;
  };
  std::vector<Tap> taps;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = bidx.data<int64_t>()[r];
    if (b < 0 || b >= N)
      node.fail(Code::invalid_argument, "batch index " + std::to_string(b) + " of region " +
                                            std::to_string(r) + " is out of range (batch " +
                                            std::to_string(N) + ")");
    const float off = half ? 0.5f : 0.f;
    const float x0 = rp[r * 4] * scale - off, y0 = rp[r * 4 + 1] * scale - off;
    float rw = rp[r * 4 + 2] * scale - off - x0, rh = rp[r * 4 + 3] * scale - off - y0;
    if (!half) rw = std::max(rw, 1.f), rh = std::max(rh, 1.f);
    const float bh = rh / float(oh), bw = rw / float(ow);
    const int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / float(oh)));
    const int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / float(ow)));
    const float count = float(std::max<int64_t>(gh * gw, 1));
    taps.clear();  // per bin, its gh x gw samples
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix)
            taps.push_back(tap(y0 + float(ph) * bh + (float(iy) + .5f) * bh / float(gh),
                               x0 + float(pw) * bw + (float(ix) + .5f) * bw / float(gw)));
    const size_t per_bin = size_t(gh * gw);
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = xp + (b * C + c) * H * W;
      for (int64_t bin = 0; bin < oh * ow; ++bin) {
        float acc = 0;
        for (size_t s = 0; s < per_bin; ++s) {
          const Tap& t = taps[size_t(bin) * per_bin + s];
          acc += t.w[0] * plane[t.at[0]] + t.w[1] * plane[t.at[1]] + t.w[2] * plane[t.at[2]] +
                 t.w[3] * plane[t.at[3]];
        }
        yp[(r * C + c) * oh * ow + bin] = acc / count;
      }
    }
  }
}

}  // namespace kiln::ref
