// The Transpose glue kernel (create_transpose_kernel) against the reference Transpose kernel,
// bit-exact: every permutation of small 2-D..4-D shapes with odd sizes and size-1 dims, typical
// layout and channel-shuffle permutations, and random rank-5/6 cases, on every ISA path (rows,
// tiles with both edges masked, and plain copies).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

void check_case(Isa isa, const Shape& in, const std::vector<int64_t>& perm, uint32_t seed) {
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(shape_str(in));
  CAPTURE(shape_str(perm));
  Node n;
  n.name = "t";
  n.op = "Transpose";
  n.attrs["perm"] = attr_ints(perm);
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[size_t(perm[i])];
  Tensor tx(DType::f32, in), ty(DType::f32, out);
  GuardedBuf x{size_t(tx.numel())}, y{size_t(tx.numel())};
  x.random(seed);
  std::copy(x.data(), x.data() + x.size(), tx.data<float>());
  find_ref_kernel("Transpose")(n, {&tx}, {&ty});
  std::string why;
  auto k = create_transpose_kernel(in, perm, isa, &why);
  REQUIRE_MESSAGE(k, why);
  y.fill(-7.f);
  test::run_split(*k, {x.data()}, {y.data()});
  int bad = 0;
  for (int64_t i = 0; i < ty.numel(); ++i) bad += y[size_t(i)] != ty.data<float>()[i];
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue transpose: permutations against the reference") {
  const std::vector<Shape> shapes = {{5},          {1},           {3, 19},         {17, 33},
                                     {16, 16},     {40, 1},       {2, 3, 17},      {1, 20, 9},
                                     {2, 5, 1, 7}, {2, 19, 7, 9}, {1, 32, 16, 16}, {3, 1, 1, 18}};
  int cases = 0;
  uint32_t seed = 1;
  for (Isa isa : test::glue_isas())
    for (const Shape& s : shapes) {
      std::vector<int64_t> perm(s.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        check_case(isa, s, perm, seed++);
        ++cases;
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  MESSAGE("transpose cases: " << cases);
}

TEST_CASE("glue transpose: layouts, channel shuffle, rank 5 and 6") {
  std::mt19937 rng(3);
  for (Isa isa : test::glue_isas()) {
    check_case(isa, {2, 24, 13, 11}, {0, 2, 3, 1}, 1);      // nchw -> nhwc
    check_case(isa, {2, 13, 11, 24}, {0, 3, 1, 2}, 2);      // nhwc -> nchw
    check_case(isa, {1, 3, 40, 35}, {0, 2, 3, 1}, 3);       // 3 channels
    check_case(isa, {2, 4, 29, 7, 5}, {0, 2, 1, 3, 4}, 4);  // channel shuffle
    check_case(isa, {1, 300, 17}, {0, 2, 1}, 5);            // several bands
    check_case(isa, {1, 1, 1, 70000}, {3, 1, 2, 0}, 6);     // a copy over several tiles
    for (int r : {5, 6})
      for (int t = 0; t < 6; ++t) {
        Shape s;
        for (int d = 0; d < r; ++d) s.push_back(int64_t(1 + rng() % 6));
        std::vector<int64_t> perm(static_cast<size_t>(r));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        check_case(isa, s, perm, uint32_t(100 + t));
      }
  }
}

TEST_CASE("glue transpose: refusals and names") {
  for (Isa isa : test::glue_isas()) {
    std::string why;
    CHECK_FALSE(create_transpose_kernel({2, 3}, {0, 0}, isa, &why));
    CHECK(why.find("permutation") != std::string::npos);
    CHECK_FALSE(create_transpose_kernel({2, 3, 1, 1, 1, 1, 1}, {0, 1, 2, 3, 4, 5, 6}, isa, &why));
    CHECK_FALSE(create_transpose_kernel({2, 0}, {1, 0}, isa, &why));
    auto k = create_transpose_kernel({4, 5}, {1, 0}, isa, &why);
    REQUIRE(k);
    CHECK(k->name() == std::string("transpose_f32_tiles__") + isa_name(isa));
  }
}

}  // namespace kiln
