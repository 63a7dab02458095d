// The plain C++ fallbacks of runtime/glue_kernels.h (reorder, blocked pooling, blocked concat)
// that plans use where the generated glue kernels refuse a problem: each against the
// reference kernels or convert_layout on NCHW data, on the layouts it is offered for.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "graph/half.h"
#include "jit/layout.h"
#include "runtime/glue_kernels.h"
#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

namespace {

constexpr Layout kAll[] = {Layout::nchw, Layout::nhwc, Layout::nChw8c, Layout::nChw16c};
constexpr Layout kBlocked[] = {Layout::nChw8c, Layout::nChw16c};
// The pooling and concat fallbacks also run nChw16c_bf16 (the bf16 precision's layout).
constexpr Layout kBlockedBf16[] = {Layout::nChw8c, Layout::nChw16c, Layout::nChw16c_bf16};

// x rounded to bf16 values (what a bf16 layout can hold).
Tensor bf16_values(const Tensor& x) {
  Tensor r(DType::f32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    r.data<float>()[i] = bf16_to_float(float_to_bf16(x.data<float>()[i]));
  return r;
}

// Runs every tile of `k` in one call.
void run_kernel(const Kernel& k, const std::vector<const float*>& src,
                const std::vector<float*>& dst) {
  KernelArgs a;
  a.src = src.data();
  a.dst = dst.data();
  k.run_all(a);
}

std::vector<float> to_layout(const Tensor& t, Layout l) {
  std::vector<float> v(size_t(layout_elems(l, t.shape())), -7.f);
  convert_layout(t.data<float>(), Layout::nchw, v.data(), l, t.shape());
  return v;
}

std::vector<float> from_layout(const std::vector<float>& v, Layout l, const Shape& s) {
  std::vector<float> out(size_t(layout_elems(Layout::nchw, s)));
  convert_layout(v.data(), l, out.data(), Layout::nchw, s);
  return out;
}

}  // namespace

TEST_CASE("C++ fallback reorder: every layout pair, pad lanes zeroed") {
  const Shape s{2, 19, 5, 7};  // 19 channels: a partial last block in both blocked layouts
  const Tensor x = random_f32(s, 1);
  for (Layout from : kAll)
    for (Layout to : kAll) {
      CAPTURE(layout_name(from));
      CAPTURE(layout_name(to));
      const std::vector<float> src = to_layout(x, from);
      std::vector<float> dst(size_t(layout_elems(to, s)), 123.f), want = dst;
      convert_layout(src.data(), from, want.data(), to, s);
      run_kernel(*make_reorder_kernel(s, from, to), {src.data()}, {dst.data()});
      CHECK(dst == want);
      CHECK(from_layout(dst, to, s) ==
            std::vector<float>(x.data<float>(), x.data<float>() + x.numel()));
    }
}

TEST_CASE("C++ fallback pooling on blocked layouts matches the reference kernels") {
  const Shape xs{2, 19, 9, 8};
  const Tensor x = random_f32(xs, 2);
  struct Case {
    const char* op;
    std::map<std::string, Attribute> attrs;
    Shape ys;
  };
  const auto window = [](int64_t k, int64_t s, int64_t p) {
    return std::map<std::string, Attribute>{{"kernel_shape", attr_ints({k, k})},
                                            {"strides", attr_ints({s, s})},
                                            {"pads", attr_ints({p, p, p, p})},
                                            {"ceil_mode", attr_i(0)}};
  };
  std::vector<Case> cases = {
      {"MaxPool", window(3, 2, 1), {2, 19, 5, 4}},
      {"AveragePool", window(3, 2, 1), {2, 19, 5, 4}},
      {"AveragePool", window(3, 2, 1), {2, 19, 5, 4}},
      {"GlobalAveragePool", {}, {2, 19, 1, 1}},
      {"GlobalMaxPool", {}, {2, 19, 1, 1}},
      // A stride whose reach does not fit 32-bit displacements: the case the generated
      // kernel refuses (tests/jit/test_glue_pool.cpp) and this fallback runs.
      {"MaxPool",
       {{"kernel_shape", attr_ints({2, 2})},
        {"strides", attr_ints({2, 2147483647})},
        {"pads", attr_ints({0, 0, 0, 0})},
        {"ceil_mode", attr_i(0)}},
       {2, 19, 4, 1}},
  };
  cases[2].attrs["count_include_pad"] = attr_i(1);
  const Tensor xr = bf16_values(x);
  for (const Case& c : cases) {
    const Node n = make_node(c.op, c.attrs);
    for (Layout l : kBlockedBf16) {
      // bf16: the reference on the bf16 values; a max is exact, an average rounded once more.
      const bool bf16 = layout_bf16(l);
      const Tensor& in = bf16 ? xr : x;
      const Tensor want = run(n, {&in}, {{DType::f32, c.ys}})[0];
      CAPTURE(c.op);
      CAPTURE(shape_str(c.ys));
      CAPTURE(layout_name(l));
      auto k = make_blocked_pool_kernel(n, xs, c.ys, l);
      REQUIRE(k);
      CHECK((k->name().find("_bf16_") != std::string::npos) == bf16);
      const std::vector<float> src = to_layout(in, l);
      std::vector<float> dst(size_t(layout_elems(l, c.ys)), 99.f);
      run_kernel(*k, {src.data()}, {dst.data()});
      const std::vector<float> got = from_layout(dst, l, c.ys);
      const bool max = std::string(c.op).find("Max") != std::string::npos;
      for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        const float w = want.data<float>()[i];
        if (bf16 && max)
          CHECK(got[i] == w);
        else  // float vs double sums (+ bf16's rounding of the average)
          CHECK(std::fabs(got[i] - w) <= 1e-5f + (bf16 ? std::fabs(w) / 256 : 0.f));
      }
    }
  }
  CHECK_FALSE(make_blocked_pool_kernel(make_node("Relu"), xs, xs, Layout::nChw8c));
  CHECK_FALSE(
      make_blocked_pool_kernel(make_node("GlobalMaxPool"), xs, {2, 19, 1, 1}, Layout::nchw));
}

TEST_CASE("C++ max pooling on nChw16c_u8 (a uint8 grid's bytes) matches the reference") {
  // Values on a uint8 grid (scale 0.05, zero point 100; 19 channels: a partial block whose pad
  // bytes the kernel ignores); the max of grid values is one, so the bytes are exact.
  const Shape xs{2, 19, 9, 8};
  const U8Quant q{0.05f, 100.f};
  Tensor x(DType::f32, xs);
  uint32_t r = 12345;
  for (int64_t i = 0; i < x.numel(); ++i) {
    r = r * 1664525u + 1013904223u;
    x.data<float>()[i] = (float(r >> 24) - q.zero) * q.scale;
  }
  for (const auto& [k, s, p, ys] : std::vector<std::tuple<int64_t, int64_t, int64_t, Shape>>{
           {3, 2, 1, {2, 19, 5, 4}}, {2, 2, 0, {2, 19, 4, 4}}, {3, 1, 1, {2, 19, 9, 8}}}) {
    const Node n = make_node("MaxPool", {{"kernel_shape", attr_ints({k, k})},
                                         {"strides", attr_ints({s, s})},
                                         {"pads", attr_ints({p, p, p, p})}});
    const Tensor want = run(n, {&x}, {{DType::f32, ys}})[0];
    auto kern = make_blocked_pool_kernel(n, xs, ys, Layout::nChw16c_u8);
    REQUIRE(kern);
    CHECK(kern->name().find("_u8_") != std::string::npos);
    std::vector<uint8_t> src(size_t(layout_bytes(Layout::nChw16c_u8, xs)), 0xff);  // pad: 255
    for (int64_t b = 0; b < xs[0]; ++b)
      for (int64_t c = 0; c < xs[1]; ++c)
        for (int64_t h = 0; h < xs[2]; ++h)
          for (int64_t w = 0; w < xs[3]; ++w)
            src[size_t(layout_offset(Layout::nChw16c_u8, xs, b, c, h, w))] = uint8_t(std::lround(
                x.data<float>()[((b * xs[1] + c) * xs[2] + h) * xs[3] + w] / q.scale + q.zero));
    std::vector<uint8_t> dst(size_t(layout_bytes(Layout::nChw16c_u8, ys)), 7);
    run_kernel(*kern, {reinterpret_cast<const float*>(src.data())},
               {reinterpret_cast<float*>(dst.data())});
    Tensor got(DType::f32, ys);
    convert_layout(dst.data(), Layout::nChw16c_u8, got.data<float>(), Layout::nchw, ys, &q);
    for (int64_t i = 0; i < got.numel(); ++i)
      REQUIRE(got.data<float>()[i] == want.data<float>()[i]);
  }
  // An average leaves the grid: not offered on bytes.
  CHECK_FALSE(
      make_blocked_pool_kernel(make_node("AveragePool", {{"kernel_shape", attr_ints({2, 2})}}), xs,
                               {2, 19, 8, 7}, Layout::nChw16c_u8));
}

TEST_CASE("C++ fallback concat on blocked layouts: whole-block inputs only") {
  for (Layout l : kBlockedBf16) {
    CAPTURE(layout_name(l));
    const int64_t b = layout_block(l);
    const Shape as{2, b, 3, 5}, bs{2, 2 * b, 3, 5}, ys{2, 3 * b, 3, 5};
    // (bf16 values, so that a bf16 layout holds them exactly: the copy must be exact.)
    const Tensor xa = bf16_values(random_f32(as, 3)), xb = bf16_values(random_f32(bs, 4));
    REQUIRE(concat_blocked_ok({as, bs}, l));
    const std::vector<float> a = to_layout(xa, l), bv = to_layout(xb, l);
    std::vector<float> dst(size_t(layout_elems(l, ys)), 5.f);
    run_kernel(*make_blocked_concat_kernel({as, bs}, l), {a.data(), bv.data()}, {dst.data()});
    const std::vector<float> got = from_layout(dst, l, ys);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 3 * b; ++c)
        for (int64_t p = 0; p < 15; ++p) {
          const float want = c < b ? xa.data<float>()[(n * b + c) * 15 + p]
                                   : xb.data<float>()[(n * 2 * b + c - b) * 15 + p];
          CHECK(got[size_t((n * 3 * b + c) * 15 + p)] == want);
        }
    CHECK_FALSE(concat_blocked_ok({{2, b + 1, 3, 5}, bs}, l));  // a partial block
  }
  CHECK_FALSE(concat_blocked_ok({{2, 16, 3, 5}}, Layout::nhwc));
  CHECK_FALSE(concat_blocked_ok({}, Layout::nChw8c));
}
