// alloc_zeroed (graph/alloc.h): every buffer is zero-filled and 64-byte aligned; from 64 KiB a
// freed buffer is kept and handed out again (zeroed) for a request of about its size, within
// the kept_limit() bound ($KILN_KEEP_MIB); huge ones are 2 MiB-aligned.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "graph/alloc.h"
#include "graph/env.h"

namespace kiln {
namespace {

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

TEST_CASE("alloc_zeroed: zeroed, aligned, and large buffers reused zeroed") {
  for (size_t n : {size_t(1), size_t(100), size_t(4096), size_t(70000), size_t(1) << 20,
                   (size_t(3) << 20) + 5}) {
    CAPTURE(n);
    auto p = alloc_zeroed(n);
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p.get()) % 64 == 0);
    if (n >= (size_t(2) << 20))
      CHECK(reinterpret_cast<uintptr_t>(p.get()) % (size_t(2) << 20) == 0);
    CHECK(all_zero(p.get(), n));
    std::memset(p.get(), 0xab, n);  // dirty it: a reused buffer must come back zeroed
    void* first = p.get();
    p.reset();
    if (n >= (size_t(64) << 10)) CHECK(kept_buffer_bytes() >= n);
    auto q = alloc_zeroed(n);
    if (n >= (size_t(64) << 10)) CHECK(q.get() == first);  // the kept buffer, not a fresh one
    CHECK(all_zero(q.get(), n));
  }
}

TEST_CASE("alloc_zeroed: kept buffers stay within kept_limit()") {
  CHECK(kept_limit() == kDefaultKeptBytes);
  // A small bound (the variable is read at each session load; snapshot_env here).
  ::setenv("KILN_KEEP_MIB", "24", 1);
  snapshot_env();
  CHECK(kept_limit() == (size_t(24) << 20));
  std::vector<std::shared_ptr<void>> live;
  for (int i = 0; i < 40; ++i) live.push_back(alloc_zeroed(size_t(3) << 20));  // 160 MiB
  live.clear();
  CHECK(kept_buffer_bytes() <= kept_limit());
  CHECK(kept_buffer_bytes() > 0);
  // One larger than the bound is never kept.
  alloc_zeroed(kept_limit() + 1).reset();
  CHECK(kept_buffer_bytes() <= kept_limit());
  // 0 keeps nothing: the next buffer freed drops everything kept before it too.
  ::setenv("KILN_KEEP_MIB", "0", 1);
  snapshot_env();
  alloc_zeroed(size_t(1) << 20).reset();
  CHECK(kept_buffer_bytes() == 0);
  ::unsetenv("KILN_KEEP_MIB");
  snapshot_env();
  CHECK(kept_limit() == kDefaultKeptBytes);
}

// Huge pages: asked for before populating unless KILN_HUGE_PAGES=0, or (by default) once a
// populate was slower than kSlowHugeMsPerMiB; huge buffers stay zeroed and aligned either way.
TEST_CASE("alloc_zeroed: huge pages asked for up front unless told not to or found slow") {
  CHECK_FALSE(huge_pages_slow(size_t(2) << 20, 1.0));
  CHECK(huge_pages_slow(size_t(2) << 20, 2 * kSlowHugeMsPerMiB + 0.1));
  CHECK_FALSE(huge_pages_slow(size_t(64) << 20, 320.0));  // under the bound: a busy host
  CHECK(huge_pages_slow(size_t(64) << 20, 1000.0));
  for (const char* v : {"0", "1"}) {
    ::setenv("KILN_HUGE_PAGES", v, 1);
    snapshot_env();
    CHECK(huge_pages_eager() == (v[0] == '1'));
    auto p = alloc_zeroed((size_t(5) << 20) + 3);
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p.get()) % (size_t(2) << 20) == 0);
    CHECK(all_zero(p.get(), (size_t(5) << 20) + 3));
  }
  ::unsetenv("KILN_HUGE_PAGES");
  snapshot_env();
  // By default: up front, unless a populate in this process was already slow.
  MESSAGE("huge pages by default in this process: ",
          std::string(huge_pages_eager() ? "asked for up front"
                                         : "left to khugepaged (a populate was slow)"));
}

}  // namespace
}  // namespace kiln
