// ScatterND / ScatterElements: what an update does to the element it lands on (the node's
// `reduction`). Shared by the reference kernels (runtime/ref) and the glue kernel
// (jit/glue/scatter.cpp): the same arithmetic, the same bits.
#pragma once

#include <algorithm>

namespace kiln {

enum class Reduction { none, add, mul, max, min };

template <class T>
T scatter_reduce(Reduction r, T dst, T u) {
  switch (r) {
    case Reduction::add:
      return T(dst + u);
    case Reduction::mul:
      return T(dst * u);
    case Reduction::max:
      return std::max(dst, u);
    case Reduction::min:
      return std::min(dst, u);
    default:
      return u;
  }
}

}  // namespace kiln
