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
// AVX512-BF16 and the session's precision allows bf16). Every other layout holds f32.
enum class Layout : int { nchw = 0, nhwc = 1, nChw8c = 2, nChw16c = 3, nChw16c_bf16 = 4 };
constexpr int kNumLayouts = 5;

const char* layout_name(Layout l);  // "nchw", "nhwc", "nChw8c", "nChw16c", "nChw16c_bf16"
inline int layout_block(Layout l) {
  return l == Layout::nChw16c || l == Layout::nChw16c_bf16 ? 16 : l == Layout::nChw8c ? 8 : 1;
}
inline bool layout_bf16(Layout l) {
  return l == Layout::nChw16c_bf16;
}
// Whether a conversion between a and b goes through nChw16c: bf16 converts directly (a flat,
// vectorised pass) only to and from nChw16c; the plan and the solver's prices chain the rest
// through it (its kernels are the vectorised f32 reorders).
inline bool layout_via_nChw16c(Layout a, Layout b) {
  return a != b && (layout_bf16(a) || layout_bf16(b)) && a != Layout::nChw16c &&
         b != Layout::nChw16c;
}
// Bytes per element of an f32 tensor's activations stored in layout l.
inline int layout_esize(Layout l) {
  return layout_bf16(l) ? 2 : 4;
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

// Plain C++ conversion between any two layouts (same logical shape); blocked destinations get
// zeroed pad lanes; a bf16 source is widened exactly, a bf16 destination rounded to nearest
// even (src / dst point to floats or, in a bf16 layout, to uint16_t elements). Plans convert with
// the generated reorder kernels (jit/glue/glue.h); this runs only inside the C++ fallback reorder
// (runtime/glue_kernels.h, make_reorder_kernel), and tests use it as the reference the generated
// kernels are checked against (tests/jit/test_glue).
void convert_layout(const void* src, Layout from, void* dst, Layout to, const Shape& nchw);

}  // namespace kiln
