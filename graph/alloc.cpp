#include "graph/alloc.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>

#include "graph/clock.h"
#include "graph/env.h"
#include "graph/error.h"

namespace kiln {
namespace {

constexpr size_t kMapAt = size_t(64) << 10, kHuge = size_t(2) << 20;

// Fresh memory is what a load pays most for on virtual machines: the first touch of every
// 4 KiB page exits to the hypervisor, even when the pages were populated in one call
// (bench/NOTES.md, "fresh memory"). So buffers are reused, as malloc reuses its heap, but
// reliably (glibc gives the top of its heap back to the OS and maps big chunks afresh):
// - below 64 KiB they come from malloc;
// - from 64 KiB (packed weights, arenas) they are mappings, and a freed one is kept (up to
//   kept_limit() in all, the least recently freed dropped first) for the next request of about
//   its size: a process that creates sessions again does not fault the same weights in again.
//   The default keeps what GoogLeNet or ResNet-50 needs (75 MiB, ~200 MiB); KILN_KEEP_MIB
//   trades that for memory given back to the system.
// From 2 MiB a mapping is 2 MiB-aligned and backed by transparent huge pages where the system
// gives them: kernels streaming packed weights larger than the caches miss the TLB on every
// 4 KiB page, and in a virtual machine each miss walks two page tables (weight-heavy models ran
// much faster on huge pages: bench/NOTES.md, "Huge pages by default"). By
// default the mapping asks for huge pages before it is populated (which also populates it far
// faster) until one such populate is slow (huge_pages_slow: one development VM now and then
// stalled hundreds of ms compacting memory for them); from then on, in this process, mappings
// are only marked for khugepaged after populating, which converts them in the background.
// KILN_HUGE_PAGES=1 / 0 always / never asks first.
struct Mapping {
  void* p;
  size_t len;
};

class KeptMappings {
 public:
  // A kept mapping of at least len bytes and at most a quarter more, or none.
  Mapping take(size_t len) {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->len >= len && it->len <= len + len / 4 &&
          (best == kept_.end() || it->len < best->len))
        best = it;
    if (best == kept_.end()) return {nullptr, 0};
    Mapping m = *best;
    bytes_ -= m.len;
    kept_.erase(best);
    return m;
  }

  void give(Mapping m) {
    std::list<Mapping> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t limit = kept_limit();
      if (m.len <= limit) {
        kept_.push_back(m);
        bytes_ += m.len;
      } else {
        drop.push_back(m);
      }
      while (bytes_ > limit) {
        drop.push_back(kept_.front());
        bytes_ -= kept_.front().len;
        kept_.pop_front();
      }
    }
    for (const Mapping& d : drop) ::munmap(d.p, d.len);
  }

  size_t bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  std::mutex mu_;
  std::list<Mapping> kept_;  // oldest first
  size_t bytes_ = 0;
};

KeptMappings& kept() {
  static auto* k = new KeptMappings;  // never destroyed: buffers may be freed at exit
  return *k;
}

std::atomic<bool> g_huge_slow{false};  // a huge-page populate was slow: ask after populating

// Whether a fresh huge mapping asks for huge pages before it is populated, and whether its
// populate is timed (default mode).
struct HugeAsk {
  bool eager, timed;
};
HugeAsk huge_ask() {
  const std::string v = env_value(EnvVar::huge_pages);
  if (v == "1" || v == "0") return {v == "1", false};
  const bool eager = !g_huge_slow.load(std::memory_order_relaxed);
  return {eager, eager};
}

// A fresh mapping of len bytes (a multiple of kMapAt), its pages populated.
Mapping map_fresh(size_t len) {
  const bool huge = len >= kHuge;
  const HugeAsk ask = huge ? huge_ask() : HugeAsk{false, false};
  const size_t extra = huge ? kHuge : 0;  // room to align to 2 MiB
  void* raw =
      ::mmap(nullptr, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return {nullptr, 0};
  void* p = raw;
  if (huge) {
    const uintptr_t at = (reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge;
    const size_t head = at - reinterpret_cast<uintptr_t>(raw);
    if (head) ::munmap(raw, head);
    if (kHuge - head) ::munmap(reinterpret_cast<void*>(at + len), kHuge - head);
    p = reinterpret_cast<void*>(at);
  }
  if (ask.eager) ::madvise(p, len, MADV_HUGEPAGE);
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif
  const auto t0 = Clock::now();
  if (::madvise(p, len, MADV_POPULATE_WRITE) != 0)  // older kernels: touch every page
    for (size_t i = 0; i < len; i += 4096) static_cast<volatile char*>(p)[i] = 0;
  if (ask.timed && huge_pages_slow(len, ms_since(t0)))
    g_huge_slow.store(true, std::memory_order_relaxed);
  if (huge && !ask.eager) ::madvise(p, len, MADV_HUGEPAGE);
  return {p, len};
}

std::atomic<size_t> g_fresh{0}, g_reused{0};

std::shared_ptr<void> alloc_mapped(size_t bytes) {
  const size_t unit = bytes >= kHuge ? kHuge : kMapAt;
  const size_t len = (bytes + unit - 1) / unit * unit;
  Mapping m = kept().take(len);
  if (m.p) {
    std::memset(m.p, 0, bytes);  // fresh mappings are zero; the bytes past `bytes` are unused
    g_reused += m.len;
  } else {
    m = map_fresh(len);
    g_fresh += m.len;
  }
  if (!m.p) return nullptr;
  return std::shared_ptr<void>(m.p, [m](void*) { kept().give(m); });
}

}  // namespace

bool huge_pages_slow(size_t bytes, double ms) {
  return ms > kSlowHugeMsPerMiB * double(bytes) / double(size_t(1) << 20);
}

bool huge_pages_eager() {
  return huge_ask().eager;
}

std::shared_ptr<void> alloc_zeroed(size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  if (bytes >= kMapAt)
    if (auto p = alloc_mapped(bytes)) return p;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) fail(Code::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

AllocStats alloc_stats() {
  return {g_fresh.load(), g_reused.load()};
}

size_t kept_limit() {
  const std::string v = env_value(EnvVar::keep_mib);
  if (v.empty()) return kDefaultKeptBytes;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || mib > (size_t(1) << 30)) return kDefaultKeptBytes;
  return size_t(mib) << 20;
}

size_t kept_buffer_bytes() {
  return kept().bytes();
}

}  // namespace kiln
