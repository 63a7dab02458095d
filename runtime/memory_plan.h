// The static memory plan (pipeline step 6): every arena tensor of a Plan gets an offset from
// liveness in step order (tensors whose lifetimes overlap never share bytes), and every step
// gets its dependencies: producers of its inputs plus earlier users of the bytes it reuses.
#pragma once

#include "runtime/plan.h"

namespace kiln {

// Places tensors with offset == -2 in the arena (sets Plan::arena_bytes, naive_bytes), fills
// Step::deps and sets Plan::scratch_bytes from the steps' kernels. Tensors with offset -1
// (constants, graph inputs/outputs) are external. A view (parent >= 0) gets no bytes of its own
// whatever its offset was: it gets its root's offset + its place in the root, or -1 if the root is
// external (the executor then points it into the root's buffer); the root stays alive while any of
// its views is used (a root whose view is a graph output, copied out after the run, until the
// end), and writing a view counts as writing those bytes of the root, except for a step without
// tiles (a view node: it writes nothing). Throws
// Error(internal) on a malformed plan (view outside its parent, cycle of views, step using a tensor
// that does not exist).
void plan_memory(Plan* plan);

}  // namespace kiln
