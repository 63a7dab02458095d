// The installed C++ header kiln/kiln.hpp (RAII over the C API) and the C API's version and
// report functions. Only public headers are included here: kiln.hpp's classes live in
// kiln::api_v0 and must not meet Kiln's internal kiln:: names in one translation unit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <kiln/kiln.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "api/capi_test_util.h"

using namespace capi_test;

namespace {

// Max |a - b| / max(1, max |b|) over float buffers.
double rel_err(const float* a, const float* b, size_t n) {
  double diff = 0, scale = 1;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / scale;
}

// Counts occurrences of `key` (a quoted JSON key) in `json`.
size_t count(const std::string& json, const std::string& key) {
  size_t n = 0;
  for (size_t p = json.find(key); p != std::string::npos; p = json.find(key, p + 1)) ++n;
  return n;
}

kiln::Options test_options() {
  kiln::Options o;
  o.threads(2).tuning(KILN_TUNING_NONE);
  return o;
}

}  // namespace

TEST_CASE("cpp api: versions agree (header, library, CMake package)") {
  CHECK(std::string(kiln_version()) == KILN_VERSION_STRING);
  CHECK(kiln::version() == KILN_VERSION_STRING);
  CHECK(kiln_api_version() == KILN_API_VERSION);
  CHECK(KILN_API_VERSION ==
        KILN_VERSION_MAJOR * 10000 + KILN_VERSION_MINOR * 100 + KILN_VERSION_PATCH);
  // The CMake project version, passed to the core as KILN_VERSION.
  CHECK(std::string(KILN_VERSION) == KILN_VERSION_STRING);
}

TEST_CASE("cpp api: a fixture network matches PyTorch through kiln::Session") {
  for (const char* name : {"tiny_resnet_op13", "two_in_out_op17"}) {
    CAPTURE(name);
    const Fixture fx = load_fixture(fixture_dir(name));
    kiln::Session s((fx.dir / "model.onnx").string(), test_options());
    REQUIRE(s.inputs().size() == fx.inputs.size());
    REQUIRE(s.outputs().size() == fx.outputs.size());
    std::vector<const void*> in;
    for (size_t i = 0; i < fx.inputs.size(); ++i) {
      CHECK(s.inputs()[i].bytes == fx.inputs[i].data.size());
      CHECK(s.input_index(s.inputs()[i].name) == i);
      in.push_back(fx.inputs[i].data.data());
    }
    std::vector<std::vector<float>> out;
    std::vector<void*> out_ptrs;
    for (const kiln::TensorInfo& t : s.outputs()) out.emplace_back(t.elements());
    for (auto& v : out) out_ptrs.push_back(v.data());
    s.run(in, out_ptrs);
    for (size_t i = 0; i < out.size(); ++i) {
      REQUIRE(fx.outputs[i].data.size() == out[i].size() * sizeof(float));
      CHECK(rel_err(out[i].data(), reinterpret_cast<const float*>(fx.outputs[i].data.data()),
                    out[i].size()) <= fixture_tol(fx.dir));
    }
    // The vector overload gives the same bytes.
    std::vector<std::vector<float>> vin;
    for (const Npy& n : fx.inputs) {
      const float* f = reinterpret_cast<const float*>(n.data.data());
      vin.emplace_back(f, f + n.data.size() / sizeof(float));
    }
    const auto again = s.run(vin);
    REQUIRE(again.size() == out.size());
    for (size_t i = 0; i < out.size(); ++i) CHECK(again[i] == out[i]);
  }
}

TEST_CASE("cpp api: failures throw kiln::Error with the C status code and message") {
  try {
    kiln::Session s("/nonexistent/model.onnx");
    FAIL("loading a missing file did not throw");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == KILN_IO_ERROR);
    CHECK(std::string(e.code_name()) == "I/O error");
    CHECK(contains(e.what(), "/nonexistent/model.onnx"));
  }
  const std::string garbage = "not an onnx model";
  CHECK_THROWS_AS(kiln::Session::from_memory(garbage.data(), garbage.size()), kiln::Error);
  // Bad options are the library's errors too, not the wrapper's.
  kiln::Options bad;
  bad.threads(-3);
  const Fixture fx = load_fixture(fixture_dir("tiny_resnet_op13"));
  try {
    kiln::Session s((fx.dir / "model.onnx").string(), bad);
    FAIL("threads -3 was accepted");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == KILN_INVALID_ARGUMENT);
    CHECK(contains(e.what(), "threads"));
  }
  kiln::Session s((fx.dir / "model.onnx").string(), test_options());
  std::vector<float> small(3), out(s.outputs()[0].elements());
  try {
    s.run({small});
    FAIL("a 3-element input was accepted");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == KILN_SHAPE_MISMATCH);
  }
  CHECK_THROWS_AS(s.input_index("no such input"), kiln::Error);
  CHECK_THROWS_AS(s.run({}, {out.data()}), kiln::Error);  // input count
}

TEST_CASE("cpp api: Options copies keep their cache_dir; sessions move") {
  static_assert(!std::is_copy_constructible_v<kiln::Session>);
  static_assert(std::is_nothrow_move_constructible_v<kiln::Session>);
  kiln::Options a;
  a.cache_dir(std::string(KILN_TEST_TMP) + "/cpp-api-cache");
  kiln::Options b = a;
  a.cache_dir("elsewhere");
  REQUIRE(b.get()->cache_dir != nullptr);
  CHECK(std::string(b.get()->cache_dir) == std::string(KILN_TEST_TMP) + "/cpp-api-cache");
  CHECK(b.get()->cache_dir != a.get()->cache_dir);  // its own copy, not a's buffer
  CHECK(kiln::Options().get()->cache_dir == nullptr);

  const Fixture fx = load_fixture(fixture_dir("tiny_resnet_op13"));
  kiln::Session s1((fx.dir / "model.onnx").string(), test_options());
  kiln_session* handle = s1.get();
  kiln::Session s2 = std::move(s1);
  CHECK(s2.get() == handle);
  CHECK(s2.inputs().size() == 1);
}

TEST_CASE("api: plan, profile and machine reports are JSON of the session") {
  const Fixture fx = load_fixture(fixture_dir("tiny_resnet_op13"));
  kiln::Session s((fx.dir / "model.onnx").string(), test_options());
  const std::string plan = s.plan_json();
  CHECK(plan.front() == '{');
  CHECK(plan.back() == '}');
  CHECK(contains(plan, "\"strategy\": \"global\""));
  CHECK(contains(plan, "\"threads\": 2"));
  CHECK(contains(plan, "\"op\": \"Conv\""));
  // The same string every call (owned by the session), also from several threads at once.
  const char* p1 = nullptr;
  std::vector<const char*> seen(4, nullptr);
  std::vector<std::thread> th;
  for (auto& out : seen)
    th.emplace_back([&s, &out] { kiln::check(kiln_session_plan_json(s.get(), &out)); });
  for (auto& t : th) t.join();
  kiln::check(kiln_session_plan_json(s.get(), &p1));
  for (const char* p : seen) CHECK(p == p1);

  const std::string prof = s.profile_json(3);
  CHECK(contains(prof, "\"runs\": 3"));
  // One layer entry per plan step.
  CHECK(count(prof, "\"kernel\":") == count(plan, "\"kernel\":"));
  CHECK(count(prof, "\"kernel\":") >= 5);
  CHECK(contains(prof, "\"reference\": false"));
  CHECK_FALSE(contains(prof, "\"reference\": true"));

  const std::string machine = kiln::machine_json();
  CHECK(contains(machine, "\"kiln_version\": \"" KILN_VERSION_STRING "\""));
  CHECK(contains(machine, "\"cores\": "));
  CHECK(contains(machine, "\"build_id\": \"" KILN_VERSION_STRING "-"));

  // Bad arguments are statuses.
  char* none = nullptr;
  CHECK_ERR(kiln_session_profile_json(s.get(), 0, &none), KILN_INVALID_ARGUMENT, "runs");
  CHECK_ERR(kiln_session_profile_json(s.get(), 1, nullptr), KILN_INVALID_ARGUMENT, "out_json");
  CHECK_ERR(kiln_session_plan_json(nullptr, &p1), KILN_INVALID_ARGUMENT, "session");
  CHECK(none == nullptr);
  kiln_string_release(nullptr);
}
