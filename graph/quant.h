// ONNX's linear quantization, the one scalar definition every kernel matches (reference
// QuantizeLinear / DequantizeLinear, the fused QuantizeDequantize and its glue post-op).
// Quantized values are kept in float32 (graph/import_qdq.h): all of them are exact there.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kiln {

// ONNX type codes of the integer types Kiln quantizes to.
constexpr int64_t kOnnxUint8 = 2, kOnnxInt8 = 3;

struct QuantRange {
  float lo, hi;
};
inline QuantRange quant_range(int64_t onnx_type) {
  return onnx_type == kOnnxInt8 ? QuantRange{-128.f, 127.f} : QuantRange{0.f, 255.f};
}

// saturate(round_half_even(x / scale) + zero_point). NaN stays NaN (no integer holds it;
// every kernel passes it through alike).
inline float quantize_value(float x, float scale, float zero_point, QuantRange r) {
  return std::min(std::max(std::nearbyint(x / scale) + zero_point, r.lo), r.hi);
}
inline float dequantize_value(float q, float scale, float zero_point) {
  return (q - zero_point) * scale;
}

}  // namespace kiln
