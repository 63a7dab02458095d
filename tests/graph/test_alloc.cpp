// alloc_zeroed (graph/alloc.h): every buffer is zero-filled and 64-byte aligned; from 64 KiB a
// freed buffer is kept and handed out again (zeroed) for a request of about its size, within
// the kept_limit() bound ($KILN_KEEP_MIB); huge ones are 2 MiB-aligned.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
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

}  // namespace
}  // namespace kiln
