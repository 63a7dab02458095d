// Reference MaxPool / AveragePool / global pooling: hand-computed cases (checked once against
// PyTorch where PyTorch can express them), then sweeps against a direct per-output formula.
#include <limits>

#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

namespace {

struct PoolCase {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool ceil;
  bool include_pad;
};

Node pool_node(const char* op, const PoolCase& p) {
  Node n = make_node(op, {{"kernel_shape", attr_ints({p.kh, p.kw})},
                          {"strides", attr_ints({p.sh, p.sw})},
                          {"pads", attr_ints({p.pt, p.pl, p.pb, p.pr})},
                          {"ceil_mode", attr_i(p.ceil)}});
  if (p.dh != 1 || p.dw != 1) n.attrs["dilations"] = attr_ints({p.dh, p.dw});
  if (std::string(op) == "AveragePool") n.attrs["count_include_pad"] = attr_i(p.include_pad);
  return n;
}

// Output size with PyTorch's ceil-mode rule: the last window must start inside the input or
// the begin padding.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
  const int64_t span = in + pb + pe - d * (k - 1) - 1;
  int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (o - 1) * s >= in + pb) --o;
  return o;
}

// `op` of case p on x must give `want` of shape ys.
void check_pool(const char* op, const PoolCase& p, const Tensor& x, const Shape& ys,
                const std::vector<float>& want) {
  check_f32(run1(pool_node(op, p), {&x}, DType::f32, ys), ys, want);
}

// AveragePool of case p on x, with count_include_pad 1 and 0.
void check_avg(PoolCase p, const Tensor& x, const Shape& ys, const std::vector<float>& with_pad,
               const std::vector<float>& without_pad) {
  p.include_pad = true;
  check_pool("AveragePool", p, x, ys, with_pad);
  p.include_pad = false;
  check_pool("AveragePool", p, x, ys, without_pad);
}

Tensor one_to(int64_t n, Shape s) {
  std::vector<float> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(float(i));
  return f32(std::move(s), v);
}

void check_max_against_naive(const PoolCase& p, uint64_t seed) {
  CAPTURE(p.h);
  CAPTURE(p.w);
  const std::string window = window_str(p);
  CAPTURE(window);
  CAPTURE(p.ceil);
  const int64_t OH = pool_out(p.h, p.kh, p.sh, p.dh, p.pt, p.pb, p.ceil);
  const int64_t OW = pool_out(p.w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil);
  Tensor x = random_f32({p.n, p.c, p.h, p.w}, seed, -5.f, -1.f);  // all negative: pads != 0
  Tensor y = run1(pool_node("MaxPool", p), {&x}, DType::f32, {p.n, p.c, OH, OW});
  int bad = 0;
  for (int64_t nc = 0; nc < p.n * p.c; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ih = oh * p.sh - p.pt + i * p.dh, iw = ow * p.sw - p.pl + j * p.dw;
            if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w)
              m = std::max(m, x.data<float>()[(nc * p.h + ih) * p.w + iw]);
          }
        if (y.data<float>()[(nc * OH + oh) * OW + ow] != m && bad++ < 5)
          FAIL_CHECK("y[" << nc << "," << oh << "," << ow << "]");
      }
  CHECK(bad == 0);
}

// PyTorch's avg_pool2d definition (dilation 1): the divisor is the window clipped to the padded
// extent (count_include_pad) or to the input.
void check_avg_against_naive(const PoolCase& p, uint64_t seed) {
  CAPTURE(p.h);
  CAPTURE(p.w);
  const std::string window = window_str(p);
  CAPTURE(window);
  CAPTURE(p.ceil);
  CAPTURE(p.include_pad);
  const int64_t OH = pool_out(p.h, p.kh, p.sh, 1, p.pt, p.pb, p.ceil);
  const int64_t OW = pool_out(p.w, p.kw, p.sw, 1, p.pl, p.pr, p.ceil);
  Tensor x = random_f32({p.n, p.c, p.h, p.w}, seed);
  Tensor y = run1(pool_node("AveragePool", p), {&x}, DType::f32, {p.n, p.c, OH, OW});
  int bad = 0;
  for (int64_t nc = 0; nc < p.n * p.c; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * p.sh - p.pt, w0 = ow * p.sw - p.pl;
        int64_t h1 = std::min(h0 + p.kh, p.h + p.pb), w1 = std::min(w0 + p.kw, p.w + p.pr);
        const int64_t padded = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, p.h), w1 = std::min(w1, p.w);
        double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += x.data<float>()[(nc * p.h + ih) * p.w + iw];
        const double want = s / double(p.include_pad ? padded : (h1 - h0) * (w1 - w0));
        const float got = y.data<float>()[(nc * OH + oh) * OW + ow];
        if (std::fabs(got - want) > 1e-6 && bad++ < 5)
          FAIL_CHECK("y[" << nc << "," << oh << "," << ow << "] = " << got << ", want " << want);
      }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ref MaxPool: hand-computed") {
  SUBCASE("2x2 stride 2") {
    Tensor x = one_to(16, {1, 1, 4, 4});
    PoolCase p{1, 1, 4, 4, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false, false};
    check_pool("MaxPool", p, x, {1, 1, 2, 2}, {6, 8, 14, 16});
  }
  SUBCASE("padded cells are ignored, not zeros") {
    Tensor x = one_to(16, {1, 1, 4, 4});
    for (int64_t i = 0; i < 16; ++i) x.data<float>()[i] *= -1;
    PoolCase p{1, 1, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false};
    check_pool("MaxPool", p, x, {1, 1, 2, 2}, {-1, -2, -5, -6});
  }
  SUBCASE("ceil_mode: partial last windows") {
    Tensor x = one_to(25, {1, 1, 5, 5});
    PoolCase p{1, 1, 5, 5, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, true, false};
    check_pool("MaxPool", p, x, {1, 1, 3, 3}, {7, 9, 10, 17, 19, 20, 22, 24, 25});
  }
  SUBCASE("ceil_mode window past the padding (PyTorch: [2, 4, 6, 6])") {
    Tensor x = one_to(6, {1, 1, 1, 6});
    PoolCase p{1, 1, 1, 6, 1, 3, 1, 2, 1, 1, 0, 1, 0, 1, true, false};
    check_pool("MaxPool", p, x, {1, 1, 1, 4}, {2, 4, 6, 6});
  }
  SUBCASE("dilation 2, two channels") {
    Tensor x = one_to(32, {1, 2, 4, 4});
    x.data<float>()[16] = 100;  // channel 1, (0,0)
    PoolCase p{1, 2, 4, 4, 2, 2, 1, 1, 2, 2, 0, 0, 0, 0, false, false};
    // Taps (i,j),(i,j+2),(i+2,j),(i+2,j+2): the max is the (i+2, j+2) tap.
    check_pool("MaxPool", p, x, {1, 2, 2, 2}, {11, 12, 15, 16, 100, 28, 31, 32});
  }
}

TEST_CASE("ref AveragePool: hand-computed") {
  Tensor x = one_to(9, {1, 1, 3, 3});
  SUBCASE("2x2 stride 1") {
    PoolCase p{1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, false, false};
    check_pool("AveragePool", p, x, {1, 1, 2, 2}, {3, 4, 6, 7});
  }
  SUBCASE("pad 1, 3x3 stride 2, count_include_pad 0 and 1") {
    PoolCase p{1, 1, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false};
    check_avg(p, x, {1, 1, 2, 2}, {12.f / 9, 16.f / 9, 24.f / 9, 28.f / 9}, {3, 4, 6, 7});
  }
  SUBCASE("pad 1, 2x2 stride 2, ceil, include pad (PyTorch: .25 1.25 2.75 7)") {
    PoolCase p{1, 1, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, true, true};
    check_pool("AveragePool", p, x, {1, 1, 2, 2}, {0.25f, 1.25f, 2.75f, 7});
  }
  SUBCASE("ceil_mode window past the padding is not counted") {
    Tensor r = one_to(6, {1, 1, 1, 6});
    PoolCase p{1, 1, 1, 6, 1, 3, 1, 2, 1, 1, 0, 1, 0, 1, true, true};
    // Last window covers cols 5 (real), 6 (pad), 7 (beyond the padding): 6 / 2.
    check_avg(p, r, {1, 1, 1, 4}, {1, 3, 5, 3}, {1.5f, 3, 5, 6});
  }
  SUBCASE("asymmetric pads with ceil_mode") {
    Tensor r = one_to(5, {1, 1, 1, 5});
    PoolCase p{1, 1, 1, 5, 1, 3, 1, 2, 1, 1, 0, 1, 0, 0, true, true};
    // Windows: cols -1..1, 1..3, 3..5; padded extent [-1, 5).
    check_avg(p, r, {1, 1, 1, 3}, {1, 3, 4.5f}, {1.5f, 3, 4.5f});
  }
  SUBCASE("dilation 2 with padding") {
    Tensor r = one_to(5, {1, 1, 1, 5});
    PoolCase p{1, 1, 1, 5, 1, 2, 1, 2, 1, 2, 0, 1, 0, 1, false, false};
    // span = 5+2-3 = 4 -> 3 outputs; taps (-1,1), (1,3), (3,5).
    check_avg(p, r, {1, 1, 1, 3}, {1, 3, 2}, {2, 3, 4});
  }
}

TEST_CASE("ref MaxPool / AveragePool: swept shapes against the direct formula") {
  const PoolCase fixed[] = {
      // n c  h  w  kh kw sh sw dh dw pt pl pb pr ceil incl
      {1, 3, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false},  // ResNet maxpool
      {2, 5, 8, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true},
      {1, 2, 6, 6, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, true, false},
      {1, 2, 5, 5, 3, 2, 2, 3, 1, 1, 1, 0, 2, 1, true, true},    // asymmetric pads
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true},   // 1x1
      {1, 3, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 0, 0, false, false},  // 1x1 output
      {1, 2, 7, 7, 3, 3, 3, 3, 1, 1, 0, 0, 0, 0, true, true},    // ceil windows past edge
  };
  uint64_t seed = 5;
  for (const PoolCase& p : fixed) {
    check_max_against_naive(p, seed++);
    check_avg_against_naive(p, seed++);
    PoolCase q = p;
    q.include_pad = !p.include_pad;
    check_avg_against_naive(q, seed++);
  }
  Rng r(7);
  for (int i = 0; i < 60; ++i) {
    PoolCase p{};
    p.n = r.pick(1, 2), p.c = r.pick(1, 3);
    p.kh = r.pick(1, 4), p.kw = r.pick(1, 4);
    p.sh = r.pick(1, 3), p.sw = r.pick(1, 3);
    p.pt = r.pick(0, p.kh - 1), p.pb = r.pick(0, p.kh - 1);
    p.pl = r.pick(0, p.kw - 1), p.pr = r.pick(0, p.kw - 1);
    p.ceil = r.pick(0, 1) == 1;
    p.include_pad = r.pick(0, 1) == 1;
    p.dh = p.dw = 1;
    p.h = r.pick(p.kh, p.kh + 8), p.w = r.pick(p.kw, p.kw + 8);
    check_avg_against_naive(p, 100 + uint64_t(i));
    p.dh = r.pick(1, 2), p.dw = r.pick(1, 2);
    p.h += (p.dh - 1) * (p.kh - 1), p.w += (p.dw - 1) * (p.kw - 1);
    check_max_against_naive(p, 200 + uint64_t(i));
  }
}

TEST_CASE("ref GlobalAveragePool / GlobalMaxPool: hand-computed") {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, -1, -5, 0, 2});
  Node gap = make_node("GlobalAveragePool"), gmp = make_node("GlobalMaxPool");
  check_f32(run1(gap, {&x}, DType::f32, {1, 2, 1, 1}), {1, 2, 1, 1}, {2.5f, -1});
  check_f32(run1(gmp, {&x}, DType::f32, {1, 2, 1, 1}), {1, 2, 1, 1}, {4, 2});
  Tensor x3 = f32({2, 1, 3}, {1, 5, 3, -2, -4, -9});
  check_f32(run1(gap, {&x3}, DType::f32, {2, 1, 1}), {2, 1, 1}, {3, -5});
  check_f32(run1(gmp, {&x3}, DType::f32, {2, 1, 1}), {2, 1, 1}, {5, -2});
  Tensor x5 = f32({1, 1, 2, 1, 2}, {1, 2, 3, 6});
  check_f32(run1(gap, {&x5}, DType::f32, {1, 1, 1, 1, 1}), {1, 1, 1, 1, 1}, {3});
  check_f32(run1(gmp, {&x5}, DType::f32, {1, 1, 1, 1, 1}), {1, 1, 1, 1, 1}, {6});
}

TEST_CASE("ref pooling: errors name the node") {
  Tensor x = one_to(9, {1, 1, 3, 3});
  PoolCase p{1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, false, false};
  Node n = pool_node("MaxPool", p);
  n.name = "pool7";
  SUBCASE("i64 input") {
    Tensor xi = i64({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    check_error([&] { run1(n, {&xi}, DType::f32, {1, 1, 2, 2}); }, Code::unsupported, "pool7");
  }
  SUBCASE("output larger than the ceil-mode size") {
    check_error([&] { run1(n, {&x}, DType::f32, {1, 1, 3, 3}); }, Code::internal, "pool7");
  }
  SUBCASE("Indices output") {
    check_error(
        [&] {
          run(n, {&x}, {{DType::f32, {1, 1, 2, 2}}, {DType::i64, {1, 1, 2, 2}}});
        },
        Code::unsupported, "pool7");
  }
  SUBCASE("missing kernel_shape") {
    n.attrs.erase("kernel_shape");
    check_error([&] { run1(n, {&x}, DType::f32, {1, 1, 2, 2}); }, Code::invalid_model, "pool7");
  }
  SUBCASE("global pool on rank 2") {
    Node g = make_node("GlobalAveragePool", {}, "gp");
    Tensor x2 = f32({1, 2}, {1, 2});
    check_error([&] { run1(g, {&x2}, DType::f32, {1, 2}); }, Code::invalid_model, "gp");
  }
}
