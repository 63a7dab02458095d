// IEEE binary16 (ONNX FLOAT16), bfloat16 and float64 <-> float32 conversions. Kiln computes in
// float32: 16-bit initializers, inputs and outputs are widened at load (graph/onnx_import.cpp)
// and narrowing rounds to nearest even, as a Cast to float16 must; float64 ones (PyTorch writes
// them for Python float arithmetic on traced sizes) are narrowed to float32.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln {

// Rounded to nearest; beyond float32's range gives +-infinity (a plain cast would be undefined
// behaviour there), NaN stays NaN.
inline float double_to_float(double d) {
  constexpr double kMax = double(std::numeric_limits<float>::max());
  if (std::isnan(d)) return std::numeric_limits<float>::quiet_NaN();
  if (d > kMax || d < -kMax) {
    // Less than half an ulp (2^103) above FLT_MAX rounds down to it, as the hardware does.
    if (std::fabs(d) < kMax + 0x1p103)
      return d > 0 ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::max();
    return d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return float(d);
}

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Exact: every binary16 value (subnormals, infinities, NaN payloads) is a float32 value.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return bits_to_float(sign);  // +-0
  // Subnormal: value = man * 2^-24, normalised into float32's range.
  int e = -1;
  do {
    man <<= 1;
    ++e;
  } while (!(man & 0x400));
  return bits_to_float(sign | uint32_t(112 - e) << 23 | ((man & 0x3ff) << 13));
}

// Round to nearest even; overflow gives infinity, NaN stays NaN (quiet).
inline uint16_t float_to_half(float f) {
  const uint32_t b = float_to_bits(f);
  const uint16_t sign = uint16_t((b >> 16) & 0x8000);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds past 65504
  if (abs < 0x38800000u) {                       // below 2^-14: a subnormal half (or 0)
    // Adding 0.5 (2^-1) aligns the half-subnormal ulp (2^-24) with float32's ulp of 0.5..1,
    // so the FPU's own round-to-nearest-even does the rounding.
    const float r = bits_to_float(abs) + 0.5f;
    return sign | uint16_t(float_to_bits(r) - 0x3f000000u);
  }
  const uint32_t odd = (abs >> 13) & 1;
  return sign | uint16_t((abs + 0xc8000fffu + odd) >> 13);  // rebias 127 -> 15 and round
}

// bfloat16 is float32's upper half.
inline float bf16_to_float(uint16_t h) {
  return bits_to_float(uint32_t(h) << 16);
}

// Round to nearest even, as vcvtneps2bf16 does (NaN stays a quiet NaN; overflow gives infinity).
// Unlike that instruction it keeps bf16 subnormals: vcvtneps2bf16 flushes them (and float32
// subnormal inputs) to zero, which kernel tests allow for.
inline uint16_t float_to_bf16(float f) {
  const uint32_t b = float_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
  return uint16_t((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

}  // namespace kiln
