// doctest's main, plus the ISA-coverage report (isa_coverage.h): when every test passed but
// some wanted an ISA this CPU lacks, the binary says which and exits with kSkipExitCode.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "isa_coverage.h"

namespace kiln::testing {
namespace {
std::mutex g_mu;
std::set<std::string> g_missing;
}  // namespace

void record_missing(const char* what) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_missing.insert(what).second)
    std::fprintf(
        stderr,
        "NOT COVERED: this CPU (under KILN_MAX_ISA, if set) lacks %s; tests of that path are "
        "skipped\n",
        what);
}

}  // namespace kiln::testing

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  using namespace kiln::testing;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_missing.empty()) return 0;
  std::string list;
  for (const std::string& m : g_missing) list += (list.empty() ? "" : ", ") + m;
  std::fprintf(stderr,
               "SKIPPED: every test that ran passed, but the paths of %s could not run on this "
               "CPU (exit %d: CTest reports this test as skipped)\n",
               list.c_str(), kSkipExitCode);
  return kSkipExitCode;
}
