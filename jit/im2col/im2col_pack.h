// Plain C++ packing of the im2col family: the per-tile patch matrices (run time) and the
// weights / bias in the microkernel's layout (creation time). See im2col_conf.h.
#pragma once

#include <cstdint>

#include "jit/im2col/im2col_conf.h"
#include "jit/pack.h"

namespace kiln::im2col {

// NHWC im2row: rows [pix0, pix0 + npix) of one image's patch matrix, row r at out + r * lda,
// columns (kh, kw, icg); taps in the padding are zeros. `src` is the image (ih x iw x ic) at
// the conv group's first channel.
void pack_rows_nhwc(const Im2colConf& c, const float* src, int64_t pix0, int64_t npix, float* out);

// NCHW im2col: columns [pix0, pix0 + npix) of one image's [K x pixels] matrix, K = (ic, kh, kw),
// row k at out + k * ldb; the microkernel reads panels of nr * simd columns of it. Lanes past
// npix in the last vector are zeros. `src` is the image (ic x ih x iw).
void pack_cols_nchw(const Im2colConf& c, const float* src, int64_t pix0, int64_t npix, float* out);

// Weights [OC, IC / groups, KH, KW] -> NHWC B: per conv group (conv_group_floats apart), per
// column group g, [K][nhwc_group_ldb(g)] with K in (kh, kw, icg) order, columns past the conv
// group's oc zero. Returns floats written (out may be null to size).
int64_t pack_weights_nhwc(const Im2colConf& c, ModelFloats w, float* out);

// Conv group cg's column group g of that, at out (nhwc_part_offset floats into the whole).
void pack_weights_nhwc_part(const Im2colConf& c, ModelFloats w, int64_t cg, int64_t g, float* out);
int64_t nhwc_part_offset(const Im2colConf& c, int64_t cg, int64_t g);

// Weights -> NCHW A: [OC][lda], the ONNX order per row, padding zero. Returns floats written
// (out may be null to size); _rows writes rows [oc0, oc1) of it.
int64_t pack_weights_nchw(const Im2colConf& c, ModelFloats w, float* out);
void pack_weights_nchw_rows(const Im2colConf& c, ModelFloats w, int64_t oc0, int64_t oc1,
                            float* out);

// [OC] -> [OC][simd] (each value repeated across a vector), for NCHW's per-row operands.
void expand_rows(const float* v, int64_t oc, int simd, float* out);

}  // namespace kiln::im2col
