#include "runtime/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "graph/env.h"

namespace kiln {
namespace {

// Set while this thread is inside the host's sink: a message it writes then is dropped (the
// sink's lock is held), and installing another sink is refused.
thread_local bool t_in_sink = false;
// The innermost LogScope's level on this thread; -1: none.
thread_local int t_scope = -1;

// The level given by the host (set_log_sink / set_log_level); -1: none, use the environment.
std::atomic<int> g_host_level{-1};
// KILN_LOG_LEVEL as read at the last session load (warn until then or when unset or bad).
std::atomic<int> g_env_level{kWarn};

int process_level() {
  const int h = g_host_level.load(std::memory_order_relaxed);
  return h >= 0 ? h : g_env_level.load(std::memory_order_relaxed);
}

// Kiln's only sink: each message goes to the host's sink when one is installed, else to
// stderr. base_sink's mutex serialises messages and swaps, so once set() returns the old
// host sink is not running and is never called again.
class RouterSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RouterSink() : stderr_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {
    stderr_->set_pattern("[kiln %L] %v");
  }
  void set(LogSink sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    host_ = std::move(sink);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!host_) return stderr_->log(msg);
    const std::string text(msg.payload.data(), msg.payload.size());
    t_in_sink = true;
    try {
      host_(int(msg.level), text.c_str());
    } catch (...) {
      // A throwing host sink must not unwind through Kiln (or the C ABI): the message is lost.
    }
    t_in_sink = false;
  }
  void flush_() override { stderr_->flush(); }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> stderr_;
  LogSink host_;
};

struct Logger {
  std::shared_ptr<RouterSink> sink = std::make_shared<RouterSink>();
  // Not registered with spdlog (no name clash with the host's loggers, untouched by
  // spdlog::set_level or drop_all); its own level passes everything, Kiln filters first.
  spdlog::logger logger{"kiln", sink};
  Logger() { logger.set_level(spdlog::level::trace); }
};

// Never destroyed: messages from other static destructors at exit still have a logger.
Logger& the_logger() {
  static Logger* l = new Logger;
  return *l;
}

}  // namespace

int parse_log_level(const char* s) {
  if (!s || !*s) return -1;
  for (int i = kTrace; i <= kOff; ++i)
    if (!std::strcmp(s, log_level_name(i))) return i;
  if (!std::strcmp(s, "warning")) return kWarn;
  if (s[0] >= '0' && s[0] <= '6' && s[1] == 0) return s[0] - '0';
  return -1;
}

const char* log_level_name(int level) {
  static const char* names[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  return level >= kTrace && level <= kOff ? names[level] : "?";
}

bool set_log_sink(LogSink sink, int level) {
  if (t_in_sink) return false;
  the_logger().sink->set(std::move(sink));
  set_log_level(level);
  return true;
}

void set_log_level(int level) {
  g_host_level.store(level >= kTrace && level <= kOff ? level : -1, std::memory_order_relaxed);
}

void read_log_level_env() {
  const int env = parse_log_level(env_value(EnvVar::log_level).c_str());
  g_env_level.store(env >= 0 ? env : int(kWarn), std::memory_order_relaxed);
}

LogScope::LogScope(int level) : saved_(t_scope) {
  t_scope = level >= kTrace && level <= kOff ? level : -1;
}
LogScope::~LogScope() {
  t_scope = saved_;
}
int LogScope::current() {
  return t_scope;
}

bool log_enabled(int level) {
  if (t_in_sink || level < kTrace || level >= kOff) return false;
  return level >= (t_scope >= 0 ? t_scope : process_level());
}

void log_write(int level, std::string_view message) {
  if (t_in_sink) return;
  the_logger().logger.log(spdlog::level::level_enum(level), "{}", message);
}

}  // namespace kiln
