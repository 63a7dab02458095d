// Tuning cache file I/O. Why this format:
// - Text, one entry per line: a damaged byte costs only the line it is in (and at most its
//   neighbour, if the byte was a newline), and a person can read the file.
// - Each line carries its own FNV-1a 64 over the rest of the line. One changed byte always
//   changes the hash (every FNV step is a bijection of the state), several collide with
//   probability 2^-64. Entry lines are seeded with the context hash, so a line pasted from
//   another machine's or build's file never verifies here.
// - The header repeats the full context (the file name holds only its hash) and is checked
//   field by field; a file for another context, another format version or with a damaged
//   header is ignored whole, and rewritten by the next flush.
// - An end marker with the entry count: a file cut exactly at a line boundary is still seen
//   as truncated (its intact lines are used, the truncation is logged).
// - Times are written with std::to_chars (shortest text that reads back to the same double,
//   independent of the C locale), plans and keys escaped, so any bytes round-trip.
// - Writers take an flock on a separate lock file (the data file is replaced by rename, so a
//   lock on it would lock a file that is about to go away), re-read, merge, write a temp file,
//   fsync, rename: readers never lock and always see a whole old or a whole new file, and a
//   writer killed at any point leaves the old file and at most a stale temp file, which the
//   next flush deletes.
#include "runtime/tuning_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "graph/env.h"
#include "runtime/log.h"

namespace kiln {
namespace {

constexpr const char* kMagic = "kiln-tuning-cache";
constexpr uint64_t kFnvPrime = 1099511628211ull;
constexpr int kMaxLoggedPerRead = 5;  // then one summary line: a bit-flipped file logs 6 lines

}  // namespace

uint64_t fnv1a64(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

namespace {

std::string hex16(uint64_t v) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = d[v & 15];
  return s;
}

int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// Exactly 16 lowercase hex digits (what hex16 writes); anything else fails.
bool parse_hex16(std::string_view s, uint64_t& v) {
  if (s.size() != 16) return false;
  v = 0;
  for (char c : s) {
    int x = hex_digit(c);
    if (x < 0) return false;
    v = v << 4 | uint64_t(x);
  }
  return true;
}

// Backslash escapes for \ tab newline CR and other control bytes; other bytes stay raw.
std::string escape(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\r') {
      o += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      o += "\\x";
      o += d[c >> 4];
      o += d[c & 15];
    } else {
      o += char(c);
    }
  }
  return o;
}

// Inverse of escape(); false on anything escape() cannot have written.
bool unescape(std::string_view s, std::string& o) {
  o.clear();
  o.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    if (c < 0x20 || c == 0x7f) return false;
    if (c != '\\') {
      o += char(c);
      continue;
    }
    if (++i == s.size()) return false;
    switch (s[i]) {
      case '\\':
        o += '\\';
        break;
      case 't':
        o += '\t';
        break;
      case 'n':
        o += '\n';
        break;
      case 'r':
        o += '\r';
        break;
      case 'x': {
        if (s.size() - i < 3) return false;
        int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
        if (hi < 0 || lo < 0) return false;
        unsigned char v = (unsigned char)(hi * 16 + lo);
        if (!(v < 0x20 || v == 0x7f)) return false;  // escape() writes only these as \x
        o += char(v);
        i += 2;
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

std::string format_ms(double ms) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, ms);
  return std::string(buf, r.ptr);
}

bool valid_ms(double ms) {
  return std::isfinite(ms) && ms >= 0;
}

bool parse_ms(std::string_view s, double& ms) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), ms);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && valid_ms(ms);
}

std::vector<std::string_view> split_tabs(std::string_view s) {
  std::vector<std::string_view> f;
  size_t b = 0;
  for (;;) {
    size_t e = s.find('\t', b);
    if (e == std::string_view::npos) {
      f.push_back(s.substr(b));
      return f;
    }
    f.push_back(s.substr(b, e - b));
    b = e + 1;
  }
}

std::string header_payload(const CacheContext& c) {
  return std::string(kMagic) + '\t' + std::to_string(TuningCache::kFormatVersion) + '\t' +
         escape(c.cpu) + '\t' + escape(c.isa) + '\t' + std::to_string(c.threads) + '\t' +
         escape(c.build);
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// write() until done, retrying on EINTR and short writes.
bool write_all(int fd, const char* p, size_t n, int& err) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Removes temp files that a writer killed mid-flush left behind. Called with the lock held:
// no live writer has a temp file for this cache then.
void remove_stale_temps(const std::string& dir, const std::string& name) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = name + ".tmp.";
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) {
      std::string p = dir + "/" + e->d_name;
      if (::unlink(p.c_str()) == 0) log_debug("tuning cache: removed stale '{}'", p);
    }
  closedir(d);
}

}  // namespace

CacheContext CacheContext::current(Isa isa, int threads) {
  CacheContext c;
  c.cpu = host_cpu().summary();
  c.isa = isa_name(isa);
  c.threads = threads;
  c.build = kiln_build_id();
  return c;
}

std::string default_cache_dir() {
  auto strip = [](std::string s) {
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  if (env_set(EnvVar::cache_dir)) {
    std::string v = env_value(EnvVar::cache_dir);
    if (v.empty() || v == "0" || v == "off" || v == "OFF" || v == "Off") return "";
    return v;
  }
  // XDG Base Directory spec: a relative path in the variable is invalid and ignored.
  if (const std::string x = env_value(EnvVar::xdg_cache_home); !x.empty() && x[0] == '/')
    return strip(x) + "/kiln";
  if (const std::string h = env_value(EnvVar::home); !h.empty()) return strip(h) + "/.cache/kiln";
  return "";
}

TuningCache::TuningCache(std::string dir, CacheContext ctx)
    : dir_(std::move(dir)), ctx_(std::move(ctx)) {
  ctx_hash_ = fnv1a64(header_payload(ctx_));
  if (dir_.empty()) return;
  path_ = dir_ + "/tuning-v" + std::to_string(kFormatVersion) + "-" + hex16(ctx_hash_) + ".kc";
  std::lock_guard<std::mutex> lock(mu_);
  read_file_locked(mem_);
}

bool TuningCache::enabled() const {
  return !dir_.empty();
}
const std::string& TuningCache::path() const {
  return path_;
}

TuningCache::Stats TuningCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::optional<double> TuningCache::time(const std::string& problem,
                                        const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mem_.times.find({problem, label});
  if (it == mem_.times.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  return it->second;
}

void TuningCache::put_time(const std::string& problem, const std::string& label, double ms) {
  if (!valid_ms(ms)) {
    log_warn("tuning cache: refusing time {} ms for '{}' / '{}' (not a finite time >= 0)", ms,
             problem, label);
    return;
  }
  if (ms == 0) ms = 0;  // -0.0 is stored as 0
  std::lock_guard<std::mutex> lock(mu_);
  TimeKey k{problem, label};
  mem_.times[k] = ms;
  dirty_times_.insert(std::move(k));
}

std::optional<std::string> TuningCache::plan(const std::string& model_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mem_.plans.find(model_key);
  if (it == mem_.plans.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  return it->second;
}

void TuningCache::put_plan(const std::string& model_key, const std::string& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  mem_.plans[model_key] = plan;
  dirty_plans_.insert(model_key);
}

void TuningCache::read_file_locked(Entries& out) {
  // O_NONBLOCK: a FIFO planted at the path must not hang the open.
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return;  // nothing cached yet (or no folder yet)
    log_warn("tuning cache '{}': cannot open: {}; ignoring it", path_, errno_text(errno));
    ++stats_.rejected;
    return;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    log_warn("tuning cache '{}': not a regular file; ignoring it", path_);
    ::close(fd);
    ++stats_.rejected;
    return;
  }
  std::string data;
  bool too_big = false;
  {
    std::vector<char> buf(size_t(1) << 16);
    for (;;) {
      ssize_t r = ::read(fd, buf.data(), buf.size());
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        log_warn("tuning cache '{}': read error: {}; ignoring it", path_, errno_text(errno));
        ::close(fd);
        ++stats_.rejected;
        return;
      }
      if (r == 0) break;
      size_t take = std::min(size_t(r), kMaxFileBytes - data.size());
      data.append(buf.data(), take);
      if (take < size_t(r)) {
        too_big = true;
        break;
      }
    }
  }
  ::close(fd);
  if (too_big) {
    log_warn("tuning cache '{}': larger than {} MiB; reading only the start of it", path_,
             kMaxFileBytes >> 20);
    ++stats_.rejected;
  }

  auto reject_file = [&](const std::string& why) {
    log_warn(
        "tuning cache '{}': {}; ignoring the whole file (it is rewritten by the next "
        "flush)",
        path_, why);
    ++stats_.rejected;
  };
  if (data.empty()) return reject_file("empty file (truncated)");
  size_t eol = data.find('\n');
  if (eol == std::string::npos || eol > kMaxLineBytes)
    return reject_file("header line truncated or too long");
  std::string_view header(data.data(), eol);
  {
    std::vector<std::string_view> f = split_tabs(header);
    if (f[0] != kMagic) return reject_file("not a Kiln tuning cache (bad magic)");
    if (f.size() < 2 || f[1] != std::to_string(kFormatVersion))
      return reject_file("format version '" + escape(f.size() < 2 ? "" : f[1]) +
                         "', this Kiln reads version " + std::to_string(kFormatVersion));
    uint64_t sum = 0;
    size_t tab = header.rfind('\t');
    if (f.size() != 7 || !parse_hex16(f[6], sum) || fnv1a64(header.substr(0, tab)) != sum)
      return reject_file("header damaged (checksum mismatch)");
    std::string cpu, isa, build;
    if (!unescape(f[2], cpu) || !unescape(f[3], isa) || !unescape(f[5], build))
      return reject_file("header damaged (bad escape)");
    if (cpu != ctx_.cpu) return reject_file("made on another CPU ('" + escape(cpu) + "')");
    if (isa != ctx_.isa) return reject_file("made for ISA '" + escape(isa) + "'");
    if (f[4] != std::to_string(ctx_.threads))
      return reject_file("made for " + std::string(f[4]) + " threads");
    if (build != ctx_.build)
      return reject_file("made by another Kiln build ('" + escape(build) + "')");
  }

  int64_t bad = 0, good = 0, logged = 0;
  auto reject_line = [&](size_t line_no, const char* why) {
    ++bad;
    if (logged++ < kMaxLoggedPerRead)
      log_warn("tuning cache '{}': line {}: {}; entry ignored (measured again)", path_, line_no,
               why);
  };
  bool end_seen = false;
  size_t line_no = 1;
  std::string a, b;
  for (size_t pos = eol + 1; pos < data.size();) {
    ++line_no;
    size_t e = data.find('\n', pos);
    const bool terminated = e != std::string::npos;
    std::string_view line(data.data() + pos, (terminated ? e : data.size()) - pos);
    pos = terminated ? e + 1 : data.size();
    if (end_seen) {
      reject_line(line_no, "data after the end marker");
      continue;
    }
    if (!terminated) {
      reject_line(line_no, "truncated line");
      continue;
    }
    if (line.size() > kMaxLineBytes) {
      reject_line(line_no, "line too long");
      continue;
    }
    size_t tab = line.rfind('\t');
    uint64_t sum = 0;
    if (tab == std::string_view::npos || !parse_hex16(line.substr(tab + 1), sum) ||
        fnv1a64(line.substr(0, tab), ctx_hash_) != sum) {
      reject_line(line_no, "checksum mismatch (damaged)");
      continue;
    }
    std::vector<std::string_view> f = split_tabs(line.substr(0, tab));
    if (f[0] == "T" && f.size() == 4) {
      double ms = 0;
      if (!unescape(f[1], a) || !unescape(f[2], b) || !parse_ms(f[3], ms)) {
        reject_line(line_no, "bad time entry");
        continue;
      }
      out.times[{a, b}] = ms;
      ++good;
    } else if (f[0] == "P" && f.size() == 3) {
      if (!unescape(f[1], a) || !unescape(f[2], b)) {
        reject_line(line_no, "bad plan entry");
        continue;
      }
      out.plans[a] = b;
      ++good;
    } else if (f[0] == "E" && f.size() == 2) {
      end_seen = true;
      int64_t n = -1;
      auto r = std::from_chars(f[1].data(), f[1].data() + f[1].size(), n);
      if (r.ec != std::errc() || r.ptr != f[1].data() + f[1].size() || n != good + bad) {
        log_warn("tuning cache '{}': end marker counts {} entries, the file has {}", path_,
                 std::string(f[1]), good + bad);
        ++stats_.rejected;
      }
    } else {
      reject_line(line_no, "unknown entry kind");
    }
  }
  if (logged > kMaxLoggedPerRead)
    log_warn("tuning cache '{}': {} damaged lines in all", path_, bad);
  if (!end_seen) {
    log_warn("tuning cache '{}': no end marker (truncated file); {} intact entries used", path_,
             good);
    ++stats_.rejected;
  }
  stats_.loaded += good;
  stats_.rejected += bad;
}

std::string TuningCache::encode_locked(const Entries& e) const {
  std::string out = header_payload(ctx_);
  out += '\t' + hex16(ctx_hash_) + '\n';
  int64_t n = 0;
  auto add = [&](const std::string& payload) {
    if (payload.size() + 17 > kMaxLineBytes) {
      log_warn(
          "tuning cache '{}': an entry of {} bytes exceeds the line limit; kept in "
          "memory only",
          path_, payload.size());
      return;
    }
    out += payload;
    out += '\t' + hex16(fnv1a64(payload, ctx_hash_)) + '\n';
    ++n;
  };
  for (const auto& [k, ms] : e.times)
    add("T\t" + escape(k.first) + '\t' + escape(k.second) + '\t' + format_ms(ms));
  for (const auto& [k, p] : e.plans) add("P\t" + escape(k) + '\t' + escape(p));
  std::string end = "E\t" + std::to_string(n);
  out += end + '\t' + hex16(fnv1a64(end, ctx_hash_)) + '\n';
  return out;
}

bool TuningCache::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled() || (dirty_times_.empty() && dirty_plans_.empty())) return true;
  auto fail = [&](const std::string& what, int err) {
    log_warn("tuning cache '{}': not saved: {}: {}; the entries stay in memory", path_, what,
             errno_text(err));
    return false;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return fail("cannot create folder '" + dir_ + "'", ec.value());

  const std::string lock_path = path_ + ".lock";
  int lfd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lfd < 0) return fail("cannot open lock file", errno);
  // Polling with a deadline rather than a blocking flock: a hung process holding the lock
  // costs this flush, not the caller's whole run.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kLockTimeoutMs);
  while (::flock(lfd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if ((err != EWOULDBLOCK && err != EINTR) || std::chrono::steady_clock::now() > deadline) {
      ::close(lfd);
      return fail("cannot lock '" + lock_path + "'", err);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Closing the descriptor releases the lock, on every path below and if we are killed.
  struct LockGuard {
    int fd;
    ~LockGuard() { ::close(fd); }
  } guard{lfd};

  const std::string name = path_.substr(dir_.size() + 1);
  remove_stale_temps(dir_, name);
  Entries merged;
  read_file_locked(merged);
  for (const auto& k : dirty_times_) merged.times[k] = mem_.times.at(k);
  for (const auto& k : dirty_plans_) merged.plans[k] = mem_.plans.at(k);
  const std::string text = encode_locked(merged);

  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot create temp file '" + tmp + "'", errno);
  int err = 0;
  bool ok = write_all(fd, text.data(), text.size(), err);
  // EINVAL/ENOTSUP: a file system that cannot sync (some FUSE ones); the data is written.
  if (ok && ::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) ok = false, err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(tmp.c_str(), path_.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    return fail("cannot write '" + tmp + "'", err);
  }
  // The rename itself is durable only once the folder is synced; the data is already safe.
  if (int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  mem_ = std::move(merged);
  dirty_times_.clear();
  dirty_plans_.clear();
  return true;
}

}  // namespace kiln
