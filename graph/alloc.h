#pragma once

#include <cstddef>
#include <memory>

namespace kiln {

// A zero-filled, 64-byte aligned buffer of `bytes` (at least 64), freed when the last owner
// goes. From 64 KiB (packed weights, arenas) the buffer is a mapping that, once freed, is
// kept for a later load of the same model; from 2 MiB it is 2 MiB-aligned and marked for
// transparent huge pages (graph/alloc.cpp says why).
std::shared_ptr<void> alloc_zeroed(size_t bytes);

// Bytes of freed large buffers kept for reuse (tests): at most kept_limit().
size_t kept_buffer_bytes();
// How much freed memory is kept: $KILN_KEEP_MIB MiB (0: none), by default kDefaultKeptBytes.
size_t kept_limit();
constexpr size_t kDefaultKeptBytes = size_t(256) << 20;
// Bytes of large buffers handed out since the process started: fresh mappings and kept ones
// reused (load logs, tests).
struct AllocStats {
  size_t fresh = 0, reused = 0;
};
AllocStats alloc_stats();

// Whether fresh mappings from 2 MiB ask for huge pages before they are populated (see
// graph/alloc.cpp): KILN_HUGE_PAGES=1 / 0, else yes until a populate was slow.
bool huge_pages_eager();
// A populate of `bytes` that took `ms` is slow: several times what populating 4 KiB pages
// costs even on a busy host (where fresh memory of either size pays the hypervisor's backing;
// bench/NOTES.md, "Huge pages by default"), i.e. the guest stalled compacting memory for huge
// pages.
constexpr double kSlowHugeMsPerMiB = 10.0;
bool huge_pages_slow(size_t bytes, double ms);

}  // namespace kiln
