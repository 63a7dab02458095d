// Running a kernel next to PROT_NONE guard pages: whether it completed or faulted (SIGSEGV is
// caught for the duration of the call and turned into `false`).
#pragma once

#include <setjmp.h>
#include <signal.h>

namespace kiln::test {

inline sigjmp_buf& segv_jmp() {
  static sigjmp_buf b;
  return b;
}

inline void on_segv(int) {
  siglongjmp(segv_jmp(), 1);
}

// Calls f(); false if it faulted.
template <class F>
bool runs_without_segv(F&& f) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = on_segv;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &sa, &old);
  bool ok = true;
  if (sigsetjmp(segv_jmp(), 1) == 0)
    f();
  else
    ok = false;
  sigaction(SIGSEGV, &old, nullptr);
  return ok;
}

}  // namespace kiln::test
