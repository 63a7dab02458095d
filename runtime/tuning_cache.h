// Persistent tuning cache: measured kernel times and solved plans, kept on disk between runs so
// a model is profiled once per machine. Every entry is keyed by the context it was measured in
// (CPU, ISA, threads, kernel generator build); an entry from any other context, and any damaged
// one, is never used: it is logged, counted and measured again.
//
// File format (one text file per context; see tuning_cache.cpp for the reasons):
//   <dir>/tuning-v1-<16 hex FNV-1a 64 of the context>.kc
//   kiln-tuning-cache <TAB> 1 <TAB> cpu <TAB> isa <TAB> threads <TAB> build <TAB> <16 hex>
//   T <TAB> problem <TAB> label <TAB> ms <TAB> <16 hex>        (a measured time)
//   P <TAB> model_key <TAB> plan <TAB> <16 hex>                (a solved plan)
//   E <TAB> <number of entries> <TAB> <16 hex>                 (end marker: no truncation)
// Fields are escaped (\\ \t \n \r \xHH), so a line never holds a raw tab or newline; the last
// field of each line is the FNV-1a 64 of the rest of the line, seeded (entry and end lines)
// with the context hash, so a flipped bit drops only the line it is in and a line copied from
// another context's file does not verify.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "jit/cpu.h"

namespace kiln {

// Kiln version plus a hash of every jit/ source and header ("0.1.0-<16 hex>"), generated at
// build time (runtime/kiln_build_id.cmake): it changes whenever the kernel generator does.
const char* kiln_build_id();

// 64-bit FNV-1a of s, continuing from h (the entry checksums; also the plan-cache key hash).
constexpr uint64_t kFnvBasis = 14695981039346656037ull;
uint64_t fnv1a64(std::string_view s, uint64_t h = kFnvBasis);

// Everything an entry's validity depends on; entries made under another context are never used.
struct CacheContext {
  std::string cpu;  // host_cpu().summary(): identity, ISA features, cache sizes
  std::string isa;  // isa_name(isa), e.g. "avx512"
  int threads = 1;
  std::string build;  // kiln_build_id()
  static CacheContext current(Isa isa, int threads);
};

// KILN_CACHE_DIR if set (the values "off"/"0"/"" disable: return ""), else
// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln, else "" (as of the last snapshot_env()).
std::string default_cache_dir();

class TuningCache {
 public:
  // Format version: part of the file name, the header and every line checksum.
  static constexpr int kFormatVersion = 1;
  // Read limits: a larger file is read up to kMaxFileBytes (the rest is ignored and logged);
  // a longer line is rejected. put_plan() values longer than kMaxLineBytes stay in memory only.
  static constexpr size_t kMaxFileBytes = size_t(64) << 20;
  static constexpr size_t kMaxLineBytes = size_t(16) << 20;
  // flush() waits at most this long for another process's lock, then fails (returns false).
  static constexpr int kLockTimeoutMs = 10000;

  // dir empty = disabled (lookups miss, puts are kept in memory only, flush is a no-op
  // returning true). Loads the file for ctx from dir. Never throws on a bad file or folder:
  // damage is logged (spdlog::warn, naming the file and what was wrong), counted in stats()
  // and the bad entries (or the whole file, for a bad header) ignored.
  TuningCache(std::string dir, CacheContext ctx);
  TuningCache(const TuningCache&) = delete;
  TuningCache& operator=(const TuningCache&) = delete;

  // Measured milliseconds for (problem, label); counts a hit or a miss.
  std::optional<double> time(const std::string& problem, const std::string& label) const;
  // NaN, infinite and negative times are refused (logged, not stored).
  void put_time(const std::string& problem, const std::string& label, double ms);
  // Arbitrary text (any bytes, newlines included); counts a hit or a miss.
  std::optional<std::string> plan(const std::string& model_key) const;
  void put_plan(const std::string& model_key, const std::string& plan);

  // Merges the entries put since the last successful flush into the file: exclusive flock on
  // <file>.lock, re-read the file, merge (ours win for the same key), write a temp file in the
  // same folder, fsync, rename into place, fsync the folder, unlock. Entries other processes
  // wrote meanwhile become visible here too. Returns false and logs (warn) on any failure;
  // in-memory entries stay and the existing file is untouched.
  bool flush();

  struct Stats {
    int64_t loaded = 0;            // entries read from disk and accepted (constructor and flushes)
    int64_t rejected = 0;          // damaged entries, plus one per rejected or unreadable file
    int64_t hits = 0, misses = 0;  // counted by time() and plan()
  };
  Stats stats() const;
  const std::string& path() const;  // the file used ("" when disabled)
  bool enabled() const;
  const CacheContext& context() const { return ctx_; }

 private:
  using TimeKey = std::pair<std::string, std::string>;
  struct Entries {
    std::map<TimeKey, double> times;
    std::map<std::string, std::string> plans;
  };
  // Reads path_ into `out`; logs and counts damage in stats_. Caller holds mu_.
  void read_file_locked(Entries& out);
  std::string encode_locked(const Entries& e) const;

  std::string dir_, path_;
  CacheContext ctx_;
  uint64_t ctx_hash_ = 0;
  mutable std::mutex mu_;
  Entries mem_;
  std::set<TimeKey> dirty_times_;  // put since the last successful flush
  std::set<std::string> dirty_plans_;
  mutable Stats stats_;
};

}  // namespace kiln
