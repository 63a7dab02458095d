// QuantizeLinear and DequantizeLinear (graph/quant.h's definitions; quantized values are
// float32, int32 ones int64). The fused QuantizeDequantize is a glue unary op.
#include "graph/quant.h"
#include "runtime/ref/ref_common.h"

namespace kiln::ref {

namespace {

// Calls fn(i, k) for every element i of x with k the index of its scale / zero point: 0 when
// they are per-tensor, else its position along `axis`.
template <class F>
void for_each_param(const Node& node, const Tensor& x, const Tensor& scale, F&& fn) {
  const int64_t count = scale.numel();
  if (count == 1) {
    for (int64_t i = 0; i < x.numel(); ++i) fn(i, int64_t(0));
    return;
  }
  const int64_t rank = int64_t(x.shape().size());
  const int64_t axis = norm_axis(node, node.attr_i("axis", 1), rank);
  if (x.shape()[size_t(axis)] != count) node.fail(Code::internal, "scale does not match the axis");
  const int64_t inner = prod(x.shape(), size_t(axis) + 1, size_t(rank));
  for (int64_t i = 0; i < x.numel(); ++i) fn(i, (i / inner) % count);
}

float zero_point(const Tensor* zp, int64_t k) {
  if (!zp) return 0.f;
  return zp->dtype() == DType::i64 ? float(zp->data<int64_t>()[k]) : zp->data<float>()[k];
}

}  // namespace

void quantize_linear(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& scale = req_input(node, in, 1);
  const Tensor* zp = opt_input(in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, x, DType::f32, "input 0");
  expect_shape(node, y, x.shape(), "output");
  const QuantRange r = quant_range(node.attr_i("to", kOnnxUint8));
  const float* xp = x.data<float>();
  const float* sp = scale.data<float>();
  float* yp = y.data<float>();
  for_each_param(node, x, scale, [&](int64_t i, int64_t k) {
    yp[i] = quantize_value(xp[i], sp[k], zero_point(zp, k), r);
  });
}

void dequantize_linear(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& scale = req_input(node, in, 1);
  const Tensor* zp = opt_input(in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_shape(node, y, x.shape(), "output");
  expect_dtype(node, scale, DType::f32, "input 1");
  const float* sp = scale.data<float>();
  float* yp = y.data<float>();
  if (x.dtype() == DType::i64) {  // int32 data (a bias): float(x - zp) * scale, as ONNX
    const int64_t* xp = x.data<int64_t>();
    for_each_param(node, x, scale, [&](int64_t i, int64_t k) {
      const int64_t z = zp ? zp->data<int64_t>()[k] : 0;
      yp[i] = float(xp[i] - z) * sp[k];
    });
    return;
  }
  expect_dtype(node, x, DType::f32, "input 0");
  const float* xp = x.data<float>();
  for_each_param(node, x, scale, [&](int64_t i, int64_t k) {
    yp[i] = dequantize_value(xp[i], sp[k], zero_point(zp, k));
  });
}

}  // namespace kiln::ref
