// Inference-mode BatchNormalization over channel dim 1; LayerNormalization; Instance /
// GroupNormalization; LRN.
#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_epilogue.h"

namespace kiln::ref {

void batch_norm(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  forbid_output(node, out, 1, "running_mean");
  forbid_output(node, out, 2, "running_var");
  if (node.attr_i("training_mode", 0) != 0)
    node.fail(Code::unsupported, "training_mode=1 is not supported");
  expect_dtype(node, x, DType::f32, "input X");
  expect_dtype(node, y, DType::f32, "output");
  expect_shape(node, y, x.shape(), "output");
  if (x.shape().size() < 2)
    node.fail(Code::invalid_model, "input X needs rank >= 2, got " + shape_str(x.shape()));
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t inner = prod(x.shape(), 2, x.shape().size());
  const char* names[] = {"scale", "B", "mean", "var"};
  const float* p[4];
  for (size_t i = 0; i < 4; ++i) {
    const Tensor& t = req_input(node, in, i + 1);
    expect_dtype(node, t, DType::f32, names[i]);
    expect_shape(node, t, {C}, names[i]);
    p[i] = t.data<float>();
  }
  const double eps = node.attr_f("epsilon", 1e-5f);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const Epilogue epilogue(node, in, 5, y);  // a fused activation (graph/fuse.cpp)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      // y = scale * (x - mean) / sqrt(var + eps) + B, evaluated in double.
      const double a = double(p[0][c]) / std::sqrt(double(p[3][c]) + eps);
      const double mean = p[2][c], bias = p[1][c];
      const int64_t base = (n * C + c) * inner;
      for (int64_t i = 0; i < inner; ++i) yp[base + i] = float((xp[base + i] - mean) * a + bias);
      if (!epilogue.empty()) epilogue.apply_row(yp + base, inner, base, c, 0);
    }
}

// y = (x - mean) / sqrt(var + eps) * scale + B over the dims [axis, axis + norm_dims)
// (graph/ops.h), var = mean((x - mean)^2) as ONNX's function body; statistics in double.
void layer_norm(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input X");
  expect_dtype(node, y, DType::f32, "output");
  expect_shape(node, y, x.shape(), "output");
  const Shape& xs = x.shape();
  const int64_t r = int64_t(xs.size());
  const int64_t axis = norm_axis(node, node.attr_i("axis", -1), r);
  const int64_t dims = node.attr_i("norm_dims", r - axis);
  if (dims < 1 || axis + dims > r)
    node.fail(Code::invalid_model, "norm_dims outside the input's rank");
  const int64_t outer = prod(xs, 0, size_t(axis)),
                group = prod(xs, size_t(axis), size_t(axis + dims));
  const int64_t inner = prod(xs, size_t(axis + dims), xs.size());
  const float* p[2] = {nullptr, nullptr};
  for (size_t i = 0; i < 2; ++i) {
    const Tensor* t = opt_input(in, i + 1);
    if (!t) continue;
    expect_dtype(node, *t, DType::f32, i == 0 ? "scale" : "B");
    if (t->numel() != group)
      node.fail(Code::invalid_model, "scale / B size differs from the normalised dims");
    p[i] = t->data<float>();
  }
  const double eps = node.attr_f("epsilon", 1e-5f);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  // Optional outputs Mean and InvStdDev: [outer, 1.., inner].
  float* stat[2] = {nullptr, nullptr};
  for (size_t k = 0; k < 2; ++k)
    if (k + 1 < out.size() && out[k + 1]) {
      expect_dtype(node, *out[k + 1], DType::f32, k ? "InvStdDev" : "Mean");
      if (out[k + 1]->numel() != outer * inner)
        node.fail(Code::internal, "Mean / InvStdDev size differs from the outer dims");
      stat[k] = out[k + 1]->data<float>();
    }
  const Epilogue epilogue(node, in, int(node.inputs.size()), y);  // a fused activation
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * group * inner + i;
      double mean = 0, var = 0;
      for (int64_t k = 0; k < group; ++k) mean += xp[base + k * inner];
      mean /= double(group);
      for (int64_t k = 0; k < group; ++k) {
        const double d = xp[base + k * inner] - mean;
        var += d * d;
      }
      const double rstd = 1 / std::sqrt(var / double(group) + eps);
      if (stat[0]) stat[0][o * inner + i] = float(mean);
      if (stat[1]) stat[1][o * inner + i] = float(rstd);
      for (int64_t k = 0; k < group; ++k) {
        const double v = (xp[base + k * inner] - mean) * rstd;
        yp[base + k * inner] = float(v * (p[0] ? p[0][k] : 1.f) + (p[1] ? p[1][k] : 0.f));
      }
    }
  if (!epilogue.empty()) epilogue.apply_row(yp, y.numel(), 0, 0, 0);
}

namespace {

// Input X, f32 [N, C, spatial...], and the output of its shape (the channel normalisations).
std::pair<const Tensor*, Tensor*> channel_io(const Node& node, const Inputs& in,
                                             const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input X");
  expect_dtype(node, y, DType::f32, "output");
  expect_shape(node, y, x.shape(), "output");
  if (x.shape().size() < 3)
    node.fail(Code::invalid_model, "input X needs rank >= 3, got " + shape_str(x.shape()));
  return {&x, &y};
}

}  // namespace

// InstanceNormalization (groups = C) and GroupNormalization: x [N, C, ...] normalised over
// each group of C / G channels (all their pixels), then y = v * scale[c] + B[c] per channel
// (graph/ops.h); statistics in double.
void group_norm(const Node& node, const Inputs& in, const Outputs& out) {
  const auto [xt, yt] = channel_io(node, in, out);
  const Tensor& x = *xt;
  Tensor& y = *yt;
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t G = node.op == "InstanceNormalization" ? C : node.attr_i("num_groups", 0);
  if (G < 1 || C % G != 0) node.fail(Code::invalid_model, "num_groups does not divide C");
  const int64_t inner = prod(x.shape(), 2, x.shape().size()), len = C / G * inner;
  const float* p[2];
  for (size_t i = 0; i < 2; ++i) {
    const Tensor& t = req_input(node, in, i + 1);
    expect_dtype(node, t, DType::f32, i == 0 ? "scale" : "B");
    expect_shape(node, t, {C}, i == 0 ? "scale" : "B");
    p[i] = t.data<float>();
  }
  const double eps = node.attr_f("epsilon", 1e-5f);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t ng = 0; ng < N * G; ++ng) {
    const float* xg = xp + ng * len;
    double mean = 0, var = 0;
    for (int64_t k = 0; k < len; ++k) mean += xg[k];
    mean /= double(len);
    for (int64_t k = 0; k < len; ++k) var += (xg[k] - mean) * (xg[k] - mean);
    const double rstd = 1 / std::sqrt(var / double(len) + eps);
    for (int64_t k = 0; k < len; ++k) {
      const int64_t c = (ng % G) * (C / G) + k / inner;
      yp[ng * len + k] = float((xg[k] - mean) * rstd * p[0][c] + p[1][c]);
    }
  }
  const Epilogue epilogue(node, in, int(node.inputs.size()), y);  // a fused activation
  if (!epilogue.empty()) epilogue.apply_row(yp, y.numel(), 0, 0, 0);
}

// LRN: y = x / (bias + alpha / size * sum of x^2 over channels [c - lo, c - lo + size - 1]
// clipped to [0, C))^beta, in double; lo = window_lo, ONNX's floor((size - 1) / 2) by default.
void lrn(const Node& node, const Inputs& in, const Outputs& out) {
  const auto [xt, yt] = channel_io(node, in, out);
  const Tensor& x = *xt;
  Tensor& y = *yt;
  const int64_t size = node.attr_i("size", 0);
  if (size < 1) node.fail(Code::invalid_model, "attribute 'size' is not >= 1");
  const int64_t N = x.shape()[0], C = x.shape()[1], inner = prod(x.shape(), 2, x.shape().size());
  const int64_t lo = node.attr_i("window_lo", (size - 1) / 2), hi = size - 1 - lo;
  if (lo < 0 || hi < 0) node.fail(Code::invalid_model, "window_lo is outside [0, size)");
  const double alpha = node.attr_f("alpha", 1e-4f), beta = node.attr_f("beta", 0.75f),
               bias = node.attr_f("bias", 1.f);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        double sum = 0;
        for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
          const double v = xp[(n * C + k) * inner + i];
          sum += v * v;
        }
        const int64_t at = (n * C + c) * inner + i;
        yp[at] = float(xp[at] / std::pow(bias + alpha / double(size) * sum, beta));
      }
}

}  // namespace kiln::ref
