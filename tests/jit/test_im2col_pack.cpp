// The im2col family's packing (jit/im2col/im2col_pack.h) against the patch-matrix definition
// written out naively here, and whole kernels on inputs that end (or start) at an unmapped
// page, so any read outside the input crashes the test.
#include <cmath>
#include <limits>

#include "jit/im2col/im2col_conf.h"
#include "jit/im2col/im2col_pack.h"
#include "test_conv_util.h"
#include "test_glue_util.h"

namespace kiln::convtest {
namespace {

// Input value at logical (c, h, w) of one image, or 0 in the padding.
float at(const std::vector<float>& nchw, const ConvProblem& p, int64_t c, int64_t h, int64_t w) {
  if (h < 0 || h >= p.ih || w < 0 || w >= p.iw) return 0.f;
  return nchw[size_t((c * p.ih + h) * p.iw + w)];
}

ConvImpl im2col_impl(Layout l) {
  ConvImpl i;
  i.family = ConvFamily::im2col;
  i.src = i.dst = l;
  return i;
}

// Shapes whose rows exercise every copy path: runs shorter and longer than a vector, runs
// that end at the input's last element, strides 1-3 (2 has its own shuffle code), dilation.
std::vector<Shp> pack_shapes() {
  std::vector<Shp> v;
  for (int64_t iw : {1, 5, 8, 9, 16, 17, 23, 40})
    for (int64_t s : {1, 2, 3}) {
      v.push_back(pad({.ic = 2, .ih = 5, .iw = iw, .oc = 3, .kh = 3, .kw = 3, .sh = s, .sw = s}, 1,
                      1, 1, 1));
      v.push_back(pad({.ic = 3, .ih = 4, .iw = iw, .oc = 3, .kh = 2, .kw = 7, .sh = 1, .sw = s}, 0,
                      3, 1, 2));
      v.push_back(pad({.ic = 1,
                       .ih = 6,
                       .iw = iw + 4,
                       .oc = 3,
                       .kh = 3,
                       .kw = 3,
                       .sh = s,
                       .sw = s,
                       .dh = 2,
                       .dw = 2},
                      2, 0, 0, 2));
    }
  // Unpadded windows whose last tap is the input's last element, runs of 7..17 outputs.
  for (int64_t n : {7, 8, 9, 15, 16, 17})
    for (int64_t s : {2, 3}) {
      v.push_back({.ic = 2, .ih = 3, .iw = (n - 1) * s + 1, .oc = 3, .sh = s, .sw = s});
      v.push_back(
          {.ic = 1, .ih = 3, .iw = (n - 1) * s + 3, .oc = 3, .kh = 3, .kw = 3, .sh = s, .sw = s});
    }
  return v;
}

TEST_CASE("im2col packing matches the patch-matrix definition") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint64_t seed = 5000;
  for (Isa isa : isas())
    for (Layout l : {Layout::nchw, Layout::nhwc})
      for (const Shp& s : pack_shapes()) {
        const ConvProblem p = problem(s);
        if (p.oh < 1 || p.ow < 1) continue;  // the window does not fit this width
        auto c = im2col::init_im2col_conf(p, im2col_impl(l), isa);
        REQUIRE_MESSAGE(c, p.str() << ": " << c.reason);
        im2col::Im2colConf cf = *c.conf;
        cf.no_copy = false;
        const Tensor x = random_tensor({1, p.ic, p.ih, p.iw}, seed++);
        const std::vector<float> nchw(x.data<float>(), x.data<float>() + x.numel());
        const std::vector<float> img = to_layout(x, l);
        // Every range of output pixels [pix0, pix0 + npix) that starts at 0, in the middle or
        // ends at the last pixel.
        const int64_t pix = p.oh * p.ow;
        for (int64_t pix0 : {int64_t(0), pix / 3, pix - 1})
          for (int64_t npix : {int64_t(1), pix - pix0, (pix - pix0 + 1) / 2}) {
            if (npix < 1 || pix0 + npix > pix) continue;
            INFO(p.str() << " " << layout_name(l) << " " << isa_name(isa) << " pixels " << pix0
                         << " + " << npix);
            // Two copies of the input: consecutive GuardedBufs alternate between ending and
            // starting at an unmapped page.
            test::GuardedBuf buf0(img.size()), buf1(img.size());
            for (test::GuardedBuf* in : {&buf0, &buf1}) {
              std::copy(img.begin(), img.end(), in->data());
              int64_t bad = 0, touched = 0;
              if (l == Layout::nhwc) {
                cf.lda = cf.k + 5;  // any stride: the 5 floats after each row stay untouched
                std::vector<float> out(size_t(npix * cf.lda), nan);
                im2col::pack_rows_nhwc(cf, in->data(), pix0, npix, out.data());
                for (int64_t r = 0; r < npix; ++r) {
                  const int64_t oh = (pix0 + r) / p.ow, ow = (pix0 + r) % p.ow;
                  for (int64_t kh = 0; kh < p.kh; ++kh)
                    for (int64_t kw = 0; kw < p.kw; ++kw)
                      for (int64_t ic = 0; ic < p.ic; ++ic) {
                        const float want = at(nchw, p, ic, oh * p.sh - p.pt + kh * p.dh,
                                              ow * p.sw - p.pl + kw * p.dw);
                        const float got = out[size_t(r * cf.lda + (kh * p.kw + kw) * p.ic + ic)];
                        bad += !(got == want);
                      }
                  for (int64_t j = cf.k; j < cf.lda; ++j)
                    touched += !std::isnan(out[size_t(r * cf.lda + j)]);
                }
              } else {
                const int64_t padded = round_up(npix, cf.simd);
                cf.ldb = padded + 3;
                std::vector<float> out(size_t(cf.k * cf.ldb), nan);
                im2col::pack_cols_nchw(cf, in->data(), pix0, npix, out.data());
                for (int64_t ic = 0; ic < p.ic; ++ic)
                  for (int64_t kh = 0; kh < p.kh; ++kh)
                    for (int64_t kw = 0; kw < p.kw; ++kw) {
                      const int64_t k = (ic * p.kh + kh) * p.kw + kw;
                      for (int64_t q = 0; q < padded; ++q) {
                        const int64_t oh = (pix0 + q) / p.ow, ow = (pix0 + q) % p.ow;
                        const float want = q < npix
                                               ? at(nchw, p, ic, oh * p.sh - p.pt + kh * p.dh,
                                                    ow * p.sw - p.pl + kw * p.dw)
                                               : 0.f;  // dead lanes of the last vector are zeros
                        bad += !(out[size_t(k * cf.ldb + q)] == want);
                      }
                      for (int64_t q = padded; q < cf.ldb; ++q)
                        touched += !std::isnan(out[size_t(k * cf.ldb + q)]);
                    }
              }
              CHECK(bad == 0);
              CHECK(touched == 0);
            }
          }
      }
}

// Whole kernels reading guarded inputs: NCHW 1x1 kernels read the input planes directly
// (masked last vector), NHWC 1x1 reads pixel rows, stride 2 gathers run to the row ends.
TEST_CASE("im2col conv never reads outside its input") {
  uint64_t seed = 5100;
  const std::vector<Shp> shapes = {
      {.ic = 5, .ih = 3, .iw = 7, .oc = 9},      // 1x1, 21 pixels: lane tails
      {.ic = 17, .ih = 13, .iw = 13, .oc = 20},  // 1x1, 169 pixels
      {.ic = 3,
       .ih = 17,
       .iw = 35,
       .oc = 8,
       .kh = 7,
       .kw = 7,
       .sh = 2,
       .sw = 2,
       .pt = 3,
       .pl = 3,
       .pb = 3,
       .pr = 3},
      {.ic = 4, .ih = 9, .iw = 18, .oc = 5, .kh = 3, .kw = 3, .sh = 2, .sw = 2},
  };
  for (Isa isa : isas())
    for (Layout l : {Layout::nchw, Layout::nhwc})
      for (const Shp& s : shapes) {
        const ConvProblem p = problem(s);
        Operands o = make_operands(p, seed++);
        std::string why;
        auto k = create_conv_kernel(p, im2col_impl(l), isa, o.w, &o.b, &why);
        REQUIRE_MESSAGE(k, why);
        const std::vector<float> img = to_layout(o.x, l);
        // Consecutive GuardedBufs alternate between ending and starting at an unmapped page.
        test::GuardedBuf buf0(img.size()), buf1(img.size());
        for (test::GuardedBuf* in : {&buf0, &buf1}) {
          INFO(k->name() << " " << p.str());
          std::copy(img.begin(), img.end(), in->data());
          const Shape ys{p.n, p.oc, p.oh, p.ow};
          std::vector<float> dst(size_t(layout_elems(l, ys)));
          const float* ins[] = {in->data(), nullptr, nullptr};
          float* outs[] = {dst.data()};
          k->run_all(KernelArgs{ins, outs});
          Tensor y(DType::f32, ys);
          convert_layout(dst.data(), l, y.data<float>(), Layout::nchw, ys);
          std::string first;
          CHECK_MESSAGE(count_mismatches(y, reference(p, o), p.ic * p.kh * p.kw, &first) == 0,
                        first);
        }
      }
}

}  // namespace
}  // namespace kiln::convtest
