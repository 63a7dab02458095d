// Debian's libasmjit-dev ships only a static, non-PIC libasmjit.a. Every member links into
// libkiln.so except globals.cpp.o, whose stderr access is a non-PIC relocation. Defining its
// three functions here keeps the linker from extracting that member at all.
#include <asmjit/core.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace asmjit {
inline namespace _abi_1_9 {
namespace DebugUtils {

const char* errorAsString(Error err) noexcept {
  // Kiln reports asmjit failures with its own context (kernel and step); the code is enough.
  // One immutable string per code, written once (callers copy it at once).
  constexpr unsigned kCodes = 256;
  struct Table {
    char s[kCodes + 1][32];
    Table() {
      for (unsigned i = 0; i < kCodes; ++i) std::snprintf(s[i], sizeof s[i], "asmjit error %u", i);
      std::snprintf(s[kCodes], sizeof s[kCodes], "asmjit error >= %u", kCodes);
    }
  };
  static const Table t;
  return t.s[std::min<unsigned>(unsigned(err), kCodes)];
}

void debugOutput(const char* str) noexcept {
  std::fputs(str, stderr);
}

void assertionFailed(const char* file, int line, const char* msg) noexcept {
  // Only reachable from asmjit's internal assertions (disabled in release builds).
  std::fprintf(stderr, "asmjit assertion failed at %s:%d: %s\n", file, line, msg);
  std::abort();
}

}  // namespace DebugUtils
}  // namespace _abi_1_9
}  // namespace asmjit
