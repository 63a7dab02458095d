#include "graph/env.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <optional>

namespace kiln {
namespace {

constexpr const char* kNames[] = {
    "KILN_LOG_LEVEL", "KILN_MAX_ISA",      "KILN_CACHE_DIR", "XDG_CACHE_HOME",
    "HOME",           "KILN_COLD_WEIGHTS", "KILN_FLOW",      "KILN_HUGE_PAGES",
    "KILN_KEEP_MIB",  "KILN_JIT_DUMP",     "KILN_PERF_MAP",  "KILN_JIT_LOG"};
static_assert(sizeof kNames / sizeof kNames[0] == size_t(EnvVar::count));

struct Snapshot {
  std::mutex mu;
  bool taken = false;
  std::array<std::optional<std::string>, size_t(EnvVar::count)> values;

  void take_locked() {
    for (size_t i = 0; i < values.size(); ++i) {
      const char* v = std::getenv(kNames[i]);
      values[i] = v ? std::optional<std::string>(v) : std::nullopt;
    }
    taken = true;
  }
  std::optional<std::string> get(EnvVar v) {
    std::lock_guard<std::mutex> lock(mu);
    if (!taken) take_locked();
    return values[size_t(v)];
  }
};

// Never destroyed: readable from other static destructors at exit.
Snapshot& snapshot() {
  static Snapshot* s = new Snapshot;
  return *s;
}

}  // namespace

std::string env_value(EnvVar v) {
  return snapshot().get(v).value_or(std::string());
}

bool env_set(EnvVar v) {
  return snapshot().get(v).has_value();
}

void snapshot_env() {
  Snapshot& s = snapshot();
  std::lock_guard<std::mutex> lock(s.mu);
  s.take_locked();
}

}  // namespace kiln
