// Misuse of the public C API, through kiln/kiln.h only: every function with bad handles,
// NULL or wrong-sized buffers, wrong dtypes, out-of-range values, released sessions, and
// calls from many threads at once. Every misuse must give a status (never a crash), leave
// out-parameters untouched, and leave the session usable. Models are hand-encoded protobuf
// bytes with hand-computed results. (test_c_api.cpp covers the documented, correct use.)
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "api/capi_test_util.h"

namespace fs = std::filesystem;

namespace {

using namespace capi_test;

// Float initializer with raw data.
Pb init_f(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  Pb t;
  for (int64_t d : dims) t.i(1, uint64_t(d));
  t.i(2, kFloat).s(8, name);
  t.s(9, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return t;
}

// a: f32 [2,2], k: i64 [4] -> y = Relu(a) (f32 [2,2]), k2 = k + k (i64 [4]).
std::string mixed_model() {
  Pb g;
  g.m(1, node("Relu", {"a"}, {"y"})).m(1, node("Add", {"k", "k"}, {"k2"})).s(2, "mixed");
  g.m(11, value_info("a", {2, 2})).m(11, value_info("k", {4}, kInt64));
  g.m(12, value_info("y", {2, 2})).m(12, value_info("k2", {4}, kInt64));
  return model(g);
}

// No inputs at all: y = c1 + c2, folded to a constant at load.
std::string constant_model() {
  Pb g;
  g.m(1, node("Add", {"c1", "c2"}, {"y"})).s(2, "const");
  g.m(5, init_f("c1", {3}, {1.f, 2.f, 3.f})).m(5, init_f("c2", {3}, {0.5f, -4.f, 10.f}));
  g.m(12, value_info("y", {3}));
  return model(g);
}

// x [1,2,4,4] -> Conv(3x3 ones, pad 1) -> Relu: a JIT conv and a multi-threaded executor.
std::string conv_model() {
  Pb attr_pads;
  attr_pads.s(1, "pads").i(20, 7);  // name, type INTS
  for (int k = 0; k < 4; ++k) attr_pads.i(8, 1);
  Pb conv = node("Conv", {"x", "w"}, {"c"});
  conv.m(5, attr_pads);
  Pb g;
  g.m(1, conv).m(1, node("Relu", {"c"}, {"y"})).s(2, "conv");
  g.m(5, init_f("w", {8, 2, 3, 3}, std::vector<float>(8 * 2 * 9, 1.f)));
  g.m(11, value_info("x", {1, 2, 4, 4})).m(12, value_info("y", {1, 8, 4, 4}));
  return model(g);
}

// Expected conv_model output for input x: every output channel is the 3x3 box sum of
// (x[0] + x[1]) with zero padding, then Relu.
std::vector<float> conv_expected(const std::vector<float>& x) {
  std::vector<float> y(8 * 16);
  for (int oc = 0; oc < 8; ++oc)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) {
        float s = 0;
        for (int c = 0; c < 2; ++c)
          for (int dh = -1; dh <= 1; ++dh)
            for (int dw = -1; dw <= 1; ++dw) {
              int hh = h + dh, ww = w + dw;
              if (hh >= 0 && hh < 4 && ww >= 0 && ww < 4) s += x[size_t(c * 16 + hh * 4 + ww)];
            }
        y[size_t(oc * 16 + h * 4 + w)] = s > 0 ? s : 0;
      }
  return y;
}

kiln_options threads_opt(int32_t threads) {
  kiln_options o;
  kiln_options_init(&o);
  o.threads = threads;
  return o;
}

}  // namespace

TEST_CASE("misuse: status and version functions accept anything") {
  kiln_status_release(nullptr);
  CHECK(kiln_status_code(nullptr) == KILN_OK);
  CHECK(std::string(kiln_status_message(nullptr)).empty());
  const char* names[] = {
      "ok",        "invalid argument", "invalid model", "unsupported", "shape mismatch",
      "I/O error", "out of memory",    "internal error"};
  for (int c = 0; c <= 7; ++c) CHECK(std::string(kiln_code_name(kiln_code(c))) == names[c]);
  for (int c : {-100, -1, 8, 1000}) CHECK(std::string(kiln_code_name(kiln_code(c))) == "unknown");
  CHECK(kiln_version() != nullptr);
  // A status message stays valid until its own release, independently of other statuses.
  kiln_status* a = kiln_options_init(nullptr);
  kiln_status* b = kiln_session_input_count(nullptr, nullptr);
  REQUIRE(a);
  REQUIRE(b);
  const std::string am = kiln_status_message(a);
  kiln_status_release(b);
  CHECK(std::string(kiln_status_message(a)) == am);
  CHECK(kiln_status_code(a) == KILN_INVALID_ARGUMENT);
  kiln_status_release(a);
}

TEST_CASE("misuse: options") {
  const std::string m = mixed_model();
  kiln_session* s = nullptr;
  kiln_options o;
  SUBCASE("garbage in every field but struct_size is reported, not used") {
    std::memset(&o, 0xff, sizeof o);
    o.struct_size = sizeof o;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "options->");
    CHECK(s == nullptr);
  }
  SUBCASE("an uninitialised (zeroed) struct is rejected") {
    std::memset(&o, 0, sizeof o);
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "struct_size is 0");
  }
  SUBCASE("absurd sizes and counts") {
    kiln_options_init(&o);
    o.struct_size = SIZE_MAX;  // a "newer client": the unknown tail is never read
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    kiln_session_release(s);
    kiln_options_init(&o);
    o.batch_size = int64_t(1) << 40;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "batch size");
    kiln_options_init(&o);
    o.threads = INT32_MIN;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "threads");
    kiln_options_init(&o);
    o.log_level = INT32_MAX;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "log_level");
  }
  SUBCASE("absurd thread counts are refused at load (TBB would crash), many are fine") {
    for (int32_t threads : {INT32_MAX, 4097}) {
      kiln_options_init(&o);
      o.threads = threads;
      CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
                "threads must be 0..4096");
      CHECK(s == nullptr);
    }
    kiln_options_init(&o);
    o.threads = 64;  // more than the cores: oversubscribed, still correct
    SessionGuard g{load_mem(m, &o)};
    REQUIRE(g.s);
    const float a[4] = {1, -1, 2, -2};
    const int64_t k[4] = {1, 2, 3, 4};
    float y[4];
    int64_t k2[4];
    const void* in[2] = {a, k};
    void* out[2] = {y, k2};
    size_t ib[2] = {16, 32}, ob[2] = {16, 32};
    CHECK_OK(kiln_session_run(g.s, in, ib, 2, out, ob, 2));
    CHECK(y[0] == 1.f);
    CHECK(y[1] == 0.f);
    CHECK(k2[3] == 8);
  }
  SUBCASE("an unusable cache folder only costs the cache: the load still works") {
    kiln_options_init(&o);
    o.cache_dir = "/proc/kiln-cache-cannot-be-here";
    o.tuning_mode = KILN_TUNING_FULL;
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    kiln_session_release(s);
  }
  SUBCASE("tuning mode and strategy out of range") {
    kiln_options_init(&o);
    o.tuning_mode = 4;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "tuning_mode is 4");
    kiln_options_init(&o);
    o.strategy = -1;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "strategy is -1");
    kiln_options_init(&o);
    o.strategy = KILN_STRATEGY_HEURISTIC;
    o.disable_cache = 1;
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    kiln_session_release(s);
  }
}

TEST_CASE("misuse: create functions") {
  kiln_session* s = reinterpret_cast<kiln_session*>(uintptr_t(0x1234));  // must become NULL
  SUBCASE("files that are not models") {
    const fs::path dir = fs::path(KILN_TEST_TMP) / "misuse";
    fs::create_directories(dir);
    CHECK_ERR(kiln_session_create_from_file(dir.c_str(), nullptr, &s), KILN_IO_ERROR,
              "is a directory");
    CHECK(s == nullptr);
    CHECK_ERR(kiln_session_create_from_file("", nullptr, &s), KILN_IO_ERROR, "");
    const fs::path empty = dir / "empty.onnx";
    {
      std::FILE* f = std::fopen(empty.c_str(), "wb");
      REQUIRE(f);
      std::fclose(f);
    }
    CHECK_ERR(kiln_session_create_from_file(empty.c_str(), nullptr, &s), KILN_INVALID_MODEL,
              "empty.onnx");
  }
  SUBCASE("memory: zero and absurd sizes are refused without reading the buffer") {
    const char byte = 0;
    CHECK_ERR(kiln_session_create_from_memory(&byte, 0, nullptr, &s), KILN_INVALID_MODEL,
              "size is 0");
    CHECK(s == nullptr);
    // Only one byte is readable: a size above 2 GiB must be rejected before parsing (ASan
    // would report any read).
    CHECK_ERR(kiln_session_create_from_memory(&byte, size_t(3) << 30, nullptr, &s),
              KILN_UNSUPPORTED, "2 GiB");
    CHECK_ERR(kiln_session_create_from_memory(&byte, SIZE_MAX, nullptr, &s), KILN_UNSUPPORTED,
              "2 GiB");
    CHECK(s == nullptr);
  }
  SUBCASE("NULL data with a size, and NULL path, leave out_session NULL") {
    CHECK_ERR(kiln_session_create_from_memory(nullptr, 100, nullptr, &s), KILN_INVALID_ARGUMENT,
              "data is NULL");
    CHECK(s == nullptr);
    s = reinterpret_cast<kiln_session*>(uintptr_t(0x1234));
    CHECK_ERR(kiln_session_create_from_file(nullptr, nullptr, &s), KILN_INVALID_ARGUMENT,
              "path is NULL");
    CHECK(s == nullptr);
  }
}

TEST_CASE("misuse: queries leave out-parameters untouched on every error") {
  SessionGuard g{load_mem(mixed_model())};
  REQUIRE(g.s);
  const size_t bad_index[] = {2, 1000, SIZE_MAX};
  for (bool input : {true, false}) {
    CAPTURE(input);
    for (size_t i : bad_index) {
      CAPTURE(i);
      const char* name = "untouched";
      // An invalid enum value must not be loaded (UB), so fill and compare the bytes.
      const int32_t dt_mark = 0x5a5a5a5a;
      kiln_dtype dt;
      std::memcpy(&dt, &dt_mark, sizeof dt);
      const int64_t* dims = reinterpret_cast<const int64_t*>(uintptr_t(8));
      size_t rank = 77, bytes = 77;
      auto name_fn = input ? kiln_session_input_name : kiln_session_output_name;
      auto dtype_fn = input ? kiln_session_input_dtype : kiln_session_output_dtype;
      auto shape_fn = input ? kiln_session_input_shape : kiln_session_output_shape;
      auto bytes_fn = input ? kiln_session_input_byte_size : kiln_session_output_byte_size;
      CHECK_ERR(name_fn(g.s, i, &name), KILN_INVALID_ARGUMENT, "out of range");
      CHECK_ERR(dtype_fn(g.s, i, &dt), KILN_INVALID_ARGUMENT, "out of range");
      CHECK_ERR(shape_fn(g.s, i, &dims, &rank), KILN_INVALID_ARGUMENT, "out of range");
      CHECK_ERR(bytes_fn(g.s, i, &bytes), KILN_INVALID_ARGUMENT, "out of range");
      CHECK(std::string(name) == "untouched");
      CHECK(std::memcmp(&dt, &dt_mark, sizeof dt) == 0);
      CHECK(dims == reinterpret_cast<const int64_t*>(uintptr_t(8)));
      CHECK(rank == 77);
      CHECK(bytes == 77);
    }
    size_t idx = 55;
    auto index_fn = input ? kiln_session_input_index : kiln_session_output_index;
    CHECK_ERR(index_fn(g.s, "", &idx), KILN_INVALID_ARGUMENT, "no");
    CHECK_ERR(index_fn(g.s, "nope", &idx), KILN_INVALID_ARGUMENT, "'nope'");
    CHECK_ERR(index_fn(nullptr, "a", &idx), KILN_INVALID_ARGUMENT, "session is NULL");
    CHECK(idx == 55);
  }
  // The session still answers correctly afterwards; the dtypes are what the model says.
  kiln_dtype dt = KILN_DTYPE_F32;
  CHECK_OK(kiln_session_input_dtype(g.s, 1, &dt));
  CHECK(dt == KILN_DTYPE_I64);
  size_t bytes = 0;
  CHECK_OK(kiln_session_input_byte_size(g.s, 1, &bytes));
  CHECK(bytes == 32);
  CHECK_OK(kiln_session_output_byte_size(g.s, 0, &bytes));
  CHECK(bytes == 16);
}

TEST_CASE("misuse: run with wrong dtypes, sizes, counts and pointers") {
  SessionGuard g{load_mem(mixed_model())};
  REQUIRE(g.s);
  alignas(16) float a[4] = {1, -2, 3, -4};
  alignas(16) int64_t k[4] = {5, -6, INT64_MAX, 0};
  alignas(16) float y[4] = {};
  alignas(16) int64_t k2[4] = {};
  const void* in[2] = {a, k};
  void* out[2] = {y, k2};
  size_t ib[2] = {16, 32}, ob[2] = {16, 32};

  SUBCASE("f32-sized buffer for the int64 input (the wrong dtype) names the input and dtype") {
    size_t wrong[2] = {16, 16};
    CHECK_ERR(kiln_session_run(g.s, in, wrong, 2, out, ob, 2), KILN_SHAPE_MISMATCH, "input 'k'");
    CHECK_ERR(kiln_session_run(g.s, in, wrong, 2, out, ob, 2), KILN_SHAPE_MISMATCH, "int64");
    size_t wrong_out[2] = {16, 16};
    CHECK_ERR(kiln_session_run(g.s, in, ib, 2, out, wrong_out, 2), KILN_SHAPE_MISMATCH,
              "output 'k2'");
  }
  SUBCASE("sizes off by one byte and absurd sizes") {
    for (size_t bad : {size_t(15), size_t(17), size_t(0), SIZE_MAX}) {
      size_t wrong[2] = {bad, 32};
      CHECK_ERR(kiln_session_run(g.s, in, wrong, 2, out, ob, 2), KILN_SHAPE_MISMATCH,
                "expected 16 bytes");
    }
  }
  SUBCASE("an int64 buffer aligned to 4 only") {
    alignas(16) char raw[40];
    const void* mis[2] = {a, raw + 4};
    CHECK_ERR(kiln_session_run(g.s, mis, ib, 2, out, ob, 2), KILN_INVALID_ARGUMENT, "input 'k'");
    void* mis_out[2] = {y, raw + 4};
    CHECK_ERR(kiln_session_run(g.s, in, ib, 2, mis_out, ob, 2), KILN_INVALID_ARGUMENT, "aligned");
  }
  SUBCASE("counts: zero, too many, SIZE_MAX (with arrays that are too short)") {
    CHECK_ERR(kiln_session_run(g.s, nullptr, nullptr, 0, out, ob, 2), KILN_INVALID_ARGUMENT,
              "input_count is 0");
    CHECK_ERR(kiln_session_run(g.s, in, ib, SIZE_MAX, out, ob, 2), KILN_INVALID_ARGUMENT,
              "input_count");
    CHECK_ERR(kiln_session_run(g.s, in, ib, 2, out, ob, 3), KILN_INVALID_ARGUMENT,
              "output_count is 3");
    CHECK_ERR(kiln_session_run(g.s, in, ib, 2, nullptr, nullptr, 0), KILN_INVALID_ARGUMENT,
              "output_count is 0");
  }
  SUBCASE("NULL element inside the arrays") {
    const void* in_null[2] = {a, nullptr};
    CHECK_ERR(kiln_session_run(g.s, in_null, ib, 2, out, ob, 2), KILN_INVALID_ARGUMENT,
              "inputs[1] is NULL");
    void* out_null[2] = {y, nullptr};
    CHECK_ERR(kiln_session_run(g.s, in, ib, 2, out_null, ob, 2), KILN_INVALID_ARGUMENT,
              "outputs[1] is NULL");
  }
  // After any of the failures above, a correct run still works (int64 adds wrap).
  CHECK_OK(kiln_session_run(g.s, in, ib, 2, out, ob, 2));
  const float want_y[4] = {1, 0, 3, 0};
  const int64_t want_k2[4] = {10, -12, -2, 0};  // INT64_MAX + INT64_MAX wraps to -2
  for (int i = 0; i < 4; ++i) {
    CHECK(y[i] == want_y[i]);
    CHECK(k2[i] == want_k2[i]);
  }
}

TEST_CASE("misuse: a model without inputs runs with empty input arrays") {
  SessionGuard g{load_mem(constant_model())};
  size_t n = 9;
  CHECK_OK(kiln_session_input_count(g.s, &n));
  CHECK(n == 0);
  float y[3] = {};
  void* out[1] = {y};
  size_t ob[1] = {12};
  CHECK_OK(kiln_session_run(g.s, nullptr, nullptr, 0, out, ob, 1));
  CHECK(y[0] == 1.5f);
  CHECK(y[1] == -2.f);
  CHECK(y[2] == 13.f);
  const void* in[1] = {y};
  size_t ib[1] = {12};
  CHECK_ERR(kiln_session_run(g.s, in, ib, 1, out, ob, 1), KILN_INVALID_ARGUMENT,
            "input_count is 1, the model has 0 inputs");
}

TEST_CASE("misuse: a released session is reported, not used") {
  kiln_session* s = load_mem(mixed_model());
  REQUIRE(s);
  kiln_session_release(s);
  // The handle is dangling now. The library tracks live sessions, so every call reports it
  // (ASan would flag any read of the freed memory) and a second release is a no-op.
  size_t n = 0;
  CHECK_ERR(kiln_session_input_count(s, &n), KILN_INVALID_ARGUMENT, "not a live session");
  const char* name = nullptr;
  CHECK_ERR(kiln_session_output_name(s, 0, &name), KILN_INVALID_ARGUMENT, "not a live session");
  kiln_isa isa;
  CHECK_ERR(kiln_session_isa(s, &isa), KILN_INVALID_ARGUMENT, "not a live session");
  float a[4] = {};
  int64_t k[4] = {};
  const void* in[2] = {a, k};
  void* out[2] = {a, k};
  size_t ib[2] = {16, 32};
  CHECK_ERR(kiln_session_run(s, in, ib, 2, out, ib, 2), KILN_INVALID_ARGUMENT,
            "not a live session");
  kiln_session_release(s);  // double release: ignored
  // Handles that never were sessions are reported the same way.
  alignas(64) unsigned char junk[256];
  std::memset(junk, 0xab, sizeof junk);
  CHECK_ERR(kiln_session_input_count(reinterpret_cast<kiln_session*>(junk), &n),
            KILN_INVALID_ARGUMENT, "not a live session");
  kiln_session_release(reinterpret_cast<kiln_session*>(junk));  // ignored, nothing freed
}

TEST_CASE("misuse: many threads at once") {
  const std::string conv = conv_model();
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float((i * 7) % 11) - 4.5f;
  const std::vector<float> want = conv_expected(x);
  constexpr int kThreads = 6, kIters = 6;

  SUBCASE("sessions created, queried, run and released concurrently") {
    std::atomic<int> failures{0}, mismatches{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
      pool.emplace_back([&, t] {
        kiln_options o = threads_opt(1 + t % 2);
        for (int it = 0; it < kIters; ++it) {
          kiln_session* s = nullptr;
          kiln_status* st = kiln_session_create_from_memory(conv.data(), conv.size(), &o, &s);
          if (st) {
            ++failures;
            kiln_status_release(st);
            continue;
          }
          size_t n = 0, bytes = 0;
          kiln_status_release(kiln_session_input_count(s, &n));
          kiln_status_release(kiln_session_output_byte_size(s, 0, &bytes));
          if (n != 1 || bytes != want.size() * 4) ++mismatches;
          std::vector<float> y(want.size());
          const void* in[1] = {x.data()};
          void* out[1] = {y.data()};
          size_t ib[1] = {x.size() * 4}, ob[1] = {y.size() * 4};
          st = kiln_session_run(s, in, ib, 1, out, ob, 1);
          if (st) ++failures;
          kiln_status_release(st);
          if (y != want) ++mismatches;
          kiln_session_release(s);
        }
      });
    for (auto& th : pool) th.join();
    CHECK(failures == 0);
    CHECK(mismatches == 0);
  }
  SUBCASE("one session: good runs, bad runs and queries interleaved") {
    for (int32_t threads : {1, 2}) {
      CAPTURE(threads);
      kiln_options o = threads_opt(threads);
      SessionGuard g{load_mem(conv, &o)};
      REQUIRE(g.s);
      std::atomic<int> failures{0}, mismatches{0}, wrong_errors{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < kThreads; ++t)
        pool.emplace_back([&, t] {
          std::vector<float> y(want.size());
          const void* in[1] = {x.data()};
          void* out[1] = {y.data()};
          size_t ib[1] = {x.size() * 4}, ob[1] = {y.size() * 4};
          size_t bad[1] = {x.size() * 4 - 4};
          for (int it = 0; it < kIters * 2; ++it) {
            if ((it + t) % 3 == 0) {
              // A misuse from this thread must not disturb the others.
              kiln_status* st = kiln_session_run(g.s, in, bad, 1, out, ob, 1);
              if (kiln_status_code(st) != KILN_SHAPE_MISMATCH) ++wrong_errors;
              kiln_status_release(st);
              const char* name = nullptr;
              st = kiln_session_input_name(g.s, 3, &name);
              if (kiln_status_code(st) != KILN_INVALID_ARGUMENT) ++wrong_errors;
              kiln_status_release(st);
              continue;
            }
            std::fill(y.begin(), y.end(), -1.f);
            kiln_status* st = kiln_session_run(g.s, in, ib, 1, out, ob, 1);
            if (st) ++failures;
            kiln_status_release(st);
            if (y != want) ++mismatches;
          }
        });
      for (auto& th : pool) th.join();
      CHECK(failures == 0);
      CHECK(mismatches == 0);
      CHECK(wrong_errors == 0);
    }
  }
  SUBCASE("options and statuses from many threads") {
    std::atomic<int> bad{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
      pool.emplace_back([&] {
        for (int it = 0; it < 200; ++it) {
          kiln_options o;
          kiln_status* st = kiln_options_init(&o);
          if (st || o.struct_size != sizeof o) ++bad;
          st = kiln_options_init(nullptr);
          if (kiln_status_code(st) != KILN_INVALID_ARGUMENT ||
              !contains(kiln_status_message(st), "options is NULL"))
            ++bad;
          kiln_status_release(st);
        }
      });
    for (auto& th : pool) th.join();
    CHECK(bad == 0);
  }
}
