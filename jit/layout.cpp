#include "jit/layout.h"

#include <cstring>

#include "graph/enum_name.h"
#include "graph/error.h"
#include "graph/half.h"
#include "graph/quant.h"

namespace kiln {

const char* layout_name(Layout l) {
  static const char* const kNames[] = {"nchw",    "nhwc",         "nChw8c",
                                       "nChw16c", "nChw16c_bf16", "nChw16c_u8"};
  return enum_name(l, kNames);
}

int64_t layout_elems(Layout l, const Shape& s) {
  return s[0] * round_up(s[1], layout_block(l)) * s[2] * s[3];
}

int64_t layout_offset(Layout l, const Shape& s, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t C = s[1], H = s[2], W = s[3];
  switch (l) {
    case Layout::nchw:
      return ((n * C + c) * H + h) * W + w;
    case Layout::nhwc:
      return ((n * H + h) * W + w) * C + c;
    default: {
      const int64_t b = layout_block(l), cb = round_up(C, b) / b;
      return (((n * cb + c / b) * H + h) * W + w) * b + c % b;
    }
  }
}

void convert_layout(const void* src, Layout from, void* dst, Layout to, const Shape& s,
                    const U8Quant* q) {
  if (from == to) {
    std::memcpy(dst, src, size_t(layout_bytes(from, s)));
    return;
  }
  if ((layout_u8(from) || layout_u8(to)) && !q)
    fail(Code::internal, "a uint8 layout converts only with its value's scale and zero point");
  auto get = [&](int64_t i) {
    return layout_bf16(from) ? bf16_to_float(static_cast<const uint16_t*>(src)[i])
           : layout_u8(from)
               ? dequantize_value(static_cast<const uint8_t*>(src)[i], q->scale, q->zero)
               : static_cast<const float*>(src)[i];
  };
  auto put = [&](int64_t i, float v) {
    if (layout_bf16(to))
      static_cast<uint16_t*>(dst)[i] = float_to_bf16(v);
    else if (layout_u8(to))
      static_cast<uint8_t*>(dst)[i] =
          uint8_t(quantize_value(v, q->scale, q->zero, quant_range(kOnnxUint8)));
    else
      static_cast<float*>(dst)[i] = v;
  };
  const float pad_u8 = q ? dequantize_value(q->zero, q->scale, q->zero) : 0.f;  // 0 -> zero
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  const int64_t padded = round_up(C, layout_block(to));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < padded; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          put(layout_offset(to, s, n, c, h, w),  // zero the pad lanes
              c < C           ? get(layout_offset(from, s, n, c, h, w))
              : layout_u8(to) ? pad_u8
                              : 0.f);
}

}  // namespace kiln
