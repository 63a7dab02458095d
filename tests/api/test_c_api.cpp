// The public C API, exercised only through kiln/kiln.h (linked against libkiln.so).
// Small models are hand-encoded ONNX protobuf bytes (see Pb below) with hand-computed outputs;
// fixture models are compared with PyTorch's output_*.npy.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/capi_test_util.h"

namespace fs = std::filesystem;

namespace {

using namespace capi_test;

// y = Relu(x), x: [dims]
std::string relu_model(const std::vector<int64_t>& dims) {
  Pb g;
  g.m(1, node("Relu", {"x"}, {"y"})).s(2, "relu").m(11, value_info("x", dims));
  g.m(12, value_info("y", dims));
  return model(g);
}

// sum = a + b, r = Relu(sum); inputs a, b [2,2]; outputs sum, r.
std::string add_relu_model() {
  Pb g;
  g.m(1, node("Add", {"a", "b"}, {"sum"})).m(1, node("Relu", {"sum"}, {"r"})).s(2, "addrelu");
  g.m(11, value_info("a", {2, 2})).m(11, value_info("b", {2, 2}));
  g.m(12, value_info("sum", {2, 2})).m(12, value_info("r", {2, 2}));
  return model(g);
}

// Fixture models (tests/fixtures/models/<name>/{model.onnx,input_*.npy,output_*.npy}) used here:
// small whole networks plus one with two inputs and two outputs. Every op is covered by the
// runtime suite; this suite checks the C API path.
const char* const kFixtures[] = {"tiny_resnet_op13", "tiny_mobilenetv2_op13",
                                 "tiny_squeezenet_op13", "two_in_out_op17"};

// Runs `s` on the fixture's inputs; returns the raw output buffers.
std::vector<std::string> run_fixture(kiln_session* s, const Fixture& fx) {
  size_t nin = 0, nout = 0;
  CHECK_OK(kiln_session_input_count(s, &nin));
  CHECK_OK(kiln_session_output_count(s, &nout));
  REQUIRE(nin == fx.inputs.size());
  std::vector<const void*> in;
  std::vector<size_t> in_bytes;
  for (const Npy& n : fx.inputs) {
    in.push_back(n.data.data());
    in_bytes.push_back(n.data.size());
  }
  std::vector<std::string> outs(nout);
  std::vector<void*> out;
  std::vector<size_t> out_bytes;
  for (size_t i = 0; i < nout; ++i) {
    size_t b = 0;
    CHECK_OK(kiln_session_output_byte_size(s, i, &b));
    outs[i].assign(b, '\0');
    out.push_back(outs[i].data());
    out_bytes.push_back(b);
  }
  CHECK_OK(
      kiln_session_run(s, in.data(), in_bytes.data(), nin, out.data(), out_bytes.data(), nout));
  return outs;
}

}  // namespace

// ---- tests ---------------------------------------------------------------------------------

TEST_CASE("api: version, codes, NULL status") {
  CHECK(std::string(kiln_version()) == KILN_VERSION);
  CHECK(kiln_status_code(nullptr) == KILN_OK);
  CHECK(std::string(kiln_status_message(nullptr)).empty());
  kiln_status_release(nullptr);
  kiln_session_release(nullptr);
  CHECK(std::string(kiln_code_name(KILN_OK)) == "ok");
  CHECK(std::string(kiln_code_name(KILN_IO_ERROR)) == "I/O error");
  CHECK(std::string(kiln_code_name(kiln_code(99))) == "unknown");
  CHECK(std::string(kiln_code_name(kiln_code(-1))) == "unknown");
  // Values are ABI: same as kiln::Code / documented.
  CHECK(KILN_INVALID_ARGUMENT == 1);
  CHECK(KILN_INVALID_MODEL == 2);
  CHECK(KILN_SHAPE_MISMATCH == 4);
  CHECK(KILN_INTERNAL == 7);
}

TEST_CASE("api: options") {
  kiln_options o;
  std::memset(&o, 0x5a, sizeof o);
  CHECK_OK(kiln_options_init(&o));
  CHECK(o.struct_size == sizeof(kiln_options));
  CHECK(o.threads == 0);
  CHECK(o.log_level == -1);
  CHECK(o.batch_size == 0);
  CHECK(o.cache_dir == nullptr);
  CHECK_ERR(kiln_options_init(nullptr), KILN_INVALID_ARGUMENT, "options is NULL");

  const std::string m = relu_model({2, 3});
  kiln_session* s = nullptr;
  SUBCASE("struct_size 0 or too small is rejected") {
    // offsetof(strategy): the size of the first published struct (version 1).
    for (size_t size : {size_t(0), offsetof(kiln_options, strategy) - 1, size_t(8)}) {
      o.struct_size = size;
      s = reinterpret_cast<kiln_session*>(&o);  // must be reset to NULL on failure
      CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
                "struct_size");
      CHECK(s == nullptr);
    }
  }
  SUBCASE("a version-1 client (struct without strategy/disable_cache) gets their defaults") {
    o.strategy = 99;  // beyond struct_size: must not be read
    o.struct_size = offsetof(kiln_options, strategy);
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    CHECK(s != nullptr);
    kiln_session_release(s);
  }
  SUBCASE("a version-2 client (struct without profile_budget_ms) gets its default") {
    o.profile_budget_ms = -5;  // beyond struct_size: must not be read
    o.struct_size = offsetof(kiln_options, profile_budget_ms);
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    CHECK(s != nullptr);
    kiln_session_release(s);
  }
  SUBCASE("profile_budget_ms: NaN, negative or absurd values are rejected") {
    for (double b : {-1.0, std::nan(""), 1e12, -std::numeric_limits<double>::infinity()}) {
      CHECK_OK(kiln_options_init(&o));
      o.profile_budget_ms = b;
      CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
                "profile_budget_ms");
    }
    CHECK_OK(kiln_options_init(&o));
    o.profile_budget_ms = 250;
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    kiln_session_release(s);
  }
  SUBCASE("accuracy: a kiln_accuracy value; others are rejected, naming the field") {
    for (int32_t a : {-1, 3, 99}) {
      CHECK_OK(kiln_options_init(&o));
      o.accuracy = a;
      CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
                "accuracy");
    }
    for (int32_t a : {KILN_ACCURACY_DEFAULT, KILN_ACCURACY_STRICT, KILN_ACCURACY_FAST}) {
      CHECK_OK(kiln_options_init(&o));
      o.accuracy = a;
      CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
      kiln_session_release(s);
    }
    o.accuracy = 99;  // beyond a version-3 struct_size: must not be read
    o.struct_size = offsetof(kiln_options, accuracy);
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    kiln_session_release(s);
  }
  SUBCASE("precision: a kiln_precision value; others are rejected, naming the field") {
    for (int32_t p : {-1, 2, 99}) {
      CHECK_OK(kiln_options_init(&o));
      o.precision = p;
      CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
                "precision");
    }
    for (int32_t p : {KILN_PRECISION_F32, KILN_PRECISION_BF16}) {
      CHECK_OK(kiln_options_init(&o));
      o.precision = p;
      CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
      kiln_session_release(s);
    }
    o.precision = 99;  // beyond a version-5 struct_size: must not be read
    o.struct_size = offsetof(kiln_options, precision);
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &o, &s));
    kiln_session_release(s);
  }
  SUBCASE("a larger struct from a newer client is accepted") {
    struct Newer {
      kiln_options base;
      uint64_t future_fields[8];
    } newer;
    std::memset(&newer, 0, sizeof newer);
    CHECK_OK(kiln_options_init(&newer.base));
    newer.base.struct_size = sizeof newer;
    newer.future_fields[0] = 12345;  // unknown to this library: ignored
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), &newer.base, &s));
    CHECK(s != nullptr);
    kiln_session_release(s);
  }
  SUBCASE("out-of-range values are rejected") {
    o.threads = -1;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "threads");
    CHECK_OK(kiln_options_init(&o));
    o.log_level = 7;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "log_level");
    CHECK_OK(kiln_options_init(&o));
    o.batch_size = -2;
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
              "batch_size");
  }
  SUBCASE("max_isa caps the instruction set") {
    for (int bad : {-1, 4, 100}) {
      CHECK_OK(kiln_options_init(&o));
      o.max_isa = bad;
      CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_INVALID_ARGUMENT,
                "max_isa");
    }
    kiln_isa isa = KILN_ISA_DEFAULT;
    CHECK_OK(kiln_options_init(&o));
    SessionGuard def{load_mem(m, &o)};
    CHECK_OK(kiln_session_isa(def.s, &isa));
    CHECK(isa >= KILN_ISA_SCALAR);
    CHECK(isa <= KILN_ISA_AVX512);
    o.max_isa = KILN_ISA_SCALAR;
    SessionGuard sc{load_mem(m, &o)};
    CHECK_OK(kiln_session_isa(sc.s, &isa));
    CHECK(isa == KILN_ISA_SCALAR);
    o.max_isa = KILN_ISA_AVX2;
    SessionGuard a2{load_mem(m, &o)};
    CHECK_OK(kiln_session_isa(a2.s, &isa));
    CHECK(isa <= KILN_ISA_AVX2);
    CHECK(isa >= KILN_ISA_SCALAR);
  }
  SUBCASE("batch_size fixes a symbolic batch") {
    const std::string sym = relu_model({-1, 3});
    SessionGuard def{load_mem(sym)};
    const int64_t* dims = nullptr;
    size_t rank = 0;
    CHECK_OK(kiln_session_input_shape(def.s, 0, &dims, &rank));
    REQUIRE(rank == 2);
    CHECK(dims[0] == 1);  // symbolic batch defaults to 1
    o.batch_size = 4;
    SessionGuard b4{load_mem(sym, &o)};
    CHECK_OK(kiln_session_output_shape(b4.s, 0, &dims, &rank));
    REQUIRE(rank == 2);
    CHECK(dims[0] == 4);
    CHECK(dims[1] == 3);
  }
}

TEST_CASE("api: NULL arguments are reported by name") {
  const std::string m = add_relu_model();
  kiln_session* s = nullptr;
  CHECK_ERR(kiln_session_create_from_file(nullptr, nullptr, &s), KILN_INVALID_ARGUMENT,
            "kiln_session_create_from_file: path is NULL");
  CHECK_ERR(kiln_session_create_from_file("x.onnx", nullptr, nullptr), KILN_INVALID_ARGUMENT,
            "out_session is NULL");
  CHECK_ERR(kiln_session_create_from_memory(nullptr, 10, nullptr, &s), KILN_INVALID_ARGUMENT,
            "kiln_session_create_from_memory: data is NULL");
  CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), nullptr, nullptr),
            KILN_INVALID_ARGUMENT, "out_session is NULL");

  size_t n = 0;
  const char* name = nullptr;
  kiln_dtype dt;
  const int64_t* dims = nullptr;
  size_t rank = 0;
  // NULL session everywhere.
  CHECK_ERR(kiln_session_input_count(nullptr, &n), KILN_INVALID_ARGUMENT,
            "kiln_session_input_count: session is NULL");
  CHECK_ERR(kiln_session_output_count(nullptr, &n), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_input_name(nullptr, 0, &name), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_output_name(nullptr, 0, &name), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_input_dtype(nullptr, 0, &dt), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_output_dtype(nullptr, 0, &dt), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_input_shape(nullptr, 0, &dims, &rank), KILN_INVALID_ARGUMENT,
            "session is NULL");
  CHECK_ERR(kiln_session_output_shape(nullptr, 0, &dims, &rank), KILN_INVALID_ARGUMENT,
            "session is NULL");
  CHECK_ERR(kiln_session_input_byte_size(nullptr, 0, &n), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_output_byte_size(nullptr, 0, &n), KILN_INVALID_ARGUMENT,
            "session is NULL");
  CHECK_ERR(kiln_session_input_index(nullptr, "a", &n), KILN_INVALID_ARGUMENT, "session is NULL");
  CHECK_ERR(kiln_session_output_index(nullptr, "r", &n), KILN_INVALID_ARGUMENT, "session is NULL");
  kiln_isa isa;
  CHECK_ERR(kiln_session_isa(nullptr, &isa), KILN_INVALID_ARGUMENT,
            "kiln_session_isa: session is NULL");
  float buf[4] = {};
  const void* ins[2] = {buf, buf};
  void* outs[2] = {buf, buf};
  size_t bytes[2] = {16, 16};
  CHECK_ERR(kiln_session_run(nullptr, ins, bytes, 2, outs, bytes, 2), KILN_INVALID_ARGUMENT,
            "kiln_session_run: session is NULL");

  // NULL out-parameters and arrays with a live session.
  SessionGuard g{load_mem(m)};
  REQUIRE(g.s);
  CHECK_ERR(kiln_session_input_count(g.s, nullptr), KILN_INVALID_ARGUMENT, "out_count is NULL");
  CHECK_ERR(kiln_session_output_count(g.s, nullptr), KILN_INVALID_ARGUMENT, "out_count is NULL");
  CHECK_ERR(kiln_session_input_name(g.s, 0, nullptr), KILN_INVALID_ARGUMENT, "out_name is NULL");
  CHECK_ERR(kiln_session_output_name(g.s, 0, nullptr), KILN_INVALID_ARGUMENT, "out_name is NULL");
  CHECK_ERR(kiln_session_input_dtype(g.s, 0, nullptr), KILN_INVALID_ARGUMENT, "out_dtype is NULL");
  CHECK_ERR(kiln_session_output_dtype(g.s, 0, nullptr), KILN_INVALID_ARGUMENT, "out_dtype is NULL");
  CHECK_ERR(kiln_session_input_shape(g.s, 0, nullptr, &rank), KILN_INVALID_ARGUMENT,
            "out_dims is NULL");
  CHECK_ERR(kiln_session_input_shape(g.s, 0, &dims, nullptr), KILN_INVALID_ARGUMENT,
            "out_rank is NULL");
  CHECK_ERR(kiln_session_output_shape(g.s, 0, nullptr, &rank), KILN_INVALID_ARGUMENT,
            "out_dims is NULL");
  CHECK_ERR(kiln_session_output_shape(g.s, 0, &dims, nullptr), KILN_INVALID_ARGUMENT,
            "out_rank is NULL");
  CHECK_ERR(kiln_session_input_byte_size(g.s, 0, nullptr), KILN_INVALID_ARGUMENT,
            "out_bytes is NULL");
  CHECK_ERR(kiln_session_output_byte_size(g.s, 0, nullptr), KILN_INVALID_ARGUMENT,
            "out_bytes is NULL");
  CHECK_ERR(kiln_session_input_index(g.s, nullptr, &n), KILN_INVALID_ARGUMENT, "name is NULL");
  CHECK_ERR(kiln_session_input_index(g.s, "a", nullptr), KILN_INVALID_ARGUMENT,
            "out_index is NULL");
  CHECK_ERR(kiln_session_output_index(g.s, nullptr, &n), KILN_INVALID_ARGUMENT, "name is NULL");
  CHECK_ERR(kiln_session_output_index(g.s, "r", nullptr), KILN_INVALID_ARGUMENT,
            "out_index is NULL");
  CHECK_ERR(kiln_session_isa(g.s, nullptr), KILN_INVALID_ARGUMENT, "out_isa is NULL");
  CHECK_ERR(kiln_session_run(g.s, nullptr, bytes, 2, outs, bytes, 2), KILN_INVALID_ARGUMENT,
            "kiln_session_run: inputs is NULL");
  CHECK_ERR(kiln_session_run(g.s, ins, nullptr, 2, outs, bytes, 2), KILN_INVALID_ARGUMENT,
            "input_bytes is NULL");
  CHECK_ERR(kiln_session_run(g.s, ins, bytes, 2, nullptr, bytes, 2), KILN_INVALID_ARGUMENT,
            "outputs is NULL");
  CHECK_ERR(kiln_session_run(g.s, ins, bytes, 2, outs, nullptr, 2), KILN_INVALID_ARGUMENT,
            "output_bytes is NULL");
  const void* ins_null[2] = {buf, nullptr};
  CHECK_ERR(kiln_session_run(g.s, ins_null, bytes, 2, outs, bytes, 2), KILN_INVALID_ARGUMENT,
            "inputs[1] is NULL");
  void* outs_null[2] = {nullptr, buf};
  CHECK_ERR(kiln_session_run(g.s, ins, bytes, 2, outs_null, bytes, 2), KILN_INVALID_ARGUMENT,
            "outputs[0] is NULL");
}

TEST_CASE("api: loading errors") {
  kiln_session* s = nullptr;
  SUBCASE("nonexistent file") {
    CHECK_ERR(kiln_session_create_from_file("/nonexistent/dir/model.onnx", nullptr, &s),
              KILN_IO_ERROR, "/nonexistent/dir/model.onnx");
    CHECK(s == nullptr);
  }
  SUBCASE("empty and garbage buffers") {
    const char empty[1] = {0};
    CHECK_ERR(kiln_session_create_from_memory(empty, 0, nullptr, &s), KILN_INVALID_MODEL, "");
    std::string garbage(1000, '\0');
    for (size_t k = 0; k < garbage.size(); ++k) garbage[k] = char((k * 2654435761u) >> 13);
    CHECK_ERR(kiln_session_create_from_memory(garbage.data(), garbage.size(), nullptr, &s),
              KILN_INVALID_MODEL, "");
    const std::string text = "this is not an ONNX model";
    CHECK_ERR(kiln_session_create_from_memory(text.data(), text.size(), nullptr, &s),
              KILN_INVALID_MODEL, "");
    CHECK(s == nullptr);
  }
  SUBCASE("truncated hand-made model") {
    const std::string m = add_relu_model();
    for (size_t cut : {size_t(3), m.size() / 2, m.size() - 1}) {
      CAPTURE(cut);
      CHECK_ERR(kiln_session_create_from_memory(m.data(), cut, nullptr, &s), KILN_INVALID_MODEL,
                "");
      CHECK(s == nullptr);
    }
  }
  SUBCASE("truncated fixture model") {
    const std::string m = read_file(fixture_dir("tiny_resnet_op13") / "model.onnx");
    REQUIRE(m.size() > 100);
    for (size_t cut : {size_t(7), m.size() / 3, m.size() / 2, m.size() - 1}) {
      CAPTURE(cut);
      CHECK_ERR(kiln_session_create_from_memory(m.data(), cut, nullptr, &s), KILN_INVALID_MODEL,
                "");
      CHECK(s == nullptr);
    }
    // The same bytes untruncated load fine (so the failures above are due to the cut).
    CHECK_OK(kiln_session_create_from_memory(m.data(), m.size(), nullptr, &s));
    kiln_session_release(s);
  }
  SUBCASE("unsupported operator") {
    Pb g;
    g.m(1, node("NoSuchOp", {"x"}, {"y"})).s(2, "bad");
    g.m(11, value_info("x", {2})).m(12, value_info("y", {2}));
    const std::string m = model(g);
    CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), nullptr, &s), KILN_UNSUPPORTED,
              "NoSuchOp");
  }
}

TEST_CASE("api: queries") {
  SessionGuard g{load_mem(add_relu_model())};
  size_t n = 0;
  CHECK_OK(kiln_session_input_count(g.s, &n));
  CHECK(n == 2);
  CHECK_OK(kiln_session_output_count(g.s, &n));
  CHECK(n == 2);
  const char* name = nullptr;
  CHECK_OK(kiln_session_input_name(g.s, 1, &name));
  CHECK(std::string(name) == "b");
  CHECK_OK(kiln_session_output_name(g.s, 1, &name));
  CHECK(std::string(name) == "r");
  kiln_dtype dt = KILN_DTYPE_I64;
  CHECK_OK(kiln_session_output_dtype(g.s, 0, &dt));
  CHECK(dt == KILN_DTYPE_F32);
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_OK(kiln_session_input_shape(g.s, 0, &dims, &rank));
  REQUIRE(rank == 2);
  CHECK(dims[0] == 2);
  CHECK(dims[1] == 2);
  CHECK_OK(kiln_session_input_byte_size(g.s, 1, &n));
  CHECK(n == 16);
  CHECK_OK(kiln_session_output_index(g.s, "r", &n));
  CHECK(n == 1);
  CHECK_OK(kiln_session_input_index(g.s, "a", &n));
  CHECK(n == 0);
  CHECK_ERR(kiln_session_input_index(g.s, "zzz", &n), KILN_INVALID_ARGUMENT, "'zzz'");

  // Index out of range.
  CHECK_ERR(kiln_session_input_name(g.s, 2, &name), KILN_INVALID_ARGUMENT, "out of range");
  CHECK_ERR(kiln_session_output_name(g.s, 5, &name), KILN_INVALID_ARGUMENT, "out of range");
  CHECK_ERR(kiln_session_input_dtype(g.s, 2, &dt), KILN_INVALID_ARGUMENT, "out of range");
  CHECK_ERR(kiln_session_output_shape(g.s, size_t(-1), &dims, &rank), KILN_INVALID_ARGUMENT,
            "out of range");
  CHECK_ERR(kiln_session_output_byte_size(g.s, 2, &n), KILN_INVALID_ARGUMENT, "out of range");
}

TEST_CASE("api: run with hand-computed results and checked buffers") {
  SessionGuard g{load_mem(add_relu_model())};
  const float a[4] = {1, -2, 3, -4}, b[4] = {0.5f, 1, -5, 2};
  float sum[4], r[4];
  const void* ins[2] = {a, b};
  void* outs[2] = {sum, r};
  size_t ib[2] = {16, 16}, ob[2] = {16, 16};
  CHECK_OK(kiln_session_run(g.s, ins, ib, 2, outs, ob, 2));
  const float want_sum[4] = {1.5f, -1, -2, -2}, want_r[4] = {1.5f, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    CHECK(sum[i] == want_sum[i]);
    CHECK(r[i] == want_r[i]);
  }

  SUBCASE("wrong byte sizes name the tensor and the expected size") {
    size_t bad[2] = {16, 12};
    CHECK_ERR(kiln_session_run(g.s, ins, bad, 2, outs, ob, 2), KILN_SHAPE_MISMATCH, "input 'b'");
    CHECK_ERR(kiln_session_run(g.s, ins, bad, 2, outs, ob, 2), KILN_SHAPE_MISMATCH,
              "expected 16 bytes");
    size_t big[2] = {32, 16};
    CHECK_ERR(kiln_session_run(g.s, ins, ib, 2, outs, big, 2), KILN_SHAPE_MISMATCH, "output 'sum'");
  }
  SUBCASE("wrong counts") {
    CHECK_ERR(kiln_session_run(g.s, ins, ib, 1, outs, ob, 2), KILN_INVALID_ARGUMENT,
              "input_count is 1, the model has 2");
    CHECK_ERR(kiln_session_run(g.s, ins, ib, 2, outs, ob, 3), KILN_INVALID_ARGUMENT,
              "output_count is 3");
    CHECK_ERR(kiln_session_run(g.s, ins, ib, 0, outs, ob, 2), KILN_INVALID_ARGUMENT, "input_count");
  }
  SUBCASE("misaligned buffer") {
    alignas(8) char raw[20];
    const void* mis[2] = {raw + 1, b};
    CHECK_ERR(kiln_session_run(g.s, mis, ib, 2, outs, ob, 2), KILN_INVALID_ARGUMENT, "aligned");
  }
  SUBCASE("a failed run leaves the session usable") {
    size_t bad[2] = {0, 0};
    CHECK_ERR(kiln_session_run(g.s, ins, bad, 2, outs, ob, 2), KILN_SHAPE_MISMATCH, "");
    std::fill(r, r + 4, -99.f);
    CHECK_OK(kiln_session_run(g.s, ins, ib, 2, outs, ob, 2));
    CHECK(r[0] == 1.5f);
  }
}

TEST_CASE("api: fixture models match PyTorch outputs") {
  for (const std::string name : kFixtures) {
    CAPTURE(name);
    const fs::path dir = fixture_dir(name);
    const double tol = fixture_tol(dir);
    Fixture fx = load_fixture(dir);
    kiln_session* s = nullptr;
    St st = take(kiln_session_create_from_file((dir / "model.onnx").c_str(), nullptr, &s));
    CHECK_MESSAGE(st.code == KILN_OK, st.msg);
    if (!s) continue;
    SessionGuard g{s};
    std::vector<std::string> outs = run_fixture(s, fx);
    REQUIRE(outs.size() == fx.outputs.size());
    for (size_t o = 0; o < outs.size(); ++o) {
      CAPTURE(o);
      REQUIRE(outs[o].size() == fx.outputs[o].data.size());
      if (fx.outputs[o].descr != "<f4") {
        CHECK(outs[o] == fx.outputs[o].data);
        continue;
      }
      const float* got = reinterpret_cast<const float*>(outs[o].data());
      const float* want = reinterpret_cast<const float*>(fx.outputs[o].data.data());
      size_t n = outs[o].size() / 4, bad = 0;
      double scale = 1, worst = 0;
      for (size_t k = 0; k < n; ++k) scale = std::max(scale, std::fabs(double(want[k])));
      for (size_t k = 0; k < n; ++k) {
        double err = std::fabs(double(got[k]) - double(want[k]));
        if (!(err <= tol * scale)) ++bad;  // also catches NaN
        worst = std::max(worst, err);
      }
      CHECK_MESSAGE(bad == 0, bad << " of " << n << " elements off, max abs error " << worst);
    }
  }
}

namespace {

// y = x + c, x: [n], c: an initializer [n] with c[i] = i / 2 in raw_data (from 1024 floats
// the importer takes it straight from the model's bytes). A graph name of `pad` characters
// moves raw_data to every alignment.
std::string add_const_model(int64_t n, size_t pad) {
  std::string raw(size_t(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = float(i) / 2;
    std::memcpy(&raw[size_t(i) * 4], &v, 4);
  }
  Pb c;
  c.i(1, uint64_t(n)).i(2, 1).s(8, "c").s(9, raw);  // dims, FLOAT, name, raw_data
  Pb g;
  g.m(1, node("Add", {"x", "c"}, {"y"})).s(2, std::string(pad, 'g')).m(5, c);
  g.m(11, value_info("x", {n})).m(12, value_info("y", {n}));
  return model(g);
}

}  // namespace

// A model loaded from memory packs its weights straight from the caller's bytes and copies
// only what it still reads (ImportOptions::borrow): once create returns, the buffer is the
// caller's to overwrite and free (under ASan a later read of it is also reported).
TEST_CASE("api: a model loaded from memory does not keep the caller's bytes") {
  constexpr int64_t kN = 2048;
  for (size_t pad = 0; pad < 4; ++pad)
    for (int32_t isa : {KILN_ISA_DEFAULT, KILN_ISA_SCALAR}) {
      CAPTURE(pad);
      CAPTURE(isa);
      kiln_options o;
      CHECK_OK(kiln_options_init(&o));
      o.max_isa = isa;
      auto bytes = std::make_unique<std::string>(add_const_model(kN, pad));
      kiln_session* s = nullptr;
      CHECK_OK(kiln_session_create_from_memory(bytes->data(), bytes->size(), &o, &s));
      SessionGuard g{s};
      std::fill(bytes->begin(), bytes->end(), '\xff');  // NaNs where c was
      bytes.reset();
      std::vector<float> x(kN, 1.f), y(kN);
      const void* in[] = {x.data()};
      void* out[] = {y.data()};
      size_t ib[] = {kN * 4}, ob[] = {kN * 4};
      CHECK_OK(kiln_session_run(s, in, ib, 1, out, ob, 1));
      int64_t bad = 0;
      for (int64_t i = 0; i < kN; ++i) bad += y[size_t(i)] != 1.f + float(i) / 2;
      CHECK(bad == 0);
    }
  // A whole network, against the same model loaded from its file.
  const fs::path dir = fixture_dir("tiny_resnet_op13");
  Fixture fx = load_fixture(dir);
  kiln_options o;
  CHECK_OK(kiln_options_init(&o));
  o.tuning_mode = KILN_TUNING_NONE;  // the same plan for both loads
  kiln_session* from_file = nullptr;
  CHECK_OK(kiln_session_create_from_file((dir / "model.onnx").c_str(), &o, &from_file));
  SessionGuard gf{from_file};
  auto bytes = std::make_unique<std::string>(read_file(dir / "model.onnx"));
  kiln_session* from_memory = nullptr;
  CHECK_OK(kiln_session_create_from_memory(bytes->data(), bytes->size(), &o, &from_memory));
  SessionGuard gm{from_memory};
  std::fill(bytes->begin(), bytes->end(), '\xff');
  bytes.reset();
  CHECK(run_fixture(from_memory, fx) == run_fixture(from_file, fx));
}

TEST_CASE("api: concurrent runs on one session give identical outputs") {
  // A whole network: many intermediates, most chance to expose shared mutable state.
  const fs::path dir = fixture_dir("tiny_resnet_op13");
  Fixture fx = load_fixture(dir);
  kiln_session* s = nullptr;
  CHECK_OK(kiln_session_create_from_file((dir / "model.onnx").c_str(), nullptr, &s));
  SessionGuard g{s};
  const std::vector<std::string> ref = run_fixture(s, fx);

  constexpr int kThreads = 4, kRuns = 8;
  std::vector<int> mismatches(kThreads, 0), failures(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      // No doctest macros here (not thread-safe): count and check afterwards.
      size_t nout = ref.size();
      std::vector<std::string> outs(nout);
      std::vector<void*> out;
      std::vector<size_t> ob;
      for (size_t i = 0; i < nout; ++i) {
        outs[i].assign(ref[i].size(), '\0');
        out.push_back(outs[i].data());
        ob.push_back(ref[i].size());
      }
      std::vector<const void*> in;
      std::vector<size_t> ib;
      for (const Npy& n : fx.inputs) {
        in.push_back(n.data.data());
        ib.push_back(n.data.size());
      }
      for (int r = 0; r < kRuns; ++r) {
        for (auto& o : outs) std::fill(o.begin(), o.end(), '\x7f');
        kiln_status* st =
            kiln_session_run(s, in.data(), ib.data(), in.size(), out.data(), ob.data(), nout);
        if (st) {
          ++failures[size_t(t)];
          kiln_status_release(st);
          continue;
        }
        if (outs != ref) ++mismatches[size_t(t)];
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(failures[size_t(t)] == 0);
    CHECK(mismatches[size_t(t)] == 0);
  }
}
