// Shape inference of unary and broadcasting elementwise ops. Broadcast expectations follow
// numpy's rule (right-aligned, 1 stretches), computed by hand.
#include <limits>

#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

namespace {

ValueId scalar_f32(Builder& b, const std::string& name, float x, Shape shape = {}) {
  return b.floats(name, std::move(shape), x);
}

ValueId const_i64(Builder& b, const std::string& name, int64_t x) {
  Tensor t(DType::i64, {});
  *t.data<int64_t>() = x;
  return b.g.add_const(name, t);
}

}  // namespace

TEST_CASE("infer unary activations keep the shape") {
  for (const char* op : {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"}) {
    CAPTURE(op);
    Builder b;
    b.node(op, {b.in("x", {2, 3, 4})});
    CHECK(b.shape() == Shape{2, 3, 4});
    CHECK(b.out().dtype == DType::f32);
  }
}

TEST_CASE("infer unary activations: errors") {
  Builder b;
  SUBCASE("int64 Relu is unsupported") {
    b.node("Relu", {b.in("x", {2}, DType::i64)});
    check_fails(b, Code::unsupported, "'x' has dtype int64");
  }
  SUBCASE("two inputs") {
    b.node("Tanh", {b.in("x", {2}), b.in("y", {2})});
    check_fails(b, Code::invalid_model, "expects 1 input(s) but has 2");
  }
  SUBCASE("non-finite alpha") {
    b.node("LeakyRelu", {b.in("x", {2})});
    b.set_f("alpha", std::numeric_limits<float>::infinity());
    check_fails(b, Code::invalid_model, "alpha");
  }
  SUBCASE("Elu with a NaN alpha") {
    b.node("Elu", {b.in("x", {2})});
    b.set_f("alpha", std::numeric_limits<float>::quiet_NaN());
    check_fails(b, Code::invalid_model, "finite");
  }
  SUBCASE("Celu with alpha 0 (it divides by alpha)") {
    b.node("Celu", {b.in("x", {2})});
    b.set_f("alpha", 0.f);
    check_fails(b, Code::invalid_model, "Celu's alpha nonzero");
  }
  SUBCASE("int64 Abs and Neg keep int64; bool is not a Neg type") {
    b.node("Abs", {b.in("x", {2}, DType::i64)});
    CHECK(b.shape() == Shape{2});
    CHECK(b.out().dtype == DType::i64);
    Builder c;
    c.node("Neg", {c.in("x", {2}, DType::boolean)});
    check_fails(c, Code::invalid_model, "bool");
  }
}

TEST_CASE("infer Identity accepts any dtype") {
  Builder b;
  b.node("Identity", {b.in("x", {5, 1}, DType::i64)});
  CHECK(b.shape() == Shape{5, 1});
  CHECK(b.out().dtype == DType::i64);
}

TEST_CASE("infer Clip") {
  Builder b;
  SUBCASE("scalar min and max") {
    b.node("Clip", {b.in("x", {1, 8, 3, 3}), scalar_f32(b, "lo", 0), scalar_f32(b, "hi", 6)});
    CHECK(b.shape() == Shape{1, 8, 3, 3});
  }
  SUBCASE("one-element tensors, min omitted") {
    b.node("Clip", {b.in("x", {4}), kNoValue, scalar_f32(b, "hi", 6, {1})});
    CHECK(b.shape() == Shape{4});
  }
  SUBCASE("no bounds") {
    b.node("Clip", {b.in("x", {4})});
    CHECK(b.shape() == Shape{4});
  }
  SUBCASE("min is not a scalar") {
    b.node("Clip", {b.in("x", {4}), scalar_f32(b, "lo", 0, {2})});
    check_fails(b, Code::invalid_model, "'lo' should be a scalar");
  }
  SUBCASE("max of another dtype") {
    b.node("Clip", {b.in("x", {4}), kNoValue, const_i64(b, "hi", 6)});
    check_fails(b, Code::invalid_model, "'hi' has dtype int64");
  }
}

TEST_CASE("infer Dropout (inference only)") {
  Builder b;
  SUBCASE("ratio and constant false training_mode") {
    b.node("Dropout", {b.in("x", {2, 3}), scalar_f32(b, "r", 0.5f), const_i64(b, "t", 0)});
    CHECK(b.shape() == Shape{2, 3});
  }
  SUBCASE("omitted mask output") {
    b.node("Dropout", {b.in("x", {2, 3})});
    b.last().outputs.push_back(kNoValue);
    CHECK(b.shape() == Shape{2, 3});
  }
  SUBCASE("training_mode true") {
    b.node("Dropout", {b.in("x", {2, 3}), kNoValue, const_i64(b, "t", 1)});
    check_fails(b, Code::unsupported, "training_mode");
  }
  // Regression (fuzz_graph, undefined behaviour): a float training_mode out of the int64
  // range was cast to int64. A float flag now saturates (NaN counts as set).
  SUBCASE("float training_mode: zero, huge, NaN") {
    const float inf = std::numeric_limits<float>::infinity();
    for (float t : {-2.59615e33f, 3e38f, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f}) {
      CAPTURE(t);
      Builder c;
      c.node("Dropout", {c.in("x", {2, 3}), kNoValue, scalar_f32(c, "t", t)});
      check_fails(c, Code::unsupported, "training_mode");
    }
    Builder z;
    z.node("Dropout", {z.in("x", {2, 3}), kNoValue, scalar_f32(z, "t", -0.75f)});
    CHECK(z.shape() == Shape{2, 3});  // truncates to 0: inference
  }
  SUBCASE("training_mode computed at run time") {
    b.node("Dropout", {b.in("x", {2, 3}), kNoValue, b.in("t", {}, DType::i64)});
    check_fails(b, Code::unsupported, "training_mode");
  }
  SUBCASE("mask output: bool, the input's shape") {
    b.node("Dropout", {b.in("x", {2, 3})}, 2);
    CHECK(b.shape() == Shape{2, 3});
    CHECK(b.out(1).dtype == DType::boolean);
    CHECK(b.out(1).shape == Shape{2, 3});
  }
  SUBCASE("training_mode true with a constant ratio 0 (PyTorch's F.dropout(p=0) export)") {
    b.node("Dropout", {b.in("x", {2, 3}), scalar_f32(b, "r", 0.f), const_i64(b, "t", 1)});
    CHECK(b.shape() == Shape{2, 3});
  }
  SUBCASE("training_mode true with a non-zero ratio") {
    b.node("Dropout", {b.in("x", {2, 3}), scalar_f32(b, "r", 0.1f), const_i64(b, "t", 1)});
    check_fails(b, Code::unsupported, "training_mode");
  }
}

TEST_CASE("infer Add/Sub/Mul/Div broadcasting") {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{2, 3, 4, 5}, {5}, {2, 3, 4, 5}},
      {{4, 1, 5}, {3, 1}, {4, 3, 5}},
      {{1}, {}, {1}},
      {{}, {}, {}},
      {{1, 64, 1, 1}, {8, 64, 7, 7}, {8, 64, 7, 7}},
      {{3, 1}, {1, 4}, {3, 4}},
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (const Case& c : cases) {
      CAPTURE(op);
      CAPTURE(shape_str(c.a));
      CAPTURE(shape_str(c.b));
      Builder b;
      b.node(op, {b.in("a", c.a), b.in("b", c.b)});
      CHECK(b.shape() == c.out);
    }
}

TEST_CASE("infer binary arithmetic on int64 and errors") {
  Builder b;
  SUBCASE("int64 shape arithmetic") {
    b.node("Div", {b.in("a", {4}, DType::i64), b.in("b", {}, DType::i64)});
    CHECK(b.shape() == Shape{4});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("mismatched dtypes name the input") {
    b.node("Mul", {b.in("a", {4}), b.in("b", {4}, DType::i64)});
    check_fails(b, Code::invalid_model, "input 1 'b' has dtype int64");
  }
  SUBCASE("incompatible shapes") {
    b.node("Add", {b.in("a", {2, 3}), b.in("b", {4})});
    check_fails(b, Code::invalid_model, "cannot broadcast shapes [2,3] and [4]");
  }
}

TEST_CASE("infer Sum") {
  Builder b;
  SUBCASE("three inputs broadcast together") {
    b.node("Sum", {b.in("a", {2, 1, 3}), b.in("b", {4, 1}), b.in("c", {3})});
    CHECK(b.shape() == Shape{2, 4, 3});
  }
  SUBCASE("single input") {
    b.node("Sum", {b.in("a", {5})});
    CHECK(b.shape() == Shape{5});
  }
  SUBCASE("int64 is rejected") {
    b.node("Sum", {b.in("a", {5}, DType::i64), b.in("b", {5}, DType::i64)});
    check_fails(b, Code::invalid_model, "int64");
  }
  SUBCASE("incompatible shapes") {
    b.node("Sum", {b.in("a", {5}), b.in("b", {5}), b.in("c", {4})});
    check_fails(b, Code::invalid_model, "cannot broadcast");
  }
}
