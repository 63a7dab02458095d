// The name of a value of a contiguous enum (0..N-1 in declaration order), from one table per
// enum instead of one switch each. Out-of-range values are named "?".
#pragma once

#include <cstddef>

namespace kiln {

template <class E, size_t N>
const char* enum_name(E e, const char* const (&names)[N]) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : "?";
}

}  // namespace kiln
