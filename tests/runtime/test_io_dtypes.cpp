// Graph inputs and outputs of the boundary dtypes (graph/ir.h io_dtypes, runtime/io_dtypes.h):
// a quantized conv whose image input is uint8 / int8 and whose output is a QuantizeLinear's
// bytes, against a plain double-precision reference on every ISA path; int32 inputs and
// outputs computed in int64 inside, float64 ones in float32; wrong dtypes refused by name.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace io_dtypes_test {

using kiln::DType;
using kiln::Tensor;
using kiln::test::OnnxBuilder;
using kiln::test::randoms;

constexpr int C = 3, M = 4, H = 7, W = 6;
constexpr float kXs = 0.05f, kWs = 0.02f, kYs = 0.1f;

struct QConv {
  bool int8_input;  // int8 image with zero point -3, else uint8 with zero point 100
  std::vector<int8_t> wq;
  std::vector<float> bias;
  int xzp() const { return int8_input ? -3 : 100; }
};

// x (uint8 / int8) -> DequantizeLinear -> Conv 3x3 pad 1 (int8 weights, DequantizeLinear) ->
// Relu -> QuantizeLinear (uint8, zero point 0) = y, declared uint8; d = DequantizeLinear(y).
std::string qconv_model(const QConv& q) {
  const int xt = q.int8_input ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  OnnxBuilder b;
  b.input("x", {1, C, H, W}, xt, "n").output("y", onnx::TensorProto::UINT8).output("d");
  b.init_f("xs", {}, {kXs});
  auto* xz = b.init("xz", xt, {});
  const int8_t xzp = int8_t(q.xzp());
  const uint8_t xzp_u = uint8_t(q.xzp());
  xz->set_raw_data(q.int8_input ? std::string(1, char(xzp)) : std::string(1, char(xzp_u)));
  auto* wt = b.init("wq", onnx::TensorProto::INT8, {M, C, 3, 3});
  wt->set_raw_data(std::string(reinterpret_cast<const char*>(q.wq.data()), q.wq.size()));
  b.init_f("ws", {}, {kWs});
  b.init_f("bias", {M}, q.bias);
  b.init_f("ys", {}, {kYs});
  auto* yz = b.init("yz", onnx::TensorProto::UINT8, {});
  yz->set_raw_data(std::string(1, '\0'));
  b.node("DequantizeLinear", {"x", "xs", "xz"}, {"xf"});
  b.node("DequantizeLinear", {"wq", "ws"}, {"wf"});
  auto& conv = b.node("Conv", {"xf", "wf", "bias"}, {"c"});
  OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.node("QuantizeLinear", {"r", "ys", "yz"}, {"y"});
  b.node("DequantizeLinear", {"y", "ys", "yz"}, {"d"});
  return b.bytes();
}

// The reference: the same arithmetic in double, quantized with ties to even.
std::vector<int> reference(const QConv& q, const std::vector<int>& x, int n) {
  std::vector<int> y(size_t(n * M * H * W));
  for (int b = 0; b < n; ++b)
    for (int m = 0; m < M; ++m)
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j) {
          double acc = q.bias[size_t(m)];
          for (int c = 0; c < C; ++c)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int ii = i + ki - 1, jj = j + kj - 1;
                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                const double xv =
                    double(x[size_t(((b * C + c) * H + ii) * W + jj)] - q.xzp()) * kXs;
                acc += xv * double(q.wq[size_t(((m * C + c) * 3 + ki) * 3 + kj)]) * kWs;
              }
          const double r = std::max(acc, 0.0) / double(kYs);
          y[size_t(((b * M + m) * H + i) * W + j)] = int(std::min(std::nearbyint(r), 255.0));
        }
  return y;
}

void check_qconv(bool int8_input, kiln::Isa isa) {
  CAPTURE(int8_input);
  CAPTURE(kiln::isa_name(isa));
  QConv q{int8_input, {}, randoms(M, 7, -0.5f, 0.5f)};
  for (float v : randoms(M * C * 9, 8, -127.f, 127.f)) q.wq.push_back(int8_t(std::lround(v)));
  const std::string bytes = qconv_model(q);
  // The cost model's plan (deterministic) and the measured one (whatever this machine's
  // timings choose, an int8 conv or an f32 one): both give the reference's bytes.
  for (kiln::TuneMode tune : {kiln::TuneMode::none, kiln::TuneMode::fast}) {
    CAPTURE(int(tune));
    kiln::SessionOptions o;
    o.max_isa = isa;
    o.use_cache = false;
    o.tune = tune;
    auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
    REQUIRE(s->inputs().size() == 1);
    CHECK(s->inputs()[0].dtype == (int8_input ? DType::i8 : DType::u8));
    CHECK(s->outputs()[0].dtype == DType::u8);
    CHECK(s->outputs()[1].dtype == DType::f32);
    if (isa != kiln::Isa::scalar) {
      // The input's dequantization runs on glue kernels, and an int8 conv may read it as it is
      // (NCHW bytes on a grid). Whether the solver takes that label is the cost model's call:
      // on this tiny conv the reorders around it decide, and measured timings (under ASan once
      // an f32 conv) are the machine's, so the test asserts the candidate, not the choice.
      for (const kiln::Step& st : s->plan().steps) {
        CAPTURE(st.kernel->name());
        CHECK(st.kernel->name().rfind("ref_", 0) != 0);
      }
      if (isa == kiln::Isa::avx512 && kiln::testing::has_vnni()) {
        const kiln::Graph& g = s->graph();
        int int8_nchw = 0;
        for (size_t i = 0; i < g.nodes.size(); ++i)
          if (g.nodes[i].op == "Conv")
            for (const kiln::Label& l : kiln::candidate_labels(g, int(i), isa, false))
              int8_nchw += l.precision == kiln::Precision::int8 &&
                           l.kind == kiln::LabelKind::conv && l.conv.src == kiln::Layout::nchw;
        CHECK(int8_nchw == 1);
      }
    }

    for (int n : {1, 2}) {  // the load's batch, and another (a second plan, the same conversion)
      CAPTURE(n);
      Tensor x(int8_input ? DType::i8 : DType::u8, {n, C, H, W});
      std::vector<int> xv;
      for (float v : randoms(size_t(x.numel()), uint32_t(10 + n), 0.f, 255.99f)) {
        const int u = int(v);
        xv.push_back(int8_input ? u - 128 : u);
      }
      for (int64_t i = 0; i < x.numel(); ++i)
        static_cast<uint8_t*>(x.raw())[i] = uint8_t(xv[size_t(i)]);
      const std::vector<int> want = reference(q, xv, n);

      std::vector<Tensor> into = {Tensor(DType::u8, {n, M, H, W}),
                                  Tensor(DType::f32, {n, M, H, W})};
      s->run({x}, into);
      const std::vector<Tensor> made = s->run(std::vector<Tensor>{x});
      REQUIRE(made.size() == 2);
      CHECK(made[0].dtype() == DType::u8);
      CHECK(made[0].shape() == into[0].shape());
      CHECK(std::memcmp(made[0].raw(), into[0].raw(), into[0].nbytes()) == 0);
      int off_by_one = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const int got = into[0].data<uint8_t>()[i];
        // A value within rounding of a half step may round either way (the kernels sum in
        // another order); nothing else may differ.
        REQUIRE(std::abs(got - want[i]) <= 1);
        off_by_one += got != want[i];
        CHECK(into[1].data<float>()[i] == float(got) * kYs);
      }
      CHECK(off_by_one <= int(want.size() / 100));
    }
  }
}

}  // namespace io_dtypes_test

using namespace io_dtypes_test;

TEST_CASE("io dtypes: a uint8 / int8 image in, a QuantizeLinear's bytes out, on every ISA") {
  std::vector<kiln::Isa> isas = kiln::testing::jit_isas();
  isas.push_back(kiln::Isa::scalar);
  for (kiln::Isa isa : isas)
    for (bool int8_input : {false, true}) check_qconv(int8_input, isa);
}

TEST_CASE("io dtypes: int32 inputs and outputs, computed in int64") {
  // y = x + c (int32, wrapping like int32 arithmetic), g = Gather(table, x) with int32 indices.
  OnnxBuilder b;
  b.input("x", {5}, onnx::TensorProto::INT32).output("y", onnx::TensorProto::INT32).output("g");
  auto* c = b.init("c", onnx::TensorProto::INT32, {5});
  for (int32_t v : {1, -2, 3, 2147483647, -7}) c->add_int32_data(v);
  b.init_f("table", {6}, {10.f, 11.f, 12.f, 13.f, 14.f, 15.f});
  b.node("Add", {"x", "c"}, {"y"});
  b.node("Gather", {"table", "x"}, {"g"});
  const std::string bytes = b.bytes();
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), {});
  CHECK(s->inputs()[0].dtype == DType::i32);
  CHECK(s->outputs()[0].dtype == DType::i32);
  Tensor x(DType::i32, {5});
  const int32_t xs[5] = {0, 5, -1, 1, 2};
  std::memcpy(x.raw(), xs, sizeof xs);
  const std::vector<Tensor> out = s->run(std::vector<Tensor>{x});
  REQUIRE(out[0].dtype() == DType::i32);
  const int32_t want[5] = {1, 3, 2, int32_t(uint32_t(2147483647u) + 1u), -5};
  for (int i = 0; i < 5; ++i) CHECK(out[0].data<int32_t>()[i] == want[i]);
  const float gw[5] = {10.f, 15.f, 15.f, 11.f, 12.f};  // -1 counts from the end
  for (int i = 0; i < 5; ++i) CHECK(out[1].data<float>()[i] == gw[i]);
}

TEST_CASE("io dtypes: float64 inputs, outputs and constants, computed in float32") {
  // y = x * k + c in double (k a raw initializer, c a Constant node's double_data), yf =
  // Cast(y, float), yd = Cast(yf, double): as PyTorch writes Python float arithmetic.
  OnnxBuilder b;
  b.input("x", {6}, onnx::TensorProto::DOUBLE)
      .output("y", onnx::TensorProto::DOUBLE)
      .output("yf")
      .output("yd", onnx::TensorProto::DOUBLE);
  const double k[6] = {0.5, 3.0, -1.0, 1e-3, 2.0, 1.0};
  b.init("k", onnx::TensorProto::DOUBLE, {6})->set_raw_data(k, sizeof k);
  auto& c = b.node("Constant", {}, {"c"});
  auto* ca = c.add_attribute();
  ca->set_name("value");
  ca->set_type(onnx::AttributeProto::TENSOR);
  ca->mutable_t()->set_data_type(onnx::TensorProto::DOUBLE);
  ca->mutable_t()->add_double_data(0.25);
  b.node("Mul", {"x", "k"}, {"m"});
  b.node("Add", {"m", "c"}, {"y"});
  OnnxBuilder::attr_i(b.node("Cast", {"y"}, {"yf"}), "to", onnx::TensorProto::FLOAT);
  OnnxBuilder::attr_i(b.node("Cast", {"yf"}, {"yd"}), "to", onnx::TensorProto::DOUBLE);
  const std::string bytes = b.bytes();
  const double xs[6] = {1.0, -2.0 / 3.0, 1e30, 123456.789, -0.1, 7.0};
  std::vector<kiln::Isa> isas = kiln::testing::jit_isas();
  isas.push_back(kiln::Isa::scalar);
  for (kiln::Isa isa : isas) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.max_isa = isa;
    o.use_cache = false;
    auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
    REQUIRE(s->inputs()[0].dtype == DType::f64);
    CHECK(s->outputs()[0].dtype == DType::f64);
    CHECK(s->outputs()[1].dtype == DType::f32);
    CHECK(s->outputs()[2].dtype == DType::f64);
    Tensor x(DType::f64, {6});
    std::memcpy(x.raw(), xs, sizeof xs);
    const std::vector<Tensor> out = s->run(std::vector<Tensor>{x});
    REQUIRE(out[0].dtype() == DType::f64);
    REQUIRE(out[1].dtype() == DType::f32);
    REQUIRE(out[2].dtype() == DType::f64);
    for (int i = 0; i < 6; ++i) {
      CAPTURE(i);
      const double want = xs[i] * k[i] + 0.25;
      const double got = out[0].data<double>()[i];
      CHECK(std::fabs(got - want) <= 3e-7 * std::fabs(want));  // float32's rounding, 2-3 ops
      CHECK(double(float(got)) == got);                        // a float32 value
      CHECK(out[1].data<float>()[i] == float(got));
      CHECK(out[2].data<double>()[i] == got);
    }
    try {  // a float32 tensor for the float64 input
      s->run(std::vector<Tensor>{Tensor(DType::f32, {6})});
      FAIL("ran with a float32 input");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Code::shape_mismatch);
      CHECK(std::string(e.what()).find("float64") != std::string::npos);
    }
  }
}

TEST_CASE("io dtypes: an input of another dtype is refused by name") {
  QConv q{false, std::vector<int8_t>(M * C * 9, 1), std::vector<float>(M, 0.f)};
  const std::string bytes = qconv_model(q);
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), {});
  for (DType d : {DType::f32, DType::i8}) {
    std::vector<Tensor> out = {Tensor(DType::u8, {1, M, H, W}), Tensor(DType::f32, {1, M, H, W})};
    try {
      s->run({Tensor(d, {1, C, H, W})}, out);
      FAIL("ran with a " << kiln::dtype_name(d) << " input");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Code::shape_mismatch);
      CHECK(std::string(e.what()).find("uint8") != std::string::npos);
    }
  }
  std::vector<Tensor> wrong_out = {Tensor(DType::f32, {1, M, H, W}),
                                   Tensor(DType::f32, {1, M, H, W})};
  try {
    s->run({Tensor(DType::u8, {1, C, H, W})}, wrong_out);
    FAIL("ran into a float32 buffer for a uint8 output");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Code::shape_mismatch);
  }
}

TEST_CASE("io dtypes: a ConvInteger's int32 sums as a graph output are exact, never Winograd") {
  // uint8 x [1, 16, 12, 12] (zero point 128), int8 w [16, 16, 3, 3], pad 1: a conv Winograd
  // takes when asked to (force_family); its sums must stay exact integers here.
  constexpr int Ci = 16, Co = 16, S = 12;
  OnnxBuilder b;
  b.input("x", {1, Ci, S, S}, onnx::TensorProto::UINT8).output("y", onnx::TensorProto::INT32);
  std::vector<int8_t> w;
  for (float v : randoms(Co * Ci * 9, 21, -127.f, 127.f)) w.push_back(int8_t(std::lround(v)));
  b.init("w", onnx::TensorProto::INT8, {Co, Ci, 3, 3})
      ->set_raw_data(std::string(reinterpret_cast<const char*>(w.data()), w.size()));
  b.init("xz", onnx::TensorProto::UINT8, {})->set_raw_data(std::string(1, char(128)));
  OnnxBuilder::attr_ints(b.node("ConvInteger", {"x", "w", "xz"}, {"y"}), "pads", {1, 1, 1, 1});
  const std::string bytes = b.bytes();
  Tensor x(DType::u8, {1, Ci, S, S});
  std::vector<int> xv;
  for (float v : randoms(size_t(x.numel()), 22, 0.f, 255.99f)) xv.push_back(int(v));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = uint8_t(xv[size_t(i)]);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.max_isa = isa;
    o.use_cache = false;
    o.force_family = kiln::ConvFamily::winograd4;
    auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
    for (const kiln::Step& st : s->plan().steps) {
      CAPTURE(st.kernel->name());
      CHECK(st.kernel->name().find("wino") == std::string::npos);
    }
    const std::vector<Tensor> out = s->run(std::vector<Tensor>{x});
    REQUIRE(out[0].dtype() == DType::i32);
    int wrong = 0;
    for (int m = 0; m < Co; ++m)
      for (int i = 0; i < S; ++i)
        for (int j = 0; j < S; ++j) {
          int64_t acc = 0;
          for (int c = 0; c < Ci; ++c)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int ii = i + ki - 1, jj = j + kj - 1;
                if (ii < 0 || ii >= S || jj < 0 || jj >= S) continue;
                acc += int64_t(xv[size_t((c * S + ii) * S + jj)] - 128) *
                       w[size_t(((m * Ci + c) * 3 + ki) * 3 + kj)];
              }
          wrong += out[0].data<int32_t>()[(m * S + i) * S + j] != acc;
        }
    CHECK(wrong == 0);
  }
}
