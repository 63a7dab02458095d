// Kernels the plan uses besides the JIT conv families: any op through its reference kernel,
// layout conversions, and plain C++ pooling / concat on blocked layouts (the JIT-algorithms
// issue replaces the latter two with generated glue kernels).
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

// Layout conversion of a 4-D f32 tensor; tiles over the batch.
std::unique_ptr<Kernel> make_reorder_kernel(const Shape& nchw, Layout from, Layout to);

// MaxPool / AveragePool (explicit attrs), GlobalAveragePool / GlobalMaxPool on a blocked
// layout (both src and dst in `l`). Returns nullptr if the node is not one of those.
std::unique_ptr<Kernel> make_blocked_pool_kernel(const Node& node, const Shape& src,
                                                 const Shape& dst, Layout l);

// Concat along channels in a blocked layout; every input's channel count must be a multiple of
// the block (checked by the caller with concat_blocked_ok).
bool concat_blocked_ok(const std::vector<Shape>& srcs, Layout l);
std::unique_ptr<Kernel> make_blocked_concat_kernel(const std::vector<Shape>& srcs, Layout l);

}  // namespace kiln
