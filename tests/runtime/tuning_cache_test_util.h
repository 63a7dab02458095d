// Helpers for the tuning cache tests: private temp folders, log capture, and an independent
// implementation of the file format's checksum (FNV-1a 64, checked against published vectors)
// so that tests can write files by hand instead of trusting the writer under test.
#pragma once

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fnv1a_ref.h"
#include "runtime/log.h"
#include "runtime/tuning_cache.h"

namespace kiln::cache_test {

namespace fs = std::filesystem;

// A fresh, empty folder under KILN_TEST_TMP per call, removed at scope exit.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> n{0};
    path = std::string(KILN_TEST_TMP) + "/cache-" + tag + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(n++);
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Routes Kiln's log (warnings and worse) into a string while alive (warnings are part of
// what the tests check, and the bit-flip loops would otherwise flood stderr).
struct LogCapture {
  std::shared_ptr<std::string> out = std::make_shared<std::string>();
  LogCapture() {
    kiln::set_log_sink(
        [o = out](int level, const char* msg) {
          *o += std::string(kiln::log_level_name(level)) + " " + msg + "\n";
        },
        kiln::kWarn);
  }
  ~LogCapture() { kiln::set_log_sink(nullptr, -1); }
  std::string text() const { return *out; }
};

inline CacheContext test_context(std::string build = "test-build-1") {
  CacheContext c;
  c.cpu = "GenuineTest family 6 model 207 stepping 2 / Test(R) CPU @ 2.0GHz";
  c.isa = "avx512";
  c.threads = 2;
  c.build = std::move(build);
  return c;
}

using test::ref_fnv1a64;
using test::ref_hex16;

// A cache file written by hand following the format documented in runtime/tuning_cache.h.
struct HandFile {
  std::string header_payload;  // without the checksum
  uint64_t ctx_hash = 0;
  std::string text;
  int entries = 0;
  explicit HandFile(const CacheContext& c, const std::string& version = "1") {
    header_payload = "kiln-tuning-cache\t" + version + "\t" + c.cpu + "\t" + c.isa + "\t" +
                     std::to_string(c.threads) + "\t" + c.build;
    ctx_hash = ref_fnv1a64(header_payload);
    text = header_payload + "\t" + ref_hex16(ctx_hash) + "\n";
  }
  std::string name() const { return "tuning-v1-" + ref_hex16(ctx_hash) + ".kc"; }
  // One line with a valid checksum; payload fields are already escaped.
  std::string line(const std::string& payload) const {
    return payload + "\t" + ref_hex16(ref_fnv1a64(payload, ctx_hash)) + "\n";
  }
  HandFile& add(const std::string& payload) {
    text += line(payload);
    ++entries;
    return *this;
  }
  HandFile& end() {
    text += line("E\t" + std::to_string(entries));
    return *this;
  }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_bytes(const std::string& path, const std::string& data) {
  // A new file rather than a truncated one: ext4 flushes a file truncated and rewritten when
  // it is closed (auto_da_alloc), which made the thousands of damaged-file cases I/O bound.
  ::unlink(path.c_str());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), std::streamsize(data.size()));
  REQUIRE(f.good());
}

// Files in `dir` whose name contains `part`.
inline int count_files(const std::string& dir, const std::string& part) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) ++n;
  return n;
}

}  // namespace kiln::cache_test
