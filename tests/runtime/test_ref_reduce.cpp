// Reference ReduceMean, Softmax and BatchNormalization: hand-computed cases.
#include <cmath>

#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

TEST_CASE("ref ReduceMean: axes input, keepdims, negative axes, noop") {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Node keep = make_node("ReduceMean");
  Node drop = make_node("ReduceMean", {{"keepdims", attr_i(0)}});
  Tensor ax1 = i64({1}, {1}), ax0 = i64({1}, {0}), axm1 = i64({1}, {-1}), none = i64({0}, {});
  check_f32(run1(keep, {&x, &ax1}, DType::f32, {2, 1}), {2, 1}, {2, 5});
  check_f32(run1(drop, {&x, &ax0}, DType::f32, {3}), {3}, {2.5f, 3.5f, 4.5f});
  check_f32(run1(drop, {&x, &axm1}, DType::f32, {2}), {2}, {2, 5});
  // No axes: reduce everything.
  check_f32(run1(keep, {&x}, DType::f32, {1, 1}), {1, 1}, {3.5f});
  check_f32(run1(drop, {&x, nullptr}, DType::f32, {}), {}, {3.5f});
  check_f32(run1(keep, {&x, &none}, DType::f32, {1, 1}), {1, 1}, {3.5f});
  // noop_with_empty_axes: identity.
  Node noop = make_node("ReduceMean", {{"noop_with_empty_axes", attr_i(1)}});
  check_f32(run1(noop, {&x, &none}, DType::f32, {2, 3}), {2, 3}, {1, 2, 3, 4, 5, 6});
  check_f32(run1(noop, {&x}, DType::f32, {2, 3}), {2, 3}, {1, 2, 3, 4, 5, 6});
  // Two non-adjacent axes of a 3-D tensor.
  Tensor y = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor ax02 = i64({2}, {0, -1});
  check_f32(run1(keep, {&y, &ax02}, DType::f32, {1, 2, 1}), {1, 2, 1}, {3.5f, 5.5f});
  check_f32(run1(drop, {&y, &ax02}, DType::f32, {2}), {2}, {3.5f, 5.5f});
  // Spatial mean of NCHW (what a GlobalAveragePool exported as ReduceMean does).
  Tensor img = f32({1, 2, 1, 3}, {1, 2, 6, 0, 0, 3});
  Tensor hw = i64({2}, {2, 3});
  check_f32(run1(keep, {&img, &hw}, DType::f32, {1, 2, 1, 1}), {1, 2, 1, 1}, {3, 1});

  Tensor dup = i64({2}, {1, -1});
  check_error([&] { run1(keep, {&x, &dup}, DType::f32, {2, 1}); }, Code::invalid_model);
  Tensor bad = i64({1}, {2});
  check_error([&] { run1(keep, {&x, &bad}, DType::f32, {2, 1}); }, Code::invalid_model);
  check_error([&] { run1(keep, {&x, &ax1}, DType::f32, {2}); }, Code::internal);
}

TEST_CASE("ref Softmax: axis, coerce_2d, large inputs") {
  Tensor x = f32({1, 3}, {0, std::log(2.f), std::log(3.f)});
  check_f32(run1(make_node("Softmax"), {&x}, DType::f32, {1, 3}), {1, 3}, {1.f / 6, 1.f / 3, 0.5f});
  Node ax1 = make_node("Softmax", {{"axis", attr_i(1)}});
  check_f32(run1(ax1, {&x}, DType::f32, {1, 3}), {1, 3}, {1.f / 6, 1.f / 3, 0.5f});
  // Would overflow exp() without subtracting the max.
  Tensor big = f32({2}, {1000, 1001});
  check_f32(run1(make_node("Softmax", {{"axis", attr_i(0)}}), {&big}, DType::f32, {2}), {2},
            {0.2689414213699951f, 0.7310585786300049f});
  // axis 0 of a 2x2: softmax down the columns.
  Tensor m = f32({2, 2}, {0, 0, std::log(3.f), 0});
  check_f32(run1(make_node("Softmax", {{"axis", attr_i(0)}}), {&m}, DType::f32, {2, 2}), {2, 2},
            {0.25f, 0.5f, 0.75f, 0.5f});
  // coerce_2d (opset < 13) flattens [axis, rank); opset 13 uses the axis alone.
  Tensor t = f32({1, 2, 2}, {0, std::log(2.f), std::log(3.f), std::log(4.f)});
  Node old = make_node("Softmax", {{"axis", attr_i(1)}, {"coerce_2d", attr_i(1)}});
  check_f32(run1(old, {&t}, DType::f32, {1, 2, 2}), {1, 2, 2}, {0.1f, 0.2f, 0.3f, 0.4f});
  Node now = make_node("Softmax", {{"axis", attr_i(1)}});
  check_f32(run1(now, {&t}, DType::f32, {1, 2, 2}), {1, 2, 2}, {0.25f, 1.f / 3, 0.75f, 2.f / 3});
  Node neg = make_node("Softmax", {{"axis", attr_i(-2)}});
  check_f32(run1(neg, {&t}, DType::f32, {1, 2, 2}), {1, 2, 2}, {0.25f, 1.f / 3, 0.75f, 2.f / 3});
  check_error(
      [&] {
        run1(make_node("Softmax", {{"axis", attr_i(3)}}), {&t}, DType::f32, {1, 2, 2});
      },
      Code::invalid_model);
}

TEST_CASE("ref BatchNormalization: inference formula") {
  // x [N=1, C=2, L=2]; with eps 0: c0 = 2*(x-1)/2 + 0.5, c1 = (x-3)/0.5 - 1.
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor scale = f32({2}, {2, 1}), b = f32({2}, {0.5f, -1}), mean = f32({2}, {1, 3}),
         var = f32({2}, {4, 0.25f});
  Node n = make_node("BatchNormalization", {{"epsilon", attr_f(0)}});
  check_f32(run1(n, {&x, &scale, &b, &mean, &var}, DType::f32, {1, 2, 2}), {1, 2, 2},
            {0.5f, 1.5f, -1, 1});
  // Rank 4, batch 2, and the default epsilon 1e-5 (var + eps == 1 here).
  Tensor x4 = f32({2, 1, 1, 2}, {2, -2, 4, 0});
  Tensor one = f32({1}, {1}), zero = f32({1}, {0}), v = f32({1}, {1 - 1e-5f});
  Node d = make_node("BatchNormalization");
  check_f32(run1(d, {&x4, &one, &zero, &zero, &v}, DType::f32, {2, 1, 1, 2}), {2, 1, 1, 2},
            {2, -2, 4, 0}, 1e-6f, 1e-7f);
  // Rank 2 ([N, C]).
  Tensor x2 = f32({2, 2}, {1, 2, 3, 4});
  check_f32(run1(n, {&x2, &scale, &b, &mean, &var}, DType::f32, {2, 2}), {2, 2},
            {0.5f, -3, 2.5f, 1});
  Tensor bad = f32({3}, {1, 1, 1});
  check_error([&] { run1(n, {&x, &bad, &b, &mean, &var}, DType::f32, {1, 2, 2}); }, Code::internal);
  check_error(
      [&] {
        run1(n, {&x, &scale, &b, &mean}, DType::f32, {1, 2, 2});
      },
      Code::invalid_model);
  Node train = make_node("BatchNormalization", {{"training_mode", attr_i(1)}});
  check_error(
      [&] {
        run1(train, {&x, &scale, &b, &mean, &var}, DType::f32, {1, 2, 2});
      },
      Code::unsupported);
}
