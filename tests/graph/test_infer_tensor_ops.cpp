// Shape inference of Concat, Split, Slice, Gather, GatherElements and Pad. Slice expectations are
// the lengths numpy gives for the same start:stop:step (e.g. len(range(10)[8:1:-2]) == 4).
#include <limits>

#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
}  // namespace

TEST_CASE("infer Concat") {
  Builder b;
  SUBCASE("channels") {
    b.node("Concat", {b.in("a", {2, 3, 4}), b.in("b", {2, 5, 4}), b.in("c", {2, 1, 4})});
    b.set_i("axis", 1);
    CHECK(b.shape() == Shape{2, 9, 4});
  }
  SUBCASE("negative axis, int64 shape pieces") {
    b.node("Concat", {b.in("a", {2}, DType::i64), b.ints("b", {-1, 7, 1})});
    b.set_i("axis", -1);
    CHECK(b.shape() == Shape{5});
    CHECK(b.out().dtype == DType::i64);
  }
  SUBCASE("axis required") {
    b.node("Concat", {b.in("a", {2}), b.in("b", {2})});
    check_fails(b, Code::invalid_model, "'axis' is required");
  }
  SUBCASE("other dims must match") {
    b.node("Concat", {b.in("a", {2, 3, 4}), b.in("b", {2, 5, 5})});
    b.set_i("axis", 1);
    check_fails(b, Code::invalid_model, "input 1 'b' has shape [2,5,5]");
  }
  SUBCASE("ranks must match") {
    b.node("Concat", {b.in("a", {2, 3}), b.in("b", {2, 3, 1})});
    b.set_i("axis", 0);
    check_fails(b, Code::invalid_model, "incompatible");
  }
  SUBCASE("dtypes must match") {
    b.node("Concat", {b.in("a", {2}), b.in("b", {2}, DType::i64)});
    b.set_i("axis", 0);
    check_fails(b, Code::invalid_model, "input 1 'b' has dtype int64");
  }
  SUBCASE("axis out of range") {
    b.node("Concat", {b.in("a", {2, 3}), b.in("b", {2, 3})});
    b.set_i("axis", 2);
    check_fails(b, Code::invalid_model, "axis 2 is out of range");
  }
}

TEST_CASE("infer Split") {
  Builder b;
  SUBCASE("split input") {
    b.node("Split", {b.in("x", {6, 4}), b.ints("s", {2, 4})}, 2);
    b.infer();
    CHECK(b.out(0).shape == Shape{2, 4});
    CHECK(b.out(1).shape == Shape{4, 4});
  }
  SUBCASE("equal parts from the output count, negative axis") {
    b.node("Split", {b.in("x", {2, 9})}, 3);
    b.set_i("axis", -1);
    b.infer();
    for (size_t i = 0; i < 3; ++i) CHECK(b.out(i).shape == Shape{2, 3});
  }
  SUBCASE("num_outputs: ceil chunks, smaller last") {
    b.node("Split", {b.in("x", {10, 3})}, 4);
    b.set_i("num_outputs", 4);
    b.infer();
    // ceil(10 / 4) = 3: 3, 3, 3, 1
    CHECK(b.out(0).shape == Shape{3, 3});
    CHECK(b.out(1).shape == Shape{3, 3});
    CHECK(b.out(2).shape == Shape{3, 3});
    CHECK(b.out(3).shape == Shape{1, 3});
  }
  SUBCASE("without num_outputs the division must be exact") {
    b.node("Split", {b.in("x", {10, 3})}, 4);
    check_fails(b, Code::invalid_model, "cannot be split evenly");
  }
  SUBCASE("num_outputs leaving an empty chunk") {
    b.node("Split", {b.in("x", {5})}, 4);
    b.set_i("num_outputs", 4);
    check_fails(b, Code::invalid_model, "cannot split size 5 into 4");
  }
  SUBCASE("num_outputs disagrees with the outputs") {
    b.node("Split", {b.in("x", {6})}, 2);
    b.set_i("num_outputs", 3);
    check_fails(b, Code::invalid_model, "num_outputs 3");
  }
  SUBCASE("split does not sum to the dim") {
    b.node("Split", {b.in("x", {6, 4}), b.ints("s", {2, 3})}, 2);
    check_fails(b, Code::invalid_model, "sums to 5");
  }
  SUBCASE("split has the wrong count") {
    b.node("Split", {b.in("x", {6, 4}), b.ints("s", {2, 2, 2})}, 2);
    check_fails(b, Code::invalid_model, "3 entries");
  }
  SUBCASE("negative split") {
    b.node("Split", {b.in("x", {6, 4}), b.ints("s", {8, -2})}, 2);
    check_fails(b, Code::invalid_model, "invalid size");
  }
  SUBCASE("split computed at run time") {
    b.node("Split", {b.in("x", {6, 4}), b.in("s", {2}, DType::i64)}, 2);
    check_fails(b, Code::unsupported, "must be a constant");
  }
}

TEST_CASE("infer Slice") {
  struct Case {
    const char* what;
    int64_t start, end, step;
    int64_t len;  // on an axis of size 10
  };
  const Case cases[] = {
      {"plain", 2, 8, 1, 6},
      {"step 3", 1, 10, 3, 3},  // 1, 4, 7
      {"INT64_MAX end", 3, kMax, 1, 7},
      {"clamped both ends", -100, 100, 1, 10},
      {"reverse all with INT64_MIN end", -1, kMin, -1, 10},
      {"reverse, end -11 clamps to before index 0", -1, -11, -1, 10},
      {"step -2", 8, 1, -2, 4},                            // 8, 6, 4, 2
      {"start clamped to the last index", 100, 5, -1, 4},  // 9, 8, 7, 6
      {"huge negative step", 9, 0, kMin, 1},
      {"huge positive step", 0, 10, kMax, 1},
      {"negative start and end", -3, -1, 1, 2},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    Builder b;
    b.node("Slice", {b.in("x", {4, 10}), b.ints("st", {c.start}), b.ints("en", {c.end}),
                     b.ints("ax", {1}), b.ints("sp", {c.step})});
    CHECK(b.shape() == Shape{4, c.len});
  }
}

TEST_CASE("infer Slice: defaults, empty results and errors") {
  Builder b;
  SUBCASE("default axes and steps") {
    b.node("Slice", {b.in("x", {4, 10, 3}), b.ints("st", {1, 2}), b.ints("en", {3, 7})});
    CHECK(b.shape() == Shape{2, 5, 3});
  }
  SUBCASE("negative axis") {
    b.node("Slice",
           {b.in("x", {4, 10, 3}), b.ints("st", {1}), b.ints("en", {2}), b.ints("ax", {-1})});
    CHECK(b.shape() == Shape{4, 10, 1});
  }
  SUBCASE("empty int64 result is allowed (shape arithmetic)") {
    b.node("Slice", {b.in("x", {10}, DType::i64), b.ints("st", {20}), b.ints("en", {30})});
    CHECK(b.shape() == Shape{0});
  }
  SUBCASE("empty float result is unsupported") {
    b.node("Slice", {b.in("x", {10}), b.ints("st", {5}), b.ints("en", {2})});
    check_fails(b, Code::unsupported, "empty");
  }
  SUBCASE("step 0") {
    b.node("Slice", {b.in("x", {10}), b.ints("st", {0}), b.ints("en", {2}), b.ints("ax", {0}),
                     b.ints("sp", {0})});
    check_fails(b, Code::invalid_model, "contain 0");
  }
  SUBCASE("length mismatch") {
    b.node("Slice", {b.in("x", {10, 4}), b.ints("st", {0, 1}), b.ints("en", {2})});
    check_fails(b, Code::invalid_model, "same length");
  }
  SUBCASE("duplicate axes") {
    b.node("Slice",
           {b.in("x", {10, 4}), b.ints("st", {0, 1}), b.ints("en", {2, 3}), b.ints("ax", {0, -2})});
    check_fails(b, Code::invalid_model, "more than once");
  }
  SUBCASE("starts computed at run time") {
    b.node("Slice", {b.in("x", {10}), b.in("st", {1}, DType::i64), b.ints("en", {2})});
    check_fails(b, Code::unsupported, "must be a constant");
  }
}

TEST_CASE("infer Gather") {
  Builder b;
  SUBCASE("indices of rank 2 on axis 1") {
    b.node("Gather", {b.in("x", {5, 4, 3}), b.in("i", {2, 6}, DType::i64)});
    b.set_i("axis", 1);
    CHECK(b.shape() == Shape{5, 2, 6, 3});
  }
  SUBCASE("scalar index removes the axis") {
    b.node("Gather", {b.in("x", {5, 4, 3}), b.in("i", {}, DType::i64)});
    CHECK(b.shape() == Shape{4, 3});
  }
  SUBCASE("constant indices in range, negative axis") {
    b.node("Gather", {b.in("x", {2, 5}, DType::i64), b.ints("i", {0, 4, -5})});
    b.set_i("axis", -1);
    CHECK(b.shape() == Shape{2, 3});
  }
  SUBCASE("constant index too large") {
    b.node("Gather", {b.in("x", {5, 4}), b.ints("i", {1, 5})});
    check_fails(b, Code::invalid_model, "index 5 is out of range for axis 0 of size 5");
  }
  SUBCASE("constant index too negative") {
    b.node("Gather", {b.in("x", {5, 4}), b.ints("i", {-6})});
    check_fails(b, Code::invalid_model, "index -6");
  }
  SUBCASE("float indices") {
    b.node("Gather", {b.in("x", {5, 4}), b.in("i", {2})});
    check_fails(b, Code::invalid_model, "input 1 'i' has dtype float32");
  }
  SUBCASE("axis out of range") {
    b.node("Gather", {b.in("x", {5, 4}), b.in("i", {2}, DType::i64)});
    b.set_i("axis", 2);
    check_fails(b, Code::invalid_model, "axis 2");
  }
}

TEST_CASE("infer GatherElements") {
  Builder b;
  SUBCASE("the output has the indices' shape (smaller than data off the axis)") {
    b.node("GatherElements", {b.in("x", {5, 4, 3}), b.in("i", {2, 9, 3}, DType::i64)});
    b.set_i("axis", -2);
    CHECK(b.shape() == Shape{2, 9, 3});
    CHECK(b.g.nodes[0].attr_i("axis", 0) == 1);
  }
  SUBCASE("int64 data, constant indices in range") {
    b.node("GatherElements", {b.in("x", {5}, DType::i64), b.ints("i", {4, -5, 0})});
    CHECK(b.shape() == Shape{3});
    CHECK(b.g.value(b.g.nodes[0].outputs[0]).dtype == DType::i64);
  }
  SUBCASE("ranks differ") {
    b.node("GatherElements", {b.in("x", {5, 4}), b.in("i", {5}, DType::i64)});
    check_fails(b, Code::invalid_model, "ranks must match");
  }
  SUBCASE("indices larger than data off the axis") {
    b.node("GatherElements", {b.in("x", {5, 4}), b.in("i", {2, 5}, DType::i64)});
    check_fails(b, Code::invalid_model, "larger than data [5,4] on axis 1");
  }
  SUBCASE("constant index out of range") {
    b.node("GatherElements", {b.in("x", {5}), b.ints("i", {1, -6})});
    check_fails(b, Code::invalid_model, "index -6 is out of range for axis 0 of size 5");
  }
  SUBCASE("float indices") {
    b.node("GatherElements", {b.in("x", {5, 4}), b.in("i", {2, 4})});
    check_fails(b, Code::invalid_model, "input 1 'i' has dtype float32");
  }
}

TEST_CASE("infer Pad") {
  Builder b;
  SUBCASE("pads for every axis") {
    b.node("Pad", {b.in("x", {1, 3, 4, 5}), b.ints("p", {0, 0, 1, 2, 0, 0, 3, 4})});
    CHECK(b.shape() == Shape{1, 3, 8, 11});  // 4 + 1 + 3, 5 + 2 + 4
  }
  SUBCASE("constant_value and opset-18 axes") {
    b.node("Pad", {b.in("x", {1, 3, 4, 5}), b.ints("p", {1, 2, 3, 4}), b.floats("v", {}, 1),
                   b.ints("ax", {2, -1})});
    CHECK(b.shape() == Shape{1, 3, 8, 11});
  }
  SUBCASE("reflect pads") {
    b.node("Pad", {b.in("x", {1, 3, 4, 5}), b.ints("p", {0, 0, 1, 1, 0, 0, 1, 6})});
    b.set_s("mode", "reflect");
    CHECK(b.shape() == Shape{1, 3, 6, 12});
  }
  SUBCASE("edge cannot pad an empty dim") {
    b.node("Pad", {b.in("x", {1, 3, 0, 5}), b.ints("p", {0, 0, 1, 1, 0, 0, 1, 1})});
    b.set_s("mode", "edge");
    check_fails(b, Code::invalid_model, "empty");
  }
  SUBCASE("unknown mode") {
    b.node("Pad", {b.in("x", {4}), b.ints("p", {1, 1})});
    b.set_s("mode", "mirror");
    check_fails(b, Code::invalid_model, "mirror");
  }
  SUBCASE("negative pads are unsupported") {
    b.node("Pad", {b.in("x", {4, 4}), b.ints("p", {0, -1, 0, 0})});
    check_fails(b, Code::unsupported, "negative pads");
  }
  SUBCASE("wrong number of pads") {
    b.node("Pad", {b.in("x", {4, 4}), b.ints("p", {1, 1})});
    check_fails(b, Code::invalid_model, "should have 4 values");
  }
  SUBCASE("pads computed at run time") {
    b.node("Pad", {b.in("x", {4, 4}), b.in("p", {4}, DType::i64)});
    check_fails(b, Code::unsupported, "must be a constant");
  }
  SUBCASE("axes computed at run time") {
    b.node("Pad", {b.in("x", {4, 4}), b.ints("p", {1, 1}), kNoValue, b.in("ax", {1}, DType::i64)});
    check_fails(b, Code::unsupported, "must be a constant");
  }
  SUBCASE("constant_value is not a scalar") {
    b.node("Pad", {b.in("x", {4, 4}), b.ints("p", {1, 1, 1, 1}), b.floats("v", {2})});
    check_fails(b, Code::invalid_model, "should be a scalar");
  }
  SUBCASE("result too large") {
    b.node("Pad", {b.in("x", {1, 1, 1, 1}), b.ints("p", {0, 0, 0, 0, 0, 0, 65536, 65536})});
    check_fails(b, Code::unsupported, "[1,1,65537,65537]");
  }
}
