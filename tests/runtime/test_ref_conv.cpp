// Reference Conv: hand-computed cases, then a sweep against a direct per-output summation.
#include <chrono>

#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

namespace {

struct ConvCase {
  int64_t n, c, h, w, m, g, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool bias;
};

Node conv_node(const ConvCase& p) {
  return make_node("Conv", {{"kernel_shape", attr_ints({p.kh, p.kw})},
                            {"strides", attr_ints({p.sh, p.sw})},
                            {"dilations", attr_ints({p.dh, p.dw})},
                            {"pads", attr_ints({p.pt, p.pl, p.pb, p.pr})},
                            {"group", attr_i(p.g)}});
}

int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pads) {
  return (in + pads - d * (k - 1) - 1) / s + 1;
}

// Direct definition: every output element is its own sum over the window (double precision),
// with the error bound scaled by the sum of |terms|.
void check_conv_against_naive(const ConvCase& p, uint64_t seed) {
  CAPTURE(p.n);
  CAPTURE(p.c);
  CAPTURE(p.h);
  CAPTURE(p.w);
  CAPTURE(p.m);
  CAPTURE(p.g);
  const std::string window = window_str(p);
  CAPTURE(window);
  const int64_t cg = p.c / p.g, mg = p.m / p.g;
  const int64_t oh_n = out_dim(p.h, p.kh, p.sh, p.dh, p.pt + p.pb);
  const int64_t ow_n = out_dim(p.w, p.kw, p.sw, p.dw, p.pl + p.pr);
  Tensor x = random_f32({p.n, p.c, p.h, p.w}, seed);
  Tensor w = random_f32({p.m, cg, p.kh, p.kw}, seed + 1);
  Tensor b = random_f32({p.m}, seed + 2);
  std::vector<const Tensor*> in = {&x, &w};
  if (p.bias) in.push_back(&b);
  Tensor y = run1(conv_node(p), in, DType::f32, {p.n, p.m, oh_n, ow_n});

  const float* X = x.data<float>();
  const float* Wt = w.data<float>();
  int bad = 0;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          const int64_t g = m / mg;
          double s = p.bias ? b.data<float>()[m] : 0.0, mag = std::fabs(s);
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < p.kh; ++i)
              for (int64_t j = 0; j < p.kw; ++j) {
                const int64_t ih = oh * p.sh + i * p.dh - p.pt;
                const int64_t iw = ow * p.sw + j * p.dw - p.pl;
                if (ih < 0 || iw < 0 || ih >= p.h || iw >= p.w) continue;
                const double t = double(X[((n * p.c + g * cg + c) * p.h + ih) * p.w + iw]) *
                                 Wt[((m * cg + c) * p.kh + i) * p.kw + j];
                s += t;
                mag += std::fabs(t);
              }
          const float got = y.data<float>()[((n * p.m + m) * oh_n + oh) * ow_n + ow];
          if (std::fabs(got - s) > 1e-5 * mag + 1e-6 && bad++ < 5)
            FAIL_CHECK("y[" << n << "," << m << "," << oh << "," << ow << "] = " << got << ", want "
                            << s);
        }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ref Conv: hand-computed 3x3 input, 2x2 kernel, bias") {
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor b = f32({1}, {1});
  Node n = conv_node({1, 1, 3, 3, 1, 1, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, true});
  // y00 = 1*1+2*2+4*3+5*4 = 37, +1 bias; and so on.
  check_f32(run1(n, {&x, &w, &b}, DType::f32, {1, 1, 2, 2}), {1, 1, 2, 2}, {38, 48, 68, 78});
  // Without bias.
  check_f32(run1(n, {&x, &w}, DType::f32, {1, 1, 2, 2}), {1, 1, 2, 2}, {37, 47, 67, 77});
  // Omitted optional input passed as nullptr.
  check_f32(run1(n, {&x, &w, nullptr}, DType::f32, {1, 1, 2, 2}), {1, 1, 2, 2}, {37, 47, 67, 77});
}

TEST_CASE("ref Conv: hand-computed padding, stride, asymmetric pads, dilation") {
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  SUBCASE("pad 1, stride 2, 3x3 ones") {
    Tensor w = f32({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
    Node n = conv_node({1, 1, 3, 3, 1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false});
    check_f32(run1(n, {&x, &w}, DType::f32, {1, 1, 2, 2}), {1, 1, 2, 2}, {12, 16, 24, 28});
  }
  SUBCASE("pads top=1 left=0 bottom=0 right=2, 2x2 ones") {
    Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
    Node n = conv_node({1, 1, 3, 3, 1, 1, 2, 2, 1, 1, 1, 1, 1, 0, 0, 2, false});
    check_f32(run1(n, {&x, &w}, DType::f32, {1, 1, 3, 4}), {1, 1, 3, 4},
              {3, 5, 3, 0, 12, 16, 9, 0, 24, 28, 15, 0});
  }
  SUBCASE("dilation 2") {
    Tensor w = f32({1, 1, 2, 2}, {1, 2, 3, 4});
    Node n = conv_node({1, 1, 3, 3, 1, 1, 2, 2, 1, 1, 2, 2, 0, 0, 0, 0, false});
    // x00*1 + x02*2 + x20*3 + x22*4 = 1 + 6 + 21 + 36
    check_f32(run1(n, {&x, &w}, DType::f32, {1, 1, 1, 1}), {1, 1, 1, 1}, {64});
  }
}

TEST_CASE("ref Conv: hand-computed channels and groups") {
  SUBCASE("two input channels summed") {
    Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    Tensor w = f32({2, 2, 1, 1}, {1, -1, 2, 0.5f});
    Node n = conv_node({1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false});
    // oc0 = c0 - c1 = -4; oc1 = 2*c0 + 0.5*c1.
    check_f32(run1(n, {&x, &w}, DType::f32, {1, 2, 2, 2}), {1, 2, 2, 2},
              {-4, -4, -4, -4, 4.5f, 7, 9.5f, 12});
  }
  SUBCASE("group 2, two outputs per group") {
    Tensor x = f32({1, 2, 1, 1}, {2, 3});
    Tensor w = f32({4, 1, 1, 1}, {1, 2, 3, 4});
    Tensor b = f32({4}, {0, 0, 0, 100});
    Node n = conv_node({1, 2, 1, 1, 4, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true});
    // oc 0,1 see channel 0 (=2); oc 2,3 see channel 1 (=3).
    check_f32(run1(n, {&x, &w, &b}, DType::f32, {1, 4, 1, 1}), {1, 4, 1, 1}, {2, 4, 9, 112});
  }
  SUBCASE("batch of 2") {
    Tensor x = f32({2, 1, 1, 2}, {1, 2, 3, 4});
    Tensor w = f32({1, 1, 1, 2}, {10, 1});
    Node n = conv_node({2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, false});
    check_f32(run1(n, {&x, &w}, DType::f32, {2, 1, 1, 1}), {2, 1, 1, 1}, {12, 34});
  }
}

TEST_CASE("ref Conv: swept shapes against the direct formula") {
  const ConvCase cases[] = {
      // n  c  h   w   m  g  kh kw sh sw dh dw pt pl pb pr bias
      {1, 3, 7, 9, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true},
      {2, 5, 11, 10, 7, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true},   // stride 2, batch 2
      {1, 4, 10, 12, 3, 1, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, false},  // dilation 2
      {1, 3, 8, 7, 6, 1, 3, 2, 1, 2, 1, 1, 0, 2, 1, 0, true},     // asymmetric pads
      {1, 6, 9, 9, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true},     // 3 groups
      {1, 7, 10, 10, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true},   // depthwise, stride 2
      {1, 5, 6, 8, 10, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},   // depthwise multiplier 2
      {1, 3, 5, 5, 4, 1, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0, true},     // 1x1 output
      {1, 13, 9, 9, 17, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, true},   // 1x1 kernel, stride 2
      {1, 2, 3, 3, 2, 1, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3, true},     // windows fully in padding
      {1, 2, 6, 7, 3, 1, 3, 2, 3, 2, 3, 2, 1, 0, 2, 3, true},     // mixed stride/dilation
      {1, 3, 17, 17, 5, 1, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, true},   // ResNet-like stem
      {1, 4, 6, 11, 2, 2, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, true},    // 1x3 kernel, groups
      {1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true},     // 1x1 everything
      {1, 3, 4, 4, 2, 1, 3, 3, 5, 5, 1, 1, 1, 1, 1, 1, true},     // stride > kernel
  };
  uint64_t seed = 1;
  for (const ConvCase& p : cases) check_conv_against_naive(p, seed += 10);

  // Random configurations (channels not multiples of anything, odd sizes).
  Rng r(42);
  for (int i = 0; i < 40; ++i) {
    ConvCase p{};
    p.n = r.pick(1, 2);
    p.g = r.pick(1, 3);
    p.c = p.g * r.pick(1, 4);
    p.m = p.g * r.pick(1, 4);
    p.kh = r.pick(1, 4), p.kw = r.pick(1, 4);
    p.sh = r.pick(1, 3), p.sw = r.pick(1, 3);
    p.dh = r.pick(1, 2), p.dw = r.pick(1, 2);
    p.pt = r.pick(0, 2), p.pl = r.pick(0, 2), p.pb = r.pick(0, 2), p.pr = r.pick(0, 2);
    p.h = r.pick(1, 9) + p.dh * (p.kh - 1);
    p.w = r.pick(1, 9) + p.dw * (p.kw - 1);
    p.bias = r.pick(0, 1) == 1;
    check_conv_against_naive(p, 1000 + uint64_t(i));
  }
}

TEST_CASE("ref Conv: 1x64x56x56 with 64 3x3 filters is fast and right") {
  const ConvCase p{1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true};
  Tensor x = random_f32({1, 64, 56, 56}, 7);
  Tensor w = random_f32({64, 64, 3, 3}, 8);
  Tensor b = random_f32({64}, 9);
  auto t0 = std::chrono::steady_clock::now();
  Tensor y = run1(conv_node(p), {&x, &w, &b}, DType::f32, {1, 64, 56, 56});
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("Conv 1x64x56x56 k3 took " << sec * 1e3 << " ms");
  // ~0.23 GFLOP; generous bound for a loaded shared machine (x20 in sanitizer builds).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  sec /= 20;
#endif
#endif
  CHECK(sec < 1.0);
  // Spot-check a corner, an edge and an interior element.
  const int64_t pts[][3] = {{0, 0, 0}, {5, 0, 31}, {63, 55, 55}, {17, 23, 40}};
  for (auto& q : pts) {
    const int64_t m = q[0], oh = q[1], ow = q[2];
    double s = b.data<float>()[m];
    for (int64_t c = 0; c < 64; ++c)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t ih = oh + i - 1, iw = ow + j - 1;
          if (ih < 0 || iw < 0 || ih >= 56 || iw >= 56) continue;
          s += double(x.data<float>()[(c * 56 + ih) * 56 + iw]) *
               w.data<float>()[((m * 64 + c) * 3 + i) * 3 + j];
        }
    CHECK(y.data<float>()[(m * 56 + oh) * 56 + ow] == doctest::Approx(s).epsilon(1e-4));
  }
}

TEST_CASE("ref Conv: errors name the node") {
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Node n = conv_node({1, 1, 3, 3, 1, 1, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, false});
  n.name = "conv_x";
  SUBCASE("i64 input") {
    Tensor xi = i64({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    check_error([&] { run1(n, {&xi, &w}, DType::f32, {1, 1, 2, 2}); }, Code::unsupported, "conv_x");
  }
  SUBCASE("3-D convolution") {
    Tensor x3 = f32({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    Tensor w3 = f32({1, 1, 1, 1, 1}, {1});
    check_error(
        [&] {
          run1(n, {&x3, &w3}, DType::f32, {1, 1, 2, 2, 2});
        },
        Code::unsupported, "conv_x");
  }
  SUBCASE("auto_pad left on the node") {
    n.attrs["auto_pad"] = attr_s("SAME_UPPER");
    check_error(
        [&] {
          run1(n, {&x, &w}, DType::f32, {1, 1, 2, 2});
        },
        Code::internal, "conv_x", "auto_pad");
  }
  SUBCASE("output shape inconsistent with attributes") {
    check_error([&] { run1(n, {&x, &w}, DType::f32, {1, 1, 3, 3}); }, Code::internal, "conv_x");
  }
  SUBCASE("missing weights") {
    check_error([&] { run1(n, {&x}, DType::f32, {1, 1, 2, 2}); }, Code::invalid_model, "conv_x");
  }
  SUBCASE("group does not divide channels") {
    n.attrs["group"] = attr_i(2);
    check_error(
        [&] {
          run1(n, {&x, &w}, DType::f32, {1, 1, 2, 2});
        },
        Code::invalid_model, "conv_x");
  }
}

TEST_CASE("ref Conv: fused post-ops (graph/post_ops.h)") {
  // 1x1 conv: oc0 = c0 + 0.5, oc1 = -c1  ->  y = [[1.5, -1.5], [-3, -4]].
  Tensor x = f32({1, 2, 1, 2}, {1, -2, 3, 4});
  Tensor w = f32({2, 2, 1, 1}, {1, 0, 0, -1});
  Tensor b = f32({2}, {0.5f, 0});
  const ConvCase p{1, 2, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true};
  SUBCASE("scale_shift, add, relu") {
    Node n = conv_node(p);
    set_post_ops(n, {"scale_shift", "add", "relu"}, {0, 0, 0}, {0, 0, 0});
    Tensor scale = f32({2}, {2, -1}), shift = f32({2}, {1, 0});
    Tensor res = f32({1, 2, 1, 2}, {1, 1, 1, -10});
    // scale_shift: [[4, -2], [3, 4]]; + residual: [[5, -1], [4, -6]]; relu.
    check_f32(run1(n, {&x, &w, &b, &scale, &shift, &res}, DType::f32, {1, 2, 1, 2}), {1, 2, 1, 2},
              {5, 0, 4, 0});
  }
  SUBCASE("leaky_relu then clip, no bias") {
    Node n = conv_node(p);
    set_post_ops(n, {"leaky_relu", "clip"}, {0.1f, -0.2f}, {0, 1});
    // y = [[1, -2], [-3, -4]] -> [[1, -0.2], [-0.3, -0.4]] -> clip [-0.2, 1].
    check_f32(run1(n, {&x, &w, nullptr}, DType::f32, {1, 2, 1, 2}), {1, 2, 1, 2},
              {1, -0.2f, -0.2f, -0.2f});
  }
  SUBCASE("missing extra input / bad residual shape") {
    Node n = conv_node(p);
    n.name = "conv_pp";
    set_post_ops(n, {"add"}, {0}, {0});
    check_error(
        [&] {
          run1(n, {&x, &w, &b}, DType::f32, {1, 2, 1, 2});
        },
        Code::invalid_model, "conv_pp");
    Tensor r = f32({2, 2}, {1, 2, 3, 4});
    check_error(
        [&] {
          run1(n, {&x, &w, &b, &r}, DType::f32, {1, 2, 1, 2});
        },
        Code::internal, "conv_pp");
  }
}
