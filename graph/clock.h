// The one monotonic clock Kiln times things with, and milliseconds elapsed on it.
#pragma once

#include <chrono>

namespace kiln {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace kiln
