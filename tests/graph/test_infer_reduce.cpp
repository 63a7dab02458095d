// Shape inference of the Reduce* family (beyond ReduceMean, tested in test_infer_linalg.cpp),
// ArgMax / ArgMin, LogSoftmax / Hardmax, Max / Min / Mean, InstanceNormalization,
// GroupNormalization (per-group scale / bias of opset 18 expanded to per channel) and LRN. Expected
// shapes and values are hand-computed.
#include <cmath>

#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

TEST_CASE("infer Reduce*: shapes and dtypes") {
  Builder b;
  SUBCASE("every op keeps / drops axes like ReduceMean") {
    for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
      CAPTURE(op);
      Builder c;
      c.node(op, {c.in("x", {2, 3, 4}), c.ints("axes", {-1})});
      c.set_i("keepdims", 0);
      CHECK(c.shape() == Shape{2, 3});
    }
  }
  SUBCASE("int64 ReduceSum") {
    b.node("ReduceSum", {b.in("x", {2, 3}, DType::i64), b.ints("axes", {0})});
    CHECK(b.shape() == Shape{1, 3});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("int64 ReduceL2 is refused") {
    b.node("ReduceL2", {b.in("x", {2, 3}, DType::i64)});
    check_fails(b, Code::unsupported, "float32");
  }
  SUBCASE("empty axes with noop") {
    b.node("ReduceMax", {b.in("x", {2, 3}), b.ints("axes", {})});
    b.set_i("noop_with_empty_axes", 1);
    CHECK(b.shape() == Shape{2, 3});
  }
}

TEST_CASE("infer ArgMax / ArgMin") {
  Builder b;
  SUBCASE("default axis 0, keepdims") {
    b.node("ArgMax", {b.in("x", {3, 4, 5})});
    CHECK(b.shape() == Shape{1, 4, 5});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("negative axis made non-negative, keepdims 0") {
    b.node("ArgMin", {b.in("x", {3, 4, 5})});
    b.set_i("axis", -1);
    b.set_i("keepdims", 0);
    CHECK(b.shape() == Shape{3, 4});
    CHECK(b.last().attr_i("axis", -9) == 2);
  }
  SUBCASE("axis out of range") {
    b.node("ArgMax", {b.in("x", {3, 4})});
    b.set_i("axis", 2);
    check_fails(b, Code::invalid_model, "out of range");
  }
  SUBCASE("int64 input is refused") {
    b.node("ArgMax", {b.in("x", {3, 4}, DType::i64)});
    check_fails(b, Code::unsupported, "");
  }
}

TEST_CASE("infer LogSoftmax, Hardmax, Max / Min / Mean") {
  Builder b;
  SUBCASE("LogSoftmax keeps the shape") {
    b.node("LogSoftmax", {b.in("x", {2, 7})});
    CHECK(b.shape() == Shape{2, 7});
  }
  SUBCASE("Hardmax of int64 is refused") {
    b.node("Hardmax", {b.in("x", {2, 7}, DType::i64)});
    check_fails(b, Code::unsupported, "");
  }
  SUBCASE("Max broadcasts three inputs") {
    b.node("Max", {b.in("a", {2, 1, 4}), b.in("b", {3, 1}), b.in("c", {4})});
    CHECK(b.shape() == Shape{2, 3, 4});
  }
  SUBCASE("Min of int64 is refused") {
    b.node("Min", {b.in("a", {2}), b.in("b", {2}, DType::i64)});
    check_fails(b, Code::unsupported, "");
  }
}

TEST_CASE("infer InstanceNormalization / GroupNormalization") {
  Builder b;
  SUBCASE("InstanceNormalization") {
    b.node("InstanceNormalization",
           {b.in("x", {2, 3, 5, 5}), b.floats("s", {3}, 1.f), b.floats("B", {3})});
    CHECK(b.shape() == Shape{2, 3, 5, 5});
  }
  SUBCASE("InstanceNormalization with a wrong scale") {
    b.node("InstanceNormalization",
           {b.in("x", {2, 3, 5}), b.floats("s", {2}, 1.f), b.floats("B", {3})});
    check_fails(b, Code::invalid_model, "one per channel");
  }
  SUBCASE("GroupNormalization opset 18: per-group scale expanded to per channel") {
    Tensor s(DType::f32, {2});
    s.data<float>()[0] = 2.f;
    s.data<float>()[1] = 3.f;
    b.node("GroupNormalization",
           {b.in("x", {1, 6, 4}), b.g.add_const("s", s), b.floats("B", {2}, 0.5f)});
    b.set_i("num_groups", 2);
    CHECK(b.shape() == Shape{1, 6, 4});
    const Tensor& e = *b.g.value(b.last().inputs[1]).constant;
    REQUIRE(e.shape() == Shape{6});
    CHECK(std::vector<float>(e.data<float>(), e.data<float>() + 6) ==
          std::vector<float>{2, 2, 2, 3, 3, 3});
    CHECK(b.g.value(b.last().inputs[2]).constant->shape() == Shape{6});
  }
  SUBCASE("GroupNormalization opset 21: per-group scale is invalid") {
    b.g.opset = 21;
    b.node("GroupNormalization",
           {b.in("x", {1, 6, 4}), b.floats("s", {2}, 1.f), b.floats("B", {6})});
    b.set_i("num_groups", 2);
    check_fails(b, Code::invalid_model, "one per channel");
  }
  SUBCASE("groups must divide the channels") {
    b.node("GroupNormalization",
           {b.in("x", {1, 6, 4}), b.floats("s", {6}, 1.f), b.floats("B", {6})});
    b.set_i("num_groups", 4);
    check_fails(b, Code::invalid_model, "does not divide");
  }
  SUBCASE("a per-group scale computed at run time is refused") {
    b.node("GroupNormalization", {b.in("x", {1, 6, 4}), b.in("s", {2}), b.floats("B", {6})});
    b.set_i("num_groups", 2);
    check_fails(b, Code::unsupported, "not a constant");
  }
}

TEST_CASE("infer LRN") {
  Builder b;
  SUBCASE("the input's shape, any rank >= 3") {
    b.node("LRN", {b.in("x", {2, 7, 5, 3, 2})});
    b.set_i("size", 4);
    CHECK(b.shape() == Shape{2, 7, 5, 3, 2});
  }
  SUBCASE("size is required") {
    b.node("LRN", {b.in("x", {1, 8, 4, 4})});
    check_fails(b, Code::invalid_model, "'size' is required");
  }
  SUBCASE("size must be positive") {
    b.node("LRN", {b.in("x", {1, 8, 4, 4})});
    b.set_i("size", 0);
    check_fails(b, Code::invalid_model, "not >= 1");
  }
  SUBCASE("rank 2 is refused") {
    b.node("LRN", {b.in("x", {1, 8})});
    b.set_i("size", 3);
    check_fails(b, Code::invalid_model, "rank");
  }
  SUBCASE("a non-finite beta is refused") {
    b.node("LRN", {b.in("x", {1, 8, 4, 4})});
    b.set_i("size", 3);
    b.set_f("beta", INFINITY);
    check_fails(b, Code::invalid_model, "'beta' is not finite");
  }
}
