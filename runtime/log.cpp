#include "runtime/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kiln {

int parse_log_level(const char* s) {
  if (!s || !*s) return -1;
  static const char* names[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  for (int i = 0; i < 7; ++i)
    if (!std::strcmp(s, names[i])) return i;
  if (!std::strcmp(s, "warning")) return 3;
  if (s[0] >= '0' && s[0] <= '6' && s[1] == 0) return s[0] - '0';
  return -1;
}

void init_logging(int level) {
  static std::once_flag once;
  std::call_once(once, [] {
    // stderr, so `kiln run` output on stdout stays clean.
    auto logger = spdlog::stderr_color_mt("kiln");
    logger->set_pattern("[kiln %L] %v");
    spdlog::set_default_logger(logger);
    int env = parse_log_level(std::getenv("KILN_LOG_LEVEL"));
    spdlog::set_level(spdlog::level::level_enum(env >= 0 ? env : int(spdlog::level::warn)));
  });
  if (level >= 0 && level <= 6) spdlog::set_level(spdlog::level::level_enum(level));
}

}  // namespace kiln
