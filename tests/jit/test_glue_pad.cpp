// The Pad glue kernel (create_pad_kernel) against the reference Pad kernel, bit-exact: constant
// pads on H/W (symmetric, one-sided, wider than the input), on N and C (nchw and nhwc; blocked:
// whole channel blocks), zero and non-zero constants; reflect / edge / wrap pads on H/W (also wider
// than the input: reflection repeats); odd sizes, channel tails, batch > 1, in nchw, nhwc and the
// ISA's blocked layout (pad lanes must stay 0), on every ISA path. The reference's modes against
// ONNX's spec examples.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

void check_case(Isa isa, Layout l, const Shape& x, const std::vector<int64_t>& b,
                const std::vector<int64_t>& e, float value, uint32_t seed,
                const std::string& mode = "constant") {
  CAPTURE(mode);
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(shape_str(x));
  CAPTURE(shape_str(b));
  CAPTURE(shape_str(e));
  CAPTURE(value);
  Node n;
  n.name = "pad";
  n.op = "Pad";
  n.attrs["mode"] = attr_s(mode);
  Shape y(4);
  for (size_t d = 0; d < 4; ++d) y[d] = x[d] + b[d] + e[d];
  Tensor tx(DType::f32, x), ty(DType::f32, y), tp(DType::i64, {8}), tv(DType::f32, {});
  for (size_t d = 0; d < 4; ++d) {
    tp.data<int64_t>()[d] = b[d];
    tp.data<int64_t>()[4 + d] = e[d];
  }
  tv.data<float>()[0] = value;
  GuardedBuf gx{size_t(tx.numel())};
  gx.random(seed);
  std::copy(gx.data(), gx.data() + gx.size(), tx.data<float>());
  find_ref_kernel("Pad")(n, {&tx, &tp, &tv}, {&ty});
  std::string why;
  auto k = create_pad_kernel(x, b, e, value, l, isa, &why, mode);
  REQUIRE_MESSAGE(k, why);
  GuardedBuf src{size_t(layout_elems(l, x))}, dst{size_t(layout_elems(l, y))};
  convert_layout(tx.data<float>(), Layout::nchw, src.data(), l, x);
  dst.fill(-99.f);
  test::run_split(*k, {src.data()}, {dst.data()});
  std::vector<float> got(size_t(ty.numel()));
  convert_layout(dst.data(), l, got.data(), Layout::nchw, y);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != ty.data<float>()[i];
  CHECK(bad == 0);
  if (layout_block(l) > 1)  // pad lanes of the last channel block stay 0
    CHECK(test::nonzero_pad_lanes(dst.data(), layout_block(l), y[0], y[1], y[2] * y[3]) == 0);
}

}  // namespace

TEST_CASE("glue pad: constant pads against the reference") {
  struct P {
    std::vector<int64_t> b, e;
  };
  const std::vector<P> hw = {{{0, 0, 1, 1}, {0, 0, 1, 1}},
                             {{0, 0, 0, 1}, {0, 0, 2, 0}},
                             {{0, 0, 3, 0}, {0, 0, 0, 5}},
                             {{0, 0, 0, 0}, {0, 0, 0, 0}},
                             {{0, 0, 2, 20}, {0, 0, 9, 17}}};
  const std::vector<P> nc = {{{0, 1, 0, 0}, {0, 2, 1, 1}}, {{1, 0, 1, 0}, {1, 3, 0, 2}}};
  int cases = 0;
  uint32_t seed = 1;
  for (Isa isa : test::glue_isas())
    for (const Shape& x : std::vector<Shape>{
             {1, 3, 5, 7}, {2, 17, 9, 11}, {1, 16, 1, 1}, {2, 40, 6, 33}, {2, 32, 5, 6}})
      for (float value : {0.f, 1.5f}) {
        for (const P& p : hw)
          for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
            if (layout_block(l) > 1 && value != 0 && x[1] % layout_block(l)) continue;
            check_case(isa, l, x, p.b, p.e, value, seed++);
            ++cases;
          }
        for (const P& p : nc)
          for (Layout l : {Layout::nchw, Layout::nhwc}) {
            check_case(isa, l, x, p.b, p.e, value, seed++);
            ++cases;
          }
        // Blocked channel pads: whole pad blocks before whole input blocks, any after.
        const Layout bl = blocked_layout(isa);
        const int64_t B = layout_block(bl);
        if (x[1] % B) continue;
        for (const P& p : {P{{0, B, 0, 1}, {0, 2 * B, 1, 0}}, P{{0, 0, 0, 0}, {0, 5, 0, 0}},
                           P{{1, 0, 2, 0}, {0, B + 3, 0, 1}}}) {
          if (value != 0 && (x[1] + p.b[1] + p.e[1]) % B) continue;
          check_case(isa, bl, x, p.b, p.e, value, seed++);
          ++cases;
        }
      }
  MESSAGE("pad cases: " << cases);
}

TEST_CASE("glue pad: reflect, edge and wrap pads against the reference") {
  struct P {
    std::vector<int64_t> b, e;
  };
  const std::vector<P> hw = {{{0, 0, 1, 1}, {0, 0, 1, 1}},
                             {{0, 0, 3, 0}, {0, 0, 0, 2}},
                             {{0, 0, 0, 2}, {0, 0, 4, 1}},
                             {{0, 0, 6, 9}, {0, 0, 5, 13}}};  // wider than some inputs
  int cases = 0;
  uint32_t seed = 100;
  for (Isa isa : test::glue_isas())
    for (const Shape& x :
         std::vector<Shape>{{1, 3, 5, 7}, {2, 17, 4, 3}, {1, 16, 1, 1}, {1, 40, 6, 33}})
      for (const std::string mode : {"reflect", "edge", "wrap"})
        for (const P& p : hw)
          for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
            if (mode == "wrap" &&
                (std::max(p.b[2], p.e[2]) > x[2] || std::max(p.b[3], p.e[3]) > x[3]))
              continue;  // refused (graph/infer_tensor_ops.cpp)
            check_case(isa, l, x, p.b, p.e, 0.f, seed++, mode);
            ++cases;
          }
  MESSAGE("mirror pad cases: " << cases);
}

TEST_CASE("reference pad: ONNX's spec examples for reflect, edge and wrap") {
  // Pad's operator documentation: data [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]].
  const std::vector<float> data = {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f};
  struct Ex {
    const char* mode;
    std::vector<int64_t> pads;
    Shape out;
    std::vector<float> want;
  };
  const std::vector<Ex> examples = {
      {"reflect",
       {0, 2, 0, 0},
       {3, 4},
       {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f}},
      {"edge",
       {0, 2, 0, 0},
       {3, 4},
       {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f}},
      {"wrap", {2, 1, 1, 1}, {6, 4}, {3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f,
                                      1.2f, 1.0f, 1.2f, 1.0f, 3.4f, 2.3f, 3.4f, 2.3f,
                                      5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f}}};
  for (const Ex& ex : examples) {
    CAPTURE(ex.mode);
    Node n;
    n.name = "pad";
    n.op = "Pad";
    n.attrs["mode"] = attr_s(ex.mode);
    Tensor tx(DType::f32, {3, 2}), ty(DType::f32, ex.out), tp(DType::i64, {4});
    std::copy(data.begin(), data.end(), tx.data<float>());
    std::copy(ex.pads.begin(), ex.pads.end(), tp.data<int64_t>());
    find_ref_kernel("Pad")(n, {&tx, &tp}, {&ty});
    CHECK(std::vector<float>(ty.data<float>(), ty.data<float>() + ty.numel()) == ex.want);
  }
}

TEST_CASE("glue pad: refusals and names") {
  for (Isa isa : test::glue_isas()) {
    std::string why;
    const Shape x{1, 3, 4, 4};
    // Blocked channel pads: input channels not whole blocks; a pad before them not whole blocks;
    // a non-zero constant into the output's pad lanes.
    const Layout bl = blocked_layout(isa);
    const int64_t B = layout_block(bl);
    CHECK_FALSE(create_pad_kernel({1, B + 1, 4, 4}, {0, 0, 0, 0}, {0, 2, 0, 0}, 0, bl, isa, &why));
    CHECK(why.find("whole") != std::string::npos);
    CHECK_FALSE(create_pad_kernel({1, B, 4, 4}, {0, 3, 0, 0}, {0, 0, 0, 0}, 0, bl, isa, &why));
    CHECK(why.find("whole") != std::string::npos);
    CHECK_FALSE(create_pad_kernel({1, B, 4, 4}, {0, 0, 0, 0}, {0, 3, 0, 0}, 1.f, bl, isa, &why));
    CHECK(why.find("pad lanes") != std::string::npos);
    CHECK(create_pad_kernel({1, B, 4, 4}, {0, 0, 0, 0}, {0, 3, 0, 0}, 0, bl, isa, &why));
    CHECK_FALSE(
        create_pad_kernel(x, {0, 0, 0, 0}, {0, 0, 0, 0}, 1.f, blocked_layout(isa), isa, &why));
    CHECK(why.find("pad lanes") != std::string::npos);
    CHECK_FALSE(create_pad_kernel(x, {0, 0, -1, 0}, {0, 0, 0, 0}, 0, Layout::nchw, isa, &why));
    auto k = create_pad_kernel(x, {0, 0, 1, 1}, {0, 0, 1, 1}, 0, Layout::nhwc, isa, &why);
    REQUIRE(k);
    CHECK(k->name() == std::string("pad_f32_nhwc__") + isa_name(isa));
    CHECK_FALSE(
        create_pad_kernel(x, {0, 1, 0, 0}, {0, 0, 0, 0}, 0, Layout::nchw, isa, &why, "reflect"));
    CHECK(why.find("H and W only") != std::string::npos);
    CHECK_FALSE(
        create_pad_kernel(x, {0, 0, 0, 200}, {0, 0, 0, 57}, 0, Layout::nchw, isa, &why, "edge"));
    CHECK(why.find("256 pad pixels") != std::string::npos);
    k = create_pad_kernel(x, {0, 0, 1, 1}, {0, 0, 1, 1}, 0, Layout::nchw, isa, &why, "reflect");
    REQUIRE(k);
    CHECK(k->name() == std::string("pad_reflect_f32_nchw__") + isa_name(isa));
  }
}

}  // namespace kiln
