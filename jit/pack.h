// Weight packing: every JIT family stores its weights with the output channels innermost,
// which is a transpose of ONNX's [OC][IC][KH][KW]. Done element by element, each read lands
// IC * KH * KW floats from the previous one (a new cache line, often a new page), and packing
// dominated warm loads (a large FC's weights alone took milliseconds). These helpers walk
// tiles instead.
#pragma once

#include <cstdint>

#include "graph/half.h"
#include "graph/ir.h"

namespace kiln {

// dst[c * dst_ld + r] = alpha * src[r * src_ld + c * src_step] for r < rows, c < cols.
// Walks 16 x 16 tiles: a tile's reads stay within 16 source rows and its writes within 16
// destination rows. Elements of dst outside the rows x cols block are not touched.
void pack_transposed(ModelFloats src, int64_t src_ld, int64_t src_step, int64_t rows, int64_t cols,
                     float* dst, int64_t dst_ld, float alpha = 1.f);

// The direct family's bf16 weight block (the grouped family's too): for each kernel tap k <
// taps, pair st < steps, output vector j < ob, lane < simd and e < 2, the bf16 (rounded to
// nearest even) of w(k, oc_vector j, lane, block channel 2 st + e), written in that order at
// o; returns the end. w returns 0 where no weight exists (past ic or oc, other groups).
template <class W>
uint16_t* pack_bf16_pairs(uint16_t* o, int64_t taps, int64_t steps, int64_t ob, int64_t simd, W w) {
  for (int64_t k = 0; k < taps; ++k)
    for (int64_t st = 0; st < steps; ++st)
      for (int64_t j = 0; j < ob; ++j)
        for (int64_t lane = 0; lane < simd; ++lane)
          for (int64_t e = 0; e < 2; ++e) *o++ = float_to_bf16(w(k, j, lane, 2 * st + e));
  return o;
}

}  // namespace kiln
