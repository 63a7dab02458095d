// The LRN glue kernel (create_lrn_kernel) against the reference LRN kernel: nchw on every ISA
// path, nhwc and nChw16c on AVX-512 (blocked pad lanes must come out 0), over window sizes odd
// and even, wider than the channels and up to the lane-shift limit, windows placed as ONNX,
// PyTorch and at the extremes (window_lo), channel tails, pixel counts
// that cross the kernel's chunks, batch > 1 and several alpha / beta / bias.
#include <doctest/doctest.h>

#include <cmath>
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

std::vector<float> reference(const std::vector<float>& x, const LrnProblem& p) {
  Node n;
  n.name = "lrn";
  n.op = "LRN";
  n.attrs["size"] = attr_i(p.size);
  n.attrs["window_lo"] = attr_i(p.lo);
  n.attrs["alpha"] = attr_f(p.alpha);
  n.attrs["beta"] = attr_f(p.beta);
  n.attrs["bias"] = attr_f(p.bias);
  const Shape s = {p.n, p.c, p.pixels, 1};
  Tensor tx(DType::f32, s), ty(DType::f32, s);
  std::copy(x.begin(), x.end(), tx.data<float>());
  find_ref_kernel("LRN")(n, {&tx}, {&ty});
  return std::vector<float>(ty.data<float>(), ty.data<float>() + ty.numel());
}

void check_case(Isa isa, Layout l, const LrnProblem& p, uint32_t seed) {
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(p.n);
  CAPTURE(p.c);
  CAPTURE(p.pixels);
  CAPTURE(p.size);
  CAPTURE(p.lo);
  CAPTURE(p.beta);
  GuardedBuf gx{size_t(p.n * p.c * p.pixels)};
  // Values up to 30: alpha / size * x^2 is then comparable to the bias for the large alphas.
  gx.random(seed, -30.f, 30.f);
  std::vector<float> x(gx.data(), gx.data() + gx.size());
  const auto want = reference(x, p);
  std::string why;
  auto k = create_lrn_kernel(p, l, isa, &why);
  REQUIRE_MESSAGE(k, why);
  const std::vector<float> got = test::run_in_layout(*k, x, l, p.n, p.c, p.pixels);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 4e-6 * std::fabs(want[i]) + 1e-30;
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && ++bad <= 3)
      CHECK_MESSAGE(false, "element " << i << ": got " << got[i] << " want " << want[i]);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue lrn: every layout against the reference") {
  struct Params {
    float alpha, beta, bias;
  };
  const Params params[] = {{1e-4f, 0.75f, 1.f},
                           {0.5f, 0.6f, 2.f},
                           {1.f, 1.f, 1.f},
                           {2e-2f, 0.5f, 0.5f},
                           {1e-3f, 0.f, 1.f}};
  int cases = 0, pi = 0;
  for (Isa isa : test::glue_isas()) {
    std::vector<Layout> layouts = {Layout::nchw};
    if (isa == Isa::avx512) layouts = {Layout::nchw, Layout::nhwc, Layout::nChw16c};
    for (int64_t c : {1, 3, 5, 16, 17, 33, 96})
      for (int64_t size : {1, 2, 3, 4, 5, 7, 16, 31, 33})
        for (int64_t pixels : {1, 7, 49, 130, 300, 1030}) {
          if ((size + c + pixels) % 3 != 0 && pixels > 49) continue;  // a third of the large ones
          for (Layout l : layouts) {
            LrnProblem p;
            p.n = pixels > 49 ? 1 : 2;
            p.c = c;
            p.pixels = pixels;
            p.size = size;
            // ONNX's window, PyTorch's (one more channel before c for even sizes) and the
            // extremes (where the lane shifts reach them).
            const int64_t los[] = {(size - 1) / 2, size / 2, 0, size - 1};
            p.lo = los[pi % 4];
            if (p.lo > 16 || size - 1 - p.lo > 16) p.lo = (size - 1) / 2;
            const Params& q = params[pi++ % 5];
            p.alpha = q.alpha;
            p.beta = q.beta;
            p.bias = q.bias;
            check_case(isa, l, p, uint32_t(c * 131 + size * 17 + pixels));
            ++cases;
          }
        }
  }
  MESSAGE("lrn cases: " << cases);
}

TEST_CASE("glue lrn: refusals and names") {
  LrnProblem p;
  p.n = 1;
  p.c = 32;
  p.pixels = 9;
  p.size = 5;
  p.lo = 2;
  std::string why;
  for (Isa isa : test::glue_isas()) {
    auto k = create_lrn_kernel(p, Layout::nchw, isa, &why);
    REQUIRE(k);
    CHECK(k->name() == std::string("lrn_f32_nchw__") + isa_name(isa));
    CHECK_FALSE(create_lrn_kernel(p, Layout::nChw8c, isa, &why));
    CHECK(why.find("nChw8c") != std::string::npos);
    if (isa != Isa::avx512) {
      CHECK_FALSE(create_lrn_kernel(p, Layout::nhwc, isa, &why));
      CHECK(why.find("AVX-512") != std::string::npos);
      continue;
    }
    LrnProblem wide = p;
    wide.size = 34;  // hi = 17 lanes: beyond the neighbouring vector
    wide.lo = 16;
    CHECK_FALSE(create_lrn_kernel(wide, Layout::nChw16c, isa, &why));
    CHECK(why.find("past the next vector") != std::string::npos);
    wide.size = 33;  // 16 lanes each side: within reach
    CHECK(create_lrn_kernel(wide, Layout::nChw16c, isa, &why));
    wide.lo = 0;  // 32 lanes after
    CHECK_FALSE(create_lrn_kernel(wide, Layout::nhwc, isa, &why));
    CHECK(create_lrn_kernel(wide, Layout::nchw, isa, &why));
    LrnProblem huge = p;  // a window over 600 channels: ~360K unrolled loads
    huge.c = 600;
    huge.size = 100001;
    huge.lo = 50000;
    CHECK_FALSE(create_lrn_kernel(huge, Layout::nchw, isa, &why));
    CHECK(why.find("too wide") != std::string::npos);
    LrnProblem empty = p;
    empty.pixels = 0;
    CHECK_FALSE(create_lrn_kernel(empty, Layout::nchw, isa, &why));
  }
}

}  // namespace kiln
