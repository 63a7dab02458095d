// The Resize glue kernel (create_resize_kernel) against the reference Resize kernel: nearest
// (every nearest_mode, integer and fractional scales, up and down), linear in every coordinate
// mode, cubic (exclude_outside), antialiased downscales; odd sizes, channel tails, batch > 1,
// in nchw, nhwc and the ISA's blocked layout (pad lanes must stay 0), on every ISA path.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/resize.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

struct ResizeCase {
  const char* mode;
  const char* coord;
  const char* nearest;
  double sh, sw;  // output H, W = floor(in * s)
  int antialias = 0, exclude = 0;
};

Node resize_node(const ResizeCase& c) {
  Node n;
  n.name = "resize";
  n.op = "Resize";
  n.attrs["mode"] = attr_s(c.mode);
  n.attrs["coordinate_transformation_mode"] = attr_s(c.coord);
  n.attrs["nearest_mode"] = attr_s(c.nearest);
  n.attrs["antialias"] = attr_i(c.antialias);
  n.attrs["exclude_outside"] = attr_i(c.exclude);
  return n;
}

// Returns false when the kernel refused (the caller counts those).
bool check_case(Isa isa, Layout l, const Shape& x, const ResizeCase& c, uint32_t seed) {
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(shape_str(x));
  CAPTURE(std::string(c.mode));
  CAPTURE(std::string(c.coord));
  CAPTURE(c.sh);
  CAPTURE(c.sw);
  const Node n = resize_node(c);
  Tensor tx(DType::f32, x), ts(DType::f32, {4});
  const float sc[4] = {1, 1, float(c.sh), float(c.sw)};
  std::copy(sc, sc + 4, ts.data<float>());
  const ResizeSpec s = resize_spec(n, x, nullptr, &ts, nullptr);
  const Shape y = s.out;
  Tensor ty(DType::f32, y);
  GuardedBuf gx{size_t(tx.numel())};
  gx.random(seed, -1.f, 1.f);
  std::copy(gx.data(), gx.data() + gx.size(), tx.data<float>());
  find_ref_kernel("Resize")(n, {&tx, nullptr, &ts}, {&ty});
  std::string why;
  auto k = create_resize_kernel(x, resize_taps(s, 2), resize_taps(s, 3), c.mode, l, isa, &why);
  if (!k) return false;
  GuardedBuf src{size_t(layout_elems(l, x))}, dst{size_t(layout_elems(l, y))};
  convert_layout(tx.data<float>(), Layout::nchw, src.data(), l, x);
  dst.fill(-99.f);
  test::run_split(*k, {src.data()}, {dst.data()});
  std::vector<float> got(size_t(ty.numel()));
  convert_layout(dst.data(), l, got.data(), Layout::nchw, y);
  // The kernel sums the taps in another order than the reference's separable passes.
  const float tol = std::string(c.mode) == "nearest" ? 0.f : 1e-5f;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - ty.data<float>()[i]) <= tol);
  CHECK(bad == 0);
  if (layout_block(l) > 1)
    CHECK(test::nonzero_pad_lanes(dst.data(), layout_block(l), y[0], y[1], y[2] * y[3]) == 0);
  return true;
}

}  // namespace

TEST_CASE("glue resize: every mode against the reference") {
  const std::vector<ResizeCase> cases = {
      {"nearest", "asymmetric", "floor", 2, 2},
      {"nearest", "half_pixel", "round_prefer_ceil", 1.7, 0.6},
      {"nearest", "tf_half_pixel_for_nn", "round_prefer_floor", 0.5, 3},  // N, C: identity
      {"nearest", "align_corners", "ceil", 3, 1.5},
      {"linear", "pytorch_half_pixel", "floor", 2, 8},
      {"linear", "half_pixel", "floor", 0.6, 1.3},
      {"linear", "align_corners", "floor", 2.5, 2},
      {"linear", "asymmetric", "floor", 4, 0.75},
      {"linear", "half_pixel_symmetric", "floor", 1.5, 2.2},
      {"cubic", "half_pixel", "floor", 2, 1.6},
      {"cubic", "align_corners", "floor", 0.7, 3, 0, 1},
      {"linear", "half_pixel", "floor", 0.5, 0.4, 1},  // antialias: 4 and 6 taps
      {"cubic", "pytorch_half_pixel", "floor", 0.6, 1.5, 1},
  };
  int run = 0, refused = 0;
  uint32_t seed = 1;
  for (Isa isa : test::glue_isas())
    for (const Shape& x :
         std::vector<Shape>{{1, 3, 5, 7}, {2, 17, 9, 11}, {1, 16, 4, 4}, {1, 40, 6, 13}})
      for (const ResizeCase& c : cases)
        for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
          if (check_case(isa, l, x, c, seed++))
            ++run;
          else
            ++refused;
        }
  MESSAGE("resize cases: " << run << " run, " << refused << " refused");
  CHECK(refused == 0);
}

TEST_CASE("glue resize: refusals and names") {
  for (Isa isa : test::glue_isas()) {
    const Node n = resize_node({"linear", "tf_crop_and_resize", "floor", 2, 2});
    Tensor ts(DType::f32, {4}), roi(DType::f32, {8});
    const float sc[4] = {1, 1, 2, 2}, r[8] = {0, 0, -0.5f, 0, 1, 1, 1, 1};
    std::copy(sc, sc + 4, ts.data<float>());
    std::copy(r, r + 8, roi.data<float>());
    const Shape x{1, 3, 4, 4};
    const ResizeSpec s = resize_spec(n, x, &roi, &ts, nullptr);
    std::string why;
    CHECK_FALSE(create_resize_kernel(x, resize_taps(s, 2), resize_taps(s, 3), "linear",
                                     Layout::nhwc, isa, &why));
    CHECK(why.find("tf_crop_and_resize") != std::string::npos);
    const ResizeSpec s2 =
        resize_spec(resize_node({"linear", "half_pixel", "floor", 2, 2}), x, nullptr, &ts, nullptr);
    auto k = create_resize_kernel(x, resize_taps(s2, 2), resize_taps(s2, 3), "linear", Layout::nhwc,
                                  isa, &why);
    REQUIRE(k);
    CHECK(k->name() == std::string("resize_linear_f32_nhwc__") + isa_name(isa));
  }
}

}  // namespace kiln
