// A host program that logs with spdlog itself and embeds Kiln through libkiln.so's C API only
// (this executable links nothing else of Kiln). Loading and running sessions must leave the
// host's logging exactly as it was: its default logger, pattern, levels and output; Kiln's
// messages reach the host only through kiln_set_log_callback, filtered per session.
#include <doctest/doctest.h>
#include <kiln/kiln.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::string kModel = std::string(KILN_FIXTURE_DIR) + "/models/tiny_resnet_op13/model.onnx";

bool ok(kiln_status* s) {
  const bool good = s == nullptr;
  if (!good) MESSAGE(kiln_status_message(s));
  kiln_status_release(s);
  return good;
}

// Loads kModel with a log level (-1: the process threshold), runs it once, releases it.
void load_and_run(int32_t log_level) {
  kiln_options o;
  REQUIRE(ok(kiln_options_init(&o)));
  o.threads = 1;
  o.log_level = log_level;
  o.disable_cache = 1;  // every load profiles (and says so at debug level)
  o.tuning_mode = KILN_TUNING_FAST;
  kiln_session* s = nullptr;
  REQUIRE(ok(kiln_session_create_from_file(kModel.c_str(), &o, &s)));
  size_t in_bytes = 0, out_bytes = 0;
  REQUIRE(ok(kiln_session_input_byte_size(s, 0, &in_bytes)));
  REQUIRE(ok(kiln_session_output_byte_size(s, 0, &out_bytes)));
  std::vector<float> in(in_bytes / 4, 0.5f), out(out_bytes / 4);
  const void* ins[] = {in.data()};
  void* outs[] = {out.data()};
  REQUIRE(ok(kiln_session_run(s, ins, &in_bytes, 1, outs, &out_bytes, 1)));
  kiln_session_release(s);
}

struct Received {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> messages;
  std::atomic<int> concurrent{0}, max_concurrent{0};
  int count_at(int level) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (auto& m : messages) n += m.first == level;
    return n;
  }
  bool any_containing(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& m : messages)
      if (m.second.find(part) != std::string::npos) return true;
    return false;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu);
    messages.clear();
  }
};

void collect(void* user, int32_t level, const char* message) {
  auto* r = static_cast<Received*>(user);
  const int now = ++r->concurrent;
  int seen = r->max_concurrent.load();
  while (now > seen && !r->max_concurrent.compare_exchange_weak(seen, now)) {
  }
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->messages.emplace_back(level, message);
  }
  std::this_thread::yield();
  --r->concurrent;
}

}  // namespace

TEST_CASE("host: a host's spdlog setup and output are unchanged by Kiln") {
  // The host's own logging: default logger into a string, its pattern and level.
  std::ostringstream host_out;
  auto host = std::make_shared<spdlog::logger>(
      "host", std::make_shared<spdlog::sinks::ostream_sink_mt>(host_out));
  host->set_pattern("%l|%v");
  spdlog::set_default_logger(host);
  spdlog::set_level(spdlog::level::info);
  setenv("KILN_LOG_LEVEL", "info", 1);  // Kiln writes to stderr; none of it may reach the host

  spdlog::info("host line 1");
  spdlog::debug("host debug (filtered by the host's level)");
  REQUIRE(ok(kiln_set_log_callback(-1, nullptr, nullptr)));  // Kiln on stderr
  load_and_run(-1);
  load_and_run(KILN_LOG_DEBUG);
  spdlog::info("host line 2");
  spdlog::warn("host line 3");

  CHECK(spdlog::default_logger() == host);
  CHECK(host->level() == spdlog::level::info);
  CHECK(spdlog::get_level() == spdlog::level::info);
  CHECK(host_out.str() == "info|host line 1\ninfo|host line 2\nwarning|host line 3\n");
  // Kiln's logger is not in spdlog's registry: the host may use the name itself.
  CHECK(spdlog::get("kiln") == nullptr);
  CHECK_NOTHROW(spdlog::register_logger(std::make_shared<spdlog::logger>("kiln")));
  load_and_run(-1);
  spdlog::drop("kiln");
  unsetenv("KILN_LOG_LEVEL");
}

TEST_CASE("host: the log callback gets Kiln's messages, filtered per session") {
  unsetenv("KILN_LOG_LEVEL");
  Received r;
  REQUIRE(ok(kiln_set_log_callback(KILN_LOG_INFO, collect, &r)));
  load_and_run(-1);  // the callback's level: info
  CHECK(r.count_at(KILN_LOG_INFO) > 0);
  CHECK(r.any_containing("plan: "));
  CHECK(r.count_at(KILN_LOG_DEBUG) == 0);
  for (auto& m : r.messages) CHECK(m.second.find("[kiln") == std::string::npos);  // no prefix

  r.clear();
  load_and_run(KILN_LOG_ERROR);  // this session's own level: nothing at info
  CHECK(r.messages.empty());
  load_and_run(KILN_LOG_DEBUG);  // and this one's: debug as well
  CHECK(r.count_at(KILN_LOG_DEBUG) > 0);
  CHECK(r.count_at(KILN_LOG_INFO) > 0);

  // Sessions at different levels loading at once: each keeps its own, the callback is never
  // entered by two threads at a time.
  r.clear();
  std::thread quiet([] { load_and_run(KILN_LOG_OFF); });
  load_and_run(KILN_LOG_TRACE);
  quiet.join();
  CHECK(r.count_at(KILN_LOG_TRACE) + r.count_at(KILN_LOG_DEBUG) > 0);
  CHECK(r.max_concurrent.load() == 1);

  // The process threshold from the environment when the callback gives none (-1), read at
  // each load.
  r.clear();
  setenv("KILN_LOG_LEVEL", "info", 1);
  REQUIRE(ok(kiln_set_log_callback(-1, collect, &r)));
  load_and_run(-1);
  CHECK(r.count_at(KILN_LOG_INFO) > 0);
  r.clear();
  setenv("KILN_LOG_LEVEL", "error", 1);
  load_and_run(-1);
  CHECK(r.messages.empty());
  unsetenv("KILN_LOG_LEVEL");

  // Removed: never called again.
  REQUIRE(ok(kiln_set_log_callback(KILN_LOG_TRACE, nullptr, nullptr)));
  r.clear();
  REQUIRE(ok(kiln_set_log_callback(KILN_LOG_OFF, nullptr, nullptr)));
  load_and_run(-1);
  CHECK(r.messages.empty());
  REQUIRE(ok(kiln_set_log_callback(-1, nullptr, nullptr)));
}

namespace {
kiln_code g_inner = KILN_OK;
void reentrant(void*, int32_t, const char*) {
  kiln_status* s = kiln_set_log_callback(KILN_LOG_OFF, nullptr, nullptr);
  if (g_inner == KILN_OK) g_inner = kiln_status_code(s);
  kiln_status_release(s);
}
}  // namespace

TEST_CASE("host: misuse of kiln_set_log_callback is reported, not a deadlock") {
  kiln_status* s = kiln_set_log_callback(7, nullptr, nullptr);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT);
  CHECK(std::string(kiln_status_message(s)).find("level") != std::string::npos);
  kiln_status_release(s);
  s = kiln_set_log_callback(-2, nullptr, nullptr);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT);
  kiln_status_release(s);

  g_inner = KILN_OK;
  REQUIRE(ok(kiln_set_log_callback(KILN_LOG_INFO, reentrant, nullptr)));
  load_and_run(-1);
  CHECK(g_inner == KILN_INVALID_ARGUMENT);
  REQUIRE(ok(kiln_set_log_callback(-1, nullptr, nullptr)));
}
