// Reference unary activations and broadcasting binary ops.
#include <limits>

#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

namespace {

Tensor unary(const char* op, const Tensor& x, std::map<std::string, Attribute> attrs = {}) {
  return run1(make_node(op, std::move(attrs)), {&x}, DType::f32, x.shape());
}

Tensor binary(const char* op, const Tensor& a, const Tensor& b, Shape out) {
  return run1(make_node(op), {&a, &b}, a.dtype(), std::move(out));
}

}  // namespace

TEST_CASE("ref unary activations: hand-computed") {
  Tensor x = f32({4}, {-2, -0.5f, 0, 1.5f});
  check_f32(unary("Relu", x), {4}, {0, 0, 0, 1.5f});
  check_f32(unary("LeakyRelu", x), {4}, {-0.02f, -0.005f, 0, 1.5f});
  check_f32(unary("LeakyRelu", x, {{"alpha", attr_f(0.5f)}}), {4}, {-1, -0.25f, 0, 1.5f});

  Tensor s = f32({2, 3}, {0, std::log(3.f), -100, 100, -std::log(3.f), 2});
  check_f32(unary("Sigmoid", s), {2, 3}, {0.5f, 0.75f, 0, 1, 0.25f, 0.8807970779778823f});

  Tensor h = f32({4}, {-3, 0, 1, 3});
  check_f32(unary("HardSigmoid", h), {4}, {0, 0.5f, 0.7f, 1});
  check_f32(unary("HardSigmoid", h, {{"alpha", attr_f(0.5f)}, {"beta", attr_f(0.25f)}}), {4},
            {0, 0.25f, 0.75f, 1});

  Tensor hs = f32({7}, {-4, -3, -1, 0, 1, 3, 4});
  check_f32(unary("HardSwish", hs), {7}, {0, 0, -1.f / 3, 0, 2.f / 3, 3, 4});

  Tensor t = f32({4}, {0, std::log(2.f), -std::log(2.f), 50});
  check_f32(unary("Tanh", t), {4}, {0, 0.6f, -0.6f, 1});

  // NaN propagates through Relu.
  Tensor n = f32({1}, {std::numeric_limits<float>::quiet_NaN()});
  check_f32(unary("Relu", n), {1}, {std::numeric_limits<float>::quiet_NaN()});
}

TEST_CASE("ref Clip: optional min/max inputs") {
  Tensor x = f32({5}, {-3, -1, 0, 2, 5});
  Tensor lo = f32({}, {-1}), hi = f32({}, {2}), hi1 = f32({1}, {2});
  Node n = make_node("Clip");
  check_f32(run1(n, {&x, &lo, &hi}, DType::f32, {5}), {5}, {-1, -1, 0, 2, 2});
  check_f32(run1(n, {&x, nullptr, &hi}, DType::f32, {5}), {5}, {-3, -1, 0, 2, 2});
  check_f32(run1(n, {&x, &lo}, DType::f32, {5}), {5}, {-1, -1, 0, 2, 5});
  check_f32(run1(n, {&x}, DType::f32, {5}), {5}, {-3, -1, 0, 2, 5});
  check_f32(run1(n, {&x, nullptr, &hi1}, DType::f32, {5}), {5}, {-3, -1, 0, 2, 2});
  // min > max: everything becomes max (numpy.clip).
  Tensor three = f32({}, {3}), one = f32({}, {1});
  check_f32(run1(n, {&x, &three, &one}, DType::f32, {5}), {5}, {1, 1, 1, 1, 1});
}

TEST_CASE("ref Add/Sub/Mul/Div f32: hand-computed broadcasting") {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = f32({3}, {10, 20, 30});
  check_f32(binary("Add", a, row, {2, 3}), {2, 3}, {11, 22, 33, 14, 25, 36});
  check_f32(binary("Add", row, a, {2, 3}), {2, 3}, {11, 22, 33, 14, 25, 36});
  Tensor col = f32({2, 1}, {1, 2}), r13 = f32({1, 3}, {10, 20, 30});
  check_f32(binary("Sub", col, r13, {2, 3}), {2, 3}, {-9, -19, -29, -8, -18, -28});
  Tensor two = f32({}, {2});
  check_f32(binary("Mul", a, two, {2, 3}), {2, 3}, {2, 4, 6, 8, 10, 12});
  Tensor p = f32({2}, {1, -3}), q = f32({2}, {4, 2});
  check_f32(binary("Div", p, q, {2}), {2}, {0.25f, -1.5f});
  Tensor z = f32({1}, {0});
  check_f32(binary("Div", p, z, {2}), {2},
            {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
  // Rank-0 with rank-0.
  Tensor s1 = f32({}, {3}), s2 = f32({}, {4});
  check_f32(binary("Mul", s1, s2, {}), {}, {12});
  // Channel bias [1, C, 1, 1] onto [1, C, H, W].
  Tensor img = f32({1, 2, 1, 2}, {1, 2, 3, 4}), bias = f32({1, 2, 1, 1}, {100, 200});
  check_f32(binary("Add", img, bias, {1, 2, 1, 2}), {1, 2, 1, 2}, {101, 102, 203, 204});
}

TEST_CASE("ref Add/Sub/Mul/Div i64: hand-computed, truncating division") {
  Tensor a = i64({4}, {7, -7, 7, -7}), b = i64({4}, {2, 2, -2, -2});
  check_i64(binary("Div", a, b, {4}), {4}, {3, -3, -3, 3});
  check_i64(binary("Add", a, b, {4}), {4}, {9, -5, 5, -9});
  check_i64(binary("Sub", a, b, {4}), {4}, {5, -9, 9, -5});
  check_i64(binary("Mul", a, b, {4}), {4}, {14, -14, -14, 14});
  Tensor s = i64({}, {3});
  check_i64(binary("Mul", a, s, {4}), {4}, {21, -21, 21, -21});
  Tensor shape = i64({2}, {1, 2048}), sc = i64({1}, {-1});
  check_i64(binary("Mul", shape, sc, {2}), {2}, {-1, -2048});
  Tensor mn = i64({1}, {std::numeric_limits<int64_t>::min()}), m1 = i64({1}, {-1});
  check_i64(binary("Div", mn, m1, {1}), {1}, {std::numeric_limits<int64_t>::min()});
}

TEST_CASE("ref Sum: variadic broadcasting") {
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2}, {10, 20}), c = f32({}, {100});
  Node n = make_node("Sum");
  check_f32(run1(n, {&a, &b, &c}, DType::f32, {2, 2}), {2, 2}, {111, 122, 113, 124});
  check_f32(run1(n, {&c, &b, &a}, DType::f32, {2, 2}), {2, 2}, {111, 122, 113, 124});
  check_f32(run1(n, {&a}, DType::f32, {2, 2}), {2, 2}, {1, 2, 3, 4});
  Tensor col = f32({2, 1}, {1, 2});
  check_f32(run1(n, {&b, &col}, DType::f32, {2, 2}), {2, 2}, {11, 21, 12, 22});
}

TEST_CASE("ref binary ops: swept broadcast shapes against per-element indexing") {
  Rng r(3);
  const char* ops[] = {"Add", "Sub", "Mul", "Div"};
  for (int it = 0; it < 80; ++it) {
    // Output shape, then each input takes a suffix of it with some dims set to 1.
    Shape out;
    const int64_t rank = r.pick(0, 4);
    for (int64_t d = 0; d < rank; ++d) out.push_back(r.pick(1, 5));
    const Shape sa = random_broadcast_operand(r, out), sb = random_broadcast_operand(r, out);
    // Whatever was dropped must still be covered by one side: recompute the real output.
    const Shape full = broadcast_shape(sa, sb);
    const char* op = ops[it % 4];
    CAPTURE(op);
    if (it % 2 == 0) {
      Tensor a = random_f32(sa, 10 + uint64_t(it)),
             b = random_f32(sb, 500 + uint64_t(it), 0.5f, 2.f);
      Tensor y = binary(op, a, b, full);
      for (int64_t i = 0; i < y.numel(); ++i) {
        const float p = a.data<float>()[bcast_index(sa, full, i)];
        const float q = b.data<float>()[bcast_index(sb, full, i)];
        const float want = it % 4 == 0 ? p + q : it % 4 == 1 ? p - q : it % 4 == 2 ? p * q : p / q;
        REQUIRE(y.data<float>()[i] == want);
      }
    } else {
      Tensor a(DType::i64, sa), b(DType::i64, sb);
      for (int64_t i = 0; i < a.numel(); ++i) a.data<int64_t>()[i] = r.pick(-50, 50);
      for (int64_t i = 0; i < b.numel(); ++i)
        b.data<int64_t>()[i] = r.pick(1, 9) * (r.pick(0, 1) ? 1 : -1);
      Tensor y = binary(op, a, b, full);
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t p = a.data<int64_t>()[bcast_index(sa, full, i)];
        const int64_t q = b.data<int64_t>()[bcast_index(sb, full, i)];
        const int64_t want = it % 4 == 1 ? p - q : it % 4 == 3 ? p / q : 0;
        REQUIRE(y.data<int64_t>()[i] == want);
      }
    }
  }
}

TEST_CASE("ref elementwise: errors name the node") {
  SUBCASE("i64 division by zero") {
    Tensor a = i64({2}, {1, 2}), b = i64({2}, {1, 0});
    Node n = make_node("Div", {}, "div_7");
    check_error(
        [&] {
          run1(n, {&a, &b}, DType::i64, {2});
        },
        Code::invalid_argument, "div_7", "division by zero");
  }
  SUBCASE("mixed dtypes") {
    Tensor a = f32({2}, {1, 2}), b = i64({2}, {1, 2});
    Node n = make_node("Add", {}, "add_1");
    check_error([&] { run1(n, {&a, &b}, DType::f32, {2}); }, Code::unsupported, "add_1");
  }
  SUBCASE("wrong output shape") {
    Tensor a = f32({2}, {1, 2}), b = f32({3}, {1, 2, 3});
    Node n = make_node("Mul", {}, "mul_1");
    check_error([&] { run1(n, {&a, &b}, DType::f32, {3}); }, Code::invalid_model, "mul_1");
    Tensor c = f32({2}, {1, 2});
    check_error([&] { run1(n, {&a, &c}, DType::f32, {4}); }, Code::internal, "mul_1");
  }
  SUBCASE("unary on i64") {
    Tensor a = i64({2}, {1, 2});
    Node n = make_node("Relu", {}, "relu_1");
    check_error([&] { run1(n, {&a}, DType::i64, {2}); }, Code::unsupported, "relu_1");
  }
  SUBCASE("Clip with a non-scalar bound") {
    Tensor x = f32({2}, {1, 2}), lo = f32({2}, {0, 0});
    Node n = make_node("Clip", {}, "clip_1");
    check_error([&] { run1(n, {&x, &lo}, DType::f32, {2}); }, Code::invalid_model, "clip_1");
  }
  SUBCASE("Sum of i64") {
    Tensor a = i64({2}, {1, 2});
    Node n = make_node("Sum", {}, "sum_1");
    check_error([&] { run1(n, {&a, &a}, DType::i64, {2}); }, Code::unsupported, "sum_1");
  }
}
