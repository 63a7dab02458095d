// Weight packing: every JIT family stores its weights with the output channels innermost,
// which is a transpose of ONNX's [OC][IC][KH][KW]. Done element by element, each read lands
// IC * KH * KW floats from the previous one (a new cache line, often a new page), and packing
// dominated warm loads (a large FC's weights alone took milliseconds). These helpers walk
// tiles instead.
#pragma once

#include <cstdint>

namespace kiln {

// dst[c * dst_ld + r] = alpha * src[r * src_ld + c * src_step] for r < rows, c < cols.
// Walks 16 x 16 tiles: a tile's reads stay within 16 source rows and its writes within 16
// destination rows. Elements of dst outside the rows x cols block are not touched.
void pack_transposed(const float* src, int64_t src_ld, int64_t src_step, int64_t rows, int64_t cols,
                     float* dst, int64_t dst_ld, float alpha = 1.f);

}  // namespace kiln
