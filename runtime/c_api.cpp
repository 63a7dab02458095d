// The C API (include/kiln/kiln.h) over kiln::Session. Every extern "C" body runs inside
// guarded(), which turns any exception into a kiln_status, so nothing but a status ever crosses
// the ABI.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/error.h"
#include "graph/ir.h"
#include "jit/cpu.h"
#include "kiln/kiln.h"
#include "runtime/log.h"
#include "runtime/report.h"
#include "runtime/session.h"

struct kiln_status {
  kiln_code code;
  std::string message;
};

struct kiln_outputs {
  std::vector<kiln::Tensor> tensors;
};

struct kiln_session {
  std::unique_ptr<kiln::Session> impl;
  std::once_flag plan_once;  // plan_json is made on the first kiln_session_plan_json
  std::string plan_json;
};

namespace {

using kiln::Code;

static_assert(int(Code::ok) == KILN_OK && int(Code::invalid_argument) == KILN_INVALID_ARGUMENT &&
                  int(Code::invalid_model) == KILN_INVALID_MODEL &&
                  int(Code::unsupported) == KILN_UNSUPPORTED &&
                  int(Code::shape_mismatch) == KILN_SHAPE_MISMATCH &&
                  int(Code::io_error) == KILN_IO_ERROR &&
                  int(Code::out_of_memory) == KILN_OUT_OF_MEMORY &&
                  int(Code::internal) == KILN_INTERNAL,
              "kiln_code must mirror kiln::Code");
static_assert(int(kiln::Isa::scalar) + 1 == KILN_ISA_SCALAR &&
                  int(kiln::Isa::avx2) + 1 == KILN_ISA_AVX2 &&
                  int(kiln::Isa::avx512) + 1 == KILN_ISA_AVX512,
              "kiln_isa must be kiln::Isa + 1");
static_assert(int(kiln::kTrace) == KILN_LOG_TRACE && int(kiln::kWarn) == KILN_LOG_WARN &&
                  int(kiln::kOff) == KILN_LOG_OFF,
              "kiln_log_level must mirror kiln::LogLevel");
static_assert(int(kiln::DType::f32) == KILN_DTYPE_F32 && int(kiln::DType::u8) == KILN_DTYPE_U8 &&
                  int(kiln::DType::i8) == KILN_DTYPE_I8 &&
                  int(kiln::DType::i32) == KILN_DTYPE_I32 &&
                  int(kiln::DType::i64) == KILN_DTYPE_I64 &&
                  int(kiln::DType::boolean) == KILN_DTYPE_BOOL &&
                  int(kiln::DType::f64) == KILN_DTYPE_F64,
              "kiln_dtype must mirror kiln::DType");

// Size of the first published kiln_options. When fields are appended, keep this constant and
// read a new field only when struct_size covers it.
constexpr size_t kOptionsV1Size = offsetof(kiln_options, strategy);
// Version 2 appended strategy and disable_cache; version 3 profile_budget_ms; version 4
// accuracy.
constexpr size_t kOptionsV2Size = offsetof(kiln_options, disable_cache) + sizeof(int32_t);
constexpr size_t kOptionsV3Size = offsetof(kiln_options, profile_budget_ms) + sizeof(double);
constexpr size_t kOptionsV4Size = offsetof(kiln_options, accuracy) + sizeof(int32_t);
// Version 5 appended input_shapes; version 6 precision.
constexpr size_t kOptionsV5Size = offsetof(kiln_options, input_shapes) + sizeof(const char*);
constexpr size_t kOptionsV6Size = offsetof(kiln_options, precision) + sizeof(int32_t);

// Returned when even allocating a status fails; kiln_status_release never frees it.
kiln_status g_oom_status{KILN_OUT_OF_MEMORY, "out of memory"};

kiln_status* make_status(kiln_code code, const char* fn, const char* what) noexcept {
  try {
    return new kiln_status{code, std::string(fn) + ": " + what};
  } catch (...) {
    return &g_oom_status;
  }
}

// Runs `body`, converting every exception into a status prefixed with the function name.
template <class F>
kiln_status* guarded(const char* fn, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const kiln::Error& e) {
    return make_status(kiln_code(e.code()), fn, e.what());
  } catch (const std::bad_alloc&) {
    return make_status(KILN_OUT_OF_MEMORY, fn, "out of memory");
  } catch (const std::exception& e) {
    return make_status(KILN_INTERNAL, fn, e.what());
  } catch (...) {
    return make_status(KILN_INTERNAL, fn, "unknown exception");
  }
}

// Decimal text of a number. Not std::to_string: its libstdc++ helper has a GNU-unique static that
// would otherwise be exported from libkiln.so next to the kiln_* symbols.
template <class T>
std::string num(T v) {
  char buf[32];
  if constexpr (std::is_signed_v<T>)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  return buf;
}

void require(const void* p, const char* arg) {
  if (!p) kiln::fail(Code::invalid_argument, std::string(arg) + " is NULL");
}

static_assert(int(kiln::Precision::f32) == KILN_PRECISION_F32 &&
                  int(kiln::Precision::bf16) == KILN_PRECISION_BF16,
              "kiln_precision must mirror kiln::Precision");
static_assert(int(kiln::TuneMode::none) + 1 == KILN_TUNING_NONE &&
                  int(kiln::TuneMode::full) + 1 == KILN_TUNING_FULL,
              "kiln_tuning must be kiln::TuneMode + 1");
static_assert(int(kiln::Strategy::global) + 1 == KILN_STRATEGY_GLOBAL &&
                  int(kiln::Strategy::heuristic) + 1 == KILN_STRATEGY_HEURISTIC,
              "kiln_strategy must be kiln::Strategy + 1");

// An options field that holds a C enum value: lo..hi, or an invalid_argument error naming the
// field and the bad value.
int32_t enum_field(int32_t v, const char* field, int32_t lo, int32_t hi, const char* what) {
  if (v < lo || v > hi)
    kiln::fail(Code::invalid_argument, std::string("options->") + field + " is " + num(v) +
                                           ", expected " + what + " (" + num(lo) + ".." + num(hi) +
                                           ")");
  return v;
}

// The one place the C API's integers become the core's typed options. The C enums with a
// DEFAULT are the core's enum + 1, so that 0 (a zeroed field) means the default.
kiln::SessionOptions convert_options(const kiln_options* o) {
  kiln::SessionOptions so;
  if (!o) return so;
  if (o->struct_size < kOptionsV1Size)
    kiln::fail(Code::invalid_argument, "options->struct_size is " + num(o->struct_size) +
                                           ", expected at least " + num(kOptionsV1Size) +
                                           " (initialise the options with kiln_options_init)");
  if (o->threads < 0)
    kiln::fail(Code::invalid_argument,
               "options->threads is " + num(o->threads) + ", expected >= 0");
  if (o->batch_size < 0)
    kiln::fail(Code::invalid_argument,
               "options->batch_size is " + num(o->batch_size) + ", expected >= 0");
  so.threads = o->threads;
  so.batch = o->batch_size;
  const int32_t level =
      enum_field(o->log_level, "log_level", -1, KILN_LOG_OFF, "-1 or a kiln_log_level");
  if (level >= 0) so.log_level = kiln::LogLevel(level);
  const int32_t isa =
      enum_field(o->max_isa, "max_isa", KILN_ISA_DEFAULT, KILN_ISA_AVX512, "a kiln_isa value");
  if (isa != KILN_ISA_DEFAULT) so.max_isa = kiln::Isa(isa - 1);
  const int32_t tune = enum_field(o->tuning_mode, "tuning_mode", KILN_TUNING_DEFAULT,
                                  KILN_TUNING_FULL, "a kiln_tuning value");
  if (tune != KILN_TUNING_DEFAULT) so.tune = kiln::TuneMode(tune - 1);
  if (o->cache_dir) so.cache_dir = o->cache_dir;
  if (o->struct_size >= kOptionsV2Size) {
    const int32_t st = enum_field(o->strategy, "strategy", KILN_STRATEGY_DEFAULT,
                                  KILN_STRATEGY_HEURISTIC, "a kiln_strategy value");
    if (st != KILN_STRATEGY_DEFAULT) so.strategy = kiln::Strategy(st - 1);
    so.use_cache = o->disable_cache == 0;
  }
  if (o->struct_size >= kOptionsV3Size) {
    if (!(o->profile_budget_ms >= 0 && o->profile_budget_ms <= 1e9))
      kiln::fail(Code::invalid_argument,
                 "options->profile_budget_ms must be 0 (the default) or a positive number of "
                 "milliseconds up to 1e9");
    so.profile_budget_ms = o->profile_budget_ms;
  }
  if (o->struct_size >= kOptionsV4Size) {
    const int32_t acc =
        enum_field(o->accuracy, "accuracy", KILN_ACCURACY_DEFAULT, KILN_ACCURACY_FAST,
                   "a kiln_accuracy value: 0 default, 1 strict or 2 fast");
    if (acc == KILN_ACCURACY_STRICT) so.accuracy = kiln::Accuracy::strict;
    if (acc == KILN_ACCURACY_FAST) so.accuracy = kiln::Accuracy::fast;
  }
  if (o->struct_size >= kOptionsV5Size && o->input_shapes)
    so.input_shapes = kiln::parse_input_shapes(o->input_shapes);
  if (o->struct_size >= kOptionsV6Size)
    so.precision =
        kiln::Precision(enum_field(o->precision, "precision", KILN_PRECISION_F32,
                                   KILN_PRECISION_BF16, "a kiln_precision value: 0 f32 or 1 bf16"));
  return so;
}

// Every session handed out and not yet released. Lets each call report a released (or never
// created) handle instead of reading freed memory, and makes a second release a no-op. Never
// destroyed, so a release from another static destructor at exit is still safe.
struct LiveSessions {
  std::mutex mu;
  std::set<const kiln_session*> set;
};
LiveSessions& live_sessions() {
  static LiveSessions* live = new LiveSessions;
  return *live;
}
bool is_live(const kiln_session* s) {
  LiveSessions& l = live_sessions();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.set.count(s) != 0;
}

const kiln::Session& session_of(const kiln_session* s) {
  require(s, "session");
  if (!is_live(s) || !s->impl)
    kiln::fail(Code::invalid_argument,
               "session is not a live session (already released, or not made by "
               "kiln_session_create_*)");
  return *s->impl;
}

const kiln::IoInfo& io_at(const kiln_session* s, bool input, size_t index) {
  const auto& list = input ? session_of(s).inputs() : session_of(s).outputs();
  if (index >= list.size())
    kiln::fail(Code::invalid_argument, std::string(input ? "input" : "output") + " index " +
                                           num(index) + " is out of range (model has " +
                                           num(list.size()) + ")");
  return list[index];
}

size_t io_bytes(const kiln::IoInfo& io) {
  kiln::require_static(io);
  return size_t(kiln::shape_numel(io.shape)) * kiln::dtype_size(io.dtype);
}

std::string describe(const kiln::IoInfo& io, const char* kind, size_t index) {
  return std::string(kind) + " '" + io.name + "' (index " + num(index) + ", " +
         kiln::dtype_name(io.dtype) + " " + kiln::shape_str(io.shape) + ")";
}

// Wraps caller buffers as tensors after checking count, pointers, sizes and alignment.
std::vector<kiln::Tensor> wrap_buffers(const std::vector<kiln::IoInfo>& list, const char* kind,
                                       const char* buf_arg, const char* bytes_arg,
                                       void* const* bufs, const size_t* bytes, size_t count) {
  if (count != list.size())
    kiln::fail(Code::invalid_argument, std::string(kind) + "_count is " + num(count) +
                                           ", the model has " + num(list.size()) + " " + kind +
                                           (list.size() == 1 ? "" : "s"));
  if (count == 0) return {};
  require(bufs, buf_arg);
  require(bytes, bytes_arg);
  std::vector<kiln::Tensor> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const kiln::IoInfo& io = list[i];
    size_t want = io_bytes(io);
    if (bytes[i] != want)
      kiln::fail(Code::shape_mismatch, describe(io, kind, i) + ": buffer is " + num(bytes[i]) +
                                           " bytes, expected " + num(want) + " bytes");
    if (!bufs[i] && want != 0)
      kiln::fail(Code::invalid_argument, std::string(buf_arg) + "[" + num(i) + "] is NULL");
    if (reinterpret_cast<uintptr_t>(bufs[i]) % kiln::dtype_size(io.dtype) != 0)
      kiln::fail(Code::invalid_argument, describe(io, kind, i) +
                                             ": buffer is not aligned to its element size (" +
                                             num(kiln::dtype_size(io.dtype)) + ")");
    out.push_back(kiln::Tensor::wrap(io.dtype, io.shape, bufs[i]));
  }
  return out;
}

// kiln_session_run's body on `sess` (the session or one of its other batches).
void run_buffers(const kiln::Session& sess, const void* const* inputs, const size_t* input_bytes,
                 size_t input_count, void* const* outputs, const size_t* output_bytes,
                 size_t output_count) {
  // Inputs are only read by the executor; Tensor has no const-view type, hence the cast.
  std::vector<kiln::Tensor> in =
      wrap_buffers(sess.inputs(), "input", "inputs", "input_bytes",
                   const_cast<void* const*>(inputs), input_bytes, input_count);
  std::vector<kiln::Tensor> out = wrap_buffers(sess.outputs(), "output", "outputs", "output_bytes",
                                               outputs, output_bytes, output_count);
  sess.run(in, out);
}

// The session at another batch (kiln_session_run_batch); errors name the batch.
std::shared_ptr<const kiln::Session> at_batch(const kiln_session* s, int64_t batch) {
  const kiln::Session& sess = session_of(s);
  if (sess.batch() == 0)
    kiln::fail(Code::invalid_argument,
               "the model's inputs have no dims: there is no batch to change");
  return sess.at_batch(batch);  // checks the range
}

template <class Load>
kiln_status* create_session(const char* fn, kiln_session** out, Load&& load) noexcept {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    require(out, "out_session");
    auto s = std::make_unique<kiln_session>();
    s->impl = load();
    {
      LiveSessions& l = live_sessions();
      std::lock_guard<std::mutex> lock(l.mu);
      l.set.insert(s.get());
    }
    *out = s.release();
  });
}

kiln_status* io_count(const char* fn, const kiln_session* s, bool input, size_t* out) noexcept {
  return guarded(fn, [&] {
    const kiln::Session& sess = session_of(s);
    require(out, "out_count");
    *out = input ? sess.inputs().size() : sess.outputs().size();
  });
}

kiln_status* io_name(const char* fn, const kiln_session* s, bool input, size_t i,
                     const char** out) noexcept {
  return guarded(fn, [&] {
    require(out, "out_name");
    *out = io_at(s, input, i).name.c_str();
  });
}

kiln_status* io_dtype(const char* fn, const kiln_session* s, bool input, size_t i,
                      kiln_dtype* out) noexcept {
  return guarded(fn, [&] {
    require(out, "out_dtype");
    *out = kiln_dtype(io_at(s, input, i).dtype);
  });
}

kiln_status* io_shape(const char* fn, const kiln_session* s, bool input, size_t i,
                      const int64_t** dims, size_t* rank) noexcept {
  static const int64_t kNoDims[1] = {0};
  return guarded(fn, [&] {
    require(dims, "out_dims");
    require(rank, "out_rank");
    const kiln::Shape& shape = io_at(s, input, i).shape;
    *dims = shape.empty() ? kNoDims : shape.data();
    *rank = shape.size();
  });
}

kiln_status* io_byte_size(const char* fn, const kiln_session* s, bool input, size_t i,
                          size_t* out) noexcept {
  return guarded(fn, [&] {
    require(out, "out_bytes");
    *out = io_bytes(io_at(s, input, i));
  });
}

kiln_status* io_index(const char* fn, const kiln_session* s, bool input, const char* name,
                      size_t* out) noexcept {
  return guarded(fn, [&] {
    const kiln::Session& sess = session_of(s);
    require(name, "name");
    require(out, "out_index");
    const auto& list = input ? sess.inputs() : sess.outputs();
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].name == name) {
        *out = i;
        return;
      }
    kiln::fail(Code::invalid_argument, std::string("the model has no ") +
                                           (input ? "input" : "output") + " named '" + name + "'");
  });
}

}  // namespace

extern "C" {

KILN_API kiln_code kiln_status_code(const kiln_status* status) {
  return status ? status->code : KILN_OK;
}

KILN_API const char* kiln_status_message(const kiln_status* status) {
  return status ? status->message.c_str() : "";
}

KILN_API void kiln_status_release(kiln_status* status) {
  if (status != &g_oom_status) delete status;
}

KILN_API const char* kiln_code_name(kiln_code code) {
  // A C caller may pass any int. In C++, loading a kiln_code outside 0..7 is undefined, so read
  // the bytes as an int.
  int c;
  static_assert(sizeof c == sizeof code);
  std::memcpy(&c, &code, sizeof c);
  if (c < KILN_OK || c > KILN_INTERNAL) return "unknown";
  return kiln::code_name(Code(c));
}

KILN_API const char* kiln_version(void) {
  return KILN_VERSION_STRING;
}

KILN_API int32_t kiln_api_version(void) {
  return KILN_API_VERSION;
}

KILN_API kiln_status* kiln_set_log_callback(int32_t level, kiln_log_fn fn, void* user_data) {
  return guarded("kiln_set_log_callback", [&] {
    if (level < -1 || level > KILN_LOG_OFF)
      kiln::fail(Code::invalid_argument,
                 "level is " + num(level) + ", expected -1 or a kiln_log_level (0..6)");
    kiln::LogSink sink;
    if (fn) sink = [fn, user_data](int l, const char* msg) { fn(user_data, l, msg); };
    if (!kiln::set_log_sink(std::move(sink), level))
      kiln::fail(Code::invalid_argument, "called from inside the log callback");
  });
}

KILN_API kiln_status* kiln_options_init(kiln_options* options) {
  return guarded("kiln_options_init", [&] {
    require(options, "options");
    *options = kiln_options{};
    options->struct_size = sizeof(kiln_options);
    options->threads = 0;
    options->log_level = -1;
    options->batch_size = 0;
    options->cache_dir = nullptr;
    options->tuning_mode = 0;
    options->max_isa = 0;
    options->strategy = 0;
    options->disable_cache = 0;
    options->profile_budget_ms = 0;
    options->accuracy = 0;
    options->input_shapes = nullptr;
    options->precision = 0;
  });
}

KILN_API kiln_status* kiln_session_create_from_file(const char* path, const kiln_options* options,
                                                    kiln_session** out_session) {
  return create_session("kiln_session_create_from_file", out_session, [&] {
    require(path, "path");
    kiln::SessionOptions so = convert_options(options);
    return kiln::Session::load_file(path, so);
  });
}

KILN_API kiln_status* kiln_session_create_from_memory(const void* data, size_t size,
                                                      const kiln_options* options,
                                                      kiln_session** out_session) {
  return create_session("kiln_session_create_from_memory", out_session, [&] {
    require(data, "data");
    if (size == 0) kiln::fail(Code::invalid_model, "size is 0: an empty buffer is not a model");
    kiln::SessionOptions so = convert_options(options);
    return kiln::Session::load_memory(data, size, so);
  });
}

KILN_API void kiln_session_release(kiln_session* session) {
  // Destructors do not throw, but keep the no-exception promise even if one ever did.
  try {
    {
      LiveSessions& l = live_sessions();
      std::lock_guard<std::mutex> lock(l.mu);
      if (l.set.erase(session) == 0) return;  // NULL, released already, or not a session
    }
    delete session;
  } catch (...) {
  }
}

KILN_API kiln_status* kiln_session_input_count(const kiln_session* session, size_t* out_count) {
  return io_count("kiln_session_input_count", session, true, out_count);
}
KILN_API kiln_status* kiln_session_output_count(const kiln_session* session, size_t* out_count) {
  return io_count("kiln_session_output_count", session, false, out_count);
}

KILN_API kiln_status* kiln_session_input_name(const kiln_session* session, size_t index,
                                              const char** out_name) {
  return io_name("kiln_session_input_name", session, true, index, out_name);
}
KILN_API kiln_status* kiln_session_output_name(const kiln_session* session, size_t index,
                                               const char** out_name) {
  return io_name("kiln_session_output_name", session, false, index, out_name);
}

KILN_API kiln_status* kiln_session_input_dtype(const kiln_session* session, size_t index,
                                               kiln_dtype* out_dtype) {
  return io_dtype("kiln_session_input_dtype", session, true, index, out_dtype);
}
KILN_API kiln_status* kiln_session_output_dtype(const kiln_session* session, size_t index,
                                                kiln_dtype* out_dtype) {
  return io_dtype("kiln_session_output_dtype", session, false, index, out_dtype);
}

KILN_API kiln_status* kiln_session_input_shape(const kiln_session* session, size_t index,
                                               const int64_t** out_dims, size_t* out_rank) {
  return io_shape("kiln_session_input_shape", session, true, index, out_dims, out_rank);
}
KILN_API kiln_status* kiln_session_output_shape(const kiln_session* session, size_t index,
                                                const int64_t** out_dims, size_t* out_rank) {
  return io_shape("kiln_session_output_shape", session, false, index, out_dims, out_rank);
}

KILN_API kiln_status* kiln_session_input_byte_size(const kiln_session* session, size_t index,
                                                   size_t* out_bytes) {
  return io_byte_size("kiln_session_input_byte_size", session, true, index, out_bytes);
}
KILN_API kiln_status* kiln_session_output_byte_size(const kiln_session* session, size_t index,
                                                    size_t* out_bytes) {
  return io_byte_size("kiln_session_output_byte_size", session, false, index, out_bytes);
}

KILN_API kiln_status* kiln_session_input_index(const kiln_session* session, const char* name,
                                               size_t* out_index) {
  return io_index("kiln_session_input_index", session, true, name, out_index);
}
KILN_API kiln_status* kiln_session_output_index(const kiln_session* session, const char* name,
                                                size_t* out_index) {
  return io_index("kiln_session_output_index", session, false, name, out_index);
}

KILN_API kiln_status* kiln_session_isa(const kiln_session* session, kiln_isa* out_isa) {
  return guarded("kiln_session_isa", [&] {
    const kiln::Session& sess = session_of(session);
    require(out_isa, "out_isa");
    *out_isa = kiln_isa(int(sess.isa()) + 1);
  });
}

KILN_API kiln_status* kiln_session_run(const kiln_session* session, const void* const* inputs,
                                       const size_t* input_bytes, size_t input_count,
                                       void* const* outputs, const size_t* output_bytes,
                                       size_t output_count) {
  return guarded("kiln_session_run", [&] {
    run_buffers(session_of(session), inputs, input_bytes, input_count, outputs, output_bytes,
                output_count);
  });
}

KILN_API kiln_status* kiln_session_output_dynamic(const kiln_session* session, size_t index,
                                                  int32_t* out_dynamic) {
  return guarded("kiln_session_output_dynamic", [&] {
    const kiln::IoInfo& io = io_at(session, false, index);
    require(out_dynamic, "out_dynamic");
    *out_dynamic = io.dynamic ? 1 : 0;
  });
}

KILN_API kiln_status* kiln_session_run_outputs(const kiln_session* session,
                                               const void* const* inputs, const size_t* input_bytes,
                                               size_t input_count, kiln_outputs** out_outputs) {
  return guarded("kiln_session_run_outputs", [&] {
    const kiln::Session& sess = session_of(session);
    require(out_outputs, "out_outputs");
    std::vector<kiln::Tensor> in =
        wrap_buffers(sess.inputs(), "input", "inputs", "input_bytes",
                     const_cast<void* const*>(inputs), input_bytes, input_count);
    auto out = std::make_unique<kiln_outputs>();
    out->tensors = sess.run(in);
    *out_outputs = out.release();
  });
}

KILN_API kiln_status* kiln_outputs_get(const kiln_outputs* outputs, size_t index,
                                       const void** out_data, const int64_t** out_dims,
                                       size_t* out_rank) {
  static const int64_t kNoDims[1] = {0};
  return guarded("kiln_outputs_get", [&] {
    require(outputs, "outputs");
    require(out_data, "out_data");
    require(out_dims, "out_dims");
    require(out_rank, "out_rank");
    if (index >= outputs->tensors.size())
      kiln::fail(Code::invalid_argument, "output index " + num(index) + " is out of range (" +
                                             num(outputs->tensors.size()) + " outputs)");
    const kiln::Tensor& t = outputs->tensors[index];
    *out_data = t.raw();
    *out_dims = t.shape().empty() ? kNoDims : t.shape().data();
    *out_rank = t.shape().size();
  });
}

KILN_API void kiln_outputs_release(kiln_outputs* outputs) {
  delete outputs;
}

KILN_API kiln_status* kiln_session_output_shape_for_batch(const kiln_session* session,
                                                          int64_t batch, size_t index,
                                                          int64_t* dims, size_t capacity,
                                                          size_t* out_rank) {
  return guarded("kiln_session_output_shape_for_batch", [&] {
    io_at(session, false, index);  // checks the session and the index first
    require(out_rank, "out_rank");
    const kiln::Shape& shape = at_batch(session, batch)->outputs()[index].shape;
    if (capacity < shape.size())
      kiln::fail(Code::invalid_argument, "capacity is " + num(capacity) + ", the output has " +
                                             num(shape.size()) + " dims");
    if (!shape.empty()) require(dims, "dims");
    for (size_t i = 0; i < shape.size(); ++i) dims[i] = shape[i];
    *out_rank = shape.size();
  });
}

KILN_API kiln_status* kiln_session_run_batch(const kiln_session* session, int64_t batch,
                                             const void* const* inputs, const size_t* input_bytes,
                                             size_t input_count, void* const* outputs,
                                             const size_t* output_bytes, size_t output_count) {
  return guarded("kiln_session_run_batch", [&] {
    run_buffers(*at_batch(session, batch), inputs, input_bytes, input_count, outputs, output_bytes,
                output_count);
  });
}

KILN_API kiln_status* kiln_session_plan_json(const kiln_session* session, const char** out_json) {
  return guarded("kiln_session_plan_json", [&] {
    const kiln::Session& sess = session_of(session);
    require(out_json, "out_json");
    // The plan never changes after creation; concurrent first calls make it once.
    auto* s = const_cast<kiln_session*>(session);
    std::call_once(s->plan_once, [&] { s->plan_json = kiln::plan_json(sess); });
    *out_json = s->plan_json.c_str();
  });
}

KILN_API kiln_status* kiln_session_profile_json(const kiln_session* session, int32_t runs,
                                                char** out_json) {
  return guarded("kiln_session_profile_json", [&] {
    const kiln::Session& sess = session_of(session);
    require(out_json, "out_json");
    if (runs < 1 || runs > 100000)
      kiln::fail(Code::invalid_argument, "runs is " + num(runs) + ", expected 1..100000");
    std::vector<kiln::Tensor> ins = kiln::random_inputs(sess), outs = kiln::make_outputs(sess);
    const std::string json = kiln::profile_json(sess, kiln::profile_layers(sess, ins, outs, runs));
    char* copy = static_cast<char*>(std::malloc(json.size() + 1));
    if (!copy) throw std::bad_alloc();
    std::memcpy(copy, json.c_str(), json.size() + 1);
    *out_json = copy;
  });
}

KILN_API const char* kiln_machine_json(void) {
  try {
    static const std::string json = kiln::machine_json();
    return json.c_str();
  } catch (...) {
    return "{}";  // only if the first call could not allocate
  }
}

KILN_API void kiln_string_release(char* str) {
  std::free(str);
}

}  // extern "C"
