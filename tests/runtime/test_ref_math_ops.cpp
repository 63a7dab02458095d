// Pow, Sqrt and Erf: the reference kernels against values known independently of them (exact
// squares and roots, erf's symmetry and its tabulated values), and a whole session running the
// decomposed LayerNorm and exact GELU that vision transformers and ConvNeXt export, against a
// double-precision computation written here.
#include <cmath>
#include <limits>

#include "graph/onnx_builder.h"
#include "runtime/session.h"
#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;
using kiln::test::OnnxBuilder;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kPosInf = std::numeric_limits<float>::infinity();

Tensor unary(const char* op, const Tensor& x) {
  return run1(make_node(op), {&x}, DType::f32, x.shape());
}

}  // namespace

TEST_CASE("ref Sqrt: exact roots, NaN below zero, infinity") {
  Tensor x = f32({7}, {0, 1, 4, 2.25f, 1e-6f, -1, kPosInf});
  check_f32(unary("Sqrt", x), {7}, {0, 1, 2, 1.5f, 1e-3f, kNaN, kPosInf}, 0, 1e-6f);
}

TEST_CASE("ref Erf: tabulated values, odd symmetry, saturation") {
  // erf(0.5), erf(1), erf(2) from Abramowitz and Stegun, table 7.1.
  Tensor x = f32({6}, {0, 0.5f, 1, 2, 6, -6});
  check_f32(unary("Erf", x), {6}, {0, 0.5204998778f, 0.8427007929f, 0.9953222650f, 1, -1}, 0,
            1e-6f);
  Tensor r = random_f32({257}, 3, -4.f, 4.f), neg(DType::f32, {257});
  for (int64_t i = 0; i < r.numel(); ++i) neg.data<float>()[i] = -r.data<float>()[i];
  Tensor a = unary("Erf", r), b = unary("Erf", neg);
  for (int64_t i = 0; i < r.numel(); ++i) {
    CHECK(a.data<float>()[i] == -b.data<float>()[i]);
    CHECK(std::fabs(a.data<float>()[i]) <= 1.f);
  }
}

TEST_CASE("ref Pow: exact powers, broadcasting, NaN for a fractional power of a negative") {
  Tensor a = f32({2, 3}, {2, -3, 9, 0.5f, -8, 16});
  Tensor e = f32({3}, {3, 2, 0.5f});
  check_f32(run1(make_node("Pow"), {&a, &e}, DType::f32, {2, 3}), {2, 3}, {8, 9, 3, 0.125f, 64, 4},
            0, 1e-6f);
  Tensor third = f32({}, {1.f / 3});
  Tensor neg = f32({2}, {-8, 8});
  check_f32(run1(make_node("Pow"), {&neg, &third}, DType::f32, {2}), {2}, {kNaN, 2}, 0, 1e-6f);
  // Squares (the LayerNorm pattern) are exact, including for negative bases.
  Tensor two = f32({1}, {2});
  Tensor r = random_f32({100}, 5, -3.f, 3.f);
  Tensor sq = run1(make_node("Pow"), {&r, &two}, DType::f32, {100});
  for (int64_t i = 0; i < r.numel(); ++i)
    CHECK(sq.data<float>()[i] == r.data<float>()[i] * r.data<float>()[i]);
}

TEST_CASE("ref Pow: integer inputs are refused naming the node") {
  Tensor a = i64({2}, {2, 3}), b = i64({2}, {2, 2});
  check_error(
      [&] {
        run1(make_node("Pow", {}, "pow_1"), {&a, &b}, DType::i64, {2});
      },
      Code::unsupported, "pow_1");
}

TEST_CASE("session: decomposed LayerNorm and exact GELU (ConvNeXt, ViT) match double precision") {
  // y = gelu((x - mean) / sqrt(var + eps)) over the last axis, with
  // var = mean((x - mean)^2) and gelu(v) = v * 0.5 * (1 + erf(v / sqrt(2))).
  const int64_t rows = 6, cols = 40;
  const float eps = 1e-6f;
  OnnxBuilder b;
  b.input("x", {1, rows, cols}).output("y");
  b.init_f("two", {}, {2.f});
  b.init_f("eps", {}, {eps});
  b.init_f("rt2", {}, {1.4142135f});
  b.init_f("one", {}, {1.f});
  b.init_f("half", {}, {0.5f});
  OnnxBuilder::attr_ints(b.node("ReduceMean", {"x"}, {"mu"}), "axes", {-1});
  b.node("Sub", {"x", "mu"}, {"d"});
  b.node("Pow", {"d", "two"}, {"d2"});
  OnnxBuilder::attr_ints(b.node("ReduceMean", {"d2"}, {"var"}), "axes", {-1});
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  b.node("Div", {"d", "sd"}, {"v"});
  b.node("Div", {"v", "rt2"}, {"vs"});
  b.node("Erf", {"vs"}, {"er"});
  b.node("Add", {"er", "one"}, {"e1"});
  b.node("Mul", {"v", "e1"}, {"m"});
  b.node("Mul", {"m", "half"}, {"y"});
  const std::string bytes = b.bytes();
  for (bool reference : {false, true}) {
    CAPTURE(reference);
    SessionOptions o;
    o.threads = 2;
    o.reference = reference;
    o.use_cache = false;
    auto s = Session::load_memory(bytes.data(), bytes.size(), o);
    Tensor x = random_f32({1, rows, cols}, 11, -3.f, 5.f);
    std::vector<Tensor> out;
    out.emplace_back(DType::f32, Shape{1, rows, cols});
    s->run({x}, out);
    const float* xp = x.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += xp[r * cols + c];
      mean /= double(cols);
      for (int64_t c = 0; c < cols; ++c) var += std::pow(xp[r * cols + c] - mean, 2);
      var /= double(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const double v = (xp[r * cols + c] - mean) / std::sqrt(var + eps);
        const double want = v * 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
        const float got = out[0].data<float>()[r * cols + c];
        CHECK_MESSAGE(std::fabs(got - want) <= 1e-5 + 1e-5 * std::fabs(want),
                      "row " << r << " col " << c << ": got " << got << ", want " << want);
      }
    }
  }
}

TEST_CASE("ref LayerNormalization: Mean and InvStdDev outputs") {
  // Rows [1, 2, 3, 4] and [2, 2, 2, 2] over the last axis: means 2.5 and 2, variances 1.25
  // and 0 (InvStdDev 1 / sqrt(var + eps)).
  kiln::Node n;
  n.name = "ln";
  n.op = "LayerNormalization";
  n.attrs["axis"] = kiln::attr_i(-1);
  n.attrs["epsilon"] = kiln::attr_f(0.25f);
  kiln::Tensor x(kiln::DType::f32, {2, 4}), s(kiln::DType::f32, {4});
  const float xv[] = {1, 2, 3, 4, 2, 2, 2, 2};
  std::copy(xv, xv + 8, x.data<float>());
  std::fill(s.data<float>(), s.data<float>() + 4, 1.f);
  kiln::Tensor y(kiln::DType::f32, {2, 4}), mean(kiln::DType::f32, {2, 1}),
      rstd(kiln::DType::f32, {2, 1});
  kiln::find_ref_kernel("LayerNormalization")(n, {&x, &s}, {&y, &mean, &rstd});
  CHECK(mean.data<float>()[0] == 2.5f);
  CHECK(mean.data<float>()[1] == 2.f);
  CHECK(rstd.data<float>()[0] == doctest::Approx(1 / std::sqrt(1.5)).epsilon(1e-6));
  CHECK(rstd.data<float>()[1] == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(y.data<float>()[0] == doctest::Approx(-1.5 / std::sqrt(1.5)).epsilon(1e-6));
}
