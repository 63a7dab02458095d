// Outputs whose size each run decides (kiln_session_output_dynamic, kiln_session_run_outputs):
// a model whose second output is NonZero of a computed tensor.
#include <cstring>
#include <kiln/kiln.hpp>

#include "capi_test_util.h"

using namespace capi_test;

namespace {

// x [6] -> r = Relu(x) (planned, static output 0) -> NonZero(r) (output 1, int64 [1, N]).
std::string nonzero_model() {
  Pb g;
  g.m(1, node("Relu", {"x"}, {"r"}))
      .m(1, node("NonZero", {"r"}, {"idx"}))
      .s(2, "g")
      .m(11, value_info("x", {6}))
      .m(12, value_info("r", {6}))
      .m(12, value_info("idx", {1, -1}, kInt64));
  return model(g);
}

// Runs the model on x through kiln_session_run_outputs: (r, the indices NonZero found).
std::pair<std::vector<float>, std::vector<int64_t>> run(kiln_session* s, const float (&x)[6]) {
  const void* in[] = {x};
  const size_t bytes[] = {sizeof x};
  kiln_outputs* out = nullptr;
  CHECK_OK(kiln_session_run_outputs(s, in, bytes, 1, &out));
  const void* data = nullptr;
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_OK(kiln_outputs_get(out, 0, &data, &dims, &rank));
  REQUIRE(rank == 1);
  REQUIRE(dims[0] == 6);
  std::vector<float> r(6);
  std::memcpy(r.data(), data, sizeof x);
  CHECK_OK(kiln_outputs_get(out, 1, &data, &dims, &rank));
  REQUIRE(rank == 2);
  REQUIRE(dims[0] == 1);
  std::vector<int64_t> idx(static_cast<size_t>(dims[1]));
  if (dims[1]) std::memcpy(idx.data(), data, idx.size() * sizeof(int64_t));
  kiln_outputs_release(out);
  return {r, idx};
}

}  // namespace

TEST_CASE("a dynamic output: reported, refused by the fixed-size calls, run into Kiln's buffers") {
  kiln_session* s = load_mem(nonzero_model());
  SessionGuard guard{s};
  int32_t dynamic = -1;
  CHECK_OK(kiln_session_output_dynamic(s, 0, &dynamic));
  CHECK(dynamic == 0);
  CHECK_OK(kiln_session_output_dynamic(s, 1, &dynamic));
  CHECK(dynamic == 1);
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_OK(kiln_session_output_shape(s, 1, &dims, &rank));
  REQUIRE(rank == 2);
  CHECK(dims[0] == 1);
  CHECK(dims[1] == -1);
  kiln_dtype dt = KILN_DTYPE_F32;
  CHECK_OK(kiln_session_output_dtype(s, 1, &dt));
  CHECK(dt == KILN_DTYPE_I64);
  size_t bytes = 0;
  CHECK_OK(kiln_session_output_byte_size(s, 0, &bytes));
  CHECK(bytes == 6 * sizeof(float));
  CHECK_ERR(kiln_session_output_byte_size(s, 1, &bytes), KILN_INVALID_ARGUMENT,
            "'idx' has a size each run decides");

  const float x[6] = {-1, 2, 0, 3, -4, 5};
  float r[6];
  int64_t idx[6];
  const void* in[] = {x};
  const size_t in_bytes[] = {sizeof x};
  void* out[] = {r, idx};
  const size_t out_bytes[] = {sizeof r, sizeof idx};
  CHECK_ERR(kiln_session_run(s, in, in_bytes, 1, out, out_bytes, 2), KILN_INVALID_ARGUMENT,
            "kiln_session_run_outputs");

  // The number of indices follows the data, run by run (an empty result included).
  auto [r1, i1] = run(s, x);
  CHECK(r1 == std::vector<float>{0, 2, 0, 3, 0, 5});
  CHECK(i1 == std::vector<int64_t>{1, 3, 5});
  const float all[6] = {1, 1, 1, 1, 1, 1};
  CHECK(run(s, all).second == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  const float none[6] = {-1, -2, 0, -3, -4, -5};
  auto [r3, i3] = run(s, none);
  CHECK(r3 == std::vector<float>(6, 0.f));
  CHECK(i3.empty());
}

TEST_CASE("kiln_session_run_outputs: a static model gives kiln_session_run's outputs") {
  Pb g;
  g.m(1, node("Relu", {"x"}, {"r"}))
      .s(2, "g")
      .m(11, value_info("x", {6}))
      .m(12, value_info("r", {6}));
  kiln_session* s = load_mem(model(g));
  SessionGuard guard{s};
  int32_t dynamic = -1;
  CHECK_OK(kiln_session_output_dynamic(s, 0, &dynamic));
  CHECK(dynamic == 0);
  const float x[6] = {-1, 2, 0, 3, -4, 5};
  float want[6];
  const void* in[] = {x};
  const size_t in_bytes[] = {sizeof x};
  void* out[] = {want};
  const size_t out_bytes[] = {sizeof want};
  CHECK_OK(kiln_session_run(s, in, in_bytes, 1, out, out_bytes, 1));
  kiln_outputs* o = nullptr;
  CHECK_OK(kiln_session_run_outputs(s, in, in_bytes, 1, &o));
  const void* data = nullptr;
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_OK(kiln_outputs_get(o, 0, &data, &dims, &rank));
  REQUIRE(rank == 1);
  CHECK(dims[0] == 6);
  CHECK(std::memcmp(data, want, sizeof want) == 0);
  kiln_outputs_release(o);
}

TEST_CASE("dynamic outputs' misuse: bad indices, NULL arguments, wrong inputs") {
  kiln_session* s = load_mem(nonzero_model());
  SessionGuard guard{s};
  int32_t dynamic = 0;
  CHECK_ERR(kiln_session_output_dynamic(s, 2, &dynamic), KILN_INVALID_ARGUMENT, "out of range");
  CHECK_ERR(kiln_session_output_dynamic(s, 0, nullptr), KILN_INVALID_ARGUMENT, "out_dynamic");
  CHECK_ERR(kiln_session_output_dynamic(nullptr, 0, &dynamic), KILN_INVALID_ARGUMENT, "session");
  const float x[6] = {1, 0, 1, 0, 1, 0};
  const void* in[] = {x};
  const size_t in_bytes[] = {sizeof x};
  const size_t short_bytes[] = {sizeof x - 4};
  kiln_outputs* o = nullptr;
  CHECK_ERR(kiln_session_run_outputs(s, in, in_bytes, 1, nullptr), KILN_INVALID_ARGUMENT,
            "out_outputs");
  CHECK_ERR(kiln_session_run_outputs(s, in, short_bytes, 1, &o), KILN_SHAPE_MISMATCH,
            "expected 24 bytes");
  CHECK_ERR(kiln_session_run_outputs(s, in, in_bytes, 2, &o), KILN_INVALID_ARGUMENT, "input_count");
  CHECK(o == nullptr);
  CHECK_OK(kiln_session_run_outputs(s, in, in_bytes, 1, &o));
  const void* data = nullptr;
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_ERR(kiln_outputs_get(o, 2, &data, &dims, &rank), KILN_INVALID_ARGUMENT, "out of range");
  CHECK_ERR(kiln_outputs_get(o, 1, nullptr, &dims, &rank), KILN_INVALID_ARGUMENT, "out_data");
  CHECK_ERR(kiln_outputs_get(nullptr, 1, &data, &dims, &rank), KILN_INVALID_ARGUMENT, "outputs");
  CHECK_OK(kiln_outputs_get(o, 1, &data, &dims, &rank));
  REQUIRE(rank == 2);
  CHECK(dims[1] == 3);
  kiln_outputs_release(o);
  kiln_outputs_release(nullptr);  // a no-op
}

TEST_CASE("C++ API: TensorInfo::dynamic and run_outputs") {
  const std::string bytes = nonzero_model();
  kiln::Session s = kiln::Session::from_memory(bytes.data(), bytes.size());
  REQUIRE(s.outputs().size() == 2);
  CHECK_FALSE(s.outputs()[0].dynamic);
  CHECK(s.outputs()[0].bytes == 6 * sizeof(float));
  CHECK(s.outputs()[1].dynamic);
  CHECK(s.outputs()[1].bytes == 0);
  CHECK(s.outputs()[1].shape == std::vector<int64_t>{1, -1});
  const float x[6] = {3, -1, 0, 2, 0, -5};
  const kiln::Outputs out = s.run_outputs({x});
  CHECK(out.shape(1) == std::vector<int64_t>{1, 2});
  const auto* idx = static_cast<const int64_t*>(out.data(1));
  CHECK(idx[0] == 0);
  CHECK(idx[1] == 3);
  float r[6];
  int64_t buf[6];
  CHECK_THROWS_AS(s.run({x}, {r, buf}), kiln::Error);  // a dynamic output has no buffer size
}
