// Inference-mode BatchNormalization over channel dim 1.
#include <cmath>

#include "runtime/ref/ref_common.h"

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
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      // y = scale * (x - mean) / sqrt(var + eps) + B, evaluated in double.
      const double a = double(p[0][c]) / std::sqrt(double(p[3][c]) + eps);
      const double mean = p[2][c], bias = p[1][c];
      const int64_t base = (n * C + c) * inner;
      for (int64_t i = 0; i < inner; ++i) yp[base + i] = float((xp[base + i] - mean) * a + bias);
    }
}

}  // namespace kiln::ref
