// kiln_ab: paired A/B timing in one process, through the C API.
//
//   kiln_ab MODEL [--rounds N] [--warmup N] CONFIG CONFIG [CONFIG ...]
//   CONFIG: comma-separated items; T=N (threads), ISA=avx2|avx512, STRATEGY=global|local|
//           fixed|heuristic, CACHE=DIR, or NAME=VALUE (an environment variable set just before
//           this config's session is loaded, for settings read at load such as KILN_FLOW).
//
// Each config gets its own session; a round runs every session once, in an order that rotates
// from round to round. Reported: each config's median / p10 / min, and for every config after
// the first the per-round ratio to the first (median and quartiles). On a shared machine whose
// speed drifts by tens of percent over seconds (the 2-vCPU VM Kiln was developed on), ratios
// of runs taken milliseconds apart are far steadier than comparing two processes: e.g.
// `kiln_ab resnet50.onnx T=1 T=2` measures the 2-thread speed-up.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "kiln_ab: %s\n", msg.c_str());
  std::exit(2);
}

void check(kiln_status* st, const std::string& what) {
  if (!st) return;
  const std::string msg = kiln_status_message(st);
  kiln_status_release(st);
  die(what + ": " + msg);
}

kiln_session* load(const char* path, const std::string& config) {
  kiln_options o;
  check(kiln_options_init(&o), "options");
  size_t pos = 0;
  while (pos <= config.size()) {
    size_t end = config.find(',', pos);
    if (end == std::string::npos) end = config.size();
    const std::string item = config.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) die("config item '" + item + "' is not NAME=VALUE");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "T") {
      o.threads = std::atoi(v.c_str());
    } else if (k == "ISA") {
      if (v != "avx2" && v != "avx512") die("ISA must be avx2 or avx512, not '" + v + "'");
      o.max_isa = v == "avx2" ? KILN_ISA_AVX2 : KILN_ISA_AVX512;
    } else if (k == "STRATEGY") {
      const char* names[] = {"global", "local", "fixed", "heuristic"};
      const kiln_strategy values[] = {KILN_STRATEGY_GLOBAL, KILN_STRATEGY_LOCAL,
                                      KILN_STRATEGY_FIXED, KILN_STRATEGY_HEURISTIC};
      int found = -1;
      for (int i = 0; i < 4; ++i)
        if (v == names[i]) found = i;
      if (found < 0) die("unknown strategy '" + v + "'");
      o.strategy = values[found];
    } else if (k == "CACHE") {
      static std::vector<std::string> keep;  // cache_dir must outlive the load call
      keep.push_back(v);
      o.cache_dir = keep.back().c_str();
    } else {
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  kiln_session* s = nullptr;
  check(kiln_session_create_from_file(path, &o, &s), std::string("loading ") + path);
  return s;
}

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) die("usage: kiln_ab MODEL [--rounds N] [--warmup N] CONFIG CONFIG [CONFIG ...]");
  const char* model = argv[1];
  int rounds = 100, warmup = 5;
  std::vector<std::string> configs;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--rounds" || a == "--warmup") && i + 1 < argc) {
      (a == "--rounds" ? rounds : warmup) = std::atoi(argv[++i]);
    } else {
      configs.push_back(a);
    }
  }
  if (configs.size() < 2) die("give at least two configs (e.g. T=1 T=2)");
  if (rounds < 1 || warmup < 0) die("--rounds must be >= 1 and --warmup >= 0");

  std::vector<kiln_session*> s;
  for (const std::string& c : configs) s.push_back(load(model, c));
  size_t in_count = 0, out_count = 0;
  check(kiln_session_input_count(s[0], &in_count), "inputs");
  check(kiln_session_output_count(s[0], &out_count), "outputs");
  std::vector<std::vector<char>> in(in_count), out(out_count);
  std::vector<const void*> in_ptr;
  std::vector<void*> out_ptr;
  std::vector<size_t> in_bytes, out_bytes;
  for (size_t i = 0; i < in_count; ++i) {
    size_t b = 0;
    check(kiln_session_input_byte_size(s[0], i, &b), "input size");
    in[i].assign(b, 0);
    // Small positive floats (any dtype's bytes are valid input for timing).
    for (size_t k = 0; k + 4 <= b; k += 4) {
      const float f = 0.25f + float(k % 97) / 97.0f;
      std::memcpy(&in[i][k], &f, 4);
    }
    in_ptr.push_back(in[i].data());
    in_bytes.push_back(b);
  }
  for (size_t i = 0; i < out_count; ++i) {
    size_t b = 0;
    check(kiln_session_output_byte_size(s[0], i, &b), "output size");
    out[i].assign(b, 0);
    out_ptr.push_back(out[i].data());
    out_bytes.push_back(b);
  }
  auto run = [&](size_t k) {
    const auto t0 = std::chrono::steady_clock::now();
    check(kiln_session_run(s[k], in_ptr.data(), in_bytes.data(), in_count, out_ptr.data(),
                           out_bytes.data(), out_count),
          "run of config '" + configs[k] + "'");
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const size_t n = s.size();
  for (int w = 0; w < warmup; ++w)
    for (size_t k = 0; k < n; ++k) run(k);
  std::vector<std::vector<double>> t(n);
  std::vector<std::vector<double>> ratio(n);
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> ms(n);
    for (size_t j = 0; j < n; ++j) {
      const size_t k = (j + size_t(r)) % n;  // rotate who goes first
      ms[k] = run(k);
    }
    for (size_t k = 0; k < n; ++k) {
      t[k].push_back(ms[k]);
      ratio[k].push_back(ms[k] / ms[0]);
    }
  }
  std::printf("%s: %d rounds\n", model, rounds);
  for (size_t k = 0; k < n; ++k) {
    std::printf("  [%zu] %-40s median %8.3f ms  p10 %8.3f  min %8.3f", k, configs[k].c_str(),
                pct(t[k], 0.5), pct(t[k], 0.1), *std::min_element(t[k].begin(), t[k].end()));
    if (k > 0)
      std::printf("   /[0]: median %.4f (quartiles %.4f .. %.4f)", pct(ratio[k], 0.5),
                  pct(ratio[k], 0.25), pct(ratio[k], 0.75));
    std::printf("\n");
  }
  for (kiln_session* x : s) kiln_session_release(x);
  return 0;
}
