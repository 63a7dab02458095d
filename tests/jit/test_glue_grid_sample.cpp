// The GridSample glue kernel (create_grid_sample_kernel) against the reference GridSample, in
// nhwc and the ISA's blocked layout (pad lanes must come out 0) on every ISA path: every mode,
// padding mode and align_corners, grids past the image's edges, channel tails and counts over
// one pass of vectors, outputs larger and smaller than the input, tiles split across threads.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

const char* kModes[] = {"bilinear", "nearest", "bicubic"};
const char* kPads[] = {"zeros", "border", "reflection"};

void check_case(Isa isa, Layout l, const Shape& xs, int64_t ho, int64_t wo, int mode, int pad,
                bool align, uint32_t seed) {
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(shape_str(xs));
  CAPTURE(std::string(kModes[mode]));
  CAPTURE(std::string(kPads[pad]));
  CAPTURE(align);
  const Shape gs = {xs[0], ho, wo, 2};
  Node n;
  n.name = "gs";
  n.op = "GridSample";
  n.attrs["mode"] = attr_s(kModes[mode]);
  n.attrs["padding_mode"] = attr_s(kPads[pad]);
  n.attrs["align_corners"] = attr_i(align);
  Tensor x(DType::f32, xs), grid(DType::f32, gs), want(DType::f32, {xs[0], xs[1], ho, wo});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dx(-3.f, 3.f), dg(-1.3f, 1.3f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dx(rng);
  for (int64_t i = 0; i < grid.numel(); ++i) grid.data<float>()[i] = dg(rng);
  find_ref_kernel("GridSample")(n, {&x, &grid}, {&want});
  std::string why;
  auto k = create_grid_sample_kernel(xs, gs, grid_sample_spec(n), l, isa, &why);
  REQUIRE_MESSAGE(k, why);
  const Shape ys = want.shape();
  test::GuardedBuf src{size_t(layout_elems(l, xs))}, dst{size_t(layout_elems(l, ys))};
  convert_layout(x.data<float>(), Layout::nchw, src.data(), l, xs);
  dst.fill(123.f);
  ScratchBuffer scratch(k->scratch_bytes(), 2);
  const float* srcs[] = {src.data(), grid.data<float>()};
  float* dsts[] = {dst.data()};
  KernelArgs a;
  a.src = srcs;
  a.dst = dsts;
  const int64_t half = k->tiles() / 2;
  std::thread second([&] { k->run(scratch.with(a, 1), half, k->tiles()); });
  k->run(scratch.with(a, 0), 0, half);
  second.join();
  std::vector<float> got(size_t(want.numel()));
  convert_layout(dst.data(), l, got.data(), Layout::nchw, ys);
  if (layout_block(l) > 1)
    CHECK(test::nonzero_pad_lanes(dst.data(), layout_block(l), ys[0], ys[1], ho * wo) == 0);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.data<float>()[i], tol = 1e-5 * (1 + std::fabs(w));
    if (!(std::fabs(got[i] - w) <= tol) && ++bad <= 3)
      CHECK_MESSAGE(false, "element " << i << ": got " << got[i] << " want " << w);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue grid_sample: every mode and padding against the reference") {
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (Layout l : {Layout::nhwc, blocked_layout(isa)})
      for (int mode = 0; mode < 3; ++mode)
        for (int pad = 0; pad < 3; ++pad)
          for (bool align : {false, true}) {
            const int i = cases++;
            // Channels: a tail, whole vectors, more than one pass of 8 vectors (and a tail).
            const int64_t c = i % 3 == 0 ? 5 : i % 3 == 1 ? 32 : 8 * simd_width(isa) + 3;
            check_case(isa, l, {2, c, 7, 9}, 11, 5, mode, pad, align, uint32_t(i));
            check_case(isa, l, {1, c, 1, 13}, 3, 300, mode, pad, align, uint32_t(i + 100));
          }
  MESSAGE("grid_sample cases: " << cases);
}

TEST_CASE("glue grid_sample: refusals") {
  GridSampleSpec s;
  std::string why;
  for (Isa isa : test::glue_isas()) {
    CHECK_FALSE(create_grid_sample_kernel({1, 4, 5, 5}, {1, 3, 3, 2}, s, Layout::nchw, isa, &why));
    CHECK(why.find("nchw") != std::string::npos);
    CHECK_FALSE(create_grid_sample_kernel({1, 4, 5, 5}, {2, 3, 3, 2}, s, Layout::nhwc, isa, &why));
    CHECK(create_grid_sample_kernel({1, 4, 5, 5}, {1, 3, 3, 2}, s, Layout::nhwc, isa, &why));
  }
}

}  // namespace kiln
