// Logging: spdlog to stderr through one "kiln" logger.
#pragma once

#include <spdlog/spdlog.h>

namespace kiln {

// level: 0 trace .. 6 off; -1 = from KILN_LOG_LEVEL (name or number), default "warn".
// Idempotent; a later call with an explicit level changes it.
void init_logging(int level = -1);
// Parses "trace", "debug", "info", "warn", "error", "critical", "off" or "0".."6"; -1 if bad.
int parse_log_level(const char* s);

}  // namespace kiln
