// Reference ConvTranspose and SubpixelInterleave: hand-computed cases, and the ConvTranspose
// kernel against the output-centric oracle (tests/graph/convt_case.h) with negative end pads
// (output_padding folded), which the graph sweep reaches only through the importer.
#include <doctest/doctest.h>

#include "graph/convt_case.h"
#include "test_ref_common.h"

namespace kiln::reftest {
namespace {

Node convt_node(std::vector<int64_t> s, std::vector<int64_t> pads, int64_t group = 1,
                std::vector<int64_t> d = {1, 1}) {
  return make_node("ConvTranspose", {{"strides", attr_ints(std::move(s))},
                                     {"dilations", attr_ints(std::move(d))},
                                     {"pads", attr_ints(std::move(pads))},
                                     {"group", attr_i(group)}});
}

TEST_CASE("ref ConvTranspose: hand-computed cases") {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor ones = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  // Stride 2, kernel 2: every input pixel becomes a 2x2 block.
  Tensor y = run1(convt_node({2, 2}, {0, 0, 0, 0}), {&x, &ones}, DType::f32, {1, 1, 4, 4});
  check_f32(y, {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // Stride 1: overlapping blocks add up; bias everywhere.
  const Tensor b = f32({1}, {0.5f});
  y = run1(convt_node({1, 1}, {0, 0, 0, 0}), {&x, &ones, &b}, DType::f32, {1, 1, 3, 3});
  check_f32(y, {1, 1, 3, 3}, {1.5f, 3.5f, 2.5f, 4.5f, 10.5f, 6.5f, 3.5f, 7.5f, 4.5f});
  // Pads crop the begin; a negative end pad (output_padding) adds bias-only columns.
  y = run1(convt_node({2, 2}, {1, 1, 0, -1}), {&x, &ones, &b}, DType::f32, {1, 1, 3, 4});
  check_f32(y, {1, 1, 3, 4},
            {1.5f, 2.5f, 2.5f, 0.5f, 3.5f, 4.5f, 4.5f, 0.5f, 3.5f, 4.5f, 4.5f, 0.5f});
  // Groups: channel 0 -> output 0, channel 1 -> output 1 (weights 1 and 2).
  const Tensor x2 = f32({1, 2, 1, 1}, {3, 5});
  const Tensor w2 = f32({2, 1, 1, 1}, {1, 2});
  y = run1(convt_node({1, 1}, {0, 0, 0, 0}, 2), {&x2, &w2}, DType::f32, {1, 2, 1, 1});
  check_f32(y, {1, 2, 1, 1}, {3, 10});
}

TEST_CASE("ref ConvTranspose: against the gather oracle, negative end pads") {
  for (const test::ConvTCase& k0 : test::convt_sweep(60, 21)) {
    test::ConvTCase k = k0;
    k.oph = 0, k.opw = 0;  // output_padding as negative canonical end pads
    const int64_t eh = k.sh - 1, ew = k.sw - 1;
    k.pb -= eh, k.pr -= ew;
    const std::string desc = k.str();
    CAPTURE(desc);
    const Tensor x = random_f32({k.n, k.c, k.h, k.w}, 3);
    const std::vector<float> wv = k.weights(), bv = k.biases();
    const Tensor w = f32({k.c, k.m / k.group, k.kh, k.kw}, wv);
    const Tensor b = f32({k.m}, bv);
    const Tensor y =
        run1(convt_node({k.sh, k.sw}, {k.pt, k.pl, k.pb, k.pr}, k.group, {k.dh, k.dw}),
             {&x, &w, k.bias ? &b : nullptr}, DType::f32, {k.n, k.m, k.out_h(), k.out_w()});
    const std::vector<float> want =
        test::convt_oracle(k, std::vector<float>(x.data<float>(), x.data<float>() + x.numel()));
    check_f32(y, {k.n, k.m, k.out_h(), k.out_w()}, want);
  }
}

TEST_CASE("ref SubpixelInterleave: phase planes into the output, with the crop offset") {
  // z: c = 1, s = 2x2: four 2x2 phase planes holding 10*phase + index.
  std::vector<float> zv;
  for (int p = 0; p < 4; ++p)
    for (int i = 0; i < 4; ++i) zv.push_back(float(10 * p + i));
  const Tensor z = f32({1, 4, 2, 2}, zv);
  Node n = make_node("SubpixelInterleave", {{"strides", attr_ints({2, 2})},
                                            {"offsets", attr_ints({1, 0})},
                                            {"out_hw", attr_ints({3, 4})}});
  const Tensor y = run1(n, {&z}, DType::f32, {1, 1, 3, 4});
  // Row oh reads t = oh + 1: phase row (t % 2), plane row t / 2; column ow: phase ow % 2.
  check_f32(y, {1, 1, 3, 4}, {20, 30, 21, 31, 2, 12, 3, 13, 22, 32, 23, 33});
}

}  // namespace
}  // namespace kiln::reftest
