// The static memory plan (pipeline step 6): every arena tensor of a Plan gets an offset from
// liveness in step order (tensors whose lifetimes overlap never share bytes), and every step
// gets its dependencies: producers of its inputs plus earlier users of the bytes it reuses.
#pragma once

#include "runtime/plan.h"

namespace kiln {

// Places tensors with offset == -2 in the arena (sets Plan::arena_bytes, naive_bytes) and
// fills Step::deps. Tensors with offset -1 (constants, graph inputs/outputs) are external.
void plan_memory(Plan* plan);

}  // namespace kiln
