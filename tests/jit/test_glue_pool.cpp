// Tests of the asmjit pooling kernels against the scalar reference kernels
// (find_ref_kernel("MaxPool") etc., fed a hand-built Node with explicit attributes) on NCHW
// data; the kernel runs on nhwc / nChw8c / nChw16c copies made by convert_layout, and its
// output is converted back. Both ISA paths.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/half.h"
#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

constexpr Layout kPoolLayouts[] = {Layout::nhwc, Layout::nChw8c, Layout::nChw16c};

Node pool_node(const PoolProblem& p, bool ceil_mode) {
  Node n;
  n.name = "pool";
  if (p.global) {
    n.op = p.max ? "GlobalMaxPool" : "GlobalAveragePool";
    return n;
  }
  n.op = p.max ? "MaxPool" : "AveragePool";
  n.attrs["kernel_shape"] = attr_ints({p.kh, p.kw});
  n.attrs["strides"] = attr_ints({p.sh, p.sw});
  n.attrs["pads"] = attr_ints({p.pt, p.pl, p.pb, p.pr});
  n.attrs["dilations"] = attr_ints({p.dh, p.dw});
  n.attrs["ceil_mode"] = attr_i(ceil_mode);
  if (!p.max) n.attrs["count_include_pad"] = attr_i(p.count_include_pad);
  return n;
}

// Output size, PyTorch's rule: ceil mode drops a last window that would start in the end
// padding.
int64_t out_size(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d, bool ceil) {
  const int64_t span = in + pb + pe - (d * (k - 1) + 1);
  int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (o - 1) * s >= in + pb) --o;
  return o;
}

struct Case {
  int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool ceil;
};

// Case `c` on input `s`; kind 0: max, 1: average without the padding, 2: with it. The output
// size is out_size's (< 1 when the input is too small for the window).
PoolProblem windowed(const Case& c, const Shape& s, int kind) {
  PoolProblem p;
  p.max = kind == 0;
  p.count_include_pad = kind == 2;
  p.kh = c.kh, p.kw = c.kw, p.sh = c.sh, p.sw = c.sw, p.dh = c.dh, p.dw = c.dw;
  p.pt = c.pt, p.pl = c.pl, p.pb = c.pb, p.pr = c.pr;
  p.src = s;
  p.dst = {s[0], s[1], out_size(s[2], c.pt, c.pb, c.kh, c.sh, c.dh, c.ceil),
           out_size(s[3], c.pl, c.pr, c.kw, c.sw, c.dw, c.ceil)};
  return p;
}

// ResNet's stem pooling window (3x3, stride 2, pad 1) on input s.
PoolProblem stem_window(const Shape& s, int kind = 0) {
  return windowed({3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false}, s, kind);
}

// Checks one problem on one ISA and layout. Max pooling must match bit for bit (it only
// selects values; NaN must stay NaN). Average: the kernel sums in float in tap order and
// multiplies by the rounded 1/count, the reference sums in double and divides, so
// |got - ref| <= (K + 2) * 2^-24 * max|x|, K the window size (the float summation bound
// (K-1) u sum|x| divided by count <= K, plus the reciprocal's and the product's roundings).
void check_pool(const PoolProblem& p, bool ceil_mode, Layout l, Isa isa, uint32_t seed,
                const std::vector<size_t>& nan_at = {}) {
  CAPTURE(p.str());
  CAPTURE(std::string(layout_name(l)));
  CAPTURE(std::string(isa_name(isa)));
  std::string why;
  auto k = create_pool_kernel(p, l, isa, &why);
  REQUIRE_MESSAGE(k, why);
  Tensor x(DType::f32, p.src), y(DType::f32, p.dst);
  {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-4.f, 4.f);
    float* xp = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) xp[i] = d(rng);
    for (size_t i : nan_at) xp[i % size_t(x.numel())] = std::numeric_limits<float>::quiet_NaN();
  }
  Node node = pool_node(p, ceil_mode);
  find_ref_kernel(node.op)(node, {&x}, {&y});

  GuardedBuf src(size_t(layout_elems(l, p.src))), dst(size_t(layout_elems(l, p.dst)));
  src.random(seed + 1, -1e3f, 1e3f);  // pad lanes: finite garbage the kernel must ignore
  convert_layout(x.data<float>(), Layout::nchw, src.data(), l, p.src);
  // Keep pad lanes garbage (convert_layout zeroed them).
  if (layout_block(l) > 1)
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == 0.f) src[i] = 777.f;
  dst.fill(-12345.f);
  test::run_split(*k, {src.data()}, {dst.data()});
  std::vector<float> got(size_t(y.numel()));
  convert_layout(dst.data(), l, got.data(), Layout::nchw, p.dst);

  const int64_t K = p.global ? p.src[2] * p.src[3] : p.kh * p.kw;
  const double tol = p.max ? 0.0 : double(K + 2) * 0x1p-24 * 4.0;
  const float* want = y.data<float>();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                        : std::fabs(double(got[i]) - double(want[i])) <= tol;
    if (!ok && ++bad <= 3)
      CHECK_MESSAGE(ok, "output " << i << ": got " << got[i] << " want " << want[i]);
  }
  CHECK(bad == 0);
  // Blocked outputs: pad lanes are zero.
  const int64_t B = layout_block(l), C = p.dst[1];
  if (B > 1 && C % B) {
    int nonzero = 0;
    const int64_t CB = round_up(C, B) / B, HWo = p.dst[2] * p.dst[3];
    for (int64_t n = 0; n < p.dst[0]; ++n)
      for (int64_t px = 0; px < HWo; ++px)
        for (int64_t c = C % B; c < B; ++c)
          nonzero += dst[size_t(((n * CB + CB - 1) * HWo + px) * B + c)] != 0.f;
    CHECK_MESSAGE(nonzero == 0, nonzero << " pad lanes not zeroed");
  }
}

// bf16 / u8 layouts (AVX-512): the reference runs on the values the kernel reads (x rounded to
// bf16, or the integers of a uint8 grid with scale 1), so a max must match bit for bit (NaN
// stays NaN); a bf16 average within check_pool's f32 bound plus its store's rounding to
// nearest even, half a bf16 ulp: 2^-8 |y|. Pad lanes of the input are garbage; those of the
// output must be zero.
void check_pool_narrow(const PoolProblem& p, bool ceil_mode, Layout l, uint32_t seed,
                       const std::vector<size_t>& nan_at = {}) {
  CAPTURE(p.str());
  CAPTURE(std::string(layout_name(l)));
  std::string why;
  auto k = create_pool_kernel(p, l, Isa::avx512, &why);
  REQUIRE_MESSAGE(k, why);
  const bool u8 = layout_u8(l);
  const U8Quant q{1.f, 0.f};  // (u8: the integers themselves)
  Tensor x(DType::f32, p.src), y(DType::f32, p.dst);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  float* xp = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i)
    xp[i] = u8 ? float(rng() % 256) : bf16_to_float(float_to_bf16(d(rng)));
  for (size_t i : nan_at) xp[i % size_t(x.numel())] = std::numeric_limits<float>::quiet_NaN();
  Node node = pool_node(p, ceil_mode);
  find_ref_kernel(node.op)(node, {&x}, {&y});

  const int64_t esize = layout_esize(l);
  GuardedBuf src(size_t(layout_bytes(l, p.src) / 4)), dst(size_t(layout_bytes(l, p.dst) / 4));
  convert_layout(x.data<float>(), Layout::nchw, src.data(), l, p.src, u8 ? &q : nullptr);
  // Pad lanes: garbage (convert_layout zeroed them); a max over them would show.
  const int64_t C = p.src[1], CB = round_up(C, 16) / 16;
  auto* sb = reinterpret_cast<uint8_t*>(src.data());
  for (int64_t n = 0; n < p.src[0]; ++n)
    for (int64_t px = 0; px < p.src[2] * p.src[3]; ++px)
      for (int64_t c = C; c < CB * 16; ++c)
        for (int64_t e = 0; e < esize; ++e)
          sb[((((n * CB + CB - 1) * p.src[2] * p.src[3] + px) * 16 + c % 16) * esize) + e] = 0x7b;
  dst.fill(-12345.f);
  test::run_split(*k, {src.data()}, {dst.data()});
  std::vector<float> got(size_t(y.numel()));
  convert_layout(dst.data(), l, got.data(), Layout::nchw, p.dst, u8 ? &q : nullptr);

  const int64_t K = p.global ? p.src[2] * p.src[3] : p.kh * p.kw;
  const double tol = p.max ? 0.0 : double(K + 2) * 0x1p-24 * 4.0;
  const float* want = y.data<float>();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : std::fabs(double(got[i]) - double(want[i])) <=
                              tol + (p.max ? 0.0 : 0x1p-8 * std::fabs(double(want[i])));
    if (!ok && ++bad <= 3)
      CHECK_MESSAGE(ok, "output " << i << ": got " << got[i] << " want " << want[i]);
  }
  CHECK(bad == 0);
  const auto* db = reinterpret_cast<const uint8_t*>(dst.data());
  const int64_t OHW = p.dst[2] * p.dst[3];
  int nonzero = 0;
  for (int64_t n = 0; n < p.dst[0]; ++n)
    for (int64_t px = 0; px < OHW; ++px)
      for (int64_t c = C; c < CB * 16; ++c)
        for (int64_t e = 0; e < esize; ++e)
          nonzero += db[((((n * CB + CB - 1) * OHW + px) * 16 + c % 16) * esize) + e] != 0;
  CHECK_MESSAGE(nonzero == 0, nonzero << " pad lane bytes not zeroed");
}

TEST_CASE("glue pool: windowed max/average against the reference kernels") {
  const std::vector<Case> cases = {
      // kh kw sh sw dh dw pt pl pb pr ceil
      {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false},  // identity window
      {1, 1, 2, 2, 1, 1, 0, 0, 0, 0, false},  // subsampling
      {2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false},
      {2, 2, 2, 2, 1, 1, 0, 0, 0, 0, true},   // odd sizes: ceil adds a clipped window
      {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false},  // ResNet stem
      {3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true},   // GoogLeNet-style ceil mode
      {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},  // Inception branch pool
      {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, true},   // stride 3: windows hanging past the padding
      {3, 2, 2, 3, 1, 1, 2, 0, 1, 1, false},  // asymmetric kernel, stride, pads
      {3, 3, 2, 2, 1, 1, 0, 1, 2, 0, true},   // asymmetric pads + ceil
      {5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false},
      {5, 5, 3, 3, 1, 1, 2, 2, 2, 2, true},
      {5, 3, 2, 1, 1, 1, 1, 0, 2, 1, true},
      {2, 3, 1, 2, 1, 1, 1, 0, 0, 2, false},
  };
  const Shape shapes[] = {{1, 16, 7, 9}, {2, 17, 13, 13}, {1, 3, 5, 4}, {1, 40, 6, 11}};
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases)
      for (const Shape& s : shapes)
        for (int kind = 0; kind < 3; ++kind) {  // max, avg cip0, avg cip1
          const PoolProblem p = windowed(c, s, kind);
          if (p.dst[2] < 1 || p.dst[3] < 1) continue;
          for (Layout l : kPoolLayouts) {
            check_pool(p, c.ceil, l, isa, uint32_t(n));
            ++n;
          }
        }
  MESSAGE("windowed pool cases: " << n);
  if (!testing::has_bf16()) return;  // (recorded: the test binary reports it skipped)
  int narrow = 0;
  for (const Case& c : cases)
    for (const Shape& s :
         {Shape{1, 16, 7, 9}, Shape{2, 17, 13, 13}, Shape{1, 40, 6, 11}, Shape{1, 33, 5, 37}})
      for (int kind = 0; kind < 3; ++kind) {
        const PoolProblem p = windowed(c, s, kind);
        if (p.dst[2] < 1 || p.dst[3] < 1) continue;
        check_pool_narrow(p, c.ceil, Layout::nChw16c_bf16, uint32_t(n + narrow++));
        if (kind == 0) check_pool_narrow(p, c.ceil, Layout::nChw16c_u8, uint32_t(n + narrow++));
      }
  MESSAGE("bf16 / u8 windowed cases: " << narrow);
}

TEST_CASE("glue pool: dilated windows (max; average as in opset 19)") {
  const std::vector<Case> cases = {
      {3, 3, 1, 1, 2, 2, 2, 2, 2, 2, false},
      {3, 3, 2, 2, 2, 2, 1, 1, 1, 1, true},
      {2, 3, 1, 2, 2, 2, 0, 1, 1, 0, false},
      {3, 2, 3, 1, 2, 3, 2, 0, 1, 1, true},
  };
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (const Case& c : cases)
      for (const Shape& s : {Shape{1, 16, 9, 10}, Shape{1, 33, 7, 13}})
        for (int kind = 0; kind < 3; ++kind) {
          const PoolProblem p = windowed(c, s, kind);
          for (Layout l : kPoolLayouts) check_pool(p, c.ceil, l, isa, uint32_t(100 + n++));
        }
  MESSAGE("dilated cases: " << n);
  if (!testing::has_bf16()) return;
  for (const Case& c : cases)
    for (int kind = 0; kind < 3; ++kind) {
      const PoolProblem p = windowed(c, Shape{1, 33, 7, 13}, kind);
      check_pool_narrow(p, c.ceil, Layout::nChw16c_bf16, uint32_t(100 + n++));
      if (kind == 0) check_pool_narrow(p, c.ceil, Layout::nChw16c_u8, uint32_t(100 + n++));
    }
}

TEST_CASE("glue pool: large channel counts (nhwc channel loop)") {
  for (Isa isa : test::glue_isas())
    for (int64_t C : {64, 128, 200, 256, 300})
      for (int kind = 0; kind < 3; ++kind) {
        const PoolProblem p = stem_window({1, C, 9, 8}, kind);
        REQUIRE(p.dst == Shape{1, C, 5, 4});
        for (Layout l : kPoolLayouts) check_pool(p, false, l, isa, uint32_t(C + kind));
      }
}

TEST_CASE("glue pool: NaN propagates through max pooling") {
  for (Isa isa : test::glue_isas()) {
    PoolProblem p = stem_window({1, 20, 9, 9});
    REQUIRE(p.dst == Shape{1, 20, 5, 5});
    for (Layout l : kPoolLayouts) check_pool(p, false, l, isa, 7, {0, 50, 163, 400, 1000, 1619});
    p.global = true;
    p.dst = {1, 20, 1, 1};
    for (Layout l : kPoolLayouts) check_pool(p, false, l, isa, 8, {5, 81 * 3 + 40, 81 * 19});
  }
  if (!testing::has_bf16()) return;
  PoolProblem p = stem_window({1, 20, 9, 9});
  check_pool_narrow(p, false, Layout::nChw16c_bf16, 7, {0, 50, 163, 400, 1000, 1619});
  p.global = true;
  p.dst = {1, 20, 1, 1};
  check_pool_narrow(p, false, Layout::nChw16c_bf16, 8, {5, 81 * 3 + 40, 81 * 19});
}

// A global max or average pool of input s.
PoolProblem global_pool(const Shape& s, bool mx) {
  PoolProblem p;
  p.global = true;
  p.max = mx;
  p.src = s;
  p.dst = {s[0], s[1], 1, 1};
  return p;
}

TEST_CASE("glue pool: global average and max") {
  const Shape shapes[] = {{1, 2048, 7, 7}, {2, 17, 3, 5}, {1, 3, 1, 1},  {1, 64, 13, 13},
                          {2, 100, 2, 2},  {1, 8, 1, 7},  {1, 65, 4, 9}, {1, 1, 5, 5}};
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (const Shape& s : shapes)
      for (bool mx : {true, false})
        for (Layout l : kPoolLayouts) check_pool(global_pool(s, mx), false, l, isa, uint32_t(n++));
  MESSAGE("global cases: " << n);
  if (!testing::has_bf16()) return;
  for (const Shape& s : shapes)
    for (bool mx : {true, false}) {
      check_pool_narrow(global_pool(s, mx), false, Layout::nChw16c_bf16, uint32_t(n++));
      if (mx) check_pool_narrow(global_pool(s, mx), false, Layout::nChw16c_u8, uint32_t(n++));
    }
}

TEST_CASE("glue pool: names and refusals") {
  const PoolProblem p = stem_window({1, 64, 112, 112});
  REQUIRE(p.dst == Shape{1, 64, 56, 56});
  std::string why;
  auto k = create_pool_kernel(p, Layout::nChw16c, Isa::avx2, &why);
  REQUIRE(k);
  CHECK(k->name() == "pool_max_k3s2_f32_nChw16c__avx2");
  CHECK(k->tiles() == 4 * 56);
  CHECK_FALSE(create_pool_kernel(p, Layout::nchw, Isa::avx2, &why));
  CHECK(why.find("nchw") != std::string::npos);
  PoolProblem bad = p;
  bad.dst = {1, 32, 56, 56};
  CHECK_FALSE(create_pool_kernel(bad, Layout::nhwc, Isa::avx2, &why));
  bad = p;
  bad.sh = 0;
  CHECK_FALSE(create_pool_kernel(bad, Layout::nhwc, Isa::avx2, &why));
  bad = p;
  bad.global = true;
  CHECK_FALSE(create_pool_kernel(bad, Layout::nhwc, Isa::avx2, &why));  // 56x56 output
  CHECK_FALSE(create_pool_kernel(p, Layout::nhwc, Isa::scalar, &why));
  // bf16 / u8: AVX-512 only; u8 max only (an average leaves the grid).
  CHECK_FALSE(create_pool_kernel(p, Layout::nChw16c_bf16, Isa::avx2, &why));
  CHECK(why.find("avx512") != std::string::npos);
  CHECK_FALSE(
      create_pool_kernel(stem_window({1, 64, 112, 112}, 1), Layout::nChw16c_u8, Isa::avx512, &why));
  CHECK(why.find("max only") != std::string::npos);
  if (!testing::has_bf16()) return;
  k = create_pool_kernel(p, Layout::nChw16c_bf16, Isa::avx512, &why);
  REQUIRE(k);
  CHECK(k->name() == "pool_max_k3s2_bf16_nChw16c_bf16__avx512");
  k = create_pool_kernel(p, Layout::nChw16c_u8, Isa::avx512, &why);
  REQUIRE(k);
  CHECK(k->name() == "pool_max_k3s2_u8_nChw16c_u8__avx512");
}

// Regression (fuzz_session: an internal error, asmjit could not encode `add rbp, 25769803764`):
// windows whose reach does not fit 32-bit displacements are refused (the reference kernel runs
// them), never half-generated; the largest that fit still generate.
TEST_CASE("glue pool: strides, pads and dilations beyond 32-bit displacements are refused") {
  PoolProblem p;
  p.kh = p.kw = 2;
  p.sh = 2;
  p.sw = 2147483647;
  p.src = {1, 3, 1024, 8};
  p.dst = {1, 3, 512, 1};
  for (Layout l : {Layout::nhwc, Layout::nChw8c}) {
    std::string why;
    CHECK_FALSE(create_pool_kernel(p, l, Isa::avx2, &why));
    CHECK(why.find("32-bit displacements") != std::string::npos);
  }
  PoolProblem q = p;
  q.sw = int64_t(1) << 40;  // products that overflow int64 are refused too
  q.dst = {1, 3, 512, 3};
  std::string why;
  CHECK_FALSE(create_pool_kernel(q, Layout::nhwc, Isa::avx2, &why));
  q = p;
  q.sw = 8;
  q.pl = q.pr = INT64_MAX / 4;
  CHECK_FALSE(create_pool_kernel(q, Layout::nhwc, Isa::avx2, &why));
  q = p;
  q.sw = 8;
  q.dw = INT64_MAX / 2;
  CHECK_FALSE(create_pool_kernel(q, Layout::nhwc, Isa::avx2, &why));
  q = p;
  q.sw = 8;  // an ordinary stride: generated
  CHECK(create_pool_kernel(q, Layout::nhwc, Isa::avx2, &why));
}

}  // namespace
}  // namespace kiln
