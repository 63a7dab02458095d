// Shape inference of Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Shape and Constant.
// Expected shapes are hand-computed from the ONNX operator definitions.
#include <optional>

#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

TEST_CASE("infer Flatten") {
  struct Case {
    int64_t axis;
    Shape out;
  };
  for (Case c : {Case{2, {6, 20}}, Case{0, {1, 120}}, Case{4, {120, 1}}, Case{-1, {24, 5}},
                 Case{1, {2, 60}}}) {
    CAPTURE(c.axis);
    Builder b;
    b.node("Flatten", {b.in("x", {2, 3, 4, 5})});
    b.set_i("axis", c.axis);
    CHECK(b.shape() == c.out);
  }
  Builder b;
  b.node("Flatten", {b.in("x", {2, 3, 4, 5})});
  b.set_i("axis", 5);
  check_fails(b, Code::invalid_model, "axis 5 is out of range");
}

TEST_CASE("infer Reshape") {
  Builder b;
  SUBCASE("0 copies, -1 infers") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {0, -1})});
    CHECK(b.shape() == Shape{2, 12});
  }
  SUBCASE("0 in the middle") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {4, 0, 2})});
    CHECK(b.shape() == Shape{4, 3, 2});
  }
  SUBCASE("-1 alone") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {-1})});
    CHECK(b.shape() == Shape{24});
  }
  SUBCASE("-1 first") {
    b.node("Reshape", {b.in("x", {1, 512, 1, 1}), b.ints("s", {-1, 256})});
    CHECK(b.shape() == Shape{2, 256});
  }
  SUBCASE("int64 data") {
    b.node("Reshape", {b.in("x", {2, 2}, DType::i64), b.ints("s", {4})});
    CHECK(b.shape() == Shape{4});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("allowzero=1 keeps a literal 0") {
    b.node("Reshape", {b.in("x", {0, 3}, DType::i64), b.ints("s", {3, 0})});
    b.set_i("allowzero", 1);
    CHECK(b.shape() == Shape{3, 0});
  }
  SUBCASE("allowzero=0: the same 0 copies dim 1 and the count no longer matches") {
    b.node("Reshape", {b.in("x", {0, 3}, DType::i64), b.ints("s", {3, 0})});
    check_fails(b, Code::invalid_model, "cannot reshape [0,3] to [3,0]");
  }
  SUBCASE("element count mismatch names both shapes") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {5, 5})});
    check_fails(b, Code::invalid_model, "cannot reshape [2,3,4] to [5,5]");
  }
  SUBCASE("-1 not divisible") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {5, -1})});
    check_fails(b, Code::invalid_model, "not a multiple");
  }
  SUBCASE("two -1") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {-1, -1})});
    check_fails(b, Code::invalid_model, "more than one -1");
  }
  SUBCASE("value below -1") {
    b.node("Reshape", {b.in("x", {2, 3, 4}), b.ints("s", {-2, 12})});
    check_fails(b, Code::invalid_model, "negative dimension -2");
  }
  SUBCASE("0 beyond the input's rank") {
    b.node("Reshape", {b.in("x", {24}), b.ints("s", {4, 0})});
    check_fails(b, Code::invalid_model, "0 at index 1");
  }
  SUBCASE("allowzero with both 0 and -1") {
    b.node("Reshape", {b.in("x", {2, 3}), b.ints("s", {0, -1})});
    b.set_i("allowzero", 1);
    check_fails(b, Code::invalid_model, "allowzero");
  }
  SUBCASE("shape computed at run time") {
    b.node("Reshape", {b.in("x", {2, 3}), b.in("s", {2}, DType::i64)});
    check_fails(b, Code::unsupported, "must be a constant");
  }
  SUBCASE("float shape") {
    b.node("Reshape", {b.in("x", {2, 3}), b.floats("s", {2}, 3)});
    check_fails(b, Code::invalid_model, "should be int64");
  }
  SUBCASE("huge product") {
    b.node("Reshape", {b.in("x", {2, 3}), b.ints("s", {int64_t(1) << 40, int64_t(1) << 40})});
    check_fails(b, Code::invalid_model, "too many elements");
  }
}

TEST_CASE("infer Squeeze") {
  Builder b;
  SUBCASE("no axes removes all 1s") {
    b.node("Squeeze", {b.in("x", {1, 3, 1, 5})});
    CHECK(b.shape() == Shape{3, 5});
  }
  SUBCASE("negative axis") {
    b.node("Squeeze", {b.in("x", {1, 3, 1, 5}), b.ints("axes", {-2})});
    CHECK(b.shape() == Shape{1, 3, 5});
  }
  SUBCASE("int64 data, all dims") {
    b.node("Squeeze", {b.in("x", {1, 1}, DType::i64), b.ints("axes", {0, 1})});
    CHECK(b.shape() == Shape{});
  }
  SUBCASE("dim is not 1") {
    b.node("Squeeze", {b.in("x", {1, 3, 1, 5}), b.ints("axes", {1})});
    check_fails(b, Code::invalid_model, "cannot squeeze axis 1 of shape [1,3,1,5]");
  }
  SUBCASE("duplicate axes") {
    b.node("Squeeze", {b.in("x", {1, 3, 1, 5}), b.ints("axes", {0, -4})});
    check_fails(b, Code::invalid_model, "more than once");
  }
  SUBCASE("axes computed at run time") {
    b.node("Squeeze", {b.in("x", {1, 3}), b.in("axes", {1}, DType::i64)});
    check_fails(b, Code::unsupported, "must be a constant");
  }
}

TEST_CASE("infer Unsqueeze") {
  Builder b;
  SUBCASE("front and back") {
    b.node("Unsqueeze", {b.in("x", {3, 4}), b.ints("axes", {0, 3})});
    CHECK(b.shape() == Shape{1, 3, 4, 1});
  }
  SUBCASE("negative axis is relative to the output rank") {
    b.node("Unsqueeze", {b.in("x", {3, 4}), b.ints("axes", {-1})});
    CHECK(b.shape() == Shape{3, 4, 1});
  }
  SUBCASE("mixed, unsorted") {
    b.node("Unsqueeze", {b.in("x", {3, 4}), b.ints("axes", {-1, 1})});
    CHECK(b.shape() == Shape{3, 1, 4, 1});
  }
  SUBCASE("scalar to 1-D (shape arithmetic)") {
    b.node("Unsqueeze", {b.in("x", {}, DType::i64), b.ints("axes", {0})});
    CHECK(b.shape() == Shape{1});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("duplicates after normalization") {
    b.node("Unsqueeze", {b.in("x", {3, 4}), b.ints("axes", {1, -3})});
    check_fails(b, Code::invalid_model, "more than once");
  }
  SUBCASE("out of range for the output rank") {
    b.node("Unsqueeze", {b.in("x", {3, 4}), b.ints("axes", {3})});
    check_fails(b, Code::invalid_model, "axes 3 is out of range for rank 3");
  }
  SUBCASE("axes missing") {
    b.node("Unsqueeze", {b.in("x", {3, 4})});
    check_fails(b, Code::invalid_model, "expects 2 input(s)");
  }
}

TEST_CASE("infer Transpose") {
  Builder b;
  SUBCASE("default reverses") {
    b.node("Transpose", {b.in("x", {2, 3, 4})});
    CHECK(b.shape() == Shape{4, 3, 2});
  }
  SUBCASE("perm") {
    b.node("Transpose", {b.in("x", {2, 3, 4, 5})});
    b.set_ints("perm", {0, 2, 3, 1});
    CHECK(b.shape() == Shape{2, 4, 5, 3});
  }
  SUBCASE("repeated index") {
    b.node("Transpose", {b.in("x", {2, 3, 4})});
    b.set_ints("perm", {0, 0, 1});
    check_fails(b, Code::invalid_model, "not a permutation");
  }
  SUBCASE("wrong length") {
    b.node("Transpose", {b.in("x", {2, 3, 4})});
    b.set_ints("perm", {1, 0});
    check_fails(b, Code::invalid_model, "not a permutation");
  }
  SUBCASE("out of range") {
    b.node("Transpose", {b.in("x", {2, 3})});
    b.set_ints("perm", {0, 2});
    check_fails(b, Code::invalid_model, "not a permutation");
  }
}

TEST_CASE("infer Shape") {
  struct Case {
    std::optional<int64_t> start, end;
    int64_t len;
  };
  const Case cases[] = {
      {{}, {}, 4}, {1, {}, 3}, {-2, {}, 2}, {{}, -1, 3}, {3, 1, 0}, {-10, 10, 4}, {2, 3, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.start.value_or(999));
    CAPTURE(c.end.value_or(999));
    Builder b;
    b.node("Shape", {b.in("x", {2, 3, 4, 5})});
    if (c.start) b.set_i("start", *c.start);
    if (c.end) b.set_i("end", *c.end);
    CHECK(b.shape() == Shape{c.len});
    CHECK(b.out().dtype == DType::i64);
  }
}

TEST_CASE("infer Constant") {
  Builder b;
  SUBCASE("value_ints") {
    b.node("Constant", {});
    b.set_ints("value_ints", {1, 2, 3});
    CHECK(b.shape() == Shape{3});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("value_float") {
    b.node("Constant", {});
    b.set_f("value_float", 2.5f);
    CHECK(b.shape() == Shape{});
    CHECK(b.out().dtype == DType::f32);
  }
  SUBCASE("value tensor") {
    b.node("Constant", {});
    b.last().attrs["value"] = attr_t(Tensor(DType::f32, {2, 2}));
    CHECK(b.shape() == Shape{2, 2});
  }
  SUBCASE("value_string is unsupported") {
    b.node("Constant", {});
    b.set_s("value_string", "hi");
    check_fails(b, Code::unsupported, "value_string");
  }
  SUBCASE("no value") {
    b.node("Constant", {});
    check_fails(b, Code::invalid_model, "no value");
  }
  SUBCASE("two values") {
    b.node("Constant", {});
    b.set_i("value_int", 1);
    b.set_f("value_float", 1);
    check_fails(b, Code::invalid_model, "exactly one");
  }
}
