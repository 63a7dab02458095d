// Shape inference of Gemm, MatMul (numpy.matmul semantics), Softmax and ReduceMean.
// Expected shapes are hand-computed.
#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

TEST_CASE("infer Gemm") {
  Builder b;
  SUBCASE("plain") {
    b.node("Gemm", {b.in("A", {4, 3}), b.in("B", {3, 5})});
    CHECK(b.shape() == Shape{4, 5});
  }
  SUBCASE("transA") {
    b.node("Gemm", {b.in("A", {3, 4}), b.in("B", {3, 5})});
    b.set_i("transA", 1);
    CHECK(b.shape() == Shape{4, 5});
  }
  SUBCASE("transB with bias [N] (classifier head)") {
    b.node("Gemm", {b.in("A", {1, 512}), b.floats("B", {1000, 512}), b.floats("C", {1000})});
    b.set_i("transB", 1);
    CHECK(b.shape() == Shape{1, 1000});
  }
  SUBCASE("both transposed, C [M,1]") {
    b.node("Gemm", {b.in("A", {3, 4}), b.in("B", {5, 3}), b.floats("C", {4, 1})});
    b.set_i("transA", 1);
    b.set_i("transB", 1);
    CHECK(b.shape() == Shape{4, 5});
  }
  SUBCASE("scalar C") {
    b.node("Gemm", {b.in("A", {4, 3}), b.in("B", {3, 5}), b.floats("C", {})});
    CHECK(b.shape() == Shape{4, 5});
  }
  SUBCASE("inner dimension mismatch") {
    b.node("Gemm", {b.in("A", {4, 3}), b.in("B", {4, 5})});
    check_fails(b, Code::invalid_model, "inner dimensions");
  }
  SUBCASE("transB makes K mismatch") {
    b.node("Gemm", {b.in("A", {4, 3}), b.in("B", {3, 5})});
    b.set_i("transB", 1);
    check_fails(b, Code::invalid_model, "K = 3 vs 5");
  }
  SUBCASE("C does not broadcast to [M,N]") {
    b.node("Gemm", {b.in("A", {4, 3}), b.in("B", {3, 5}), b.floats("C", {5, 4})});
    check_fails(b, Code::invalid_model, "does not broadcast to the output shape [4,5]");
  }
  SUBCASE("C of rank 3") {
    b.node("Gemm", {b.in("A", {4, 3}), b.in("B", {3, 5}), b.floats("C", {1, 4, 5})});
    check_fails(b, Code::invalid_model, "'C'");
  }
  SUBCASE("A of rank 3") {
    b.node("Gemm", {b.in("A", {1, 4, 3}), b.in("B", {3, 5})});
    check_fails(b, Code::invalid_model, "should have rank 2");
  }
}

TEST_CASE("infer MatMul") {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{3}, {3}, {}},                           // dot product
      {{2, 3}, {3}, {2}},                       // matrix x vector
      {{3}, {3, 4}, {4}},                       // vector x matrix
      {{2, 3}, {3, 4}, {2, 4}},                 // plain
      {{5, 1, 2, 3}, {4, 3, 6}, {5, 4, 2, 6}},  // batch broadcasting
      {{7, 2, 3}, {3}, {7, 2}},                 // batched matrix x vector
      {{3}, {7, 3, 4}, {7, 4}},                 // vector x batched matrix
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.a));
    CAPTURE(shape_str(c.b));
    Builder b;
    b.node("MatMul", {b.in("a", c.a), b.in("b", c.b)});
    CHECK(b.shape() == c.out);
  }
}

TEST_CASE("infer MatMul: errors") {
  Builder b;
  SUBCASE("K mismatch") {
    b.node("MatMul", {b.in("a", {2, 3}), b.in("b", {4, 5})});
    check_fails(b, Code::invalid_model, "inner dimensions do not match: [2,3] x [4,5]");
  }
  SUBCASE("batch mismatch") {
    b.node("MatMul", {b.in("a", {2, 2, 3}), b.in("b", {3, 3, 4})});
    check_fails(b, Code::invalid_model, "cannot broadcast");
  }
  SUBCASE("scalar operand") {
    b.node("MatMul", {b.in("a", {}), b.in("b", {3})});
    check_fails(b, Code::invalid_model, "rank >= 1");
  }
  SUBCASE("int64 is unsupported") {
    b.node("MatMul", {b.in("a", {2, 3}, DType::i64), b.in("b", {3, 4}, DType::i64)});
    check_fails(b, Code::unsupported, "int64");
  }
}

TEST_CASE("infer Softmax") {
  Builder b;
  SUBCASE("last axis") {
    b.node("Softmax", {b.in("x", {2, 5})});
    b.set_i("axis", -1);
    CHECK(b.shape() == Shape{2, 5});
  }
  SUBCASE("coerce_2d") {
    b.node("Softmax", {b.in("x", {2, 3, 4})});
    b.set_i("axis", 1);
    b.set_i("coerce_2d", 1);
    CHECK(b.shape() == Shape{2, 3, 4});
  }
  SUBCASE("axis = rank is out of range") {
    b.node("Softmax", {b.in("x", {2, 5})});
    b.set_i("axis", 2);
    check_fails(b, Code::invalid_model, "axis 2 is out of range for rank 2");
  }
  SUBCASE("axis = -rank-1 is out of range") {
    b.node("Softmax", {b.in("x", {2, 5})});
    b.set_i("axis", -3);
    check_fails(b, Code::invalid_model, "axis -3");
  }
}

TEST_CASE("infer ReduceMean") {
  Builder b;
  SUBCASE("axes, keepdims") {
    b.node("ReduceMean", {b.in("x", {2, 3, 4, 5}), b.ints("axes", {1, -1})});
    CHECK(b.shape() == Shape{2, 1, 4, 1});
  }
  SUBCASE("axes, keepdims=0") {
    b.node("ReduceMean", {b.in("x", {2, 3, 4, 5}), b.ints("axes", {1, -1})});
    b.set_i("keepdims", 0);
    CHECK(b.shape() == Shape{2, 4});
  }
  SUBCASE("no axes reduces everything") {
    b.node("ReduceMean", {b.in("x", {2, 3, 4, 5})});
    CHECK(b.shape() == Shape{1, 1, 1, 1});
  }
  SUBCASE("no axes, keepdims=0 gives a scalar") {
    b.node("ReduceMean", {b.in("x", {2, 3})});
    b.set_i("keepdims", 0);
    CHECK(b.shape() == Shape{});
  }
  SUBCASE("empty axes with noop_with_empty_axes") {
    b.node("ReduceMean", {b.in("x", {2, 3, 4}), b.ints("axes", {})});
    b.set_i("noop_with_empty_axes", 1);
    CHECK(b.shape() == Shape{2, 3, 4});
  }
  SUBCASE("global average pooling as ReduceMean") {
    b.node("ReduceMean", {b.in("x", {1, 1280, 7, 7}), b.ints("axes", {2, 3})});
    b.set_i("keepdims", 0);
    CHECK(b.shape() == Shape{1, 1280});
  }
  SUBCASE("duplicate axes") {
    b.node("ReduceMean", {b.in("x", {2, 3, 4, 5}), b.ints("axes", {1, -3})});
    check_fails(b, Code::invalid_model, "more than once");
  }
  SUBCASE("axis out of range") {
    b.node("ReduceMean", {b.in("x", {2, 3}), b.ints("axes", {2})});
    check_fails(b, Code::invalid_model, "axes 2 is out of range");
  }
  SUBCASE("axes computed at run time") {
    b.node("ReduceMean", {b.in("x", {2, 3}), b.in("axes", {1}, DType::i64)});
    check_fails(b, Code::unsupported, "must be a constant");
  }
  SUBCASE("axes attribute is not canonical") {
    b.node("ReduceMean", {b.in("x", {2, 3})});
    b.set_ints("axes", {1});
    check_fails(b, Code::invalid_model, "canonical");
  }
}
