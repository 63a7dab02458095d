// Shared by the libFuzzer harnesses: a quiet, sandboxed process and the rule for what counts
// as a bug. Kiln must reject any hostile model with a kiln::Error of a meaningful code; an
// internal error, any other exception, a crash, a sanitizer report or a hang is a finding.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "graph/error.h"

namespace kiln::fuzz {

// Largest model a harness looks at: the seeds are <= 28 KB, and bigger inputs only slow the
// fuzzer down (size limits themselves are covered by tests/graph/test_limits.cpp).
constexpr size_t kMaxModelBytes = size_t(1) << 18;

// libFuzzer reads its arguments after LLVMFuzzerInitialize: corpus folders and path flags
// given relative to the starting folder are made absolute before init_process() moves away.
inline void absolutize_paths(int* argc, char*** argv) {
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return;
  static const char* const path_flags[] = {
      "-artifact_prefix=",    "-exact_artifact_path=", "-dict=",
      "-merge_control_file=", "-features_dir=",        "-create_missing_dirs="};
  for (int i = 1; i < *argc; ++i) {
    std::string arg = (*argv)[i], prefix;
    if (arg.empty()) continue;
    if (arg[0] == '-') {
      for (const char* f : path_flags)
        if (arg.rfind(f, 0) == 0) prefix = f;
      if (prefix.empty() || prefix == "-create_missing_dirs=") continue;
    }
    std::string path = arg.substr(prefix.size());
    if (path.empty() || path[0] == '/') continue;
    // Leaked on purpose: argv strings must outlive the fuzzer.
    (*argv)[i] = strdup((prefix + cwd + "/" + path).c_str());
  }
}

// Called once from LLVMFuzzerInitialize. Logging off; no feature that writes files (JIT dumps,
// perf maps) may be enabled from the environment; the working directory becomes a fresh
// private temporary folder, so even a stray relative-path write stays inside it.
inline void init_process(int* argc, char*** argv) {
  absolutize_paths(argc, argv);
  // -fork, -jobs and -merge re-run argv[0], which libFuzzer does not let us rewrite: with a
  // relative program path, stay in the starting folder (scripts pass an absolute path).
  bool reruns = false;
  for (int i = 1; i < *argc; ++i)
    for (const char* f : {"-fork=", "-jobs=", "-workers=", "-merge="})
      if (std::strncmp((*argv)[i], f, std::strlen(f)) == 0) reruns = true;
  const bool stay = reruns && (*argv)[0][0] != '/';
  setenv("KILN_LOG_LEVEL", "off", 1);
  unsetenv("KILN_JIT_DUMP");
  unsetenv("KILN_PERF_MAP");
  const char* tmp = std::getenv("TMPDIR");
  static std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-fuzz-XXXXXX";
  if (stay) return;
  if (!mkdtemp(dir.data()) || chdir(dir.c_str()) != 0) {
    std::perror("kiln fuzz: cannot enter a private temporary folder");
    std::abort();
  }
  // Removed at exit when still empty (nothing is ever written there).
  std::atexit([] { rmdir(dir.c_str()); });
}

[[noreturn]] inline void bug(const char* what, const char* msg) {
  std::fprintf(stderr, "\n*** KILN FUZZ FINDING: %s: %s\n", what, msg);
  std::fflush(stderr);
  std::abort();
}

// Runs `body`; an expected rejection (kiln::Error with a code other than internal) is fine,
// everything else aborts so libFuzzer records the input.
template <class F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.code() == Code::internal) bug("internal error", e.what());
  } catch (const std::bad_alloc&) {
    bug("std::bad_alloc", "an allocation limit is missing");
  } catch (const std::exception& e) {
    bug("unexpected exception", e.what());
  } catch (...) {
    bug("unexpected exception", "not a std::exception");
  }
}

}  // namespace kiln::fuzz
