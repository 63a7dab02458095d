// Resize (any rank, separable: one pass per resized axis over the taps of graph/resize.h),
// DepthToSpace / SpaceToDepth (a Transpose of a 6-D view) and GridSample (the taps of
// graph/grid_sample.h, summed in double).
#include <algorithm>
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
    if (s.out[d] == shape[d] && t.identity()) continue;
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

}  // namespace kiln::ref
