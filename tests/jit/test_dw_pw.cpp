// The separable kernel (jit/dw/dw_pw_kernel.h) against the reference depthwise conv followed by
// the reference 1x1, on both ISA paths, over swept shapes: bands of 1, 2, 3 rows and the
// default (a last band shorter than the others), batches, channel tails, stride-2 and padded
// depthwise convs, post-ops on both convs (per-channel operands on the first, a residual on
// the second), and the refusals.
#include "jit/dw/dw_pw_kernel.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

struct SepCase {
  Shp dw;  // oc = ic
  int64_t oc = 0;
  std::vector<PostOp> dw_post, pw_post;
  bool bias = true;  // both convs (without one and post-op operands a node has 2 inputs)
};

// The 1x1 reading the depthwise conv's output.
ConvProblem pw_problem(const ConvProblem& dw, int64_t oc, std::vector<PostOp> post) {
  Shp s;
  s.n = dw.n;
  s.ic = dw.oc;
  s.ih = dw.oh;
  s.iw = dw.ow;
  s.oc = oc;
  return problem(s, chain(std::move(post)));
}

// Runs the fused kernel (band rows per tile, 0: its choice) and compares with the references.
void check_case(const SepCase& sc, Isa isa, int64_t band, uint64_t seed) {
  Shp ds = sc.dw;
  ds.oc = ds.ic;
  ds.bias = sc.bias;
  ConvProblem dw = problem(ds, chain(sc.dw_post));
  dw.groups = dw.ic;
  ConvProblem pw = pw_problem(dw, sc.oc, sc.pw_post);
  pw.bias = sc.bias;
  Operands dwo = make_operands(dw, seed);
  const Tensor mid = reference(dw, dwo);
  Operands pwo = make_operands(pw, seed + 100);
  pwo.x = mid;
  const Tensor want = reference(pw, pwo);

  // The nodes' input counts: 2 without a bias or post-op operands (the exact-size src below
  // lets ASan see a read past them).
  auto inputs = [&](const Operands& o) {
    return sc.bias || !o.extra.empty() ? 3 + int(o.extra.size()) : 2;
  };
  const int dw_inputs = inputs(dwo), pw_inputs = inputs(pwo);
  std::string why;
  auto k = create_dw_pw_kernel(dw, dwo.w, sc.bias ? &dwo.b : nullptr, dw_inputs, pw, pwo.w,
                               sc.bias ? &pwo.b : nullptr, pw_inputs, isa, &why, band);
  REQUIRE_MESSAGE(k, why);
  INFO(k->name() << " dw " << dw.str() << " pw " << pw.str() << " band " << band);
  std::vector<float> x = to_layout(dwo.x, Layout::nhwc);
  std::vector<std::vector<float>> keep;
  std::vector<const float*> ins{x.data(), nullptr};
  if (dw_inputs > 2) ins.push_back(nullptr);
  for (const Tensor& e : dwo.extra) ins.push_back(e.data<float>());  // per channel: plain
  ins.insert(ins.end(), size_t(std::min(pw_inputs, 3)), nullptr);
  for (const Tensor& e : pwo.extra) {
    keep.push_back(e.shape().size() == 4
                       ? to_layout(e, Layout::nhwc)
                       : std::vector<float>(e.data<float>(), e.data<float>() + e.numel()));
    ins.push_back(keep.back().data());
  }
  const Shape ys{pw.n, pw.oc, pw.oh, pw.ow};
  std::vector<float> dst(size_t(layout_elems(Layout::nhwc, ys)) + 64, NAN);
  std::fill(dst.end() - 64, dst.end(), 12345.f);
  float* outs[] = {dst.data()};
  run_tiles_checked(*k, ins.data(), outs);
  CHECK_MESSAGE(std::count(dst.end() - 64, dst.end(), 12345.f) == 64, "wrote past dst");
  Tensor got(DType::f32, ys);
  convert_layout(dst.data(), Layout::nhwc, got.data<float>(), Layout::nchw, ys);
  std::string first;
  const int64_t bad = count_mismatches(got, want, pw.ic * dw.kh * dw.kw, &first);
  CHECK_MESSAGE(bad == 0, bad << " mismatches, first " << first);
}

Shp dw_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, int64_t p) {
  Shp d;
  d.n = n;
  d.ic = c;
  d.ih = h;
  d.iw = w;
  d.kh = d.kw = k;
  d.sh = d.sw = s;
  d.pt = d.pl = d.pb = d.pr = p;
  return d;
}

TEST_CASE("separable dw -> 1x1 kernel matches the two reference convs (both ISAs)") {
  const std::vector<SepCase> cases = {
      {dw_shape(1, 32, 12, 10, 3, 1, 1), 48, {op(K::relu)}, {}},
      {dw_shape(2, 19, 9, 7, 3, 1, 1), 21, {}, {op(K::relu)}},  // channel tails both sides
      {dw_shape(1, 64, 15, 15, 3, 2, 1), 40, {op(K::clip, 0, 6)}, {op(K::add)}},
      {dw_shape(2, 24, 11, 13, 5, 1, 2),
       16,
       {op(K::scale_shift), op(K::relu)},
       {op(K::add), op(K::relu)}},
      {dw_shape(1, 8, 7, 5, 3, 1, 0), 72, {op(K::hardswish)}, {op(K::prelu)}},
      {dw_shape(1, 128, 6, 6, 3, 1, 1), 130, {}, {op(K::scale_shift), op(K::swish)}},
      {dw_shape(2, 40, 10, 9, 3, 1, 1), 24, {op(K::relu)}, {}, false},  // no biases
      {dw_shape(1, 16, 7, 7, 3, 2, 1), 32, {}, {}, false},
  };
  uint64_t seed = 7100;
  for (Isa isa : isas())
    for (const SepCase& c : cases)
      for (int64_t band : {0, 1, 2, 3}) check_case(c, isa, band, seed++);
}

TEST_CASE("separable kernel: refusals name the reason") {
  ConvProblem dw = problem(dw_shape(1, 16, 8, 8, 3, 1, 1));
  dw.oc = 16;
  dw.groups = 16;
  const Tensor dww = random_tensor({16, 1, 3, 3}, 1), pww = random_tensor({24, 16, 1, 1}, 2);
  auto refuse = [&](const ConvProblem& a, const ConvProblem& b, const char* want) {
    std::string why;
    auto k = create_dw_pw_kernel(a, dww, nullptr, 2, b, pww, nullptr, 2, Isa::avx2, &why);
    CHECK(!k);
    CHECK_MESSAGE(why.find(want) != std::string::npos, why);
  };
  const ConvProblem pw = pw_problem(dw, 24, {});
  ConvProblem strided = pw;
  strided.sh = strided.sw = 2;
  strided.oh = strided.ow = 4;
  refuse(dw, strided, "not a dense 1x1 of stride 1");
  ConvProblem wider = pw;
  wider.ic = 32;
  refuse(dw, wider, "does not read the first's output");
  ConvProblem dense = dw;
  dense.groups = 1;
  refuse(dense, pw, "first conv not depthwise");
  ConvProblem residual = dw;
  residual.post = chain({op(K::add)});
  refuse(residual, pw, "post-ops read a tensor");
  std::string why;
  CHECK(!create_dw_pw_kernel(dw, dww, nullptr, 2, pw, pww, nullptr, 2, Isa::avx2, &why, 9));
  CHECK(why.find("band taller") != std::string::npos);
}

}  // namespace
}  // namespace kiln::convtest
