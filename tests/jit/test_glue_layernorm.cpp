// The LayerNorm glue kernel (create_layernorm_kernel) against the reference LayerNormalization
// kernel: rows of a row-major tensor, and the channels of a 4-D tensor in nhwc and the ISA's
// blocked layout (pad lanes must come out 0), over channel tails, odd pixel counts, batch > 1,
// on every ISA path.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/post_ops.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_expect.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

// Reference: LayerNormalization over dim 1 of [outer, c, inner, 1] (norm_dims 1).
std::vector<float> reference(const std::vector<float>& x, int64_t outer, int64_t c, int64_t inner,
                             float eps, const std::vector<float>& gamma,
                             const std::vector<float>* beta, const std::vector<PostOp>& post = {}) {
  Node n;
  for (const PostOp& op : post) append_post_op(n, op, {});
  n.name = "ln";
  n.op = "LayerNormalization";
  n.attrs["axis"] = attr_i(1);
  n.attrs["norm_dims"] = attr_i(1);
  n.attrs["epsilon"] = attr_f(eps);
  const Shape s = {outer, c, inner, 1};
  Tensor tx(DType::f32, s), tg(DType::f32, {c}), tb(DType::f32, {c}), ty(DType::f32, s);
  std::copy(x.begin(), x.end(), tx.data<float>());
  std::copy(gamma.begin(), gamma.end(), tg.data<float>());
  if (beta) std::copy(beta->begin(), beta->end(), tb.data<float>());
  find_ref_kernel("LayerNormalization")(n, {&tx, &tg, beta ? &tb : nullptr}, {&ty});
  return std::vector<float>(ty.data<float>(), ty.data<float>() + ty.numel());
}

void check_case(Isa isa, Layout l, int64_t outer, int64_t c, int64_t inner, bool with_beta,
                uint32_t seed, const std::vector<PostOp>& post = {}) {
  CAPTURE(post_ops_str(post));
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(outer);
  CAPTURE(c);
  CAPTURE(inner);
  const float eps = 1e-5f;
  GuardedBuf gx{size_t(outer * c * inner)};
  // An offset mean per row makes the two-pass variance matter.
  gx.random(seed, -3.f, 5.f);
  std::vector<float> x(gx.data(), gx.data() + gx.size());
  GuardedBuf gg{size_t(c)}, gb{size_t(c)};
  gg.random(seed + 1, -2.f, 2.f);
  gb.random(seed + 2, -1.f, 1.f);
  std::vector<float> gamma(gg.data(), gg.data() + c), beta(gb.data(), gb.data() + c);
  // Without and with the post-ops: the normalised value's budget, times the ops' slope
  // (<= 1.2 for those tested), plus their own few ulps.
  const auto pre = reference(x, outer, c, inner, eps, gamma, with_beta ? &beta : nullptr);
  const auto want = reference(x, outer, c, inner, eps, gamma, with_beta ? &beta : nullptr, post);
  std::string why;
  auto k = create_layernorm_kernel(outer, c, inner, l, eps, gg.data(),
                                   with_beta ? gb.data() : nullptr, isa, &why, post);
  REQUIRE_MESSAGE(k, why);
  // The 4-D tensor is [outer, c, inner, 1] (nchw = rows only when inner == 1); run_in_layout
  // checks that blocked pad lanes come out 0 (sigmoid(0) would not).
  const std::vector<float> got = test::run_in_layout(*k, x, l, outer, c, inner);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 2e-5 * (1 + std::fabs(pre[i])) * 1.2 + 1e-6 * std::fabs(want[i]);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && ++bad <= 3)
      CHECK_MESSAGE(false, "element " << i << ": got " << got[i] << " want " << want[i]);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("glue layernorm: rows and channels against the reference") {
  int cases = 0;
  for (Isa isa : test::glue_isas()) {
    const Layout blocked = blocked_layout(isa);
    for (int64_t c : {1, 3, 8, 15, 16, 17, 40, 96, 100})
      for (int64_t outer : {1, 2}) {
        check_case(isa, Layout::nchw, outer * 3, c, 1, c % 2 == 0, uint32_t(c + 7 * outer));
        for (int64_t inner : {1, 7, 49})
          for (Layout l : {Layout::nhwc, blocked}) {
            check_case(isa, l, outer, c, inner, inner != 7, uint32_t(c * 31 + inner + outer));
            ++cases;
          }
      }
  }
  MESSAGE("layernorm cases: " << cases);
}

TEST_CASE("glue layernorm: fused one-input post-ops") {
  using K = PostOp::Kind;
  using test::mk;
  const std::vector<std::vector<PostOp>> chains = {
      {mk(K::relu)}, {mk(K::sigmoid)}, {mk(K::gelu)}, {mk(K::swish), mk(K::clip, -0.2f, 1.f)},
      {mk(K::tanh)}, {mk(K::mish)}};
  for (Isa isa : test::glue_isas())
    for (const auto& post : chains) {
      check_case(isa, Layout::nchw, 3, 17, 1, true, 5, post);
      check_case(isa, Layout::nhwc, 2, 40, 7, false, 6, post);
      check_case(isa, blocked_layout(isa), 2, 17, 7, true, 7, post);
    }
  std::string why;
  std::vector<float> g(8, 1.f);
  CHECK_FALSE(create_layernorm_kernel(2, 8, 4, Layout::nhwc, 1e-5f, g.data(), nullptr,
                                      test::glue_isas()[0], &why, {mk(K::add)}));
  CHECK(why.find("needs an operand") != std::string::npos);
  auto k = create_layernorm_kernel(2, 8, 4, Layout::nhwc, 1e-5f, g.data(), nullptr,
                                   test::glue_isas()[0], &why, {mk(K::relu)});
  REQUIRE(k);
  CHECK(k->name().find("_relu_") != std::string::npos);
}

TEST_CASE("glue layernorm: refusals and names") {
  for (Isa isa : test::glue_isas()) {
    std::vector<float> g(8, 1.f);
    std::string why;
    auto k = create_layernorm_kernel(2, 8, 4, Layout::nhwc, 1e-5f, g.data(), nullptr, isa, &why);
    REQUIRE(k);
    CHECK(k->name() == std::string("layernorm_f32_nhwc__") + isa_name(isa));
    CHECK_FALSE(
        create_layernorm_kernel(2, 8, 4, Layout::nchw, 1e-5f, g.data(), nullptr, isa, &why));
    CHECK(why.find("strided") != std::string::npos);
    CHECK_FALSE(
        create_layernorm_kernel(0, 8, 4, Layout::nhwc, 1e-5f, g.data(), nullptr, isa, &why));
    const Layout other = isa == Isa::avx512 ? Layout::nChw8c : Layout::nChw16c;
    CHECK_FALSE(create_layernorm_kernel(1, 8, 4, other, 1e-5f, g.data(), nullptr, isa, &why));
  }
}

}  // namespace kiln
