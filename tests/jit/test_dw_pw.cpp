// The separable kernel (jit/dw/dw_pw_kernel.h) against the reference depthwise conv followed by
// the reference 1x1, on both ISA paths, over swept shapes: bands of 1, 2, 3 rows and the
// default (a last band shorter than the others), batches, channel tails, stride-2 and padded
// depthwise convs, post-ops on both convs (per-channel operands on the first, a residual on
// the second), and the refusals.
#include <optional>

#include "jit/dw/dw_pw_kernel.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;

struct SepCase {
  Shp dw;          // oc = ic
  int64_t oc = 0;  // the project conv's (0: none)
  std::vector<PostOp> dw_post, pw_post;
  bool bias = true;  // every conv (without one and post-op operands a node has 2 inputs)
  int64_t e_ic = 0;  // the expand conv's input channels (0: none)
  std::vector<PostOp> e_post = {};
};

// A dense 1x1 over an image of dw's input (expand) or output (project) size.
ConvProblem one_by_one(const ConvProblem& dw, bool at_input, int64_t ic, int64_t oc,
                       std::vector<PostOp> post) {
  Shp s;
  s.n = dw.n;
  s.ic = ic;
  s.ih = at_input ? dw.ih : dw.oh;
  s.iw = at_input ? dw.iw : dw.ow;
  s.oc = oc;
  return problem(s, chain(std::move(post)));
}
ConvProblem pw_problem(const ConvProblem& dw, int64_t oc, std::vector<PostOp> post) {
  return one_by_one(dw, false, dw.oc, oc, std::move(post));
}

// One conv of the chain: its problem, operands and the node's input count (2 without a bias
// or post-op operands: the exact-size src below lets ASan see a read past them).
struct Part {
  ConvProblem p;
  Operands o;
  int inputs = 2;
  ChainConv conv() const { return {p, &o.w, p.bias ? &o.b : nullptr, inputs}; }
  // The node's inputs (activation, weights and bias slots null, post-op operands).
  void push_inputs(std::vector<const float*>& ins, std::vector<std::vector<float>>& keep) const {
    ins.insert(ins.end(), size_t(std::min(inputs, 3)), nullptr);
    for (const Tensor& e : o.extra) {
      keep.push_back(e.shape().size() == 4
                         ? to_layout(e, Layout::nhwc)
                         : std::vector<float>(e.data<float>(), e.data<float>() + e.numel()));
      ins.push_back(keep.back().data());
    }
  }
};

Part make_part(const ConvProblem& p, bool bias, uint64_t seed, const Tensor* x) {
  Part r{p, make_operands(p, seed)};
  r.p.bias = bias;
  if (x) r.o.x = *x;
  r.inputs = bias || !r.o.extra.empty() ? 3 + int(r.o.extra.size()) : 2;
  return r;
}

// Runs the chain kernel (band rows per band, 0: its choice) and compares with the references.
void check_case(const SepCase& sc, Isa isa, int64_t band, uint64_t seed) {
  Shp ds = sc.dw;
  ds.oc = ds.ic;
  ConvProblem dwp = problem(ds, chain(sc.dw_post));
  dwp.groups = dwp.ic;
  if (band > dwp.oh) return;  // (the sweep's bands: some are taller than a small case's image)
  std::optional<Part> e, pw;
  if (sc.e_ic)
    e = make_part(one_by_one(dwp, true, sc.e_ic, dwp.ic, sc.e_post), sc.bias, seed + 200, nullptr);
  Tensor dw_in;
  if (e) dw_in = reference(e->p, e->o);
  Part dw = make_part(dwp, sc.bias, seed, e ? &dw_in : nullptr);
  Tensor want = reference(dw.p, dw.o);
  if (sc.oc) {
    pw = make_part(pw_problem(dw.p, sc.oc, sc.pw_post), sc.bias, seed + 100, &want);
    want = reference(pw->p, pw->o);
  }
  const ChainConv dwc = dw.conv();
  const ChainConv ec = e ? e->conv() : ChainConv{}, pc = pw ? pw->conv() : ChainConv{};
  std::string why;
  auto k = create_dw_chain_kernel(e ? &ec : nullptr, dwc, pw ? &pc : nullptr, isa, &why, band);
  REQUIRE_MESSAGE(k, why);
  INFO(k->name() << " dw " << dw.p.str() << " band " << band << " expand from " << sc.e_ic
                 << " project to " << sc.oc);
  std::vector<float> x = to_layout(e ? e->o.x : dw.o.x, Layout::nhwc);
  std::vector<std::vector<float>> keep;
  std::vector<const float*> ins;
  for (const Part* part : {e ? &*e : nullptr, &dw, pw ? &*pw : nullptr})
    if (part) part->push_inputs(ins, keep);
  ins[0] = x.data();
  const Shape ys{want.shape()};
  std::vector<float> dst(size_t(layout_elems(Layout::nhwc, ys)) + 64, NAN);
  std::fill(dst.end() - 64, dst.end(), 12345.f);
  float* outs[] = {dst.data()};
  run_tiles_checked(*k, ins.data(), outs);
  CHECK_MESSAGE(std::count(dst.end() - 64, dst.end(), 12345.f) == 64, "wrote past dst");
  Tensor got(DType::f32, ys);
  convert_layout(dst.data(), Layout::nhwc, got.data<float>(), Layout::nchw, ys);
  std::string first;
  const int64_t k_len = (sc.e_ic + 1) * dw.p.kh * dw.p.kw + (sc.oc ? dw.p.ic : 0);
  const int64_t bad = count_mismatches(got, want, k_len, &first);
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

// Expand -> depthwise (-> project): the expand rows a band reads are computed once per tile
// (runs of band x stride rows, the image's last run moved up to end at its last row), so the
// cases cover strides 1 and 2, 3x3 / 5x5 with padding, dilation, images whose height is not a
// multiple of a run, bands of 1 .. 5 rows (tiles of several bands), tall images (the held rows
// moved to the scratch's front) and post-ops on all three.
TEST_CASE("chain kernel: expand 1x1 -> depthwise (-> project 1x1) matches the reference convs") {
  Shp dil = dw_shape(1, 24, 13, 9, 3, 1, 2);
  dil.dh = dil.dw = 2;
  const std::vector<SepCase> cases = {
      {dw_shape(1, 48, 12, 10, 3, 1, 1), 16, {op(K::clip, 0, 6)}, {}, true, 8, {op(K::clip, 0, 6)}},
      {dw_shape(1, 96, 17, 11, 3, 2, 1), 24, {op(K::relu)}, {op(K::add)}, true, 16, {op(K::relu)}},
      {dw_shape(2, 19, 9, 7, 3, 1, 1), 0, {op(K::swish)}, {}, true, 5, {op(K::swish)}},
      {dw_shape(1, 40, 14, 6, 5, 2, 2), 0, {}, {}, false, 24, {op(K::hardswish)}},
      {dw_shape(2, 32, 10, 10, 5, 1, 2),
       20,
       {op(K::scale_shift)},
       {op(K::prelu)},
       true,
       12,
       {op(K::prelu)}},
      {dil, 16, {}, {}, true, 40, {}},
      {dw_shape(1, 16, 7, 7, 3, 2, 0), 8, {}, {}, false, 3, {}},
      // Tall images: a tile's bands walk down far enough to move the held rows to the
      // scratch's front (compaction) several times.
      {dw_shape(1, 16, 40, 6, 3, 1, 1), 8, {op(K::relu)}, {}, true, 4, {}},
      {dw_shape(1, 8, 45, 5, 3, 2, 1), 0, {}, {}, true, 3, {op(K::relu)}},
  };
  uint64_t seed = 7300;
  for (Isa isa : isas())
    for (const SepCase& c : cases)
      for (int64_t band : {0, 1, 2, 3, 5}) check_case(c, isa, band, seed++);
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
  refuse(dw, wider, "does not read the depthwise output");
  ConvProblem dense = dw;
  dense.groups = 1;
  refuse(dense, pw, "middle conv not depthwise");
  ConvProblem residual = dw;
  residual.post = chain({op(K::add)});
  refuse(residual, pw, "post-ops read a tensor");
  std::string why;
  CHECK(!create_dw_pw_kernel(dw, dww, nullptr, 2, pw, pww, nullptr, 2, Isa::avx2, &why, 9));
  CHECK(why.find("band taller") != std::string::npos);
  // Expand convs.
  const Tensor ew = random_tensor({16, 8, 1, 1}, 3);
  auto refuse_expand = [&](const ConvProblem& e, const ChainConv* p, const char* want) {
    const ChainConv ec{e, &ew, nullptr, 2}, dc{dw, &dww, nullptr, 2};
    std::string w;
    CHECK(!create_dw_chain_kernel(&ec, dc, p, Isa::avx2, &w));
    CHECK_MESSAGE(w.find(want) != std::string::npos, w);
  };
  const ConvProblem e = one_by_one(dw, true, 8, 16, {});
  ConvProblem e3 = e;
  e3.kh = e3.kw = 3;
  e3.pt = e3.pl = e3.pb = e3.pr = 1;
  refuse_expand(e3, nullptr, "expand conv not a dense 1x1");
  ConvProblem narrow = e;
  narrow.oc = 8;
  refuse_expand(narrow, nullptr, "does not read the expand output");
  ConvProblem eres = e;
  eres.post = chain({op(K::add)});
  refuse_expand(eres, nullptr, "expand conv's post-ops read a tensor");
  const ChainConv dc{dw, &dww, nullptr, 2};
  CHECK(!create_dw_chain_kernel(nullptr, dc, nullptr, Isa::avx2, &why));
  CHECK(why.find("no 1x1 conv") != std::string::npos);
}

}  // namespace
}  // namespace kiln::convtest
