// Shape inference for QuantizeLinear, DequantizeLinear and the internal QuantizeDequantize
// (a QuantizeLinear -> DequantizeLinear pair: graph/fuse_qdq.cpp).
#include <cmath>
#include <string>

#include "graph/infer_util.h"
#include "graph/quant.h"

namespace kiln::infer_detail {

namespace {

// Scale (input 1) and zero point (input 2): a scalar, or one value per slice of x along
// `axis` (made non-negative on the node). A one-element 1-D tensor is per-tensor.
void check_quant_params(Graph& g, Node& n) {
  const Value& x = input(g, n, 0);
  expect_dtype(g, n, 1, DType::f32, Code::unsupported);
  const Value& s = input(g, n, 1);
  if (s.shape.size() > 1)
    n.fail(Code::invalid_model, input_desc(g, n, 1) + " (scale) must be a scalar or 1-D");
  if (n.attr_i("block_size", 0) != 0)
    n.fail(Code::unsupported, "blocked quantization (block_size) is not supported");
  const int64_t count = s.shape.empty() ? 1 : s.shape[0];
  if (count != 1) {
    const int64_t axis = normalize_axis(n, n.attr_i("axis", 1), int64_t(x.shape.size()));
    if (x.shape[size_t(axis)] != count)
      n.fail(Code::invalid_model, input_desc(g, n, 1) + " (scale) has " + std::to_string(count) +
                                      " values but the input's dim " + std::to_string(axis) +
                                      " is " + std::to_string(x.shape[size_t(axis)]));
    n.attrs["axis"] = attr_i(axis);
  }
  if (has_input(n, 2)) {
    expect_same_dtype(g, n, n.op == "DequantizeLinear" ? 0 : 1, 2);  // x's type, widened
    if (input(g, n, 2).shape != s.shape)
      n.fail(Code::invalid_model,
             input_desc(g, n, 2) + " (zero point) must have the scale's shape");
  }
}

}  // namespace

void infer_quantize_dequantize(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  const int64_t to = n.attr_i("to", 0);
  const float scale = n.attr_f("scale", 0.f), zp = n.attr_f("zero_point", 0.f);
  const QuantRange r = quant_range(to);
  if ((to != kOnnxUint8 && to != kOnnxInt8) || !(scale > 0) || !std::isfinite(scale) ||
      !(zp >= r.lo && zp <= r.hi) || zp != std::nearbyint(zp))
    n.fail(Code::internal,
           "needs to UINT8 / INT8, a finite scale > 0 and an integer zero point "
           "in range");
  set_output(g, n, 0, DType::f32, input(g, n, 0).shape);
}

void infer_quantize(Graph& g, Node& n) {  // QuantizeLinear
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  const int64_t to = n.attr_i("to", 0);
  if (to != kOnnxUint8 && to != kOnnxInt8)
    n.fail(Code::internal, "attribute 'to' (set at import) must be UINT8 or INT8");
  // Opset 23's `precision`: the division's type (0: y_scale's, float32 here).
  if (const int64_t p = n.attr_i("precision", 0); p != 0 && p != 1)
    n.fail(Code::unsupported, "precision " + std::to_string(p) +
                                  " (a division in a type other than float32) is not supported");
  check_quant_params(g, n);
  set_output(g, n, 0, DType::f32, input(g, n, 0).shape);
}

void infer_dequantize(Graph& g, Node& n) {
  const DType t = input(g, n, 0).dtype;
  if (t != DType::f32 && t != DType::i64)
    n.fail(Code::unsupported, input_desc(g, n, 0) + " must be an integer tensor");
  check_quant_params(g, n);
  set_output(g, n, 0, DType::f32, input(g, n, 0).shape);
}

}  // namespace kiln::infer_detail
