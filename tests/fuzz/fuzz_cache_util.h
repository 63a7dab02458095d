// Shared by fuzz_cache.cpp and make_cache_seeds.cpp: the fixed context the harness loads cache
// files for (seeds must be written for the same one), and an independent reading of the file
// format (runtime/tuning_cache.h) that says which entries a file may legitimately hold.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/tuning_cache.h"
#include "tests/runtime/fnv1a_ref.h"

namespace kiln::fuzz {

inline CacheContext cache_fuzz_context() {
  CacheContext c;
  c.cpu = "GenuineIntel family 6 model 207 stepping 2 / Fuzz CPU";
  c.isa = "avx512";
  c.threads = 4;
  c.build = "0.1.0-fuzz";
  return c;
}

using test::ref_fnv1a64;
using test::ref_hex16;

// The exact header line payload (no checksum) for the fuzz context; it has no bytes that need
// escaping, so the file's first line must be this plus a tab, its hash and a newline.
inline std::string cache_fuzz_header() {
  CacheContext c = cache_fuzz_context();
  return "kiln-tuning-cache\t1\t" + c.cpu + "\t" + c.isa + "\t" + std::to_string(c.threads) + "\t" +
         c.build;
}

// Undoes the escapes the format allows (\\ \t \n \r and \xHH for control bytes); false on
// anything else, as a conforming reader must.
inline bool cache_unescape(std::string_view s, std::string& out) {
  out.clear();
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    if (c < 0x20 || c == 0x7f) return false;
    if (c != '\\') {
      out += char(c);
      continue;
    }
    if (i + 1 >= s.size()) return false;
    char e = s[++i];
    if (e == '\\') {
      out += '\\';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'n') {
      out += '\n';
    } else if (e == 'r') {
      out += '\r';
    } else if (e == 'x' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      int v = hex(s[i + 1]) * 16 + hex(s[i + 2]);
      if (!(v < 0x20 || v == 0x7f)) return false;
      out += char(v);
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

// What a file may hold: for each key, every value text found on a checksum-valid line before
// the first valid end marker, with a header that is exactly the fuzz context's. `keys` lists
// the keys of every line whose fields unescape, valid or not (the harness looks them all up).
struct CacheOracle {
  bool header_ok = false;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> times;
  std::map<std::string, std::set<std::string>> plans;
  std::set<std::pair<std::string, std::string>> time_keys;
  std::set<std::string> plan_keys;

  explicit CacheOracle(std::string_view data) {
    const std::string header = cache_fuzz_header();
    const uint64_t seed = ref_fnv1a64(header);
    size_t pos = 0;
    bool first = true, ended = false;
    while (pos < data.size()) {
      size_t e = data.find('\n', pos);
      if (e == std::string_view::npos) break;  // an unterminated line is never valid
      std::string_view line = data.substr(pos, e - pos);
      pos = e + 1;
      if (first) {
        first = false;
        header_ok = line == header + "\t" + ref_hex16(seed);
        continue;
      }
      size_t tab = line.rfind('\t');
      if (tab == std::string_view::npos) continue;
      std::string_view payload = line.substr(0, tab);
      bool valid =
          header_ok && !ended && line.substr(tab + 1) == ref_hex16(ref_fnv1a64(payload, seed));
      std::vector<std::string_view> f;
      for (size_t b = 0;;) {
        size_t t = payload.find('\t', b);
        f.push_back(payload.substr(b, t == std::string_view::npos ? t : t - b));
        if (t == std::string_view::npos) break;
        b = t + 1;
      }
      std::string a, b, v;
      if (f[0] == "T" && f.size() == 4 && cache_unescape(f[1], a) && cache_unescape(f[2], b)) {
        time_keys.insert({a, b});
        if (valid) times[{a, b}].insert(std::string(f[3]));
      } else if (f[0] == "P" && f.size() == 3 && cache_unescape(f[1], a) &&
                 cache_unescape(f[2], v)) {
        plan_keys.insert(a);
        if (valid) plans[a].insert(v);
      } else if (f[0] == "E" && f.size() == 2 && valid) {
        ended = true;
      }
    }
  }
};

}  // namespace kiln::fuzz
