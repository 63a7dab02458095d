// The int8 gemm1x1 kernel (AVX512-VNNI): src values on a uint8 grid x_scale * (q - x_zero) and
// weights w_scale[oc] * int8, against the reference Conv on the same values. The products and
// sums are exact integers in the kernel and exact in the reference's f32 up to its summation
// order, so they agree to f32 rounding; the weights' integers are recovered, the zero point's
// share folded into the bias, both checked by the tolerance.
#include <cmath>
#include <cstring>
#include <random>

#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "jit/dw/dw_conf.h"
#include "jit/glue/glue.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

// Operands of p on the int8 grids: x = xs * (u - xz) with u uniform in [0, 255], w = ws[oc] *
// an integer in [-128, 127] (channel oc's extremes used), bias and residuals as usual.
// zero >= 0 pins the zero point (else uniform in [0, 255]).
Operands int8_operands(const ConvProblem& p, uint64_t seed, ConvInt8* q, int zero = -1) {
  Operands o = make_operands(p, seed);
  std::mt19937 rng{uint32_t(seed)};
  q->x_scale = 0.037f;
  q->x_zero = float(std::uniform_int_distribution<int>(0, 255)(rng));
  if (zero >= 0) q->x_zero = float(zero);
  std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
  for (int64_t i = 0; i < o.x.numel(); ++i)
    o.x.data<float>()[i] = q->x_scale * (float(u8(rng)) - q->x_zero);
  q->w_scale.assign(size_t(p.oc), 0.f);
  const int64_t per_oc = o.w.numel() / p.oc;
  for (int64_t oc = 0; oc < p.oc; ++oc) {
    const float ws = 0.002f * float(1 + oc % 7);
    q->w_scale[size_t(oc)] = ws;
    for (int64_t k = 0; k < per_oc; ++k)
      o.w.data<float>()[oc * per_oc + k] = ws * float(k == 0 ? -128 : k == 1 ? 127 : s8(rng));
  }
  return o;
}

// got vs the reference's want, sums of `terms` f32 products of magnitude up to ~0.037 * 255 *
// 0.014 * 128 (int8_operands): within their rounding, relative to max(1, |want|).
void check_sums(const Tensor& want, const Tensor& got, int64_t terms) {
  const double tol = 2e-6 * std::sqrt(double(terms)) * 20;
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    if (!(std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w))) && bad++ == 0)
      first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
              std::to_string(w);
  }
  CHECK_MESSAGE(bad == 0, bad << " mismatches, first " << first);
}

void check_int8(const ConvProblem& p, uint64_t seed, int ur = 0, int ob = 0,
                const convjit::Gemm1x1Force& force = {}, Layout src = Layout::nChw16c) {
  auto q = std::make_shared<ConvInt8>();
  Operands o = int8_operands(p, seed, q.get());
  ConvImpl impl = conv_impl(ConvFamily::gemm1x1, src, Layout::nChw16c, ur, ob);
  impl.int8 = q;
  auto c = convjit::init_gemm1x1_conf(p, impl, Isa::avx512, force);
  REQUIRE_MESSAGE(c, "conf refused: " << c.reason);
  REQUIRE(c.conf->int8);
  auto k = convjit::make_gemm1x1_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
  INFO(k->name() << " " << p.str() << " m_outer " << c.conf->m_outer << " blocking "
                 << c.conf->blocking_str() << " im2row " << c.conf->im2row);
  CHECK(c.conf->im2row == (p.kh * p.kw != 1 || p.pt || p.pl || p.pb || p.pr || p.sh > 2));
  CHECK(c.conf->dense_k == (src == Layout::nchw));
  CHECK(c.conf->windows == (c.conf->im2row && src != Layout::nchw));
  const Tensor want = reference(p, o);
  const Tensor got = run_kernel(*k, p, o, impl.src, impl.dst);
  check_sums(want, got, p.ic);
}

TEST_CASE("gemm1x1 int8 matches the reference on int8-grid operands") {
  if (!testing::has_vnni()) return;
  uint64_t seed = 7000;
  // tests/shapes/conv_gemm1x1.txt (channel tails, odd channel counts, strides 1 and 2, batch 2)
  for (const ConvProblem& p : shapes::read_shapes("conv_gemm1x1")) check_int8(p, seed++);
}

TEST_CASE("gemm1x1 int8: blockings, loop orders, channel tails, stride 2, post-ops") {
  if (!testing::has_vnni()) return;
  uint64_t seed = 7100;
  const std::vector<std::string> shapes = {
      "ic37ih9iw11_oc45oh9ow11kh1kw1sh1sw1ph0pw0",  // ic tail not a multiple of 4
      "ic1ih5iw5_oc17oh5ow5kh1kw1sh1sw1ph0pw0",
      "ic6ih5iw7_oc16oh5ow7kh1kw1sh1sw1ph0pw0_nobias",
      "mb2ic64ih14iw14_oc48oh7ow7kh1kw1sh2sw2ph0pw0",
      "ic33ih15iw8_oc20oh8ow4kh1kw1sh2sw2ph0pw0_nobias",
      "ic256ih7iw7_oc512oh7ow7kh1kw1sh1sw1ph0pw0",
  };
  for (const std::string& s : shapes)
    for (auto [ur, ob] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {5, 3}, {4, 2}})
      for (int m_outer : {0, 1}) {
        convjit::Gemm1x1Force f;
        f.m_outer = m_outer;
        f.chunk_blocks = 1;
        check_int8(problem(s), seed++, ur, ob, f);
      }
  for (const auto& post :
       std::vector<std::vector<PostOp>>{chain({op(K::relu)}), chain({op(K::add), op(K::relu)}),
                                        chain({op(K::scale_shift), op(K::add), op(K::sigmoid)})}) {
    ConvProblem p = problem("mb2ic40ih6iw6_oc36oh6ow6kh1kw1sh1sw1ph0pw0");
    p.post = post;
    check_int8(p, seed++);
  }
}

TEST_CASE("im2col int8 (taps read in place by the gemm1x1 microkernel) matches the reference") {
  if (!testing::has_vnni()) return;
  uint64_t seed = 7300;
  // tests/shapes/conv_direct.txt and im2col.txt: kernel sizes, strides, asymmetric padding
  // (the zero point outside the image), dilation, channel tails, batch 2; and 1x1 with padding
  // or stride 3, which the plain 1x1 path does not take.
  std::vector<ConvProblem> ps = shapes::read_shapes("conv_direct");
  for (const ConvProblem& p : shapes::read_shapes("im2col")) ps.push_back(p);
  ps.push_back(problem("ic20ih7iw7_oc24oh9ow9kh1kw1sh1sw1ph1pw1"));
  ps.push_back(problem("ic32ih10iw10_oc16oh4ow4kh1kw1sh3sw3ph0pw0"));
  convjit::Gemm1x1Force groups_outer;  // (the whole image one band)
  groups_outer.m_outer = 0;
  for (const ConvProblem& p : ps) {
    if (p.groups != 1) continue;
    check_int8(p, seed++);
    check_int8(p, seed++, 3, 2);
    check_int8(p, seed++, 2, 1, groups_outer);
  }
}

TEST_CASE("im2col int8 with dense K (NCHW, at most 4 input channels) matches the reference") {
  if (!testing::has_vnni()) return;
  uint64_t seed = 7500;
  // An image's first convs (7x7 stride 2, 3x3, 11x11 stride 4) and the geometry the packing
  // handles: 1 to 4 channels, asymmetric padding wider than the window reach, dilation, stride
  // 3, rows and columns of padding only, batch 2, channel and pixel tails.
  const std::vector<std::string> shapes = {
      "ic3ih32iw32_oc64oh16ow16kh7kw7sh2sw2ph3pw3",
      "mb2ic3ih19iw23_oc24oh10ow12kh3kw3sh2sw2ph1pw1",
      "ic1ih9iw9_oc17oh9ow9kh3kw3sh1sw1ph1pw1_nobias",
      "ic2ih12iw10_oc16oh12ow10kh5kw5sh1sw1ph2pw2",
      "ic4ih9iw13_oc32oh5ow4kh3kw3sh2sw3ph1pw0",
      "ic3ih35iw35_oc20oh8ow8kh11kw11sh4sw4ph2pw2",
      "ic3ih10iw10_oc16oh6ow6kh3kw3sh1sw1dh2dw2ph0pw0",
      "ic3ih5iw6_oc16oh9ow10kh3kw3sh1sw1ph3pw3",
      "ic3ih1iw17_oc16oh3ow17kh3kw3sh1sw1ph2pw1",
      "ic3ih8iw8_oc16oh9ow5kh3kw3sh1sw2pt0pl2pb3pr1",
      "ic3ih5iw5_oc8oh9ow10kh3kw3sh1sw1pt3pl4pb3pr3",
  };
  for (const std::string& s : shapes) {
    check_int8(problem(s), seed++, 0, 0, {}, Layout::nchw);
    convjit::Gemm1x1Force f;
    f.chunk_blocks = 1;
    for (int m_outer : {0, 1}) {
      f.m_outer = m_outer;
      check_int8(problem(s), seed++, 3, 2, f, Layout::nchw);
    }
  }
  ConvProblem p = problem("ic3ih16iw16_oc32oh8ow8kh3kw3sh2sw2ph1pw1");
  p.post = chain({op(K::add), op(K::relu)});
  check_int8(p, seed++, 0, 0, {}, Layout::nchw);
}

// Each grouped shape with the conf's blocking, 3 pixels x 1 vector, and groups outer; then a
// residual chain on `chain_shape` with 2 vectors a register block.
void check_grouped_int8(const std::vector<std::string>& shapes, const std::string& chain_shape,
                        uint64_t seed) {
  convjit::Gemm1x1Force groups_outer;
  groups_outer.m_outer = 0;
  for (const std::string& s : shapes) {
    const ConvProblem p = problem(s);
    check_int8(p, seed++);
    check_int8(p, seed++, 3, 1);
    check_int8(p, seed++, 0, 0, groups_outer);
  }
  ConvProblem p = problem(chain_shape);
  p.post = chain({op(K::add), op(K::relu)});
  check_int8(p, seed, 0, 2);
}

TEST_CASE("grouped int8 (groups of whole channel blocks, windows in place) matches the reference") {
  if (!testing::has_vnni()) return;
  // One and several blocks per group on either side (oc groups inside one conv group),
  // stride 2, dilation, asymmetric padding, batch 2, RegNet's 16-channel groups.
  check_grouped_int8(
      {"g2ic32ih8iw8_oc32oh8ow8kh3kw3sh1sw1ph1pw1", "g4ic64ih9iw9_oc128oh5ow5kh3kw3sh2sw2ph1pw1",
       "g2ic64ih6iw7_oc32oh6ow7kh3kw3sh1sw1ph1pw1_nobias",
       "mb2g3ic48ih7iw7_oc48oh7ow7kh3kw3sh1sw1dh2dw2ph2pw2",
       "g4ic64ih8iw8_oc64oh9ow5kh3kw3sh1sw2pt0pl2pb3pr1",
       "g10ic160ih14iw14_oc160oh14ow14kh3kw3sh1sw1ph1pw1"},
      "g2ic32ih8iw8_oc64oh8ow8kh3kw3sh1sw1ph1pw1", 7700);
}

// Groups narrower than a block run as merged groups filling whole blocks (int8_group_merge),
// the weights between their conv groups zero: RegNetY's 8 channels a group (also an odd
// number of groups), ResNeXt's 4, RegNetX-1.6GF's 24 (3 blocks a merged group; odd numbers
// of groups leave a partial last merged group), 12 a group (4 merged), fewer inputs than
// outputs a group; stride 2, batch 2, both loop orders, forced
// blocks, a residual chain (2 vectors a group).
TEST_CASE("grouped int8 with narrow groups (merged into whole blocks) matches the reference") {
  if (!testing::has_vnni()) return;
  struct Want {
    const char* shape;
    int64_t merge;
  };
  for (const Want& w : std::vector<Want>{{"g6ic48ih4iw4_oc48oh4ow4kh3kw3sh1sw1ph1pw1", 2},
                                         {"g13ic104ih4iw4_oc104oh4ow4kh3kw3sh1sw1ph1pw1", 2},
                                         {"g8ic32ih4iw4_oc32oh4ow4kh3kw3sh1sw1ph1pw1", 4},
                                         {"g2ic48ih4iw4_oc48oh4ow4kh3kw3sh1sw1ph1pw1", 2},
                                         {"g4ic32ih4iw4_oc64oh4ow4kh3kw3sh1sw1ph1pw1", 2},
                                         {"g4ic64ih4iw4_oc64oh4ow4kh3kw3sh1sw1ph1pw1", 1},
                                         {"g3ic72ih4iw4_oc72oh4ow4kh3kw3sh1sw1ph1pw1", 2},
                                         {"g5ic60ih4iw4_oc60oh4ow4kh3kw3sh1sw1ph1pw1", 4},
                                         {"g3ic60ih4iw4_oc60oh4ow4kh3kw3sh1sw1ph1pw1", 0},
                                         {"g32ic64ih4iw4_oc64oh4ow4kh3kw3sh1sw1ph1pw1", 0}})
    CHECK_MESSAGE(convjit::int8_group_merge(problem(w.shape)) == w.merge, w.shape);
  check_grouped_int8(
      {"g6ic48ih10iw10_oc48oh10ow10kh3kw3sh1sw1ph1pw1",
       "g13ic104ih7iw7_oc104oh4ow4kh3kw3sh2sw2ph1pw1",
       "mb2g8ic32ih8iw9_oc32oh8ow9kh3kw3sh1sw1ph1pw1",
       "g4ic96ih6iw6_oc96oh6ow6kh3kw3sh1sw1ph1pw1_nobias",
       "g4ic32ih7iw7_oc64oh7ow7kh3kw3sh1sw1ph1pw1",
       "g3ic72ih7iw7_oc72oh7ow7kh3kw3sh1sw1ph1pw1",  // RegNetX-1.6GF's 24 a group
       "g7ic168ih8iw8_oc168oh4ow4kh3kw3sh2sw2ph1pw1", "g5ic60ih5iw6_oc60oh5ow6kh3kw3sh1sw1ph1pw1"},
      "g4ic32ih8iw8_oc64oh8ow8kh3kw3sh1sw1ph1pw1", 7750);
}

// ---- uint8 operands (nChw16c_u8): src bytes read in place / copied, dst the last
// quantize-dequantize's q, the residual read as bytes ----

// t (NCHW, on grid q) in nChw16c_u8, its pad lanes random bytes (they meet zero weights).
std::vector<uint8_t> to_u8(const Tensor& t, U8Quant q, std::mt19937& rng) {
  const Shape& s = t.shape();
  std::vector<uint8_t> out(size_t(layout_bytes(Layout::nChw16c_u8, s)));
  convert_layout(t.data<float>(), Layout::nchw, out.data(), Layout::nChw16c_u8, s, &q);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = s[1]; c < round_up(s[1], 16); ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          out[size_t(layout_offset(Layout::nChw16c_u8, s, n, c, h, w))] = uint8_t(byte(rng));
  return out;
}

// Runs k on o with src / dst (and so the residual) in nChw16c or nChw16c_u8; the output back
// in NCHW f32 (a u8 dst dequantized on `out_q`).
Tensor run_u8(const Kernel& k, const ConvProblem& p, const Operands& o, const ConvInt8& q,
              Layout src_l, Layout dst_l, U8Quant out_q, uint64_t seed) {
  std::mt19937 rng{uint32_t(seed)};
  const Shape ys{p.n, p.oc, p.oh, p.ow};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::vector<float>> floats;
  auto in = [&](const Tensor& t, Layout l, U8Quant g) -> const float* {
    if (layout_u8(l))
      return reinterpret_cast<const float*>(bytes.emplace_back(to_u8(t, g, rng)).data());
    return floats.emplace_back(to_layout(t, l)).data();
  };
  std::vector<const float*> ins{in(o.x, src_l, {q.x_scale, q.x_zero}), nullptr, nullptr};
  for (const Tensor& e : o.extra)
    ins.push_back(e.shape().size() == 4 ? in(e, dst_l, q.residual.value_or(U8Quant{}))
                                        : e.data<float>());
  const size_t n = size_t(layout_bytes(dst_l, ys)), guard = 256;
  std::vector<uint8_t> dst(n + guard, 0xa5);
  float* outs[] = {reinterpret_cast<float*>(dst.data())};
  run_tiles_checked(k, ins.data(), outs);
  CHECK_MESSAGE(std::count(dst.begin() + int64_t(n), dst.end(), 0xa5) == int64_t(guard),
                "kernel wrote past the end of dst");
  Tensor y(DType::f32, ys);
  convert_layout(dst.data(), dst_l, y.data<float>(), Layout::nchw, ys, &out_q);
  return y;
}

// p's post-ops end with a quantize-dequantize (its grid out_q); an `add` residual is
// on its own uint8 grid. Every src / dst combination of nChw16c and nChw16c_u8 must give the
// same bits as the f32 one (the same integer sums, scaling and chain; a u8 dst holds the q
// whose dequantized value the f32 dst holds), and that within a quantum of the reference.
bool is_depthwise(const ConvProblem& p) {
  return p.groups > 1 && p.groups == p.ic && p.oc == p.ic;
}

void check_u8(ConvProblem p, uint64_t seed, int ur = 0, int ob = 0,
              const convjit::Gemm1x1Force& force = {}) {
  auto q = std::make_shared<ConvInt8>();
  Operands o = int8_operands(p, seed, q.get());
  // (The last op's grid as uint8: an int8 one shifted by 128.)
  const PostOp& last = p.post.back();
  const U8Quant out_q{last.alpha, last.beta + (last.kind == K::quant_dequant_s8 ? 128.f : 0.f)};
  const U8Quant res_q{0.03f, 140.f};
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_int_distribution<int> u8(0, 255);
  for (size_t i = 0; i < p.post.size(); ++i)
    if (p.post[i].kind == K::add) {
      q->residual = res_q;
      Tensor& r = o.extra[size_t(p.post[i].input - 3)];
      for (int64_t j = 0; j < r.numel(); ++j)
        r.data<float>()[j] = res_q.scale * (float(u8(rng)) - res_q.zero);
    }
  const Tensor want = reference(p, o);
  Tensor base;
  // (Depthwise int8 reads only uint8.)
  const bool dw = is_depthwise(p);
  std::vector<Layout> srcs{Layout::nChw16c_u8};
  if (!dw) srcs.insert(srcs.begin(), Layout::nChw16c);
  for (Layout src : srcs)
    for (Layout dst : {Layout::nChw16c, Layout::nChw16c_u8}) {
      const ConvFamily fam = dw             ? ConvFamily::depthwise
                             : p.groups > 1 ? ConvFamily::grouped
                                            : ConvFamily::gemm1x1;
      ConvImpl impl = conv_impl(fam, src, dst, ur, ob);
      impl.int8 = q;
      std::unique_ptr<Kernel> k;
      if (dw) {
        auto c = convjit::init_dw_conf(p, impl, Isa::avx512);
        REQUIRE_MESSAGE(c, "conf refused: " << c.reason);
        CHECK(c.conf->int8);
        CHECK(c.conf->u8_dst == (dst == Layout::nChw16c_u8));
        CHECK(c.conf->sub_zero == (q->x_zero != 0));
        k = convjit::make_dw_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
      } else {
        auto c = convjit::init_gemm1x1_conf(p, impl, Isa::avx512, force);
        REQUIRE_MESSAGE(c, "conf refused: " << c.reason);
        CHECK(c.conf->u8_src == (src == Layout::nChw16c_u8));
        CHECK(c.conf->u8_dst == (dst == Layout::nChw16c_u8));
        k = convjit::make_gemm1x1_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
        INFO("m_outer " << c.conf->m_outer << " pack " << c.conf->pack << " windows "
                        << c.conf->windows);
      }
      INFO(k->name() << " " << p.str());
      const Tensor got = run_u8(*k, p, o, *q, src, dst, out_q, seed + 1);
      if (!base.numel()) {
        base = got;
        int64_t off = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          off += !(std::fabs(got.data<float>()[i] - want.data<float>()[i]) <= out_q.scale * 1.001);
        CHECK_MESSAGE(off == 0, off << " outputs more than a quantum from the reference");
        continue;
      }
      int64_t first = -1;
      for (int64_t i = 0; i < got.numel() && first < 0; ++i)
        if (std::memcmp(got.data<float>() + i, base.data<float>() + i, 4)) first = i;
      CHECK_MESSAGE(first < 0, "differs from the nChw16c -> nChw16c kernel's output at "
                                   << first << ": "
                                   << got.data<float>()[std::max<int64_t>(first, 0)] << " vs "
                                   << base.data<float>()[std::max<int64_t>(first, 0)]);
    }
}

TEST_CASE("int8 convs on uint8 operands (nChw16c_u8) give the f32 layout's bits") {
  if (!testing::has_vnni()) return;
  uint64_t seed = 7900;
  const PostOp qdq = op(K::quant_dequant_u8, 0.05f, 17.f);
  // 1x1 stride 1 (read in place), stride 2 (packed), channel tails whose pad lanes hold
  // random bytes, windows (3x3, padding: the zero point), grouped, batch 2; chains with and
  // without a residual; both loop orders.
  const std::vector<std::string> shapes = {
      "ic64ih14iw14_oc48oh14ow14kh1kw1sh1sw1ph0pw0",
      "mb2ic40ih9iw11_oc36oh9ow11kh1kw1sh1sw1ph0pw0",
      "ic33ih15iw8_oc20oh8ow4kh1kw1sh2sw2ph0pw0_nobias",
      "ic37ih9iw9_oc45oh9ow9kh3kw3sh1sw1ph1pw1",
      "mb2ic32ih10iw10_oc32oh5ow5kh3kw3sh2sw2ph1pw1",
      "g2ic32ih8iw8_oc64oh8ow8kh3kw3sh1sw1ph1pw1",
      "g13ic104ih6iw6_oc104oh6ow6kh3kw3sh1sw1ph1pw1",  // merged groups, pad lanes random
  };
  for (const std::string& s : shapes)
    for (const auto& post : std::vector<std::vector<PostOp>>{
             chain({qdq}), chain({op(K::relu), qdq}), chain({op(K::add), op(K::relu), qdq})})
      for (int m_outer : {0, 1}) {
        ConvProblem p = problem(s);
        p.post = post;
        convjit::Gemm1x1Force f;
        f.m_outer = m_outer;
        check_u8(p, seed++, 0, 0, f);
      }
  // An int8 grid stored as uint8 (q + 128).
  ConvProblem p = problem("ic32ih6iw6_oc32oh6ow6kh1kw1sh1sw1ph0pw0");
  p.post = chain({op(K::quant_dequant_s8, 0.05f, -3.f)});
  check_u8(p, seed++);
}

// ---- depthwise int8 (exact integer sums in f32, jit/dw/dw_conf.h) ----

// The depthwise int8 kernel (src nChw16c_u8, pad lanes random bytes) against the reference on
// the same grid values; dst nChw16c. `zero` pins the input's zero point (-1: random).
void check_dw_int8(const ConvProblem& p, uint64_t seed, int zero, int ur = 0,
                   convjit::DwWeights force = convjit::DwWeights::automatic) {
  auto q = std::make_shared<ConvInt8>();
  const Operands o = int8_operands(p, seed, q.get(), zero);
  ConvImpl impl = conv_impl(ConvFamily::depthwise, Layout::nChw16c_u8, Layout::nChw16c, ur);
  impl.int8 = q;
  auto c = convjit::init_dw_conf(p, impl, Isa::avx512, force);
  REQUIRE_MESSAGE(c, "conf refused: " << c.reason);
  auto k = convjit::make_dw_kernel(*c.conf, o.w, p.bias ? &o.b : nullptr);
  INFO(k->name() << " " << p.str() << " zero " << q->x_zero);
  CHECK(k->name().find("conv_dw_int8_nChw16c_u8_to_nChw16c_") == 0);
  const Tensor want = reference(p, o);
  const Tensor got = run_u8(*k, p, o, *q, Layout::nChw16c_u8, Layout::nChw16c, {}, seed + 1);
  check_sums(want, got, p.kh * p.kw);
}

TEST_CASE("depthwise int8 (uint8 src, exact f32 integer sums) matches the reference") {
  if (!testing::has_isa(Isa::avx512)) return;
  uint64_t seed = 8100;
  // tests/shapes/mobilenetv2.txt's depthwise convs (strides 1 and 2), then channel tails,
  // 5x5 / 7x7, dilation, asymmetric padding, stride 3, non-square, batch 2, no bias; zero
  // points 0 (post-ReLU values) and not.
  std::vector<ConvProblem> ps;
  for (const ConvProblem& p : shapes::read_shapes("mobilenetv2"))
    if (is_depthwise(p)) ps.push_back(p);
  for (const char* s : {"g20ic20ih9iw11_oc20oh9ow11kh3kw3sh1sw1ph1pw1",
                        "mb2g37ic37ih8iw8_oc37oh4ow4kh5kw5sh2sw2ph2pw2_nobias",
                        "g16ic16ih10iw10_oc16oh10ow10kh7kw7sh1sw1ph3pw3",
                        "g32ic32ih9iw9_oc32oh9ow9kh3kw3sh1sw1dh2dw2ph2pw2",
                        "g48ic48ih8iw8_oc48oh9ow5kh3kw3sh1sw2pt0pl2pb3pr1",
                        "g16ic16ih12iw13_oc16oh4ow5kh3kw3sh3sw3ph1pw1",
                        "g32ic32ih20iw22_oc32oh20ow22kh21kw21sh1sw1ph10pw10"})
    ps.push_back(problem(s));
  REQUIRE(ps.size() > 8);
  for (const ConvProblem& p : ps)
    for (int zero : {0, -1}) check_dw_int8(p, seed++, zero);
  // Every weight mode and forced register blocks on one shape.
  const ConvProblem p = problem("g40ic40ih11iw17_oc40oh11ow17kh3kw3sh1sw1ph1pw1");
  for (auto w : {convjit::DwWeights::all, convjit::DwWeights::row, convjit::DwWeights::stream})
    for (int ur : {1, 4, 7}) check_dw_int8(p, seed++, -1, ur, w);
}

TEST_CASE("depthwise int8: a uint8 dst gives the f32 dst's bits") {
  if (!testing::has_isa(Isa::avx512)) return;
  uint64_t seed = 8200;
  const PostOp qdq = op(K::quant_dequant_u8, 0.05f, 17.f);
  for (const char* s : {"g32ic32ih10iw10_oc32oh10ow10kh3kw3sh1sw1ph1pw1",
                        "mb2g40ic40ih9iw9_oc40oh5ow5kh3kw3sh2sw2ph1pw1_nobias"})
    for (const auto& post :
         std::vector<std::vector<PostOp>>{chain({qdq}), chain({op(K::clip, 0.f, 6.f), qdq}),
                                          chain({op(K::add), op(K::relu), qdq}),
                                          chain({op(K::quant_dequant_s8, 0.04f, -5.f)})}) {
      ConvProblem p = problem(s);
      p.post = post;
      check_u8(p, seed++);
    }
}

TEST_CASE("depthwise int8 refusals") {
  if (!testing::has_isa(Isa::avx512)) return;
  auto q = std::make_shared<ConvInt8>();
  q->w_scale.assign(16, 1.f);
  const ConvProblem p = problem("g16ic16ih4iw4_oc16oh4ow4kh3kw3sh1sw1ph1pw1");
  auto refused = [&](Layout src, Layout dst, const ConvProblem& pp, const char* why) {
    ConvImpl impl = conv_impl(ConvFamily::depthwise, src, dst);
    impl.int8 = q;
    auto c = convjit::init_dw_conf(pp, impl, Isa::avx512);
    CHECK_MESSAGE(!c, layout_name(src) << " -> " << layout_name(dst));
    CHECK_MESSAGE(c.reason.find(why) != std::string::npos, c.reason);
  };
  refused(Layout::nChw16c, Layout::nChw16c, p, "nChw16c_u8 src");  // (never quantizes)
  refused(Layout::nhwc, Layout::nhwc, p, "nChw16c_u8 src");
  refused(Layout::nChw16c_u8, Layout::nChw16c_u8, p, "quantize-dequantize");  // no Q/DQ last
  refused(Layout::nChw16c_u8, Layout::nChw16c,
          problem("g16ic16ih40iw40_oc16oh16ow16kh25kw25sh1sw1ph0pw0"), "taps");
  q->w_scale.assign(15, 1.f);
  refused(Layout::nChw16c_u8, Layout::nChw16c, p, "scale per oc");
  // f32 kernels take no uint8 layout
  ConvImpl impl = conv_impl(ConvFamily::depthwise, Layout::nChw16c_u8, Layout::nChw16c);
  CHECK(!convjit::init_dw_conf(p, impl, Isa::avx512));
}

TEST_CASE("uint8 layout refusals") {
  if (!testing::has_vnni()) return;
  auto q = std::make_shared<ConvInt8>();
  q->w_scale.assign(16, 1.f);
  ConvImpl impl = conv_impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c_u8);
  impl.int8 = q;
  // a u8 dst needs a quantize-dequantize last, and a residual on a uint8 grid
  ConvProblem p = problem("ic16ih4iw4_oc16oh4ow4kh1kw1sh1sw1ph0pw0");
  p.post = chain({op(K::relu)});
  auto c = convjit::init_gemm1x1_conf(p, impl, Isa::avx512);
  CHECK(!c);
  CHECK(c.reason.find("quantize-dequantize") != std::string::npos);
  p.post = chain({op(K::add), op(K::quant_dequant_u8, 0.1f, 3.f)});
  c = convjit::init_gemm1x1_conf(p, impl, Isa::avx512);
  CHECK(!c);
  CHECK(c.reason.find("residual") != std::string::npos);
  q->residual = U8Quant{0.1f, 3.f};
  CHECK(convjit::init_gemm1x1_conf(p, impl, Isa::avx512));
  // f32 kernels take no uint8 layout
  impl.int8 = nullptr;
  CHECK(!convjit::init_gemm1x1_conf(p, impl, Isa::avx512));
}

TEST_CASE("nChw16c <-> nChw16c_u8 conversions quantize and dequantize on the value's grid") {
  if (host_cpu().isa != Isa::avx512) {
    MESSAGE("SKIPPED: the uint8 conversion kernels need avx512");
    return;
  }
  std::mt19937 rng{81};
  std::uniform_int_distribution<int> u8(0, 255);
  for (const Shape& s : std::vector<Shape>{{1, 16, 3, 5}, {2, 37, 7, 9}, {1, 5, 1, 1}}) {
    const U8Quant g{0.0375f, 121.f};
    Tensor x(DType::f32, s);
    for (int64_t i = 0; i < x.numel(); ++i) {
      x.data<float>()[i] = g.scale * (float(u8(rng)) - g.zero);
      if (i % 11 == 3) x.data<float>()[i] = float(u8(rng)) - 128.f;  // off the grid, saturating
    }
    std::vector<float> blocked = to_layout(x, Layout::nChw16c, 0.f);
    std::vector<uint8_t> want(size_t(layout_bytes(Layout::nChw16c_u8, s)));
    convert_layout(blocked.data(), Layout::nChw16c, want.data(), Layout::nChw16c_u8, s, &g);
    std::string why;
    auto to = create_reorder_kernel(s, Layout::nChw16c, Layout::nChw16c_u8, Isa::avx512, &why, &g);
    auto from =
        create_reorder_kernel(s, Layout::nChw16c_u8, Layout::nChw16c, Isa::avx512, &why, &g);
    REQUIRE_MESSAGE((to && from), why);
    CHECK(!create_reorder_kernel(s, Layout::nChw16c, Layout::nChw16c_u8, Isa::avx512, &why));
    std::vector<uint8_t> got(want.size() + 64, 0xa5);
    std::vector<float> back(blocked.size() + 16, 7.f);
    const float* in1[] = {blocked.data()};
    float* out1[] = {reinterpret_cast<float*>(got.data())};
    KernelArgs a;
    a.src = in1;
    a.dst = out1;
    to->run(a, 0, to->tiles());
    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    CHECK(std::count(got.begin() + std::ptrdiff_t(want.size()), got.end(), 0xa5) == 64);
    const float* in2[] = {reinterpret_cast<const float*>(got.data())};
    float* out2[] = {back.data()};
    a.src = in2;
    a.dst = out2;
    from->run(a, 0, from->tiles());
    for (size_t i = 0; i < blocked.size(); ++i)
      REQUIRE(back[i] == (float(want[i]) - g.zero) * g.scale);
    CHECK(back[blocked.size()] == 7.f);
  }
}

TEST_CASE("gemm1x1 int8 refusals") {
  if (!testing::has_vnni()) return;
  const ConvProblem p = problem("ic16ih4iw4_oc16oh4ow4kh1kw1sh1sw1ph0pw0");
  auto q = std::make_shared<ConvInt8>();
  q->w_scale.assign(16, 1.f);
  ConvImpl impl = conv_impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc);
  impl.int8 = q;
  auto c = convjit::init_gemm1x1_conf(p, impl, Isa::avx512);
  CHECK(!c);
  CHECK(c.reason.find("nChw16c") != std::string::npos);
  impl = conv_impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c);
  impl.int8 = q;
  CHECK(!convjit::init_gemm1x1_conf(p, impl, Isa::avx2));
  // NCHW only for the dense K im2row (not 1x1, at most 4 channels)
  impl = conv_impl(ConvFamily::gemm1x1, Layout::nchw, Layout::nChw16c);
  impl.int8 = q;
  CHECK(!convjit::init_gemm1x1_conf(p, impl, Isa::avx512));
  CHECK(!convjit::init_gemm1x1_conf(problem("ic5ih4iw4_oc16oh4ow4kh3kw3sh1sw1ph1pw1"), impl,
                                    Isa::avx512));
  impl = conv_impl(ConvFamily::gemm1x1, Layout::nChw16c, Layout::nChw16c);
  impl.int8 = q;
  // grouped: groups filling whole 16-channel blocks on both sides (alone or at most 4
  // merged, no more than there are), and a window
  q->w_scale.assign(72, 1.f);
  for (const char* s :
       {"g2ic24ih4iw4_oc32oh4ow4kh3kw3sh1sw1ph1pw1", "g3ic60ih4iw4_oc60oh4ow4kh3kw3sh1sw1ph1pw1",
        "g32ic64ih4iw4_oc64oh4ow4kh3kw3sh1sw1ph1pw1",
        "g2ic32ih4iw4_oc32oh4ow4kh1kw1sh1sw1ph0pw0"}) {
    auto c = convjit::init_gemm1x1_conf(problem(s), impl, Isa::avx512);
    CHECK_MESSAGE(!c, s);
    CHECK(c.reason.find("grouped") != std::string::npos);
  }
  q->w_scale.assign(15, 1.f);
  CHECK(!convjit::init_gemm1x1_conf(p, impl, Isa::avx512));
}

}  // namespace
}  // namespace kiln::convtest
