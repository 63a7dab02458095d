// One oneTBB task_arena per thread count, shared by every session of the process and never
// destroyed.
//
// Why shared: oneTBB 2021.8 (Debian 12) keeps memory of every arena whose tasks ran on its
// workers: creating an arena of 2, running one task group in it and destroying it, 20,000
// times, grew the process by 130 MiB (~7 KiB each, without bound). A session made three such
// arenas (executor, profiler, kernel building), so a host loading sessions in a loop grew by
// ~15 KiB per load (bench/soak). Concurrent runs of one session always shared its arena;
// sessions of the same thread count now share theirs the same way.
#pragma once

#include <tbb/task_arena.h>

namespace kiln {

// The process's arena of `threads` (>= 2) slots, created and initialized on first use.
tbb::task_arena& shared_arena(int threads);

}  // namespace kiln
