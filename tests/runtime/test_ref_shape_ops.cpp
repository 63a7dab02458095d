// Reference data-movement ops: copies, Transpose, Concat, Split, Slice, Gather, Shape, Pad,
// Constant — hand-computed cases on tiny tensors, f32 and i64.
#include <limits>

#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

namespace {

Tensor iota_f32(Shape s) {
  Tensor t(DType::f32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
  return t;
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

}  // namespace

TEST_CASE("ref Reshape/Flatten/Squeeze/Unsqueeze/Identity/Dropout: data copy") {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor shp = i64({1}, {6});
  check_f32(run1(make_node("Reshape"), {&x, &shp}, DType::f32, {6}), {6}, {1, 2, 3, 4, 5, 6});
  check_f32(run1(make_node("Flatten", {{"axis", attr_i(-1)}}), {&x}, DType::f32, {2, 3}), {2, 3},
            {1, 2, 3, 4, 5, 6});
  Tensor ax = i64({1}, {0});
  check_f32(run1(make_node("Unsqueeze"), {&x, &ax}, DType::f32, {1, 2, 3}), {1, 2, 3},
            {1, 2, 3, 4, 5, 6});
  Tensor x1 = f32({1, 3, 1}, {7, 8, 9});
  check_f32(run1(make_node("Squeeze"), {&x1}, DType::f32, {3}), {3}, {7, 8, 9});
  check_f32(run1(make_node("Identity"), {&x}, DType::f32, {2, 3}), {2, 3}, {1, 2, 3, 4, 5, 6});
  check_f32(run1(make_node("Dropout"), {&x}, DType::f32, {2, 3}), {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = i64({3}, {1, 2048, 1});
  check_i64(run1(make_node("Squeeze"), {&s}, DType::i64, {3}), {3}, {1, 2048, 1});
  check_i64(run1(make_node("Identity"), {&s}, DType::i64, {3}), {3}, {1, 2048, 1});

  check_error(
      [&] {
        run1(make_node("Reshape", {}, "r"), {&x, &shp}, DType::f32, {5});
      },
      Code::internal, "r");
  check_error(
      [&] {
        run1(make_node("Identity", {}, "id"), {&x}, DType::i64, {2, 3});
      },
      Code::internal, "id");
  check_error(
      [&] {
        run(make_node("Dropout", {}, "dr"), {&x}, {{DType::f32, {2, 3}}, {DType::f32, {2, 3}}});
      },
      Code::unsupported, "dr");
}

TEST_CASE("ref Transpose: default and explicit perms") {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  check_f32(run1(make_node("Transpose"), {&x}, DType::f32, {3, 2}), {3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor x3 = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Node p021 = make_node("Transpose", {{"perm", attr_ints({0, 2, 1})}});
  check_f32(run1(p021, {&x3}, DType::f32, {1, 3, 2}), {1, 3, 2}, {1, 4, 2, 5, 3, 6});
  // NCHW -> NHWC.
  Tensor x4 = f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Node nhwc = make_node("Transpose", {{"perm", attr_ints({0, 2, 3, 1})}});
  check_f32(run1(nhwc, {&x4}, DType::f32, {1, 2, 2, 2}), {1, 2, 2, 2}, {1, 5, 2, 6, 3, 7, 4, 8});
  // Reversed 3-D default: y[k][j][i] = x[i][j][k].
  Tensor r = f32({2, 1, 2}, {1, 2, 3, 4});
  check_f32(run1(make_node("Transpose"), {&r}, DType::f32, {2, 1, 2}), {2, 1, 2}, {1, 3, 2, 4});
  Tensor xi = i64({2, 2}, {1, 2, 3, 4});
  check_i64(run1(make_node("Transpose"), {&xi}, DType::i64, {2, 2}), {2, 2}, {1, 3, 2, 4});
  Tensor sc = f32({}, {5});
  check_f32(run1(make_node("Transpose"), {&sc}, DType::f32, {}), {}, {5});

  // Swept: random permutations of ranks 1..5 against per-element index arithmetic.
  Rng rng(9);
  for (int it = 0; it < 30; ++it) {
    const size_t rank = size_t(1 + rng.next() % 5);
    Shape s;
    for (size_t d = 0; d < rank; ++d) s.push_back(int64_t(1 + rng.next() % 4));
    std::vector<int64_t> perm;
    for (size_t d = 0; d < rank; ++d) perm.push_back(int64_t(d));
    for (size_t d = rank; d > 1; --d) std::swap(perm[d - 1], perm[rng.next() % d]);
    Shape so;
    for (int64_t p : perm) so.push_back(s[size_t(p)]);
    Tensor a = iota_f32(s);
    Tensor y = run1(make_node("Transpose", {{"perm", attr_ints(perm)}}), {&a}, DType::f32, so);
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> oi(rank), ii(rank);
      int64_t rem = i;
      for (size_t d = rank; d-- > 0;) oi[d] = rem % so[d], rem /= so[d];
      for (size_t d = 0; d < rank; ++d) ii[size_t(perm[d])] = oi[d];
      int64_t flat = 0;
      for (size_t d = 0; d < rank; ++d) flat = flat * s[d] + ii[d];
      REQUIRE(y.data<float>()[i] == float(flat));
    }
  }
  check_error(
      [&] {
        run1(make_node("Transpose", {{"perm", attr_ints({0, 0})}}, "t"), {&x}, DType::f32, {2, 2});
      },
      Code::invalid_model, "t");
}

TEST_CASE("ref Concat: f32 and i64, negative axis, empty inputs") {
  Tensor a = f32({2, 1}, {1, 2}), b = f32({2, 2}, {3, 4, 5, 6});
  Node c1 = make_node("Concat", {{"axis", attr_i(1)}});
  check_f32(run1(c1, {&a, &b}, DType::f32, {2, 3}), {2, 3}, {1, 3, 4, 2, 5, 6});
  Node cm1 = make_node("Concat", {{"axis", attr_i(-1)}});
  check_f32(run1(cm1, {&b, &a}, DType::f32, {2, 3}), {2, 3}, {3, 4, 1, 5, 6, 2});
  Tensor e = f32({2, 0}, {});
  check_f32(run1(c1, {&a, &e, &a}, DType::f32, {2, 2}), {2, 2}, {1, 1, 2, 2});
  Node c0 = make_node("Concat", {{"axis", attr_i(0)}});
  Tensor s1 = i64({1}, {1}), s2 = i64({2}, {-1, 49});
  check_i64(run1(c0, {&s1, &s2}, DType::i64, {3}), {3}, {1, -1, 49});
  Tensor r = f32({1, 2}, {7, 8});
  check_f32(run1(c0, {&b, &r}, DType::f32, {3, 2}), {3, 2}, {3, 4, 5, 6, 7, 8});
  check_error(
      [&] {
        run1(make_node("Concat", {{"axis", attr_i(0)}}, "cat"), {&a, &b}, DType::f32, {4, 1});
      },
      Code::invalid_model, "cat");
  check_error(
      [&] {
        run1(make_node("Concat", {{"axis", attr_i(0)}}, "cat"), {&s1, &a}, DType::i64, {3});
      },
      Code::unsupported, "cat");
}

TEST_CASE("ref Split: copies slices along the axis") {
  Tensor x = f32({6}, {1, 2, 3, 4, 5, 6});
  Tensor sizes = i64({2}, {2, 4});
  auto ys = run(make_node("Split"), {&x, &sizes}, {{DType::f32, {2}}, {DType::f32, {4}}});
  check_f32(ys[0], {2}, {1, 2});
  check_f32(ys[1], {4}, {3, 4, 5, 6});
  // Axis 1 of [2, 3], no sizes: opset-18 equal split, last chunk smaller.
  Tensor m = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto ms = run(make_node("Split", {{"axis", attr_i(-1)}}), {&m},
                {{DType::f32, {2, 2}}, {DType::f32, {2, 1}}});
  check_f32(ms[0], {2, 2}, {1, 2, 4, 5});
  check_f32(ms[1], {2, 1}, {3, 6});
  Tensor v = i64({4}, {1, 3, 224, 224});
  auto vs =
      run(make_node("Split"), {&v}, {{DType::i64, {1}}, {DType::i64, {1}}, {DType::i64, {2}}});
  check_i64(vs[0], {1}, {1});
  check_i64(vs[1], {1}, {3});
  check_i64(vs[2], {2}, {224, 224});
  // Output sizes that do not tile the input / disagree with `split`.
  check_error(
      [&] {
        run(make_node("Split", {}, "sp"), {&x}, {{DType::f32, {2}}, {DType::f32, {3}}});
      },
      Code::internal, "sp");
  check_error(
      [&] {
        run(make_node("Split", {}, "sp"), {&x, &sizes}, {{DType::f32, {3}}, {DType::f32, {3}}});
      },
      Code::internal, "sp");
}

TEST_CASE("ref Slice: starts/ends/axes/steps inputs with ONNX clamping") {
  Tensor x = iota_f32({3, 4});  // rows [0..3], [4..7], [8..11]
  Node n = make_node("Slice");
  Tensor s1 = i64({1}, {1}), e3 = i64({1}, {3}), a0 = i64({1}, {0});
  check_f32(run1(n, {&x, &s1, &e3, &a0}, DType::f32, {2, 4}), {2, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
  // Default axes [0, 1]; step 2 on rows; INT64_MAX end.
  Tensor s01 = i64({2}, {0, 1}), e_big = i64({2}, {kMax, 3}), st21 = i64({2}, {2, 1});
  check_f32(run1(n, {&x, &s01, &e_big, nullptr, &st21}, DType::f32, {2, 2}), {2, 2}, {1, 2, 9, 10});
  // Negative axis and negative start.
  Tensor sm2 = i64({1}, {-2}), e_end = i64({1}, {kMax}), am1 = i64({1}, {-1});
  check_f32(run1(n, {&x, &sm2, &e_end, &am1}, DType::f32, {3, 2}), {3, 2}, {2, 3, 6, 7, 10, 11});

  Tensor v = iota_f32({5});
  Tensor sm1 = i64({1}, {-1}), e_min = i64({1}, {-kMax}), stm1 = i64({1}, {-1});
  check_f32(run1(n, {&v, &sm1, &e_min, &a0, &stm1}, DType::f32, {5}), {5}, {4, 3, 2, 1, 0});
  Tensor s4 = i64({1}, {4}), e0 = i64({1}, {0}), stm2 = i64({1}, {-2});
  check_f32(run1(n, {&v, &s4, &e0, &a0, &stm2}, DType::f32, {2}), {2}, {4, 2});
  // Out-of-range start/end with a negative step clamp to [dim-1] / [-1].
  Tensor s10 = i64({1}, {10}), em10 = i64({1}, {-10});
  check_f32(run1(n, {&v, &s10, &em10, &a0, &stm1}, DType::f32, {5}), {5}, {4, 3, 2, 1, 0});
  // Positive step, start past the end: empty.
  Tensor s3 = i64({1}, {3}), e1 = i64({1}, {1});
  check_f32(run1(n, {&v, &s3, &e1}, DType::f32, {0}), {0}, {});
  Tensor s_neg = i64({1}, {-100}), e2 = i64({1}, {2});
  check_f32(run1(n, {&v, &s_neg, &e2}, DType::f32, {2}), {2}, {0, 1});
  // Step 3 with a remainder.
  Tensor st3 = i64({1}, {3});
  Tensor s0 = i64({1}, {0});
  check_f32(run1(n, {&v, &s0, &e_end, nullptr, &st3}, DType::f32, {2}), {2}, {0, 3});

  // Huge steps take one element (regression, fuzz_session: stride x step overflowed int64).
  Tensor x3 = iota_f32({3, 8, 6}), s5 = i64({1}, {5}), st_big = i64({1}, {kMax / 2 + 1});
  Tensor stm_big = i64({1}, {-(kMax / 2 + 1)}), a1 = i64({1}, {1});
  std::vector<float> col5;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 6; ++c) col5.push_back(float(r * 48 + 5 * 6 + c));
  check_f32(run1(n, {&x3, &s5, &e_end, &a1, &st_big}, DType::f32, {3, 1, 6}), {3, 1, 6}, col5);
  check_f32(run1(n, {&x3, &s5, &em10, &a1, &stm_big}, DType::f32, {3, 1, 6}), {3, 1, 6}, col5);
  Tensor st_max = i64({1}, {kMax}), st_min = i64({1}, {-kMax - 1}), s0b = i64({1}, {0});
  std::vector<float> col0;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 6; ++c) col0.push_back(float(r * 48 + c));
  check_f32(run1(n, {&x3, &s0b, &e_end, &a1, &st_max}, DType::f32, {3, 1, 6}), {3, 1, 6}, col0);
  check_f32(run1(n, {&x3, &s5, &em10, &a1, &st_min}, DType::f32, {3, 1, 6}), {3, 1, 6}, col5);

  // i64 shape arithmetic: dims [2:] of a shape vector.
  Tensor shape = i64({4}, {1, 2048, 7, 7}), s2 = i64({1}, {2});
  check_i64(run1(n, {&shape, &s2, &e_end}, DType::i64, {2}), {2}, {7, 7});

  Tensor st0 = i64({1}, {0});
  check_error(
      [&] {
        run1(make_node("Slice", {}, "sl"), {&v, &s0, &e1, &a0, &st0}, DType::f32, {1});
      },
      Code::invalid_model, "sl");
  check_error(
      [&] {
        run1(make_node("Slice", {}, "sl"), {&v, &s0, &e1}, DType::f32, {2});
      },
      Code::internal, "sl");
}

TEST_CASE("ref Gather: axis, negative and multi-dim indices, errors") {
  Tensor d = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Node g0 = make_node("Gather");
  Tensor idx = i64({2}, {2, 0});
  check_f32(run1(g0, {&d, &idx}, DType::f32, {2, 2}), {2, 2}, {5, 6, 1, 2});
  Tensor neg = i64({1}, {-1});
  check_f32(run1(g0, {&d, &neg}, DType::f32, {1, 2}), {1, 2}, {5, 6});
  Tensor one = i64({}, {1});
  Node g1 = make_node("Gather", {{"axis", attr_i(1)}});
  check_f32(run1(g1, {&d, &one}, DType::f32, {3}), {3}, {2, 4, 6});
  Tensor i2 = i64({2, 2}, {1, 0, 0, -1});
  check_f32(run1(g1, {&d, &i2}, DType::f32, {3, 2, 2}), {3, 2, 2},
            {2, 1, 1, 2, 4, 3, 3, 4, 6, 5, 5, 6});
  // The usual shape-arithmetic case: element 0 of a shape vector as a scalar.
  Tensor shape = i64({4}, {1, 3, 224, 224}), zero = i64({}, {0});
  check_i64(run1(g0, {&shape, &zero}, DType::i64, {}), {}, {1});

  Tensor three = i64({1}, {3}), m4 = i64({1}, {-4});
  check_error(
      [&] {
        run1(make_node("Gather", {}, "gath"), {&d, &three}, DType::f32, {1, 2});
      },
      Code::invalid_argument, "gath", "out of range");
  check_error(
      [&] {
        run1(make_node("Gather", {}, "gath"), {&d, &m4}, DType::f32, {1, 2});
      },
      Code::invalid_argument, "gath", "out of range");
  Tensor fidx = f32({1}, {0});
  check_error(
      [&] {
        run1(make_node("Gather", {}, "gath"), {&d, &fidx}, DType::f32, {1, 2});
      },
      Code::unsupported, "gath");
}

TEST_CASE("ref Shape: start/end") {
  Tensor x = f32({1, 3, 4, 5}, std::vector<float>(60, 0.f));
  check_i64(run1(make_node("Shape"), {&x}, DType::i64, {4}), {4}, {1, 3, 4, 5});
  check_i64(run1(make_node("Shape", {{"start", attr_i(1)}}), {&x}, DType::i64, {3}), {3},
            {3, 4, 5});
  check_i64(run1(make_node("Shape", {{"start", attr_i(-2)}}), {&x}, DType::i64, {2}), {2}, {4, 5});
  check_i64(run1(make_node("Shape", {{"end", attr_i(-1)}}), {&x}, DType::i64, {3}), {3}, {1, 3, 4});
  check_i64(run1(make_node("Shape", {{"start", attr_i(9)}}), {&x}, DType::i64, {0}), {0}, {});
  check_i64(
      run1(make_node("Shape", {{"start", attr_i(-9)}, {"end", attr_i(2)}}), {&x}, DType::i64, {2}),
      {2}, {1, 3});
  Tensor s = i64({}, {4});
  check_i64(run1(make_node("Shape"), {&s}, DType::i64, {0}), {0}, {});
}

TEST_CASE("ref ScatterND: ONNX's spec examples, reductions, negative and bad indices") {
  // ScatterND's operator documentation, example 1.
  Tensor data = f32({8}, {1, 2, 3, 4, 5, 6, 7, 8}), idx = i64({4, 1}, {4, 3, 1, 7}),
         upd = f32({4}, {9, 10, 11, 12});
  check_f32(run1(make_node("ScatterND"), {&data, &idx, &upd}, DType::f32, {8}), {8},
            {1, 11, 3, 10, 9, 6, 7, 12});
  // Whole slices, as in example 2: planes 0 and 2 of a [4, 4, 4] tensor replaced.
  std::vector<float> d2, u2, want;
  for (int i = 0; i < 64; ++i) d2.push_back(float(i % 8 + 1));
  for (int i = 0; i < 32; ++i) u2.push_back(float(i / 16 * 4 + i % 4 + 5));
  want = d2;
  for (int i = 0; i < 16; ++i) want[size_t(i)] = u2[size_t(i)];
  for (int i = 0; i < 16; ++i) want[size_t(32 + i)] = u2[size_t(16 + i)];
  Tensor x2 = f32({4, 4, 4}, d2), i2 = i64({2, 1}, {0, 2}), up2 = f32({2, 4, 4}, u2);
  check_f32(run1(make_node("ScatterND"), {&x2, &i2, &up2}, DType::f32, {4, 4, 4}), {4, 4, 4}, want);
  // add / mul with a repeated index (both updates apply), max, min; a negative index.
  Tensor rep = i64({2, 1}, {-1, 7}), two = f32({2}, {2, 3});
  check_f32(run1(make_node("ScatterND", {{"reduction", attr_s("add")}}), {&data, &rep, &two},
                 DType::f32, {8}),
            {8}, {1, 2, 3, 4, 5, 6, 7, 13});
  check_f32(run1(make_node("ScatterND", {{"reduction", attr_s("mul")}}), {&data, &rep, &two},
                 DType::f32, {8}),
            {8}, {1, 2, 3, 4, 5, 6, 7, 48});
  check_f32(run1(make_node("ScatterND", {{"reduction", attr_s("max")}}), {&data, &idx, &upd},
                 DType::f32, {8}),
            {8}, {1, 11, 3, 10, 9, 6, 7, 12});
  check_f32(run1(make_node("ScatterND", {{"reduction", attr_s("min")}}), {&data, &idx, &upd},
                 DType::f32, {8}),
            {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor bad = i64({4, 1}, {4, 3, 8, 7});
  check_error(
      [&] {
        run1(make_node("ScatterND", {}, "s"), {&data, &bad, &upd}, DType::f32, {8});
      },
      Code::invalid_argument, "s", "out of range");
}

TEST_CASE("ref Pad: constant mode, pads input, constant_value, negative pads, axes") {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Node n = make_node("Pad");
  // pads = [x1_begin, x2_begin, x1_end, x2_end]
  Tensor p = i64({4}, {1, 0, 0, 1});
  check_f32(run1(n, {&x, &p}, DType::f32, {3, 3}), {3, 3}, {0, 0, 0, 1, 2, 0, 3, 4, 0});
  Tensor nine = f32({}, {9});
  check_f32(run1(n, {&x, &p, &nine}, DType::f32, {3, 3}), {3, 3}, {9, 9, 9, 1, 2, 9, 3, 4, 9});
  Tensor crop = i64({4}, {0, -1, 0, 0});
  check_f32(run1(n, {&x, &crop}, DType::f32, {2, 1}), {2, 1}, {2, 4});
  Tensor mixed = i64({4}, {-1, 1, 0, 0});
  check_f32(run1(n, {&x, &mixed, &nine}, DType::f32, {1, 3}), {1, 3}, {9, 3, 4});
  // NCHW spatial padding.
  Tensor px = f32({1, 1, 1, 1}, {5});
  Tensor p4 = i64({8}, {0, 0, 1, 1, 0, 0, 1, 1});
  check_f32(run1(n, {&px, &p4}, DType::f32, {1, 1, 3, 3}), {1, 1, 3, 3},
            {0, 0, 0, 0, 5, 0, 0, 0, 0});
  // Opset-18 axes input.
  Tensor pa = i64({2}, {2, 0}), am1 = i64({1}, {-1});
  check_f32(run1(n, {&x, &pa, nullptr, &am1}, DType::f32, {2, 4}), {2, 4},
            {0, 0, 1, 2, 0, 0, 3, 4});
  // i64 data.
  Tensor xi = i64({2}, {7, 8}), p1 = i64({2}, {1, 2}), m1 = i64({}, {-1});
  check_i64(run1(n, {&xi, &p1, &m1}, DType::i64, {5}), {5}, {-1, 7, 8, -1, -1});

  // reflect / edge / wrap, pads wider than the dim (values from numpy.pad, ONNX's reference).
  Tensor r3 = f32({3}, {1, 2, 3}), p50 = i64({2}, {5, 0}), p24 = i64({2}, {2, 4}),
         p23 = i64({2}, {2, 3});
  check_f32(run1(make_node("Pad", {{"mode", attr_s("reflect")}}), {&r3, &p50}, DType::f32, {8}),
            {8}, {2, 1, 2, 3, 2, 1, 2, 3});
  check_f32(run1(make_node("Pad", {{"mode", attr_s("wrap")}}), {&r3, &p23}, DType::f32, {8}), {8},
            {2, 3, 1, 2, 3, 1, 2, 3});
  check_error(
      [&] {
        run1(make_node("Pad", {{"mode", attr_s("wrap")}}, "pad"), {&r3, &p24}, DType::f32, {9});
      },
      Code::unsupported, "pad", "wider");
  check_f32(run1(make_node("Pad", {{"mode", attr_s("edge")}}), {&r3, &p24}, DType::f32, {9}), {9},
            {1, 1, 1, 2, 3, 3, 3, 3, 3});
  Tensor p0030 = i64({4}, {0, 3, 0, 0});
  check_f32(run1(make_node("Pad", {{"mode", attr_s("reflect")}}), {&x, &p0030}, DType::f32, {2, 5}),
            {2, 5}, {2, 1, 2, 1, 2, 4, 3, 4, 3, 4});
  check_error(
      [&] {
        run1(make_node("Pad", {{"mode", attr_s("mirror")}}, "pad"), {&x, &p}, DType::f32, {3, 3});
      },
      Code::unsupported, "pad", "mirror");
  Tensor short_pads = i64({2}, {1, 1});
  check_error(
      [&] {
        run1(make_node("Pad", {}, "pad"), {&x, &short_pads}, DType::f32, {3, 3});
      },
      Code::invalid_model, "pad");
  Tensor cv_i = i64({}, {1});
  check_error(
      [&] {
        run1(make_node("Pad", {}, "pad"), {&x, &p, &cv_i}, DType::f32, {3, 3});
      },
      Code::unsupported, "pad");
}

TEST_CASE("ref Constant: value tensor and scalar/list attributes") {
  Node n = make_node("Constant", {{"value", attr_t(f32({2}, {1.5f, -2}))}});
  check_f32(run1(n, {}, DType::f32, {2}), {2}, {1.5f, -2});
  Node ni = make_node("Constant", {{"value", attr_t(i64({1}, {42}))}});
  check_i64(run1(ni, {}, DType::i64, {1}), {1}, {42});
  check_i64(run1(make_node("Constant", {{"value_ints", attr_ints({3, 4})}}), {}, DType::i64, {2}),
            {2}, {3, 4});
  check_i64(run1(make_node("Constant", {{"value_int", attr_i(5)}}), {}, DType::i64, {}), {}, {5});
  check_f32(run1(make_node("Constant", {{"value_float", attr_f(0.5f)}}), {}, DType::f32, {}), {},
            {0.5f});
  check_f32(
      run1(make_node("Constant", {{"value_floats", attr_floats({1, 2, 3})}}), {}, DType::f32, {3}),
      {3}, {1, 2, 3});
  check_error([&] { run1(make_node("Constant", {}, "k"), {}, DType::f32, {1}); }, Code::unsupported,
              "k");
  check_error([&] { run1(n, {}, DType::f32, {3}); }, Code::internal);
}

TEST_CASE("ref kernels: registry covers every supported op and nothing else") {
  const char* ops[] = {"Conv",
                       "BatchNormalization",
                       "Relu",
                       "LeakyRelu",
                       "Clip",
                       "Sigmoid",
                       "HardSigmoid",
                       "HardSwish",
                       "Tanh",
                       "Add",
                       "Sub",
                       "Mul",
                       "Div",
                       "Sum",
                       "MaxPool",
                       "AveragePool",
                       "GlobalAveragePool",
                       "GlobalMaxPool",
                       "ReduceMean",
                       "Gemm",
                       "MatMul",
                       "Flatten",
                       "Reshape",
                       "Squeeze",
                       "Unsqueeze",
                       "Transpose",
                       "Concat",
                       "Split",
                       "Slice",
                       "Gather",
                       "Shape",
                       "Identity",
                       "Dropout",
                       "Pad",
                       "Softmax",
                       "Constant"};
  for (const char* op : ops) {
    CAPTURE(op);
    const bool found = find_ref_kernel(op) != nullptr;
    CHECK(found);
  }
  const bool none = find_ref_kernel("LSTM") == nullptr && find_ref_kernel("") == nullptr &&
                    find_ref_kernel("conv") == nullptr;
  CHECK(none);
}
