// Every environment variable the library reads, in one place, and when: a snapshot taken at
// first use and again at the start of every session load (Session::load_*). Nothing reads
// the process environment while a session runs: a getenv racing a host thread's setenv is
// undefined behaviour, and a run must not change with the environment.
#pragma once

#include <string>

namespace kiln {

enum class EnvVar {
  log_level,       // KILN_LOG_LEVEL (runtime/log.h)
  max_isa,         // KILN_MAX_ISA (jit/cpu.h)
  cache_dir,       // KILN_CACHE_DIR, XDG_CACHE_HOME, HOME (runtime/tuning_cache.h)
  xdg_cache_home,  //
  home,            //
  cold_weights,    // KILN_COLD_WEIGHTS (runtime/selection.cpp)
  flow,            // KILN_FLOW (runtime/executor.cpp)
  huge_pages,      // KILN_HUGE_PAGES (graph/alloc.cpp)
  keep_mib,        // KILN_KEEP_MIB (graph/alloc.cpp)
  jit_dump,        // KILN_JIT_DUMP, KILN_PERF_MAP, KILN_JIT_LOG (jit/)
  perf_map,        //
  jit_log,         //
  count
};

// The variable's value in the current snapshot; "" when unset. Thread-safe.
std::string env_value(EnvVar v);
// Whether it is set (possibly to "").
bool env_set(EnvVar v);
// Reads every variable again (session loads do; tests that change the environment too).
void snapshot_env();

}  // namespace kiln
