// Plain C++ kernels the plan uses where no generated one applies: any op through its reference
// kernel, and fallbacks for the generated glue kernels (jit/glue/glue.h) - layout conversion,
// pooling and concat on blocked layouts. Each fallback runs only when its generated kernel
// refuses the problem; tests/runtime/test_glue_fallbacks.cpp checks all three against the
// reference kernels / convert_layout.
#pragma once

#include <memory>
#include <vector>

#include "graph/ir.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

// Runs `node` through its reference kernel. Inputs/outputs are viewed with the given shapes
// and dtypes (normally the values' own; a flat [elems] view lets elementwise ops run on a
// blocked buffer unchanged). One tile.
std::unique_ptr<Kernel> make_ref_kernel(const Node& node, std::vector<Shape> in_shapes,
                                        std::vector<DType> in_types, std::vector<Shape> out_shapes,
                                        std::vector<DType> out_types);

// Layout conversion of a 4-D f32 tensor (convert_layout per image); tiles over the batch.
// Fallback for create_reorder_kernel in the plan (runtime/plan.cpp) and the profiler's
// conversion timings: on the scalar ISA and reference plans (no JIT), and where the generated
// reorder refuses (an empty dimension, offsets beyond 32 bits).
// (q: the value's grid where a side is nChw16c_u8.)
std::unique_ptr<Kernel> make_reorder_kernel(const Shape& nchw, Layout from, Layout to,
                                            const U8Quant* q = nullptr);

// MaxPool / AveragePool (explicit attrs), GlobalAveragePool / GlobalMaxPool on a blocked
// layout (both src and dst in `l`; nChw16c_bf16, and nChw16c_u8 for MaxPool only). Returns
// nullptr if the node is not one of those.
// Fallback for create_pool_kernel in a pool label on a blocked layout (runtime/labels.cpp)
// where the generated kernel refuses: a window whose reach does not fit 32-bit displacements
// (strides, pads or dilations in the billions; found by fuzz_session), too many border
// columns to unroll.
std::unique_ptr<Kernel> make_blocked_pool_kernel(const Node& node, const Shape& src,
                                                 const Shape& dst, Layout l);

// Concat along channels in a blocked layout; every input's channel count must be a multiple of
// the block (checked by the caller with concat_blocked_ok). Fallback for create_concat_kernel
// in a concat label on a blocked layout (runtime/labels.cpp) where the generated kernel
// refuses: an empty output, or an image too large for 32-bit offsets.
bool concat_blocked_ok(const std::vector<Shape>& srcs, Layout l);
std::unique_ptr<Kernel> make_blocked_concat_kernel(const std::vector<Shape>& srcs, Layout l);

}  // namespace kiln
