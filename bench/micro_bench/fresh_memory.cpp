// kiln_micro_bench fresh-memory [--mb N] [--file MODEL.onnx] [--reps R]: what a load pays to
// write into memory, by where the memory comes from (graph/alloc.cpp chooses by these), and
// to read a model file mapped afresh against reading it into a reused buffer
// (graph/onnx_mmap.cpp). Medians of R repetitions, each on N MiB.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "graph/alloc.h"
#include "graph/error.h"
#include "micro_bench.h"

namespace kiln::bench {
namespace {

// Reads one byte per cache line (the sum keeps the reads).
long touch(const void* p, size_t n) {
  long s = 0;
  for (size_t i = 0; i < n; i += 64) s += static_cast<const volatile char*>(p)[i];
  return s;
}

void* map_anon(size_t n, bool huge_first) {
  constexpr size_t kHuge = size_t(2) << 20;
  char* raw = static_cast<char*>(
      ::mmap(nullptr, n + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (raw == MAP_FAILED) fail(Code::out_of_memory, "mmap failed");
  char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge);
  if (huge_first) ::madvise(p, n, MADV_HUGEPAGE);
  ::madvise(p, n, 23 /* MADV_POPULATE_WRITE */);
  return raw;
}

}  // namespace

int fresh_memory(const ModeArgs& a) {
  const size_t n = size_t(std::stod(a.get("--mb", "16")) * 1048576);
  const int reps = std::stoi(a.get("--reps", "15"));
  const size_t extra = size_t(2) << 20;
  long sink = 0;
  std::printf("writing %.1f MiB (median of %d):\n", double(n) / 1048576, reps);
  const double faulted = median_ms(reps, [&] {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::memset(p, 1, n);
    ::munmap(p, n);
  });
  const double populated = median_ms(reps, [&] {
    void* raw = map_anon(n, false);
    std::memset(static_cast<char*>(raw) + extra, 1, n - extra);
    ::munmap(raw, n + extra);
  });
  const double huge = median_ms(reps, [&] {
    void* raw = map_anon(n, true);
    std::memset(static_cast<char*>(raw) + extra, 1, n - extra);
    ::munmap(raw, n + extra);
  });
  alloc_zeroed(n).reset();  // now kept
  const double reused = median_ms(reps, [&] { std::memset(alloc_zeroed(n).get(), 1, n); });
  std::printf("  fresh 4 KiB pages, faulted by the writes       %8.2f ms\n", faulted);
  std::printf("  fresh 4 KiB pages, populated in one call first  %8.2f ms\n", populated);
  std::printf("  fresh huge pages, populated in one call first   %8.2f ms\n", huge);
  std::printf("  alloc_zeroed, a kept buffer (zeroed, written)   %8.2f ms\n", reused);
  const std::string file = a.get("--file", "");
  if (!file.empty()) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(Code::io_error, "cannot open " + file);
    const size_t size = size_t(::lseek(fd, 0, SEEK_END));
    const double mapped = median_ms(reps, [&] {
      void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      sink += touch(p, size);
      ::munmap(p, size);
    });
    alloc_zeroed(size).reset();
    const double read = median_ms(reps, [&] {
      auto buf = alloc_zeroed(size);
      if (::pread(fd, buf.get(), size, 0) != ssize_t(size)) fail(Code::io_error, "short read");
      sink += touch(buf.get(), size);
    });
    ::close(fd);
    std::printf("reading %s (%.1f MiB):\n", file.c_str(), double(size) / 1048576);
    std::printf("  mapped afresh, every line read once            %8.2f ms\n", mapped);
    std::printf("  read into a kept buffer, every line read once  %8.2f ms\n", read);
  }
  return sink == 42 ? 1 : 0;
}

}  // namespace kiln::bench
