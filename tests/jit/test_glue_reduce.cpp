// The reduction glue kernels against the reference kernels, on every ISA path: every Reduce*
// op (create_reduce_kernel) over rows (inner == 1) and columns (inner > 1) with vector tails,
// batch > 1 and NaN / inf entries for Max / Min / LogSumExp; LogSoftmax (create_softmax_kernel
// with log) over rows and channels; Max / Min / Mean of two (create_binary_kernel) with
// broadcasting and NaN in either operand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
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

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Runs the reference kernel of `n` on inputs `in` into outputs of shape `ys`.
Tensor ref_run(const Node& n, const std::vector<const Tensor*>& in, const Shape& ys) {
  Tensor y(DType::f32, ys);
  find_ref_kernel(n.op)(n, in, {&y});
  return y;
}

Tensor tensor(const Shape& s, const float* p) {
  Tensor t(DType::f32, s);
  std::copy(p, p + t.numel(), t.data<float>());
  return t;
}

// got vs want: NaN where want is NaN, else within tol(i).
template <class Tol>
void expect_close(const float* got, const Tensor& want, Tol tol) {
  int bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float w = want.data<float>()[i];
    const bool ok = std::isnan(w) ? std::isnan(got[i])
                    : std::isinf(w)
                        ? got[i] == w
                        : std::fabs(double(got[i]) - w) <= tol(i) && !std::isnan(got[i]);
    if (!ok && ++bad <= 3)
      CHECK_MESSAGE(false, "element " << i << ": got " << got[i] << " want " << w);
  }
  CHECK(bad == 0);
}

struct OpCase {
  const char* onnx;
  ReduceOp op;
  float lo, hi;  // input range: positive for LogSum, near 1 for Prod (no overflow)
};
const OpCase kOps[] = {
    {"ReduceSum", ReduceOp::sum, -4, 4},
    {"ReduceMean", ReduceOp::mean, -4, 4},
    {"ReduceMax", ReduceOp::max, -4, 4},
    {"ReduceMin", ReduceOp::min, -4, 4},
    {"ReduceProd", ReduceOp::prod, 0.9f, 1.1f},
    {"ReduceL1", ReduceOp::l1, -4, 4},
    {"ReduceL2", ReduceOp::l2, -4, 4},
    {"ReduceLogSum", ReduceOp::log_sum, 0.1f, 4},
    {"ReduceLogSumExp", ReduceOp::log_sum_exp, -30, 30},
    {"ReduceSumSquare", ReduceOp::sum_square, -4, 4},
};

void check_reduce(Isa isa, const OpCase& oc, int64_t outer, int64_t c, int64_t inner,
                  bool specials) {
  CAPTURE(std::string(isa_name(isa)));
  CAPTURE(std::string(oc.onnx));
  CAPTURE(outer);
  CAPTURE(c);
  CAPTURE(inner);
  GuardedBuf x{size_t(outer * c * inner)}, y{size_t(outer * inner)};
  x.random(uint32_t(outer * 131 + c * 7 + inner), oc.lo, oc.hi);
  auto at = [&](int64_t o, int64_t k, int64_t i) -> float& {
    return x[size_t((o * c + k) * inner + i)];
  };
  const int64_t cols = outer * inner;
  if (specials && cols >= 4) {  // (o, i) = (0, 0): a NaN; (0, 1) +inf; (0, 2) -inf; (0, 3) all -inf
    auto col = [&](int64_t j, int64_t k) -> float& { return at(j / inner, k, j % inner); };
    col(0, c / 2) = kNaN;
    col(1, c - 1) = kInf;
    col(2, 0) = -kInf;
    for (int64_t k = 0; k < c; ++k) col(3, k) = -kInf;
  }
  Node n;
  n.name = "r";
  n.op = oc.onnx;
  n.attrs["keepdims"] = attr_i(0);
  Tensor tx = tensor({outer, c, inner}, x.data());
  Tensor axes(DType::i64, {1});
  axes.data<int64_t>()[0] = 1;
  const Tensor want = ref_run(n, {&tx, &axes}, {outer, inner});
  std::string why;
  auto k = create_reduce_kernel(oc.op, outer, c, inner, isa, &why);
  REQUIRE_MESSAGE(k, why);
  y.fill(123.f);
  test::run_split(*k, {x.data()}, {y.data()});
  // The float accumulation against the reference's double: relative to the sum of |x|
  // (cancellation in Sum / Mean), else to the result.
  expect_close(y.data(), want, [&](int64_t j) {
    double scale = std::fabs(double(want.data<float>()[j]));
    if (oc.op == ReduceOp::sum || oc.op == ReduceOp::mean) {
      double s = 0;
      for (int64_t kk = 0; kk < c; ++kk) s += std::fabs(at(j / inner, kk, j % inner));
      scale += oc.op == ReduceOp::mean ? s / double(c) : s;
    }
    return 1e-5 * scale + 1e-6;
  });
}

}  // namespace

TEST_CASE("glue reduce: every Reduce* op over rows and columns against the reference") {
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (const OpCase& oc : kOps)
      for (int64_t c : {1, 3, 8, 16, 17, 100, 1000})
        for (int64_t inner : {1, 5, 8, 16, 37})
          for (int64_t outer : {1, 3}) {
            check_reduce(isa, oc, outer, c, inner, true);
            ++cases;
          }
  MESSAGE("reduce cases: " << cases);
}

TEST_CASE("glue reduce: names and refusals") {
  for (Isa isa : test::glue_isas()) {
    std::string why;
    auto rows = create_reduce_kernel(ReduceOp::max, 4, 10, 1, isa, &why);
    REQUIRE(rows);
    CHECK(rows->name() == std::string("reduce_max_f32_rows__") + isa_name(isa));
    auto cols = create_reduce_kernel(ReduceOp::log_sum_exp, 4, 10, 3, isa, &why);
    REQUIRE(cols);
    CHECK(cols->name() == std::string("reduce_log_sum_exp_f32_cols__") + isa_name(isa));
    CHECK_FALSE(create_reduce_kernel(ReduceOp::sum, 0, 10, 3, isa, &why));
    CHECK(why == "empty tensor");
  }
  std::string why;
  CHECK_FALSE(create_reduce_kernel(ReduceOp::sum, 1, 10, 3, Isa::scalar, &why));
}

TEST_CASE("glue logsoftmax: rows and channels against the reference") {
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (int64_t c : {1, 3, 16, 17, 100, 1000})
      for (int64_t inner : {1, 7})
        for (Layout l : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
          if (l == Layout::nchw && inner != 1) continue;
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(std::string(layout_name(l)));
          CAPTURE(c);
          CAPTURE(inner);
          const int64_t outer = 2;
          GuardedBuf gx{size_t(outer * c * inner)};
          gx.random(uint32_t(c * 3 + inner), -30.f, 30.f);
          std::vector<float> x(gx.data(), gx.data() + gx.size());
          if (c > 2) x[1] = kNaN;  // row 0 (nchw) / pixel 1 of image 0: all NaN
          Node n;
          n.name = "ls";
          n.op = "LogSoftmax";
          n.attrs["axis"] = attr_i(1);
          Tensor tx = tensor({outer, c, inner, 1}, x.data());
          const Tensor want = ref_run(n, {&tx}, tx.shape());
          std::string why;
          auto k = create_softmax_kernel(outer, c, inner, l, isa, &why, true);
          REQUIRE_MESSAGE(k, why);
          CHECK(k->name().rfind("logsoftmax_f32_", 0) == 0);
          const std::vector<float> got = test::run_in_layout(*k, x, l, outer, c, inner);
          // x - max - log(sum) in float against double: relative to |x| (up to ~1e2).
          expect_close(got.data(), want, [&](int64_t i) {
            return 2e-6 * (std::fabs(double(want.data<float>()[i])) + 60.0);
          });
          ++cases;
        }
  MESSAGE("logsoftmax cases: " << cases);
}

TEST_CASE("glue bcast: Max / Min / Mean of two against the reference, NaN propagating") {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 5, 3, 7}, {2, 5, 3, 7}},
                                                       {{2, 5, 3, 7}, {1, 5, 1, 1}},
                                                       {{3, 17}, {17}},
                                                       {{2, 19, 4, 4}, {2, 19, 4, 4}},
                                                       {{33}, {1}}};
  for (Isa isa : test::glue_isas())
    for (BinaryOp op : {BinaryOp::max, BinaryOp::min, BinaryOp::mean})
      for (const auto& [sa, sb] : shapes) {
        const char* onnx = op == BinaryOp::max ? "Max" : op == BinaryOp::min ? "Min" : "Mean";
        const Shape a_shape = sa, b_shape = sb;
        CAPTURE(std::string(isa_name(isa)));
        CAPTURE(std::string(onnx));
        CAPTURE(shape_str(a_shape));
        CAPTURE(shape_str(b_shape));
        const int64_t na = shape_numel(a_shape), nb = shape_numel(b_shape);
        GuardedBuf a{size_t(na)}, b{size_t(nb)}, y{size_t(na)};
        a.random(uint32_t(na + nb), -3.f, 3.f);
        b.random(uint32_t(na * 3 + nb), -3.f, 3.f);
        a[0] = kNaN;              // NaN in the first operand
        if (nb > 1) b[1] = kNaN;  // and in the second
        a[size_t(na - 1)] = kInf;
        Node n;
        n.name = "m";
        n.op = onnx;
        Tensor ta = tensor(a_shape, a.data()), tb = tensor(b_shape, b.data());
        const Tensor want = ref_run(n, {&ta, &tb}, a_shape);
        Shape y4 = a_shape;
        y4.insert(y4.begin(), 4 - y4.size(), 1);
        std::string why;
        auto k = create_binary_kernel(op, y4, Layout::nchw, {a_shape, Layout::nchw, 0},
                                      {b_shape, Layout::nchw, 1}, {}, isa, &why);
        REQUIRE_MESSAGE(k, why);
        y.fill(123.f);
        test::run_split(*k, {a.data(), b.data()}, {y.data()});
        expect_close(y.data(), want, [](int64_t) { return 0.0; });  // exact
      }
}

}  // namespace kiln

namespace kiln {

// A GroupNorm case: x [n, c, pixels] (eps 1e-3; gamma, beta fixed per channel), its reference
// output without and with `post`, and the tolerance of a kernel's element i: the normalised
// value's budget times the post-ops' slope (<= 1.2) plus their own few ulps.
struct GnCase {
  std::vector<float> gamma, beta;
  Tensor pre, want;
  GnCase(int64_t n, int64_t c, int64_t groups, int64_t pixels, const float* x,
         const std::vector<PostOp>& post) {
    for (int64_t i = 0; i < c; ++i) {
      gamma.push_back(0.5f + 0.1f * float(i % 13));
      beta.push_back(0.25f * float(i % 5) - 0.5f);
    }
    Node nd;
    nd.name = "gn";
    nd.op = groups == c ? "InstanceNormalization" : "GroupNormalization";
    nd.attrs["num_groups"] = attr_i(groups);
    nd.attrs["epsilon"] = attr_f(1e-3f);
    Tensor tx = tensor({n, c, pixels}, x), ts = tensor({c}, gamma.data()),
           tb = tensor({c}, beta.data());
    pre = ref_run(nd, {&tx, &ts, &tb}, tx.shape());
    for (const PostOp& op : post) append_post_op(nd, op, {});
    want = ref_run(nd, {&tx, &ts, &tb}, tx.shape());
  }
  void check(const float* got) const {
    expect_close(got, want, [&](int64_t i) {
      return 2.4e-6 * (std::fabs(double(pre.data<float>()[i])) + 4.0) +
             1e-6 * std::fabs(double(want.data<float>()[i]));
    });
  }
};

TEST_CASE("glue groupnorm: Instance / GroupNormalization against the reference") {
  using K = PostOp::Kind;
  using test::mk;
  const std::vector<std::vector<PostOp>> post_chains = {{},
                                                        {mk(K::relu)},
                                                        {mk(K::swish)},
                                                        {mk(K::mish)},
                                                        {mk(K::leaky_relu, 0.2f)},
                                                        {mk(K::tanh)},
                                                        {mk(K::gelu), mk(K::clip, -1.f, 2.f)}};
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (int64_t c : {1, 4, 6, 24})
      for (int64_t groups : {int64_t(1), int64_t(2), c})
        for (int64_t pixels : {1, 7, 16, 49}) {
          if (c % groups) continue;
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(c);
          CAPTURE(groups);
          CAPTURE(pixels);
          const int64_t n = 2;
          GuardedBuf x{size_t(n * c * pixels)}, y{size_t(n * c * pixels)};
          x.random(uint32_t(c * 17 + groups + pixels), -3.f, 5.f);
          // Fused post-ops: one chain per case, in turn.
          const std::vector<PostOp> post = post_chains[size_t(cases) % post_chains.size()];
          CAPTURE(post_ops_str(post));
          const GnCase ref(n, c, groups, pixels, x.data(), post);
          std::string why;
          auto k = create_groupnorm_kernel(n, c, groups, pixels, 1e-3f, ref.gamma.data(),
                                           ref.beta.data(), isa, &why, post);
          REQUIRE_MESSAGE(k, why);
          y.fill(123.f);
          test::run_split(*k, {x.data()}, {y.data()});
          ref.check(y.data());
          ++cases;
        }
  MESSAGE("groupnorm cases: " << cases);
}

TEST_CASE("glue groupnorm: the blocked kernel against the reference, pad lanes 0") {
  using K = PostOp::Kind;
  using test::mk;
  const std::vector<std::vector<PostOp>> post_chains = {
      {}, {mk(K::relu)}, {mk(K::sigmoid)}, {mk(K::swish)}, {mk(K::hardsigmoid, 0.2f, 0.5f)}};
  int cases = 0;
  for (Isa isa : test::glue_isas()) {
    const Layout l = blocked_layout(isa);
    const int64_t V = simd_width(isa);
    for (int64_t c : {8, 16, 24, 40, 64})
      for (int64_t gs : {1, 2, 4, 8, 16, 32})
        for (int64_t pixels : {1, 3, 7, 49}) {
          if (c % gs || !((gs <= V && V % gs == 0) || gs % V == 0)) continue;
          const int64_t n = 2, groups = c / gs;
          const std::vector<PostOp> post = post_chains[size_t(cases) % post_chains.size()];
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(c);
          CAPTURE(groups);
          CAPTURE(pixels);
          CAPTURE(post_ops_str(post));
          const Shape s4 = {n, c, pixels, 1};
          std::vector<float> x(size_t(n * c * pixels));
          std::mt19937 rng(uint32_t(c * 131 + gs * 7 + pixels));
          std::uniform_real_distribution<float> d(-3.f, 5.f);
          for (float& v : x) v = d(rng) + 0.02f * float(&v - x.data()) / float(pixels);
          const GnCase ref(n, c, groups, pixels, x.data(), post);
          std::string why;
          auto k = create_groupnorm_blocked_kernel(n, c, groups, pixels, 1e-3f, ref.gamma.data(),
                                                   ref.beta.data(), isa, &why, post);
          REQUIRE_MESSAGE(k, why);
          GuardedBuf src{size_t(layout_elems(l, s4))}, dst{size_t(layout_elems(l, s4))};
          convert_layout(x.data(), Layout::nchw, src.data(), l, s4);
          dst.fill(123.f);
          test::run_split(*k, {src.data()}, {dst.data()});
          CHECK(test::nonzero_pad_lanes(dst.data(), V, n, c, pixels) == 0);
          std::vector<float> got(x.size());
          convert_layout(dst.data(), l, got.data(), Layout::nchw, s4);
          ref.check(got.data());
          ++cases;
        }
    std::string why;
    std::vector<float> g(48, 1.f);
    CHECK_FALSE(create_groupnorm_blocked_kernel(1, 48, 16, 9, 1e-5f, g.data(), g.data(), isa,
                                                &why));  // 3 channels per group
    CHECK(why.find("straddle") != std::string::npos);
  }
  MESSAGE("blocked groupnorm cases: " << cases);
}

}  // namespace kiln
