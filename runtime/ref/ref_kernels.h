// Scalar reference kernels: simple, readable, trusted. They are the oracle every JIT kernel is
// tested against and the fallback for any op without a JIT kernel. Speed is not a goal here;
// obviously-correct loops are.
#pragma once

#include <string_view>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// Computes `node` (in its canonical form, see graph/ops.h, after shape inference) from `in`
// into the pre-allocated `out` tensors, whose shapes/dtypes are the inferred ones.
// in[i] is nullptr for an omitted optional input. Throws Error naming the node on a
// combination it cannot handle (it never reads or writes out of bounds).
using RefKernel = void (*)(const Node& node, const std::vector<const Tensor*>& in,
                           const std::vector<Tensor*>& out);

RefKernel find_ref_kernel(std::string_view op);  // nullptr if none

}  // namespace kiln
