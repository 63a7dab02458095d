// ScatterND / ScatterElements: what an update does to the element it lands on (the node's
// `reduction`). Shared by the reference kernels (runtime/ref) and the glue kernel
// (jit/glue/scatter.cpp): the same arithmetic, the same bits.
#pragma once

#include <algorithm>
#include <optional>
#include <string>

namespace kiln {

enum class Reduction { none, add, mul, max, min };

// The node's `reduction` attribute by name; nothing for an unknown one.
inline std::optional<Reduction> parse_reduction(const std::string& name) {
  const char* names[] = {"none", "add", "mul", "max", "min"};  // (Reduction's order)
  for (int i = 0; i < 5; ++i)
    if (name == names[i]) return Reduction(i);
  return std::nullopt;
}

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
