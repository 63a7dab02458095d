// Shapes decided by the caller through the C API: kiln_options.input_shapes at load, and other
// batches at run time (kiln_session_run_batch, kiln_session_output_shape_for_batch).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/capi_test_util.h"

using namespace capi_test;

namespace {

// Conv, MaxPool, GlobalAveragePool, Flatten, Gemm: any batch, height and width (x: [N,3,32,32]).
const char* kConvNet = "dynamic_batch_op13";

std::string conv_net_path() {
  return (fixture_dir(kConvNet) / "model.onnx").string();
}

// Deterministic inputs that differ per element and per sample.
std::vector<float> pattern(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(std::sin(double(i) * 0.37 + seed));
  return v;
}

kiln_options options(const char* shapes = nullptr) {
  kiln_options o;
  kiln_options_init(&o);
  o.tuning_mode = KILN_TUNING_NONE;  // one plan per shape, the same in every session
  o.threads = 2;
  o.input_shapes = shapes;
  return o;
}

kiln_session* load(const kiln_options& o) {
  kiln_session* s = nullptr;
  CHECK_OK(kiln_session_create_from_file(conv_net_path().c_str(), &o, &s));
  return s;
}

std::vector<int64_t> out_shape_for(kiln_session* s, int64_t batch) {
  std::vector<int64_t> dims(8);
  size_t rank = 0;
  CHECK_OK(kiln_session_output_shape_for_batch(s, batch, 0, dims.data(), dims.size(), &rank));
  dims.resize(rank);
  return dims;
}

// One run of the one-input, one-output net; batch 0: kiln_session_run.
std::vector<float> run(kiln_session* s, const std::vector<float>& x, int64_t batch,
                       size_t out_elems) {
  std::vector<float> y(out_elems, NAN);
  const void* in[] = {x.data()};
  void* out[] = {y.data()};
  size_t ib[] = {x.size() * 4}, ob[] = {y.size() * 4};
  if (batch)
    CHECK_OK(kiln_session_run_batch(s, batch, in, ib, 1, out, ob, 1));
  else
    CHECK_OK(kiln_session_run(s, in, ib, 1, out, ob, 1));
  return y;
}

std::vector<int64_t> input_shape(kiln_session* s) {
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_OK(kiln_session_input_shape(s, 0, &dims, &rank));
  return std::vector<int64_t>(dims, dims + rank);
}

}  // namespace

TEST_CASE("api: input_shapes sets height and width at load") {
  kiln_options o = options("input:2x3x40x24");
  kiln_session* s = load(o);
  SessionGuard g{s};
  CHECK(input_shape(s) == std::vector<int64_t>{2, 3, 40, 24});
  const int64_t* dims = nullptr;
  size_t rank = 0;
  CHECK_OK(kiln_session_output_shape(s, 0, &dims, &rank));
  CHECK(std::vector<int64_t>(dims, dims + rank) == std::vector<int64_t>{2, 10});
  // The same numbers as the scalar path at that shape.
  kiln_options os = options("input:2x3x40x24");
  os.max_isa = KILN_ISA_SCALAR;
  kiln_session* ref = load(os);
  SessionGuard gr{ref};
  const std::vector<float> x = pattern(2 * 3 * 40 * 24, 1);
  const std::vector<float> y = run(s, x, 0, 20), want = run(ref, x, 0, 20);
  float worst = 0, scale = 1;
  for (size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::fabs(y[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  CHECK(worst <= 1e-4f * scale);

  // batch_size is dim 0 of every input, the shapes' included; a version-4 client's struct
  // ends before input_shapes, which is then not read.
  o.batch_size = 3;
  kiln_session* s2 = load(o);
  CHECK(input_shape(s2) == std::vector<int64_t>{3, 3, 40, 24});
  kiln_session_release(s2);
  o.batch_size = 0;
  o.struct_size = offsetof(kiln_options, input_shapes);
  o.input_shapes = "not a shape";
  kiln_session* s3 = load(o);
  SessionGuard g3{s3};
  CHECK(input_shape(s3) == std::vector<int64_t>{1, 3, 32, 32});
}

TEST_CASE("api: input_shapes errors name what is wrong") {
  const std::string path = conv_net_path();
  struct Case {
    const char* shapes;
    kiln_code code;
    const char* part;
  };
  const Case cases[] = {
      {"nope:1x3x32x32", KILN_INVALID_ARGUMENT, "'nope', which is not an input"},
      {"input:1x3x32", KILN_SHAPE_MISMATCH, "has 4 dims"},
      {"input:1x3x0x32", KILN_INVALID_ARGUMENT, "dim 0, expected 1.."},
      {"input:1x3x-2x32", KILN_INVALID_ARGUMENT, "'-2' that is not a positive integer"},
      {"input:1x3xx32", KILN_INVALID_ARGUMENT, "'' that is not a positive integer"},
      {"input1x3x32x32", KILN_INVALID_ARGUMENT, "no 'NAME:'"},
      {"input:1x3x32x32,input:1x3x8x8", KILN_INVALID_ARGUMENT, "given before"},
      {"input:1x3x99999999999999x1", KILN_INVALID_ARGUMENT, "expected 1.."},
      // 3 input channels are baked into the first Conv's weights.
      {"input:1x4x32x32", KILN_SHAPE_MISMATCH, "'input' dim 1 = 4 (the model declares 3)"},
  };
  for (const Case& c : cases) {
    const std::string shapes = c.shapes;
    CAPTURE(shapes);
    kiln_options o = options(c.shapes);
    kiln_session* s = nullptr;
    CHECK_ERR(kiln_session_create_from_file(path.c_str(), &o, &s), c.code, c.part);
    CHECK(s == nullptr);
  }
}

TEST_CASE("api: a symbolic dim other than the batch must be set") {
  // y = Relu(x), x: [N, N, 4] (both symbolic, named "N" by the test model writer).
  Pb g;
  g.m(1, node("Relu", {"x"}, {"y"})).s(2, "relu").m(11, value_info("x", {-1, -1, 4}));
  g.m(12, value_info("y", {-1, -1, 4}));
  const std::string m = model(g);
  kiln_options o = options();
  kiln_session* s = nullptr;
  CHECK_ERR(kiln_session_create_from_memory(m.data(), m.size(), &o, &s), KILN_UNSUPPORTED,
            "symbolic dimension 1 ('N')");
  o.input_shapes = "x:3x5x4";
  s = load_mem(m, &o);
  SessionGuard gs{s};
  CHECK(input_shape(s) == std::vector<int64_t>{3, 5, 4});
  // Another batch of a memory-loaded session: planned from the copy of the bytes it keeps.
  std::vector<float> x = pattern(2 * 5 * 4, 3);
  std::vector<float> y = run(s, x, 2, 2 * 5 * 4);
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == std::max(x[i], 0.f));
}

TEST_CASE("api: another batch at run time matches a session loaded at that batch") {
  kiln_options o = options("input:1x3x20x28");
  kiln_session* s = load(o);
  SessionGuard g{s};
  CHECK(out_shape_for(s, 3) == std::vector<int64_t>{3, 10});
  CHECK(out_shape_for(s, 1) == std::vector<int64_t>{1, 10});
  const std::vector<float> x1 = pattern(3 * 20 * 28, 5);
  const std::vector<float> y1 = run(s, x1, 0, 10);
  CHECK(run(s, x1, 1, 10) == y1);  // its own batch through run_batch
  for (int64_t batch : {3, 2}) {
    CAPTURE(batch);
    const std::vector<float> x = pattern(size_t(batch) * 3 * 20 * 28, 7);
    kiln_options ob = options("input:1x3x20x28");
    ob.batch_size = batch;
    kiln_session* loaded = load(ob);
    SessionGuard gl{loaded};
    CHECK(input_shape(loaded)[0] == batch);
    const std::vector<float> want = run(loaded, x, 0, size_t(batch) * 10);
    CHECK(run(s, x, batch, size_t(batch) * 10) == want);
  }
  // The loaded shape still runs, and its results did not change.
  CHECK(run(s, x1, 0, 10) == y1);

  // Errors: sizes checked against the batch's shapes, batch range, capacity.
  std::vector<float> x(2 * 3 * 20 * 28), y(20);
  const void* in[] = {x.data()};
  void* out[] = {y.data()};
  size_t ib[] = {x.size() * 4}, ob[] = {y.size() * 4}, small_ob[] = {10 * 4};
  CHECK_ERR(kiln_session_run_batch(s, 2, in, ib, 1, out, small_ob, 1), KILN_SHAPE_MISMATCH,
            "[2,10]");
  CHECK_ERR(kiln_session_run_batch(s, 3, in, ib, 1, out, ob, 1), KILN_SHAPE_MISMATCH,
            "[3,3,20,28]");
  CHECK_ERR(kiln_session_run_batch(s, 0, in, ib, 1, out, ob, 1), KILN_INVALID_ARGUMENT,
            "batch size");
  CHECK_ERR(kiln_session_run_batch(s, -4, in, ib, 1, out, ob, 1), KILN_INVALID_ARGUMENT,
            "batch size");
  CHECK_ERR(kiln_session_run_batch(s, int64_t(1) << 40, in, ib, 1, out, ob, 1),
            KILN_INVALID_ARGUMENT, "batch size");
  CHECK_ERR(kiln_session_run(s, in, ib, 1, out, ob, 1), KILN_SHAPE_MISMATCH, "bytes");
  int64_t dims[1];
  size_t rank = 0;
  CHECK_ERR(kiln_session_output_shape_for_batch(s, 2, 0, dims, 1, &rank), KILN_INVALID_ARGUMENT,
            "capacity is 1");
  CHECK_ERR(kiln_session_output_shape_for_batch(s, 2, 1, dims, 1, &rank), KILN_INVALID_ARGUMENT,
            "out of range");
}

TEST_CASE("api: a batch the model cannot take is refused at run time") {
  // y = Reshape(x, [1, 6]): the constant shape fixes the batch at 1.
  Pb shape;
  shape.i(1, 2).i(2, uint64_t(kInt64)).i(7, 1).i(7, 6).s(8, "shape");
  Pb g;
  g.m(1, node("Reshape", {"x", "shape"}, {"y"})).s(2, "reshape").m(5, shape);
  g.m(11, value_info("x", {-1, 2, 3})).m(12, value_info("y", {1, 6}));
  const std::string m = model(g);
  kiln_options o = options();
  kiln_session* s = load_mem(m, &o);
  SessionGuard gs{s};
  std::vector<float> x(12), y(12);
  const void* in[] = {x.data()};
  void* out[] = {y.data()};
  size_t ib[] = {48}, ob[] = {48};
  CHECK_ERR(kiln_session_run_batch(s, 2, in, ib, 1, out, ob, 1), KILN_SHAPE_MISMATCH,
            "'x' dim 0 = 2");
  // The session still runs its own batch.
  size_t ib1[] = {24}, ob1[] = {24};
  CHECK_OK(kiln_session_run(s, in, ib1, 1, out, ob1, 1));
}

// Several threads at once, each running batches 1..3 in turn on one session (first uses plan
// concurrently): every result equals a session loaded at that batch. TSan runs this too.
TEST_CASE("api: runs of several batches from several threads") {
  kiln_options o = options("input:1x3x16x16");
  kiln_session* s = load(o);
  SessionGuard g{s};
  constexpr int kBatches = 3, kThreads = 4, kRuns = 3;
  std::vector<std::vector<float>> xs, want;
  for (int b = 1; b <= kBatches; ++b) {
    xs.push_back(pattern(size_t(b) * 3 * 16 * 16, b));
    kiln_options ob = options("input:1x3x16x16");
    ob.batch_size = b;
    kiln_session* loaded = load(ob);
    SessionGuard gl{loaded};
    want.push_back(run(loaded, xs.back(), 0, size_t(b) * 10));
  }
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      // No doctest macros here (not thread-safe): count and check afterwards.
      for (int r = 0; r < kRuns * kBatches; ++r) {
        const int b = 1 + (r + t) % kBatches;
        std::vector<float> y(size_t(b) * 10);
        const void* in[] = {xs[size_t(b - 1)].data()};
        void* out[] = {y.data()};
        size_t ib[] = {xs[size_t(b - 1)].size() * 4}, obytes[] = {y.size() * 4};
        kiln_status* st = kiln_session_run_batch(s, b, in, ib, 1, out, obytes, 1);
        bad[size_t(t)] += st != nullptr || y != want[size_t(b - 1)];
        kiln_status_release(st);
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(bad[size_t(t)] == 0);
}
