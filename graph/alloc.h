#pragma once

#include <cstddef>
#include <memory>

namespace kiln {

// A zero-filled, 64-byte aligned buffer of `bytes` (at least 64), freed when the last owner
// goes. From 64 KiB (packed weights, arenas) the buffer is a mapping that, once freed, is
// kept for a later load of the same model; from 2 MiB it is 2 MiB-aligned and marked for
// transparent huge pages (graph/alloc.cpp says why).
std::shared_ptr<void> alloc_zeroed(size_t bytes);

// Bytes of freed large buffers kept for reuse (tests; at most kKeptBytes).
size_t kept_buffer_bytes();
constexpr size_t kKeptBytes = size_t(64) << 20;

}  // namespace kiln
