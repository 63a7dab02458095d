// kiln_soak: the deployment soak test at full size (bench/soak/soak.h says what it checks).
//
//   kiln_soak MODEL [--run-threads N] [--runs N] [--sessions N] [--load-threads N]
//             [--loads N] [--rounds N] [--intra N] [--cache DIR] [--rss-slack-kb N]
//
// Prints one line per round (resident memory, open descriptors) and a summary; exits 0 when
// every output was bitwise identical, nothing failed, and neither resident memory (over the
// second half of the rounds) nor open descriptors grew; 1 otherwise; 2 on a bad command line.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "bench/soak/soak.h"

// The options that set an int count of the config.
const std::map<std::string, int kiln_soak::Config::*> kCounts = {
    {"--run-threads", &kiln_soak::Config::run_threads},
    {"--runs", &kiln_soak::Config::runs},
    {"--sessions", &kiln_soak::Config::sessions},
    {"--load-threads", &kiln_soak::Config::load_threads},
    {"--loads", &kiln_soak::Config::loads},
    {"--rounds", &kiln_soak::Config::rounds},
    {"--intra", &kiln_soak::Config::intra_threads},
};

int main(int argc, char** argv) {
  // One malloc arena: resident memory then measures what is live. With glibc's default (an
  // arena per thread group, each keeping what was freed in it) MobileNetV2's readings wandered
  // by +-5 MiB around a flat mean; with one arena they stayed within 20 KiB over 30 rounds.
  mallopt(M_ARENA_MAX, 1);
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: kiln_soak MODEL [--run-threads N] [--runs N] [--sessions N] "
                 "[--load-threads N] [--loads N] [--rounds N] [--intra N] [--cache DIR] "
                 "[--rss-slack-kb N]\n");
    return 2;
  }
  kiln_soak::Config c;
  c.model = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string opt = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kiln_soak: %s needs a value\n", opt.c_str());
      return 2;
    }
    const std::string val = argv[++i];
    char* end = nullptr;
    const long n = std::strtol(val.c_str(), &end, 10);
    const bool number = end && *end == 0 && n >= 0 && n <= 1000000;
    if (opt == "--cache") {
      c.cache_dir = val;
      continue;
    }
    if (!number) {
      std::fprintf(stderr, "kiln_soak: %s expects a count, got '%s'\n", opt.c_str(), val.c_str());
      return 2;
    }
    if (opt == "--rss-slack-kb") {
      c.rss_slack_kb = n;
      continue;
    }
    const auto count = kCounts.find(opt);
    if (count == kCounts.end()) {
      std::fprintf(stderr, "kiln_soak: unknown option '%s'\n", opt.c_str());
      return 2;
    }
    c.*(count->second) = int(n);
  }
  if (c.sessions < 1 || c.rounds < 2) {
    std::fprintf(stderr, "kiln_soak: needs --sessions >= 1 and --rounds >= 2\n");
    return 2;
  }
  const kiln_soak::Report r = kiln_soak::soak(c);
  for (size_t i = 0; i < r.rss_kb.size(); ++i)
    std::printf("%-8s RSS %8ld KiB  open fds %ld\n",
                i == 0 ? "warm-up" : ("round " + std::to_string(i)).c_str(), r.rss_kb[i], r.fds[i]);
  std::printf("%s\n", r.summary().c_str());
  const bool ok = r.ok(c.rss_slack_kb);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
