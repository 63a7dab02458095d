// ConvTranspose end to end: sessions on every ISA path run it as a JIT sub-pixel Conv plus the
// convt (SubpixelInterleave) glue kernel, never a reference label, and match both the
// reference path and the independent gather oracle over a sweep of strides, kernels, pads,
// output_padding, groups, dilations and batch sizes; a decoder-like stack tuned normally.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "graph/convt_case.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/session.h"

namespace kiln {
namespace {

using test::ConvTCase;

std::vector<float> run(const std::string& bytes, const SessionOptions& o, const Tensor& x,
                       std::unique_ptr<Session>* keep = nullptr) {
  auto s = Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> y{Tensor(DType::f32, s->outputs()[0].shape)};
  s->run({x}, y);
  if (keep) *keep = std::move(s);
  return std::vector<float>(y[0].data<float>(), y[0].data<float>() + y[0].numel());
}

// Nodes on a reference label (must be none) and on the convt label.
void check_labels(const Session& s, int* convt) {
  const Graph& g = s.graph();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Label& l = s.selection().nodes[i].label;
    CAPTURE(g.nodes[i].op);
    CHECK(l.kind != LabelKind::ref);
    *convt += l.kind == LabelKind::convt;
  }
}

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double maxref = 1e-30, maxdiff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    maxref = std::max(maxref, std::fabs(double(want[i])));
    maxdiff = std::max(maxdiff, std::fabs(double(got[i]) - want[i]));
  }
  return maxdiff / maxref;
}

// A JIT session on `isa` (2 threads, no tuning cache), tuned as by default.
SessionOptions jit_options(Isa isa) {
  SessionOptions o;
  o.use_cache = false;
  o.max_isa = isa;
  o.threads = 2;
  return o;
}

Tensor input_for(const Shape& s, uint32_t seed) {
  Tensor x(DType::f32, s);
  const std::vector<float> v = test::randoms(size_t(x.numel()), seed, -1.f, 1.f);
  std::copy(v.begin(), v.end(), x.data<float>());
  return x;
}

TEST_CASE("ConvTranspose session: JIT labels match the oracle over a sweep, every ISA path") {
  // Channels up to 20 (tails of 8 and 16); tiny shapes keep the tuned loads fast.
  const std::vector<ConvTCase> cases = test::convt_sweep(24, 9, 20);
  for (Isa isa : testing::jit_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    int convt = 0;
    for (const ConvTCase& k : cases) {
      const std::string desc = k.str();
      CAPTURE(desc);
      const std::string bytes = test::convt_model(k).bytes();
      const Tensor x = input_for({k.n, k.c, k.h, k.w}, 5);
      const std::vector<float> want =
          test::convt_oracle(k, std::vector<float>(x.data<float>(), x.data<float>() + x.numel()));
      std::unique_ptr<Session> s;
      CHECK(rel_err(run(bytes, jit_options(isa), x, &s), want) <= 1e-5);
      check_labels(*s, &convt);
      SessionOptions ro;
      ro.reference = true;
      ro.use_cache = false;
      CHECK(rel_err(run(bytes, ro, x), want) <= 1e-5);
    }
    CHECK(convt > 12);  // most cases have strides or crops: the interleave runs
  }
}

TEST_CASE("ConvTranspose session: a decoder stack (k2s2, k4s2p1, k3s2p1op1 + Relu), tuned") {
  test::OnnxBuilder b;
  b.input("x", {1, 24, 6, 5});
  struct L {
    int64_t c, m, k, s, p, op;
  };
  const std::vector<L> layers = {{24, 16, 2, 2, 0, 0}, {16, 16, 4, 2, 1, 0}, {16, 8, 3, 2, 1, 1}};
  std::string cur = "x";
  uint32_t seed = 1;
  for (const L& l : layers) {
    const std::string id = std::to_string(seed), w = "w" + id, bi = "b" + id, y = "y" + id,
                      r = "r" + id;
    b.init_f(w, {l.c, l.m, l.k, l.k},
             test::randoms(size_t(l.c * l.m * l.k * l.k), seed, -.3f, .3f));
    b.init_f(bi, {l.m}, test::randoms(size_t(l.m), seed + 50, -.3f, .3f));
    auto& n = b.node("ConvTranspose", {cur, w, bi}, {y});
    test::OnnxBuilder::attr_ints(n, "strides", {l.s, l.s});
    test::OnnxBuilder::attr_ints(n, "pads", {l.p, l.p, l.p, l.p});
    if (l.op) test::OnnxBuilder::attr_ints(n, "output_padding", {l.op, l.op});
    b.node("Relu", {y}, {r});
    cur = r;
    ++seed;
  }
  b.output(cur);
  const std::string bytes = b.bytes();
  const Tensor x = input_for({1, 24, 6, 5}, 3);
  SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  const std::vector<float> want = run(bytes, ro, x);
  REQUIRE(want.size() == size_t(8 * 48 * 40));
  for (Isa isa : testing::jit_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    std::unique_ptr<Session> s;
    CHECK(rel_err(run(bytes, jit_options(isa), x, &s), want) <= 1e-5);
    int convt = 0;
    check_labels(*s, &convt);
    CHECK(convt == 3);  // every stride-2 layer interleaves its phases
  }
}

}  // namespace
}  // namespace kiln
