// libFuzzer harness: bytes -> a tuning cache file in a private folder -> kiln::TuningCache loads
// it -> every key found in the bytes is looked up. A finding: a crash, a sanitizer report, any
// exception (the cache must never throw on a bad file), or a returned entry that the file does
// not hold on a checksum-valid line under the exact header (fuzz_cache_util.h reads the format
// independently).
//
// The first input byte picks the mode. Bit 0 set: every line's checksum is recomputed before
// the file is written, so the parsing behind the checksum (fields, escapes, numbers, the end
// marker) is fuzzed too, not only rejection. Bits 1-6 all set (1 input in 64): a time is put
// and flushed over the fuzzed file, and the rewritten file must load with no damage and hold
// it (flush fsyncs, which costs milliseconds, hence rarely).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "runtime/log.h"
#include "runtime/tuning_cache.h"
#include "tests/fuzz/fuzz_cache_util.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

std::string g_dir;  // <private temp folder>/cache
std::string g_path;

constexpr size_t kMaxInput = size_t(1) << 20;

// Recomputes the checksum field (after the last tab) of every complete line.
std::string fix_checksums(std::string_view in) {
  const uint64_t seed = kiln::fuzz::ref_fnv1a64(kiln::fuzz::cache_fuzz_header());
  std::string out;
  out.reserve(in.size() + 64);
  size_t pos = 0;
  bool first = true;
  while (pos < in.size()) {
    size_t e = in.find('\n', pos);
    if (e == std::string_view::npos) {
      out.append(in.substr(pos));
      break;
    }
    std::string_view line = in.substr(pos, e - pos);
    size_t tab = line.rfind('\t');
    if (tab == std::string_view::npos) {
      out.append(line);
    } else {
      std::string_view payload = line.substr(0, tab);
      out.append(payload);
      out += '\t';
      out += kiln::fuzz::ref_hex16(first ? kiln::fuzz::ref_fnv1a64(payload)
                                         : kiln::fuzz::ref_fnv1a64(payload, seed));
    }
    out += '\n';
    first = false;
    pos = e + 1;
  }
  return out;
}

void write_file(const std::string& data) {
  // A new file each time: truncating and rewriting one makes ext4 flush it at close.
  ::unlink(g_path.c_str());
  int fd = ::open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) kiln::fuzz::bug("harness", "cannot create the cache file");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w <= 0) kiln::fuzz::bug("harness", "cannot write the cache file");
    done += size_t(w);
  }
  ::close(fd);
}

bool same_double(const std::string& text, double v) {
  char* end = nullptr;
  std::string t = text;
  double x = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && !t.empty() && std::memcmp(&x, &v, sizeof x) == 0;
}

void check(const kiln::TuningCache& c, const kiln::fuzz::CacheOracle& o) {
  for (const auto& k : o.time_keys) {
    std::optional<double> t = c.time(k.first, k.second);
    if (!t) continue;
    if (!std::isfinite(*t) || *t < 0) kiln::fuzz::bug("cache", "returned a time that is not >= 0");
    auto it = o.times.find(k);
    bool found = false;
    if (it != o.times.end())
      for (const std::string& text : it->second) found = found || same_double(text, *t);
    if (!found) kiln::fuzz::bug("cache", "returned a time no valid line holds");
  }
  for (const auto& k : o.plan_keys) {
    std::optional<std::string> p = c.plan(k);
    if (!p) continue;
    auto it = o.plans.find(k);
    if (it == o.plans.end() || !it->second.count(*p))
      kiln::fuzz::bug("cache", "returned a plan no valid line holds");
  }
  const auto s = c.stats();
  if (s.loaded < 0 || s.rejected < 0 || (!o.header_ok && s.loaded != 0))
    kiln::fuzz::bug("cache", "entries loaded from a file with a wrong header");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  kiln::fuzz::init_process(argc, argv);
  kiln::set_log_level(kiln::kOff);  // the cache warns on every bad file
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) kiln::fuzz::bug("harness", "getcwd failed");
  g_dir = std::string(cwd) + "/cache";
  g_path = kiln::TuningCache(g_dir, kiln::fuzz::cache_fuzz_context()).path();
  // Registered after init_process's handler, so it runs first and the folder can go.
  std::atexit([] {
    ::unlink(g_path.c_str());
    ::unlink((g_path + ".lock").c_str());
    ::rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > kMaxInput) return -1;
  const uint8_t mode = data[0];
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string file = mode & 1 ? fix_checksums(body) : std::string(body);
  if (::mkdir(g_dir.c_str(), 0755) != 0 && errno != EEXIST)
    kiln::fuzz::bug("harness", "cannot create the cache folder");
  write_file(file);
  const kiln::fuzz::CacheOracle oracle(file);
  try {
    kiln::TuningCache c(g_dir, kiln::fuzz::cache_fuzz_context());
    check(c, oracle);
    (void)c.time("absent", "key");
    (void)c.plan("absent");
    if ((mode & 0x7e) == 0x7e) {
      c.put_time("fuzz \t\n\\ key", "label", 1.25);
      if (!c.flush()) kiln::fuzz::bug("cache", "flush failed in a writable folder");
      kiln::TuningCache again(g_dir, kiln::fuzz::cache_fuzz_context());
      if (again.stats().rejected != 0) kiln::fuzz::bug("cache", "flush wrote a damaged file");
      if (again.time("fuzz \t\n\\ key", "label") != 1.25)
        kiln::fuzz::bug("cache", "flushed entry missing");
    }
  } catch (const std::exception& e) {
    kiln::fuzz::bug("exception from the tuning cache", e.what());
  } catch (...) {
    kiln::fuzz::bug("exception from the tuning cache", "not a std::exception");
  }
  return 0;
}
