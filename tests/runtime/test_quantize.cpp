// `kiln quantize` (runtime/quantize.h): the QDQ model it writes (structure, integer ranges,
// scales), that Kiln runs it within 8-bit quantization's error of the float model, per-channel
// against per-tensor weights, calibration from files and the percentile method, determinism,
// and errors that leave an existing output file alone.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "error_of.h"
#include "graph/onnx_builder.h"
#include "runtime/npy.h"
#include "runtime/quantize.h"
#include "session_test_util.h"

namespace fs = std::filesystem;
using kiln::Code;
using kiln::QuantizeOptions;
using kiln::Tensor;
using namespace kiln::sessiontest;

namespace {

using kiln::test::error_of;

// x [1, 8, 10, 10] -> conv 3x3 (16, pad 1) -> relu = r -> conv 1x1 (16) = c2 -> add(r, c2) ->
// GlobalAveragePool -> Flatten -> Gemm (10) = y. Output channel c of conv 1's weights is scaled
// by `spread`^c / 8: with a large spread one weight scale per tensor starves the small channels.
std::string model(float spread = 1.f, int64_t opset = 13) {
  kiln::test::OnnxBuilder b(opset);
  b.input("x", {1, 8, 10, 10}).output("y");
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto weights = [&](const std::string& name, std::vector<int64_t> dims, float scale,
                     float per_row = 1.f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const int64_t row = n / dims[0];
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[size_t(i)] = scale * nd(rng) * std::pow(per_row, float(i / row));
    b.init_f(name, dims, v);
  };
  weights("w1", {16, 8, 3, 3}, 0.2f / std::pow(spread, 8.f), spread);
  weights("b1", {16}, 0.1f);
  weights("w2", {16, 16, 1, 1}, 0.25f);
  weights("b2", {16}, 0.1f);
  weights("wf", {10, 16}, 0.3f);
  weights("bf", {10}, 0.1f);
  kiln::test::OnnxBuilder::attr_ints(b.node("Conv", {"x", "w1", "b1"}, {"c1"}), "pads",
                                     {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r"});
  b.node("Conv", {"r", "w2", "b2"}, {"c2"});
  b.node("Add", {"r", "c2"}, {"a"});
  b.node("GlobalAveragePool", {"a"}, {"p"});
  b.node("Flatten", {"p"}, {"f"});
  kiln::test::OnnxBuilder::attr_i(b.node("Gemm", {"f", "wf", "bf"}, {"y"}), "transB", 1);
  return b.bytes();
}

fs::path write_model(const fs::path& dir, const std::string& bytes, const char* name = "m.onnx") {
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return dir / name;
}

onnx::ModelProto read_proto(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(ss.str()));
  return m;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Tensor run_file(const fs::path& p, const Tensor& x) {
  kiln::SessionOptions o;
  o.use_cache = false;
  o.tune = kiln::TuneMode::none;
  return run(*kiln::Session::load_file(p.string(), o), x);
}

Tensor run_bytes(const std::string& bytes, const Tensor& x) {
  kiln::SessionOptions o;
  o.use_cache = false;
  o.tune = kiln::TuneMode::none;
  return run(*load(bytes, o), x);
}

const onnx::TensorProto* init_named(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("quantize: the QDQ model's structure and integer data") {
  const fs::path dir = fresh_dir("quantize_structure");
  const fs::path in = write_model(dir, model());
  QuantizeOptions o;
  o.per_channel = true;
  o.random_samples = 3;
  const kiln::QuantizeReport r = kiln::quantize_model(in.string(), (dir / "q.onnx").string(), o);
  CHECK(r.samples == 3);
  CHECK(r.weights == 3);
  CHECK(r.biases == 3);
  CHECK(r.nodes == 4);  // 2 Conv, Gemm, Add
  // x, r (conv 1's Relu output), c2, a (the Add's output), f (the Gemm's input).
  CHECK(r.activations == 5);
  const onnx::ModelProto m = read_proto(dir / "q.onnx");
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) ++ops[n.op_type()];
  CHECK(ops["QuantizeLinear"] == 5);
  CHECK(ops["DequantizeLinear"] == 5 + 3 + 3);
  CHECK(ops["Relu"] == 1);  // kept: ONNX Runtime folds it into the quantized conv itself
  // Float weights are gone; the int8 ones are in [-127, 127] with a scale per channel.
  CHECK(init_named(m, "w1") == nullptr);
  const onnx::TensorProto* wq = init_named(m, "w1_quantized");
  REQUIRE(wq);
  CHECK(wq->data_type() == onnx::TensorProto::INT8);
  int extreme = 0;
  for (char c : wq->raw_data()) {
    CHECK(int(int8_t(c)) >= -127);
    extreme += std::abs(int(int8_t(c))) == 127;
  }
  CHECK(extreme >= 16);  // each channel's largest weight maps to +-127
  const onnx::TensorProto* ws = init_named(m, "w1_scale");
  REQUIRE(ws);
  CHECK(ws->float_data_size() == 16);
  const onnx::TensorProto* bq = init_named(m, "b1_quantized");
  REQUIRE(bq);
  CHECK(bq->data_type() == onnx::TensorProto::INT32);
  // Every QuantizeLinear's zero point is uint8; x's range spans 0, so its zero point is inside.
  const onnx::TensorProto* zx = init_named(m, "x_zero_point");
  REQUIRE(zx);
  CHECK(zx->data_type() == onnx::TensorProto::UINT8);
  const int z = uint8_t(zx->raw_data()[0]);
  CHECK(z > 64);
  CHECK(z < 192);
  // r is a Relu output: its range starts at 0.
  const onnx::TensorProto* zr = init_named(m, "r_zero_point");
  REQUIRE(zr);
  CHECK(uint8_t(zr->raw_data()[0]) == 0);
}

TEST_CASE("quantize: Kiln runs the QDQ model within 8-bit error of the float model") {
  const fs::path dir = fresh_dir("quantize_accuracy");
  const std::string bytes = model();
  const fs::path in = write_model(dir, bytes);
  QuantizeOptions o;
  o.per_channel = true;
  kiln::quantize_model(in.string(), (dir / "q.onnx").string(), o);
  const Tensor x = normal_tensor({1, 8, 10, 10}, 77);
  const Tensor want = run_bytes(bytes, x);
  const Tensor got = run_file(dir / "q.onnx", x);
  const double err = rel_error(got, want);
  MESSAGE("QDQ vs float: max relative error " << err);
  CHECK(err > 0);  // it is quantized
  CHECK(err < 0.05);
}

TEST_CASE("quantize: per-channel weight scales keep small channels that per-tensor loses") {
  const fs::path dir = fresh_dir("quantize_per_channel");
  const std::string bytes = model(1.8f);  // conv 1's channels span 1.8^15 ~ 6700x
  const fs::path in = write_model(dir, bytes);
  QuantizeOptions o;
  o.per_channel = false;
  kiln::quantize_model(in.string(), (dir / "pt.onnx").string(), o);
  o.per_channel = true;
  kiln::quantize_model(in.string(), (dir / "pc.onnx").string(), o);
  const onnx::ModelProto pt = read_proto(dir / "pt.onnx"), pc = read_proto(dir / "pc.onnx");
  REQUIRE(init_named(pt, "w1_scale"));
  CHECK(init_named(pt, "w1_scale")->float_data_size() == 1);
  // Channel 0's weights (6700x smaller than channel 15's) all round to 0 with one scale; with
  // their own scale their largest is +-127.
  const std::string& wt = init_named(pt, "w1_quantized")->raw_data();
  const std::string& wc = init_named(pc, "w1_quantized")->raw_data();
  int zeros = 0, extreme = 0;
  for (size_t i = 0; i < 8 * 9; ++i) {
    zeros += wt[i] == 0;
    extreme += std::abs(int(int8_t(wc[i]))) == 127;
  }
  CHECK(zeros == 8 * 9);
  CHECK(extreme >= 1);
  const Tensor x = normal_tensor({1, 8, 10, 10}, 3);
  const Tensor want = run_bytes(bytes, x);
  const double e_pt = rel_error(run_file(dir / "pt.onnx", x), want);
  const double e_pc = rel_error(run_file(dir / "pc.onnx", x), want);
  MESSAGE("per tensor " << e_pt << ", per channel " << e_pc);
  CHECK(e_pc < e_pt);
}

TEST_CASE("quantize: calibration files, the percentile method, determinism") {
  const fs::path dir = fresh_dir("quantize_calib");
  const fs::path in = write_model(dir, model());
  fs::create_directories(dir / "calib");
  // Enough samples that the share the percentile cuts at each end is more than one value.
  for (int i = 0; i < 16; ++i) {
    Tensor t = normal_tensor({i == 2 ? 2 : 1, 8, 10, 10}, uint64_t(100 + i));  // any batch
    if (i == 1) t.data<float>()[17] = 60.f;  // one outlier, in sample s101
    kiln::write_npy((dir / "calib" / ("s" + std::to_string(100 + i) + ".npy")).string(), t);
  }
  QuantizeOptions o;
  o.calib_dir = (dir / "calib").string();
  CHECK(kiln::quantize_model(in.string(), (dir / "a.onnx").string(), o).samples == 16);
  kiln::quantize_model(in.string(), (dir / "b.onnx").string(), o);
  CHECK(file_bytes(dir / "a.onnx") == file_bytes(dir / "b.onnx"));  // same inputs, same file
  o.method = kiln::CalibMethod::percentile;
  kiln::quantize_model(in.string(), (dir / "p.onnx").string(), o);
  const float s_minmax = init_named(read_proto(dir / "a.onnx"), "x_scale")->float_data(0);
  const float s_pct = init_named(read_proto(dir / "p.onnx"), "x_scale")->float_data(0);
  CHECK(s_minmax >= 60.f / 255);  // the outlier sets the min-max range
  CHECK(s_pct < s_minmax / 4);    // the percentile range ignores it
  // A file of another shape is named.
  kiln::write_npy((dir / "calib" / "z_bad.npy").string(), normal_tensor({1, 3, 10, 10}, 1));
  const kiln::Error e =
      error_of([&] { kiln::quantize_model(in.string(), (dir / "c.onnx").string(), o); });
  CHECK(e.code() == Code::shape_mismatch);
  CHECK(std::string(e.what()).find("z_bad.npy") != std::string::npos);
  CHECK(!fs::exists(dir / "c.onnx"));
}

TEST_CASE("quantize: errors name the problem and leave an existing output alone") {
  const fs::path dir = fresh_dir("quantize_errors");
  std::ofstream(dir / "out.onnx") << "keep me";
  auto out = (dir / "out.onnx").string();
  QuantizeOptions o;
  CHECK(error_of([&] { kiln::quantize_model((dir / "missing.onnx").string(), out, o); }).code() ==
        Code::io_error);
  const fs::path old = write_model(dir, model(1.f, 11), "op11.onnx");
  o.per_channel = true;
  const kiln::Error e = error_of([&] { kiln::quantize_model(old.string(), out, o); });
  CHECK(e.code() == Code::unsupported);
  CHECK(std::string(e.what()).find("opset 11") != std::string::npos);
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.node("Relu", {"x"}, {"y"});
  const fs::path relu = write_model(dir, b.bytes(), "relu.onnx");
  CHECK(error_of([&] { kiln::quantize_model(relu.string(), out, o); }).code() == Code::unsupported);
  fs::create_directories(dir / "empty");
  o.calib_dir = (dir / "empty").string();
  const fs::path ok = write_model(dir, model());
  CHECK(error_of([&] { kiln::quantize_model(ok.string(), out, o); }).code() ==
        Code::invalid_argument);
  CHECK(file_bytes(dir / "out.onnx") == "keep me");
}
