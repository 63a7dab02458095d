// Opsets 19-21, 16-bit float tensors widened to float32, and refusals that name the reason
// (a foreign-domain-only model, an integer Pow): graph/onnx_import.cpp, graph/half.h.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "graph/error.h"
#include "graph/half.h"
#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"

namespace {

using kiln::Code;
using kiln::DType;
using kiln::Graph;
using kiln::test::import;
using kiln::test::OnnxBuilder;

// The error of importing and inferring the model (what a session load does first).
kiln::Error error_of(const std::string& bytes) {
  try {
    Graph g = import(bytes);
    kiln::infer_shapes(g);
  } catch (const kiln::Error& e) {
    return e;
  }
  FAIL("the model was accepted");
  return kiln::Error(Code::internal, "");
}

// Conv + Relu: ops whose form did not change in opsets 19-28 (Conv-22 only added bfloat16).
OnnxBuilder conv_model(int64_t opset) {
  OnnxBuilder b(opset);
  b.input("x", {1, 2, 5, 5}).output("y");
  b.init_f("w", {3, 2, 3, 3}, std::vector<float>(54, 0.5f));
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  return b;
}

// Binary16 bit patterns and their values as the IEEE 754 format defines them.
struct HalfCase {
  uint16_t bits;
  float value;
};
const HalfCase kHalves[] = {
    {0x3c00, 1.f},        {0xc000, -2.f},      {0x7bff, 65504.f},     {0x0001, 0x1p-24f},
    {0x03ff, 0x3ffp-24f}, {0x0400, 0x1p-14f},  {0x3555, 0x1.554p-2f}, {0x8000, -0.f},
    {0x7c00, INFINITY},   {0xfc00, -INFINITY},
};

// bfloat16 is by definition the upper 16 bits of a float32 pattern.
uint16_t bf16_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return uint16_t(b >> 16);
}
float truncated(float f) {
  const uint32_t b = uint32_t(bf16_bits(f)) << 16;
  float t;
  std::memcpy(&t, &b, 4);
  return t;
}

}  // namespace

TEST_CASE("import: opsets 19 to 28 load; 29 is refused naming the supported range") {
  for (int64_t opset : {19, 20, 21, 22, 24, 28}) {
    CAPTURE(opset);
    Graph g = import(conv_model(opset).bytes());
    CHECK(g.opset == opset);
  }
  auto e = error_of(conv_model(29).bytes());
  CHECK(e.code() == Code::unsupported);
  CHECK(std::string(e.what()).find("1 to 28") != std::string::npos);
}

TEST_CASE("import: float16 and bfloat16 initializers widen to float32 exactly") {
  const size_t n = std::size(kHalves);
  for (bool raw : {true, false}) {
    CAPTURE(raw);
    OnnxBuilder b = conv_model(13);
    auto* h = b.init("h", onnx::TensorProto::FLOAT16, {int64_t(n)});
    auto* bf = b.init("bf", onnx::TensorProto::BFLOAT16, {int64_t(n)});
    std::vector<uint16_t> hraw, bfraw;
    for (const HalfCase& c : kHalves) {
      if (raw) {
        hraw.push_back(c.bits);
        bfraw.push_back(bf16_bits(c.value));
      } else {
        h->add_int32_data(c.bits);
        bf->add_int32_data(bf16_bits(c.value));
      }
    }
    if (raw) {
      h->set_raw_data(hraw.data(), hraw.size() * 2);
      bf->set_raw_data(bfraw.data(), bfraw.size() * 2);
    }
    Graph g = import(b.bytes());
    for (const std::string name : {"h", "bf"}) {
      CAPTURE(name);
      const kiln::Value& v = g.value(g.find(name));
      REQUIRE(v.constant);
      REQUIRE(v.constant->dtype() == DType::f32);
      for (size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        float want = kHalves[i].value;
        if (name == "bf") want = truncated(want);
        const float got = v.constant->data<float>()[i];
        CHECK(got == want);
        CHECK(std::signbit(got) == std::signbit(want));
      }
    }
  }
  SUBCASE("a raw payload of the wrong length is invalid") {
    OnnxBuilder b = conv_model(13);
    b.init("h", onnx::TensorProto::FLOAT16, {3})->set_raw_data("abcd");
    auto e = error_of(b.bytes());
    CHECK(e.code() == Code::invalid_model);
    CHECK(std::string(e.what()).find("'h'") != std::string::npos);
  }
}

TEST_CASE("import: a float16 graph input is a float32 input, a float64 one float32 inside") {
  OnnxBuilder b(13);
  b.input("x", {1, 2, 5, 5}, onnx::TensorProto::FLOAT16).output("y");
  b.node("Relu", {"x"}, {"y"});
  Graph g = import(b.bytes());
  CHECK(g.value(g.inputs[0]).dtype == DType::f32);
  CHECK(g.io_dtypes.count("x") == 0);
  OnnxBuilder d(13);
  d.input("x", {2}, onnx::TensorProto::DOUBLE).output("y", onnx::TensorProto::DOUBLE);
  d.node("Relu", {"x"}, {"y"});
  Graph gd = import(d.bytes());
  CHECK(gd.value(gd.inputs[0]).dtype == DType::f32);  // held as float32 ...
  REQUIRE(gd.io_dtypes.count("x") == 1);              // ... passed as float64
  CHECK(gd.io_dtypes.at("x") == DType::f64);
  REQUIRE(gd.io_dtypes.count("y") == 1);
  CHECK(gd.io_dtypes.at("y") == DType::f64);
  OnnxBuilder u(13);
  u.input("x", {2}, onnx::TensorProto::UINT16).output("y");
  u.node("Relu", {"x"}, {"y"});
  auto e = error_of(u.bytes());
  CHECK(e.code() == Code::unsupported);
  CHECK(std::string(e.what()).find("UINT16") != std::string::npos);
}

TEST_CASE("import: float64 initializers narrow to float32, rounded to nearest") {
  const double fmax = double(std::numeric_limits<float>::max());
  const double in[] = {0.1,
                       -0.0,
                       1e300,
                       -1e300,
                       fmax + 0x1p102,
                       fmax + 0x1p103,
                       1e-320,
                       std::numeric_limits<double>::quiet_NaN(),
                       -2.5,
                       16777217.0};
  const float inf = std::numeric_limits<float>::infinity();
  const float want[] = {0.1f, -0.f, inf, -inf, float(fmax), inf, 0.f, 0.f, -2.5f, 16777216.f};
  const size_t n = std::size(in);
  for (bool raw : {true, false}) {
    CAPTURE(raw);
    OnnxBuilder b = conv_model(13);
    auto* d = b.init("d", onnx::TensorProto::DOUBLE, {int64_t(n)});
    if (raw)
      d->set_raw_data(in, sizeof in);
    else
      for (double v : in) d->add_double_data(v);
    Graph g = import(b.bytes());
    const kiln::Value& v = g.value(g.find("d"));
    REQUIRE(v.constant);
    REQUIRE(v.constant->dtype() == DType::f32);
    for (size_t i = 0; i < n; ++i) {
      CAPTURE(i);
      const float got = v.constant->data<float>()[i];
      if (std::isnan(in[i])) {
        CHECK(std::isnan(got));
        continue;
      }
      CHECK(got == want[i]);
      CHECK(std::signbit(got) == std::signbit(want[i]));
    }
  }
  SUBCASE("a raw payload of the wrong length is invalid") {
    OnnxBuilder b = conv_model(13);
    b.init("d", onnx::TensorProto::DOUBLE, {2})->set_raw_data("abcdefghijkl");
    auto e = error_of(b.bytes());
    CHECK(e.code() == Code::invalid_model);
    CHECK(std::string(e.what()).find("'d'") != std::string::npos);
  }
}

TEST_CASE("half: narrowing rounds to nearest even, widening is exact") {
  for (const HalfCase& c : kHalves) {
    CHECK(kiln::float_to_half(c.value) == c.bits);
    CHECK(kiln::half_to_float(c.bits) == c.value);
  }
  // Every finite half round-trips; the midpoint between neighbours goes to the even one, and
  // one float32 ulp either side of it to the nearer one.
  int checked = 0;
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const float a = kiln::half_to_float(uint16_t(h)), b = kiln::half_to_float(uint16_t(h + 1));
    REQUIRE(kiln::float_to_half(a) == h);
    REQUIRE(kiln::float_to_half(-a) == (h | 0x8000));
    const float mid = a + (b - a) / 2;  // exact: halves have 11 significant bits
    REQUIRE(kiln::float_to_half(mid) == ((h & 1) ? h + 1 : h));
    REQUIRE(kiln::float_to_half(std::nextafter(mid, 0.f)) == h);
    REQUIRE(kiln::float_to_half(std::nextafter(mid, INFINITY)) == h + 1);
    ++checked;
  }
  CHECK(checked == 0x7bff);
  CHECK(kiln::float_to_half(65520.f) == 0x7c00);  // the midpoint past 65504 rounds to inf
  CHECK(kiln::float_to_half(std::nextafter(65520.f, 0.f)) == 0x7bff);
  CHECK(kiln::float_to_half(1e-9f) == 0);  // below half the smallest subnormal
  CHECK(std::isnan(kiln::half_to_float(kiln::float_to_half(std::nanf("")))));
  CHECK(kiln::bf16_to_float(0x3f80) == 1.f);
}

TEST_CASE("import: refusals name the reason") {
  SUBCASE("a model importing only a foreign opset domain") {
    OnnxBuilder b(13);
    b.model().mutable_opset_import(0)->set_domain("ai.onnx.preview.training");
    b.input("x", {2}).output("y");
    b.node("Adagrad", {"x"}, {"y"}).set_domain("ai.onnx.preview.training");
    auto e = error_of(b.bytes());
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("ai.onnx.preview.training") != std::string::npos);
  }
  SUBCASE("a graph input with a zero-sized dimension is an empty tensor, not a symbolic one") {
    OnnxBuilder b(13);
    b.input("x", {1, 0, 3}).output("y").node("Relu", {"x"}, {"y"});
    auto e = error_of(b.bytes());
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("dimension 1 of size 0") != std::string::npos);
  }
  SUBCASE("integer Pow is valid ONNX that Kiln does not run") {
    OnnxBuilder b(13);
    b.input("x", {2}, onnx::TensorProto::INT64).input("p", {2}, onnx::TensorProto::INT64);
    b.output("y").node("Pow", {"x", "p"}, {"y"});
    auto e = error_of(b.bytes());
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("Pow") != std::string::npos);
  }
}
