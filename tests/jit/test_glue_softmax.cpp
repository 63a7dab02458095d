// The Softmax glue kernel (create_softmax_kernel) against the reference Softmax kernel: rows of
// a row-major tensor, and the channels of a 4-D tensor in nhwc and the ISA's blocked layout (pad
// lanes must come out 0), over channel tails, odd pixel counts, batch > 1, rows whose exp would
// overflow without the max subtracted, and rows holding NaN / +-inf, on every ISA path.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

// Reference: Softmax over dim 1 of [outer, c, inner, 1].
std::vector<float> reference(const std::vector<float>& x, int64_t outer, int64_t c, int64_t inner) {
  Node n;
  n.name = "softmax";
  n.op = "Softmax";
  n.attrs["axis"] = attr_i(1);
  const Shape s = {outer, c, inner, 1};
  Tensor tx(DType::f32, s), ty(DType::f32, s);
  std::copy(x.begin(), x.end(), tx.data<float>());
  find_ref_kernel("Softmax")(n, {&tx}, {&ty});
  return std::vector<float>(ty.data<float>(), ty.data<float>() + ty.numel());
}

void check_case(Isa isa, Layout l, int64_t outer, int64_t c, int64_t inner, uint32_t seed,
                bool specials) {
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(outer);
  CAPTURE(c);
  CAPTURE(inner);
  GuardedBuf gx{size_t(outer * c * inner)};
  gx.random(seed, -30.f, 30.f);
  std::vector<float> x(gx.data(), gx.data() + gx.size());
  // Row (o, p) is x[(o * c + k) * inner + p] for k < c.
  auto at = [&](int64_t o, int64_t k, int64_t p) -> float& {
    return x[size_t((o * c + k) * inner + p)];
  };
  for (int64_t k = 0; k < c; ++k) at(outer - 1, k, inner - 1) += 100.f;  // exp(x) overflows
  if (specials && inner >= 4) {
    const float inf = std::numeric_limits<float>::infinity();
    at(0, c / 2, 0) = std::numeric_limits<float>::quiet_NaN();  // row 0: all NaN
    at(0, c - 1, 1) = inf;                                      // row 1: NaN (inf - inf)
    at(0, 0, 2) = -inf;                                         // row 2: that entry 0
    for (int64_t k = 0; k < c; ++k) at(0, k, 3) = -inf;         // row 3: all NaN
  }
  const auto want = reference(x, outer, c, inner);
  std::string why;
  auto k = create_softmax_kernel(outer, c, inner, l, isa, &why);
  REQUIRE_MESSAGE(k, why);
  const std::vector<float> got = test::run_in_layout(*k, x, l, outer, c, inner);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // exp's ~1 ulp, the float sum's rounding and x - max rounded in float (the reference
    // subtracts in double): a few 1e-6 relative.
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : std::fabs(double(got[i]) - want[i]) <= 1e-5 * want[i] + 1e-30;
    if (!ok && ++bad <= 3)
      CHECK_MESSAGE(false, "element " << i << ": got " << got[i] << " want " << want[i]);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue softmax: rows and channels against the reference") {
  int cases = 0;
  for (Isa isa : test::glue_isas()) {
    const Layout blocked = blocked_layout(isa);
    for (int64_t c : {1, 3, 8, 15, 16, 17, 40, 100, 1000})
      for (int64_t outer : {1, 2}) {
        check_case(isa, Layout::nchw, outer * 5, c, 1, uint32_t(c + 7 * outer), false);
        for (int64_t inner : {1, 7, 49})
          for (Layout l : {Layout::nhwc, blocked}) {
            check_case(isa, l, outer, c, inner, uint32_t(c * 31 + inner + outer), true);
            ++cases;
          }
      }
  }
  MESSAGE("softmax cases: " << cases);
}

TEST_CASE("glue softmax: refusals and names") {
  for (Isa isa : test::glue_isas()) {
    std::string why;
    auto k = create_softmax_kernel(2, 8, 4, Layout::nhwc, isa, &why);
    REQUIRE(k);
    CHECK(k->name() == std::string("softmax_f32_nhwc__") + isa_name(isa));
    CHECK_FALSE(create_softmax_kernel(2, 8, 4, Layout::nchw, isa, &why));
    CHECK(why.find("strided") != std::string::npos);
    CHECK_FALSE(create_softmax_kernel(0, 8, 4, Layout::nhwc, isa, &why));
    const Layout other = isa == Isa::avx512 ? Layout::nChw8c : Layout::nChw16c;
    CHECK_FALSE(create_softmax_kernel(1, 8, 4, other, isa, &why));
  }
}

}  // namespace kiln
