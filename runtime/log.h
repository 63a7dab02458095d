// Logging. Kiln writes through its own spdlog logger, never registered with spdlog and never
// the default one: a host that uses spdlog keeps its default logger, pattern and levels.
// Messages go to stderr ("[kiln W] ...") or, once a host installs one, to its sink (the C
// API's kiln_set_log_callback); the sink is called under a lock, one message at a time.
//
// Which messages are written: a message at level L is written when L >= the threshold of
// the thread writing it. A thread inside a LogScope (a session's load or run) uses that
// session's level; elsewhere, or when the session set none, the process threshold: the
// level given with the sink, else KILN_LOG_LEVEL as read at the last session load, else
// warn.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln {

// spdlog's numbering: 0 trace, 1 debug, 2 info, 3 warn, 4 error, 5 critical, 6 off.
enum LogLevel : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// Parses "trace", "debug", "info", "warn"/"warning", "error", "critical", "off" or "0".."6";
// -1 if bad.
int parse_log_level(const char* s);
const char* log_level_name(int level);  // "trace" .. "off"

// A host's sink: called with each message written (no prefix, no newline).
using LogSink = std::function<void(int level, const char* message)>;
// Installs `sink` (empty: back to stderr) and the process threshold (`level` 0..6; -1 = from
// KILN_LOG_LEVEL, else warn). When it returns, the previous sink is not being called and never
// will be again. Called from inside a sink it would deadlock: returns false and changes nothing.
bool set_log_sink(LogSink sink, int level);
// The process threshold alone (-1: back to KILN_LOG_LEVEL / warn); the CLI's --log-level.
void set_log_level(int level);
// Takes KILN_LOG_LEVEL from the environment snapshot (graph/env.h) as the process threshold
// (session loads call it; a threshold given by set_log_sink/set_log_level takes precedence).
void read_log_level_env();

// Messages of this thread use `level` (0..6; -1: the process threshold) while it lives.
class LogScope {
 public:
  explicit LogScope(int level);
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;
  // The level of the innermost scope on this thread (-1 when none): to carry into tasks that
  // other threads run for it.
  static int current();

 private:
  int saved_;
};

bool log_enabled(int level);
void log_write(int level, std::string_view message);

template <class... A>
void log_at(int level, fmt::format_string<A...> f, A&&... a) {
  if (log_enabled(level)) log_write(level, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void log_trace(fmt::format_string<A...> f, A&&... a) {
  log_at(kTrace, f, std::forward<A>(a)...);
}
template <class... A>
void log_debug(fmt::format_string<A...> f, A&&... a) {
  log_at(kDebug, f, std::forward<A>(a)...);
}
template <class... A>
void log_info(fmt::format_string<A...> f, A&&... a) {
  log_at(kInfo, f, std::forward<A>(a)...);
}
template <class... A>
void log_warn(fmt::format_string<A...> f, A&&... a) {
  log_at(kWarn, f, std::forward<A>(a)...);
}
template <class... A>
void log_error(fmt::format_string<A...> f, A&&... a) {
  log_at(kError, f, std::forward<A>(a)...);
}

}  // namespace kiln
