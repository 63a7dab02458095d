// Data layouts of 4-D activations. Logical shape is always NCHW; the layout says how it is
// stored. Blocked layouts store channels in blocks of 8 or 16 with the block innermost and
// the channel count padded up to a whole block; padded lanes hold unspecified (finite)
// values, and every kernel ignores them (reads only real channels or multiplies them by
// zero-padded weights).
#pragma once

#include <cstdint>

#include "graph/ir.h"
#include "jit/cpu.h"

namespace kiln {

// nChw16c_bf16: nChw16c with bfloat16 elements (precision is part of the layout, so the solver
// prices a precision change like any layout conversion; offered only where the CPU has
// AVX512-BF16 and the session's precision allows bf16).
// nChw16c_u8: nChw16c holding the uint8 integers q of a value that is a QuantizeDequantize
// output (x = (q - zero) * scale exactly; runtime/int8_conv.h u8_value), for int8 convs of QDQ
// models to read and write a quarter of the bytes; converting it needs the value's scale and
// zero point. Every other layout holds f32.
enum class Layout : int {
  nchw = 0,
  nhwc = 1,
  nChw8c = 2,
  nChw16c = 3,
  nChw16c_bf16 = 4,
  nChw16c_u8 = 5
};
constexpr int kNumLayouts = 6;

// "nchw", "nhwc", "nChw8c", "nChw16c", "nChw16c_bf16", "nChw16c_u8"
const char* layout_name(Layout l);
inline int layout_block(Layout l) {
  return l == Layout::nChw16c || l == Layout::nChw16c_bf16 || l == Layout::nChw16c_u8 ? 16
         : l == Layout::nChw8c                                                        ? 8
                                                                                      : 1;
}
inline bool layout_bf16(Layout l) {
  return l == Layout::nChw16c_bf16;
}
inline bool layout_u8(Layout l) {
  return l == Layout::nChw16c_u8;
}
// Whether a conversion between a and b goes through nChw16c: bf16 and u8 convert directly (a
// flat, vectorised pass) only to and from nChw16c, and nchw to bf16 (a network's input, in
// the transpose); the plan and the solver's prices chain the rest through nChw16c (its kernels
// are the vectorised f32 reorders).
inline bool layout_via_nChw16c(Layout a, Layout b) {
  auto narrow = [](Layout l) { return layout_bf16(l) || layout_u8(l); };
  return a != b && (narrow(a) || narrow(b)) && a != Layout::nChw16c && b != Layout::nChw16c &&
         !(a == Layout::nchw && b == Layout::nChw16c_bf16);
}
// How layout l stores an f32 tensor's elements, as kernel names say it: "f32", "bf16", "u8".
inline const char* layout_elem_name(Layout l) {
  return layout_bf16(l) ? "bf16" : layout_u8(l) ? "u8" : "f32";
}
// Bytes per element of an f32 tensor's activations stored in layout l.
inline int layout_esize(Layout l) {
  return layout_bf16(l) ? 2 : layout_u8(l) ? 1 : 4;
}
inline int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}
// The blocked layout of an ISA's vector width: nChw16c (avx512), nChw8c (avx2 and below).
inline Layout blocked_layout(Isa isa) {
  return isa == Isa::avx512 ? Layout::nChw16c : Layout::nChw8c;
}

// Elements a 4-D tensor of logical shape [n, c, h, w] occupies in layout `l`, and their bytes.
int64_t layout_elems(Layout l, const Shape& nchw);
inline int64_t layout_bytes(Layout l, const Shape& nchw) {
  return layout_elems(l, nchw) * layout_esize(l);
}

// Element offset of logical (n, c, h, w) in layout `l` for a tensor of logical shape `nchw`.
int64_t layout_offset(Layout l, const Shape& nchw, int64_t n, int64_t c, int64_t h, int64_t w);

// The uint8 grid of a value held in nChw16c_u8: x = (q - zero) * scale.
struct U8Quant {
  float scale = 1, zero = 0;
};

// Plain C++ conversion between any two layouts (same logical shape); blocked destinations get
// zeroed pad lanes (u8: the zero point); a bf16 source is widened exactly, a bf16 destination
// rounded to nearest even; a u8 side is (de)quantized with `q` (graph/quant.h; required then)
// (src / dst point to floats or, in a bf16 / u8 layout, to uint16_t / uint8_t elements). Plans
// convert with the generated reorder kernels (jit/glue/glue.h); this runs only inside the C++
// fallback reorder (runtime/glue_kernels.h, make_reorder_kernel), and tests use it as the reference
// the generated kernels are checked against (tests/jit/test_glue).
void convert_layout(const void* src, Layout from, void* dst, Layout to, const Shape& nchw,
                    const U8Quant* q = nullptr);

}  // namespace kiln
