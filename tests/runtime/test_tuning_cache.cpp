// Tuning cache: round trips, the documented file format (files written by hand here, with an
// independent checksum), contexts, the default folder, and damaged files (truncation, bit
// flips, foreign versions, other contexts, oversized and unreadable files). Processes killed
// mid-write, concurrent writers and full disks are in test_tuning_cache_procs.cpp.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "graph/env.h"
#include "jit/cpu.h"
#include "runtime/tuning_cache.h"
#include "tests/runtime/tuning_cache_test_util.h"

using namespace kiln;
using namespace kiln::cache_test;

namespace {

using TimeMap = std::map<std::pair<std::string, std::string>, double>;
using PlanMap = std::map<std::string, std::string>;

// 40 times and 3 plans with plain keys (no escapes), so the tests can find each entry's line
// in the raw file without the parser under test. Values are exact binary fractions.
struct Sample {
  TimeMap times;
  PlanMap plans;
  Sample() {
    for (int i = 0; i < 40; ++i)
      times[{"conv_n1_c" + std::to_string(16 * i) + "_h56", "label" + std::to_string(i % 3)}] =
          0.5 + 0.125 * i;
    plans["model0"] = "plan zero";
    plans["model1"] = "node a: direct\nnode b: gemm1x1\n";  // newlines are escaped on disk
    plans["model2"] = std::string("bytes \x01\x7f\xff\t\\ end", 16);
  }
  void put(TuningCache& c) const {
    for (const auto& [k, ms] : times) c.put_time(k.first, k.second, ms);
    for (const auto& [k, p] : plans) c.put_plan(k, p);
  }
};

// One line of a cache file as the test sees it: byte range [start, end] (end = its '\n' or
// the last byte) and the key of the entry on it, if any.
struct RawLine {
  size_t start, end;
  char kind;
  std::pair<std::string, std::string> key;
};

std::vector<RawLine> raw_lines(const std::string& data) {
  std::vector<RawLine> out;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t e = data.find('\n', pos);
    if (e == std::string::npos) e = data.size() - 1;
    std::string line = data.substr(pos, e - pos);
    RawLine r{pos, e, out.empty() ? 'H' : line[0], {}};
    std::vector<std::string> f;
    for (size_t b = 0;;) {
      size_t t = line.find('\t', b);
      f.push_back(line.substr(b, t == std::string::npos ? std::string::npos : t - b));
      if (t == std::string::npos) break;
      b = t + 1;
    }
    if (r.kind == 'T') r.key = {f.at(1), f.at(2)};
    if (r.kind == 'P') r.key = {f.at(1), ""};
    out.push_back(r);
    pos = e + 1;
  }
  return out;
}

// Checks every lookup: entries in `present` must read back exactly, the others must miss.
// With present == nullptr, only "whatever is returned is exactly what was written".
void check_entries(const TuningCache& c, const Sample& s,
                   const std::set<std::pair<std::string, std::string>>* present) {
  for (const auto& [k, ms] : s.times) {
    std::optional<double> t = c.time(k.first, k.second);
    if (t) REQUIRE(*t == ms);
    if (present) REQUIRE(t.has_value() == (present->count(k) > 0));
  }
  for (const auto& [k, p] : s.plans) {
    std::optional<std::string> got = c.plan(k);
    if (got) REQUIRE(*got == p);
    if (present) REQUIRE(got.has_value() == (present->count({k, ""}) > 0));
  }
}

// Writes the sample through the cache under test and returns the file's bytes.
std::string sample_file(const TempDir& d, const Sample& s) {
  TuningCache c(d.path, test_context());
  s.put(c);
  REQUIRE(c.flush());
  return read_bytes(c.path());
}

// The damage tests' setup: the sample written to a fresh directory; load() puts other bytes
// in its place and opens the cache on them.
struct SampleFile {
  TempDir d;
  Sample s;
  std::string full;  // the file as written
  std::string path;
  explicit SampleFile(const char* dir)
      : d(dir), full(sample_file(d, s)), path(TuningCache(d.path, test_context()).path()) {}
  TuningCache load(const std::string& data) const {
    write_bytes(path, data);
    return TuningCache(d.path, test_context());
  }
};

struct EnvGuard {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  explicit EnvGuard(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const char* v = std::getenv(n);
      saved.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (auto& [n, v] : saved) v ? setenv(n.c_str(), v->c_str(), 1) : unsetenv(n.c_str());
    kiln::snapshot_env();
  }
};

}  // namespace

TEST_CASE("tuning cache: FNV-1a 64 reference matches published vectors") {
  // Guards the independent checksum the other tests write files with.
  CHECK(ref_fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(ref_fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(ref_fnv1a64("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("tuning cache: round trip across two objects") {
  TempDir d("roundtrip");
  LogCapture log;
  TimeMap times;
  const double exotic[] = {0.0, 1e-300,    4.9406564584124654e-324, DBL_MAX,
                           0.1, 1.0 / 3.0, 12345.678901234567};
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += char(b);
  const std::string keys[] = {"plain",
                              "tab\there",
                              "new\nline",
                              "back\\slash\\n",
                              std::string("nul\0byte", 8),
                              "utf8 \xc3\xa9\xe2\x82\xac",
                              all_bytes,
                              ""};
  {
    TuningCache c(d.path, test_context());
    CHECK(c.enabled());
    CHECK(c.stats().loaded == 0);
    CHECK(c.stats().rejected == 0);
    int i = 0;
    for (const auto& k : keys)
      for (double ms : exotic) {
        std::string label = "L" + std::to_string(i++) + k;
        c.put_time(k, label, ms);
        times[{k, label}] = ms;
      }
    c.put_plan("resnet18 key", "line 1\nline 2\r\n\ttabbed\\");
    c.put_plan(all_bytes, all_bytes);
    c.put_plan("empty", "");
    // Refused: not a time.
    c.put_time("bad", "nan", std::nan(""));
    c.put_time("bad", "inf", std::numeric_limits<double>::infinity());
    c.put_time("bad", "neg", -1.0);
    CHECK(!c.time("bad", "nan"));
    CHECK(!c.time("bad", "neg"));
    CHECK(c.flush());
    CHECK(log.text().find("refusing") != std::string::npos);
  }
  std::string name = fs::path(TuningCache(d.path, test_context()).path()).filename();
  CHECK(name.size() == std::string("tuning-v1-0123456789abcdef.kc").size());
  CHECK(name.rfind("tuning-v1-", 0) == 0);
  CHECK(name.substr(name.size() - 3) == ".kc");

  TuningCache c2(d.path, test_context());
  CHECK(c2.stats().loaded == int64_t(times.size()) + 3);
  CHECK(c2.stats().rejected == 0);
  for (const auto& [k, ms] : times) {
    std::optional<double> t = c2.time(k.first, k.second);
    REQUIRE(t);
    CHECK(std::memcmp(&*t, &ms, sizeof ms) == 0);  // bit-exact
  }
  CHECK(c2.plan("resnet18 key") == std::optional<std::string>("line 1\nline 2\r\n\ttabbed\\"));
  CHECK(c2.plan(all_bytes) == std::optional<std::string>(all_bytes));
  CHECK(c2.plan("empty") == std::optional<std::string>(""));
  CHECK(!c2.time("bad", "inf"));
  CHECK(!c2.plan("absent"));
  CHECK(c2.stats().hits == int64_t(times.size()) + 3);
  CHECK(c2.stats().misses == 2);
  // The file is plain text: no raw control bytes but the line ends.
  int control = 0;
  for (char ch : read_bytes(c2.path()))
    control += (unsigned char)ch < 0x20 && ch != '\n' && ch != '\t';
  CHECK(control == 0);
  CHECK(log.text().find("tuning cache '") == std::string::npos);  // no damage reported
}

TEST_CASE("tuning cache: flush merges with other writers, ours win on the same key") {
  TempDir d("merge");
  TuningCache a(d.path, test_context()), b(d.path, test_context());
  a.put_time("p", "shared", 1.0);
  a.put_time("p", "only_a", 2.0);
  CHECK(a.flush());
  b.put_time("p", "shared", 3.0);  // b's own measurement wins over the file's
  b.put_time("p", "only_b", 4.0);
  b.put_plan("m", "plan b");
  CHECK(b.flush());
  CHECK(b.time("p", "only_a") == 2.0);  // learned from the file at flush
  a.put_plan("m2", "plan a");
  CHECK(a.flush());  // a's stale copy of "shared" is not dirty: b's value stays
  TuningCache c(d.path, test_context());
  CHECK(c.time("p", "shared") == 3.0);
  CHECK(c.time("p", "only_a") == 2.0);
  CHECK(c.time("p", "only_b") == 4.0);
  CHECK(c.plan("m") == std::optional<std::string>("plan b"));
  CHECK(c.plan("m2") == std::optional<std::string>("plan a"));
  CHECK(c.stats().rejected == 0);
  CHECK(count_files(d.path, ".tmp.") == 0);
}

TEST_CASE("tuning cache: a hand-written file in the documented format") {
  TempDir d("handmade");
  LogCapture log;
  CacheContext ctx = test_context();
  HandFile f(ctx);
  f.add("T\tconv a\tdirect\t0.25")
      .add("T\tconv\\ta\tgemm\\n1x1\t1e-3")
      .add("P\tmodel\\tkey\tline1\\nline2\\x01\\\\")
      // Valid checksums, invalid contents: each is rejected.
      .add("T\tx\ty\tnan")
      .add("T\tx\ty\t-1")
      .add("T\tx\ty\tinf")
      .add("T\tx\ty\t1e999")
      .add("T\tx\ty\t0.5 ")
      .add("T\tbad\\qescape\ty\t1")
      .add("T\tbad\\x41escape\ty\t1")  // \x is written only for control bytes
      .add("T\ttoo\tmany\tfields\t1")
      .add("Z\tunknown kind")
      .end();
  write_bytes(d / f.name(), f.text);
  TuningCache c(d.path, ctx);
  CHECK(c.path() == d / f.name());
  CHECK(c.time("conv a", "direct") == 0.25);
  CHECK(c.time("conv\ta", "gemm\n1x1") == 1e-3);
  CHECK(c.plan("model\tkey") == std::optional<std::string>("line1\nline2\x01\\"));
  CHECK(!c.time("x", "y"));
  CHECK(c.stats().loaded == 3);
  CHECK(c.stats().rejected == 9);
  CHECK(log.text().find(c.path()) != std::string::npos);
  CHECK(log.text().find("9 damaged lines") != std::string::npos);
}

TEST_CASE("tuning cache: disabled") {
  TempDir d("disabled");
  TuningCache c("", test_context());
  CHECK(!c.enabled());
  CHECK(c.path().empty());
  CHECK(!c.time("p", "l"));
  c.put_time("p", "l", 1.5);
  c.put_plan("m", "x");
  CHECK(c.time("p", "l") == 1.5);  // kept in memory for this object only
  CHECK(c.plan("m") == std::optional<std::string>("x"));
  CHECK(c.flush());
  CHECK(c.stats().loaded == 0);
  CHECK(c.stats().misses == 1);
  CHECK(c.stats().hits == 2);
  CHECK(count_files(d.path, "") == 0);
}

TEST_CASE("tuning cache: default_cache_dir environment handling") {
  EnvGuard guard({"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
  // The library reads the environment at snapshots (every session load), never in between.
  auto dir = [] {
    kiln::snapshot_env();
    return default_cache_dir();
  };
  setenv("HOME", "/home/u", 1);
  setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  setenv("KILN_CACHE_DIR", "/explicit/dir", 1);
  CHECK(dir() == "/explicit/dir");
  for (const char* off : {"off", "0", ""}) {
    setenv("KILN_CACHE_DIR", off, 1);
    CHECK_MESSAGE(dir() == "", off);
  }
  unsetenv("KILN_CACHE_DIR");
  CHECK(dir() == "/xdg/cache/kiln");
  setenv("XDG_CACHE_HOME", "/xdg/cache/", 1);
  CHECK(dir() == "/xdg/cache/kiln");
  setenv("XDG_CACHE_HOME", "relative/cache", 1);  // invalid per the XDG spec: ignored
  CHECK(dir() == "/home/u/.cache/kiln");
  setenv("XDG_CACHE_HOME", "", 1);
  CHECK(dir() == "/home/u/.cache/kiln");
  unsetenv("XDG_CACHE_HOME");
  CHECK(dir() == "/home/u/.cache/kiln");
  unsetenv("HOME");
  CHECK(dir() == "");
  setenv("KILN_CACHE_DIR", "rel/dir", 1);  // an explicit choice is taken as given
  CHECK(dir() == "rel/dir");
  setenv("KILN_CACHE_DIR", "/changed/later", 1);  // no snapshot since: not seen
  CHECK(default_cache_dir() == "rel/dir");
}

TEST_CASE("tuning cache: context and build id") {
  CacheContext c = CacheContext::current(Isa::avx2, 3);
  CHECK(c.cpu == host_cpu().summary());
  CHECK(c.cpu.find(" family ") != std::string::npos);
  CHECK(c.isa == "avx2");
  CHECK(c.threads == 3);
  std::string id = kiln_build_id();
  CHECK(c.build == id);
  std::string version = KILN_VERSION;
  REQUIRE(id.size() == version.size() + 17);
  CHECK(id.substr(0, version.size() + 1) == version + "-");
  for (char ch : id.substr(version.size() + 1))
    CHECK(((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')));
}

TEST_CASE("tuning cache: entries from another context are never used") {
  TempDir d("context");
  LogCapture log;
  CacheContext base = test_context();
  {
    TuningCache c(d.path, base);
    c.put_time("p", "l", 7.0);
    c.put_plan("m", "plan");
    REQUIRE(c.flush());
  }
  std::vector<CacheContext> others(4, base);
  others[0].cpu = "AuthenticAMD family 26 model 68 stepping 0 / AMD EPYC";
  others[1].isa = "avx2";
  others[2].threads = 1;
  others[3].build = "test-build-2";
  const std::string base_path = TuningCache(d.path, base).path();
  const std::string base_bytes = read_bytes(base_path);
  for (size_t i = 0; i < others.size(); ++i) {
    CAPTURE(i);
    {
      TuningCache o(d.path, others[i]);
      CHECK(o.path() != base_path);
      CHECK(!o.time("p", "l"));
      CHECK(!o.plan("m"));
      o.put_time("p", "l", 100.0 + i);
      CHECK(o.flush());
    }
    // Same file name (e.g. a file copied from another machine): the header is checked.
    TuningCache probe(d.path, others[i]);
    write_bytes(probe.path(), base_bytes);
    TuningCache o(d.path, others[i]);
    CHECK(!o.time("p", "l"));
    CHECK(!o.plan("m"));
    CHECK(o.stats().rejected == 1);
    CHECK(o.stats().loaded == 0);
  }
  CHECK(log.text().find("another CPU") != std::string::npos);
  CHECK(log.text().find("another Kiln build") != std::string::npos);
  CHECK(log.text().find("made for ISA 'avx512'") != std::string::npos);
  CHECK(log.text().find("made for 2 threads") != std::string::npos);
  // The base context's file was never touched by the others.
  CHECK(read_bytes(base_path) == base_bytes);
  TuningCache again(d.path, base);
  CHECK(again.time("p", "l") == 7.0);

  // A single line moved from another context's file into this one does not verify.
  HandFile mine(base), theirs(others[3]);
  mine.add("T\tp\tmine\t1");
  std::string foreign = theirs.line("T\tp\ttheirs\t2");
  mine.text += foreign;
  mine.entries++;
  mine.end();
  write_bytes(d / mine.name(), mine.text);
  TuningCache m(d.path, base);
  CHECK(m.time("p", "mine") == 1.0);
  CHECK(!m.time("p", "theirs"));
  CHECK(m.stats().rejected == 1);
}

TEST_CASE("tuning cache: foreign format version and non-cache files") {
  TempDir d("version");
  LogCapture log;
  CacheContext ctx = test_context();
  const std::string name = HandFile(ctx).name();
  auto load = [&](const std::string& bytes) {
    write_bytes(d / name, bytes);
    auto c = std::make_unique<TuningCache>(d.path, ctx);
    CHECK(!c->time("p", "l"));
    CHECK(c->stats().loaded == 0);
    CHECK(c->stats().rejected == 1);
    return c;
  };
  // A well-formed version 2 file (valid checksums for its own header) at our path.
  HandFile v2(ctx, "2");
  v2.add("T\tp\tl\t1").end();
  load(v2.text);
  CHECK(log.text().find("format version '2'") != std::string::npos);
  load("");
  CHECK(log.text().find("empty file") != std::string::npos);
  load("GIF89a\x01\x02\x03 garbage without newline");
  load("kiln-tuning-cache\t1\tshort header\n");
  load(std::string(100000, 'x') + "\n");
  CHECK(log.text().find("bad magic") != std::string::npos);
  // Header damaged: one changed character in the CPU field, checksum now wrong.
  HandFile good(ctx);
  good.add("T\tp\tl\t1").end();
  std::string bad = good.text;
  bad[good.text.find("Test(R)")] = 'B';
  load(bad);
  CHECK(log.text().find("header damaged") != std::string::npos);

  // The next flush replaces a rejected file with a valid one holding our entries.
  auto c = load(v2.text);
  c->put_time("p", "new", 2.5);
  CHECK(c->flush());
  TuningCache after(d.path, ctx);
  CHECK(after.stats().rejected == 0);
  CHECK(after.time("p", "new") == 2.5);
  CHECK(!after.time("p", "l"));
}

TEST_CASE("tuning cache: truncated at every length") {
  LogCapture log;
  const SampleFile f("truncate");
  const std::string& full = f.full;
  const std::vector<RawLine> lines = raw_lines(full);
  REQUIRE(lines.size() == 1 + f.s.times.size() + f.s.plans.size() + 1);
  REQUIRE(lines.back().kind == 'E');
  for (size_t cut = 0; cut < full.size(); ++cut) {
    CAPTURE(cut);
    TuningCache c = f.load(full.substr(0, cut));
    // Present: the entry lines that are whole, '\n' included, with a whole header.
    std::set<std::pair<std::string, std::string>> present;
    for (const RawLine& l : lines)
      if ((l.kind == 'T' || l.kind == 'P') && l.end < cut && lines[0].end < cut)
        present.insert(l.key);
    check_entries(c, f.s, &present);
    CHECK(c.stats().loaded == int64_t(present.size()));
    CHECK(c.stats().rejected >= 1);  // every cut is noticed, even one at a line boundary
  }
  TuningCache whole = f.load(full);
  CHECK(whole.stats().rejected == 0);
  CHECK(log.text().find("no end marker (truncated file)") != std::string::npos);
  CHECK(log.text().find("truncated line") != std::string::npos);
}

TEST_CASE("tuning cache: single bit flips lose only the damaged lines") {
  LogCapture log;
  const SampleFile f("bitflip1");
  const std::string& full = f.full;
  const std::vector<RawLine> lines = raw_lines(full);
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t pos = rng() % full.size();
    const int bit = int(rng() % 8);
    CAPTURE(seed);
    CAPTURE(pos);
    std::string data = full;
    data[pos] = char(data[pos] ^ (1 << bit));
    TuningCache c = f.load(data);
    // Lost: the line holding the byte; if it was a line's '\n', the next line too (they
    // merge); if it is in the header, everything.
    std::set<std::pair<std::string, std::string>> present;
    size_t hit = 0;
    while (!(lines[hit].start <= pos && pos <= lines[hit].end)) ++hit;
    for (size_t i = 1; i < lines.size(); ++i) {
      bool lost = hit == 0 || i == hit || (full[pos] == '\n' && i == hit + 1);
      if (!lost && (lines[i].kind == 'T' || lines[i].kind == 'P')) present.insert(lines[i].key);
    }
    check_entries(c, f.s, &present);
    CHECK(c.stats().rejected >= 1);
  }
  CHECK(log.text().find("checksum mismatch") != std::string::npos);
}

TEST_CASE("tuning cache: random multi-bit damage is never trusted") {
  LogCapture log;
  const SampleFile f("bitflipN");
  const std::string& full = f.full;
  int64_t survivors = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    std::mt19937_64 rng(seed * 7919 + 1);
    std::string data = full;
    const int flips = 2 + int(rng() % 15);
    for (int k = 0; k < flips; ++k) data[rng() % data.size()] ^= char(1 << (rng() % 8));
    if (seed % 5 == 0) data.resize(rng() % data.size());  // and sometimes cut as well
    CAPTURE(seed);
    TuningCache c = f.load(data);
    check_entries(c, f.s, nullptr);
    if (data != full) CHECK(c.stats().rejected >= 1);
    survivors += c.stats().loaded;
  }
  CHECK(survivors > 0);  // the check above was exercised on real survivors
}

TEST_CASE("tuning cache: oversized file and line limits") {
  TempDir d("limits");
  LogCapture log;
  CacheContext ctx = test_context();
  HandFile f(ctx);
  f.add("T\tp\tl\t3").end();
  const std::string path = d / f.name();
  write_bytes(path, f.text);
  // Grow the file past the read limit with zeros (sparse: no 64 MiB written).
  REQUIRE(::truncate(path.c_str(), off_t(TuningCache::kMaxFileBytes + 4096)) == 0);
  {
    TuningCache c(d.path, ctx);
    CHECK(c.time("p", "l") == 3.0);
    CHECK(c.stats().rejected >= 2);  // the size, and the bytes after the end marker
    CHECK(log.text().find("larger than 64 MiB") != std::string::npos);
  }
  // A plan longer than a line may be stays in memory, the rest is saved.
  {
    TuningCache c(d.path, ctx);
    c.put_plan("huge", std::string(TuningCache::kMaxLineBytes, 'p'));
    c.put_plan("small", "ok");
    CHECK(c.flush());
    CHECK(c.plan("huge").has_value());
    CHECK(log.text().find("exceeds the line limit") != std::string::npos);
  }
  TuningCache c(d.path, ctx);
  CHECK(!c.plan("huge"));
  CHECK(c.plan("small") == std::optional<std::string>("ok"));
  CHECK(c.time("p", "l") == 3.0);
  CHECK(c.stats().rejected == 0);
}

TEST_CASE("tuning cache: unreadable file or folder") {
  LogCapture log;
  SUBCASE("the cache path is a folder") {
    TempDir d("isdir");
    std::string path = TuningCache(d.path, test_context()).path();
    fs::create_directories(path);
    TuningCache c(d.path, test_context());
    CHECK(c.stats().rejected == 1);
    CHECK(!c.time("p", "l"));
    c.put_time("p", "l", 1.0);
    CHECK(!c.flush());  // cannot rename onto a folder
    CHECK(c.time("p", "l") == 1.0);
    CHECK(fs::is_directory(path));
    CHECK(count_files(d.path, ".tmp.") == 0);
    CHECK(log.text().find("not a regular file") != std::string::npos);
    CHECK(log.text().find("not saved") != std::string::npos);
  }
  SUBCASE("the cache path is a FIFO (must not hang)") {
    TempDir d("fifo");
    std::string path = TuningCache(d.path, test_context()).path();
    REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
    TuningCache c(d.path, test_context());
    CHECK(c.stats().rejected == 1);
  }
  SUBCASE("the folder is a regular file") {
    TempDir d("notdir");
    write_bytes(d / "file", "x");
    TuningCache c(d / "file/sub", test_context());
    CHECK(c.stats().rejected == 1);  // ENOTDIR on open
    c.put_time("p", "l", 1.0);
    CHECK(!c.flush());
    CHECK(c.time("p", "l") == 1.0);
    CHECK(read_bytes(d / "file") == "x");
  }
  SUBCASE("a missing folder is created by flush") {
    TempDir d("mkdir");
    TuningCache c(d / "a/b/c", test_context());
    CHECK(c.stats().rejected == 0);
    c.put_time("p", "l", 1.0);
    CHECK(c.flush());
    CHECK(TuningCache(d / "a/b/c", test_context()).time("p", "l") == 1.0);
  }
  SUBCASE("chmod 000 folder") {
    TempDir d("chmod");
    {
      TuningCache c(d.path, test_context());
      c.put_time("p", "l", 1.0);
      REQUIRE(c.flush());
    }
    const std::string before = read_bytes(TuningCache(d.path, test_context()).path());
    REQUIRE(::chmod(d.path.c_str(), 0) == 0);
    // Root (and CAP_DAC_OVERRIDE) ignores permissions: then this case cannot be staged.
    const bool blocked = ::access((d / ".").c_str(), R_OK) != 0;
    if (!blocked) {
      MESSAGE("running with permission override (root): chmod 000 does not block; skipped");
    } else {
      TuningCache c(d.path, test_context());
      CHECK(c.stats().rejected == 1);
      CHECK(!c.time("p", "l"));
      c.put_time("p", "l2", 2.0);
      CHECK(!c.flush());
      CHECK(c.time("p", "l2") == 2.0);
    }
    REQUIRE(::chmod(d.path.c_str(), 0755) == 0);
    CHECK(read_bytes(TuningCache(d.path, test_context()).path()) == before);
  }
}
