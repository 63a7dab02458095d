// The kiln::Error a callable throws, for tests of error paths.
#pragma once

#include <doctest/doctest.h>

#include "graph/error.h"

namespace kiln::test {

// Runs `f` and returns the Error it throws (fails the test if it throws nothing).
template <class F>
Error error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected a kiln::Error");
  return Error(Code::ok, "");
}

}  // namespace kiln::test
