// Reference kernels of the bool ops, Where, Cast and the shape builders (Expand, Tile,
// ConstantOfShape, Range, Size): hand-computed cases on tiny tensors.
#include <limits>

#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

namespace {

Tensor b8(Shape s, std::vector<uint8_t> v) {
  Tensor t(DType::boolean, std::move(s));
  REQUIRE(int64_t(v.size()) == t.numel());
  for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = v[i];
  return t;
}

void check_b8(const Tensor& got, const Shape& shape, const std::vector<uint8_t>& want) {
  REQUIRE(got.dtype() == DType::boolean);
  REQUIRE(got.shape() == shape);
  REQUIRE(got.numel() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    CHECK_MESSAGE(int(got.data<uint8_t>()[i]) == int(want[i]), "element " << i);
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("ref comparisons: f32, i64 and bool, broadcasting, NaN compares false") {
  Tensor a = f32({2, 3}, {1, 2, 3, kNan, 5, -1});
  Tensor b = f32({3}, {2, 2, 2});
  const Shape s{2, 3};
  check_b8(run1(make_node("Equal"), {&a, &b}, DType::boolean, s), s, {0, 1, 0, 0, 0, 0});
  check_b8(run1(make_node("Less"), {&a, &b}, DType::boolean, s), s, {1, 0, 0, 0, 0, 1});
  check_b8(run1(make_node("Greater"), {&a, &b}, DType::boolean, s), s, {0, 0, 1, 0, 1, 0});
  check_b8(run1(make_node("LessOrEqual"), {&a, &b}, DType::boolean, s), s, {1, 1, 0, 0, 0, 1});
  check_b8(run1(make_node("GreaterOrEqual"), {&a, &b}, DType::boolean, s), s, {0, 1, 1, 0, 1, 0});
  Tensor i = i64({2, 1}, {-1, 7}), j = i64({2}, {7, -1});
  check_b8(run1(make_node("Equal"), {&i, &j}, DType::boolean, {2, 2}), {2, 2}, {0, 1, 1, 0});
  Tensor p = b8({2}, {0, 1}), q = b8({1}, {1});
  check_b8(run1(make_node("Equal"), {&p, &q}, DType::boolean, {2}), {2}, {0, 1});
  check_error(
      [&] {
        run1(make_node("Less"), {&a, &i}, DType::boolean, {2, 3});
      },
      Code::unsupported);
}

TEST_CASE("ref Not/And/Or/Xor") {
  Tensor a = b8({2, 2}, {0, 0, 1, 1}), b = b8({2}, {0, 1});
  const Shape s{2, 2};
  check_b8(run1(make_node("Not"), {&a}, DType::boolean, s), s, {1, 1, 0, 0});
  check_b8(run1(make_node("And"), {&a, &b}, DType::boolean, s), s, {0, 0, 0, 1});
  check_b8(run1(make_node("Or"), {&a, &b}, DType::boolean, s), s, {0, 1, 1, 1});
  check_b8(run1(make_node("Xor"), {&a, &b}, DType::boolean, s), s, {0, 1, 1, 0});
}

TEST_CASE("ref Where: three-way broadcasting over f32, i64 and bool") {
  Tensor c = b8({2, 1}, {1, 0});
  Tensor x = f32({3}, {1, 2, 3}), y = f32({1}, {-5});
  check_f32(run1(make_node("Where"), {&c, &x, &y}, DType::f32, {2, 3}), {2, 3},
            {1, 2, 3, -5, -5, -5});
  Tensor xi = i64({}, {4}), yi = i64({2, 2}, {0, 1, 2, 3});
  Tensor c2 = b8({2}, {0, 1});
  check_i64(run1(make_node("Where"), {&c2, &xi, &yi}, DType::i64, {2, 2}), {2, 2}, {0, 4, 2, 4});
  Tensor xb = b8({1}, {1}), yb = b8({2}, {0, 0});
  check_b8(run1(make_node("Where"), {&c2, &xb, &yb}, DType::boolean, {2}), {2}, {0, 1});
}

TEST_CASE("ref IsNaN/IsInf/Sign/Mod") {
  Tensor x = f32({5}, {kNan, kInf, -kInf, 0.f, -2.5f});
  check_b8(run1(make_node("IsNaN"), {&x}, DType::boolean, {5}), {5}, {1, 0, 0, 0, 0});
  check_b8(run1(make_node("IsInf"), {&x}, DType::boolean, {5}), {5}, {0, 1, 1, 0, 0});
  check_b8(run1(make_node("IsInf", {{"detect_negative", attr_i(0)}}), {&x}, DType::boolean, {5}),
           {5}, {0, 1, 0, 0, 0});
  check_b8(run1(make_node("IsInf", {{"detect_positive", attr_i(0)}}), {&x}, DType::boolean, {5}),
           {5}, {0, 0, 1, 0, 0});
  check_f32(run1(make_node("Sign"), {&x}, DType::f32, {5}), {5}, {kNan, 1, -1, 0, -1});
  const int64_t lo = std::numeric_limits<int64_t>::min();
  Tensor n64 = i64({4}, {3, -4, 0, lo});  // -INT64_MIN wraps to itself, as in numpy
  check_i64(run1(make_node("Neg"), {&n64}, DType::i64, {4}), {4}, {-3, 4, 0, lo});
  check_i64(run1(make_node("Abs"), {&n64}, DType::i64, {4}), {4}, {3, 4, 0, lo});
  Tensor a = i64({4}, {7, -7, 7, -7}), b = i64({4}, {3, 3, -3, -3});
  check_i64(run1(make_node("Mod"), {&a, &b}, DType::i64, {4}), {4}, {1, 2, -2, -1});
  check_i64(run1(make_node("Mod", {{"fmod", attr_i(1)}}), {&a, &b}, DType::i64, {4}), {4},
            {1, -1, 1, -1});
  Tensor fa = f32({2}, {5.5f, -5.5f}), fb = f32({1}, {2});
  check_f32(run1(make_node("Mod", {{"fmod", attr_i(1)}}), {&fa, &fb}, DType::f32, {2}), {2},
            {1.5f, -1.5f});
  Tensor zero = i64({1}, {0});
  check_error(
      [&] {
        run1(make_node("Mod"), {&a, &zero}, DType::i64, {4});
      },
      Code::invalid_argument);
}

TEST_CASE("ref Cast: float16 rounding, int32 wrap, bool, saturation") {
  auto cast = [](const Tensor& x, int64_t to, DType d) {
    return run1(make_node("Cast", {{"to", attr_i(to)}}), {&x}, d, x.shape());
  };
  // Half: 11 significant bits (ties to even), subnormals in steps of 2^-24, overflow past
  // 65504 (65519 still rounds down, 65520 is the tie that rounds to infinity).
  Tensor x = f32({9}, {1.f + 0x1p-11f, 1.f + 0x1p-11f + 0x1p-20f, 1.f + 3 * 0x1p-11f, 0x1p-25f,
                       0x1p-25f + 0x1p-30f, 65519.f, 65520.f, -1e6f, kNan});
  check_f32(cast(x, 10, DType::f32), {9},
            {1.f, 1.f + 0x1p-10f, 1.f + 0x1p-9f, 0.f, 0x1p-24f, 65504.f, kInf, -kInf, kNan}, 0, 0);
  Tensor y = f32({5}, {2.9f, -2.9f, kNan, 3e9f, 0.f});
  check_i64(cast(y, 7, DType::i64), {5}, {2, -2, INT64_MIN, 3000000000, 0});
  check_i64(cast(y, 6, DType::i64), {5}, {2, -2, INT32_MIN, INT32_MIN, 0});
  check_b8(cast(y, 9, DType::boolean), {5}, {1, 1, 1, 1, 0});
  Tensor big = i64({2}, {(int64_t(1) << 32) + 5, -1});
  check_i64(cast(big, 6, DType::i64), {2}, {5, -1});
  check_f32(cast(big, 1, DType::f32), {2}, {float((int64_t(1) << 32) + 5), -1.f});
  Tensor b = b8({2}, {1, 0});
  check_f32(cast(b, 1, DType::f32), {2}, {1, 0});
  Tensor like = i64({}, {0});
  check_i64(run1(make_node("CastLike"), {&b, &like}, DType::i64, {2}), {2}, {1, 0});
}

TEST_CASE("ref Expand/Tile/ConstantOfShape/Range/Size") {
  Tensor x = f32({3, 1}, {1, 2, 3});
  Tensor shp = i64({3}, {2, 1, 2});
  check_f32(run1(make_node("Expand"), {&x, &shp}, DType::f32, {2, 3, 2}), {2, 3, 2},
            {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  Tensor t = i64({2, 2}, {1, 2, 3, 4});
  Tensor reps = i64({2}, {2, 3});
  check_i64(run1(make_node("Tile"), {&t, &reps}, DType::i64, {4, 6}), {4, 6},
            {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  Tensor cs = i64({2}, {2, 1});
  check_f32(run1(make_node("ConstantOfShape"), {&cs}, DType::f32, {2, 1}), {2, 1}, {0, 0});
  Tensor v = i64({1}, {-3});
  check_i64(run1(make_node("ConstantOfShape", {{"value", attr_t(v)}}), {&cs}, DType::i64, {2, 1}),
            {2, 1}, {-3, -3});
  Tensor s = f32({}, {1}), l = f32({}, {2}), d = f32({}, {0.25f});
  check_f32(run1(make_node("Range"), {&s, &l, &d}, DType::f32, {4}), {4}, {1, 1.25f, 1.5f, 1.75f});
  Tensor si = i64({}, {10}), li = i64({}, {4}), di = i64({}, {-3});
  check_i64(run1(make_node("Range"), {&si, &li, &di}, DType::i64, {2}), {2}, {10, 7});
  check_i64(run1(make_node("Size"), {&t}, DType::i64, {}), {}, {4});
}
