// The planner's separable fusion (runtime/plan.cpp fuse_separable, jit/dw/dw_pw_kernel.h): a
// depthwise conv and the 1x1 reading its output, both NHWC, become one step when the decider
// says so, and the plan's output equals the reference path's; a decider saying no, an
// intermediate read twice or a graph output keep two steps.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "jit/conv/conv_kernel.h"
#include "runtime/executor.h"
#include "runtime/labels.h"
#include "runtime/plan.h"
#include "runtime/selection.h"
#include "runtime/separable.h"
#include "runtime/session.h"
#include "runtime/tuning_cache.h"
#include "session_test_util.h"
#include "test_rng.h"

namespace {

using kiln::test::OnnxBuilder;

struct SepNet {
  int64_t n, c, h, w, stride, oc;
  bool residual;    // the 1x1's output + the input (stride 1, oc == c)
  bool mid_output;  // the depthwise output is a graph output too
};

std::vector<float> values(kiln::test::XorShift& r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = r.uniform(-0.5f, 0.5f);
  return v;
}

std::string build(const SepNet& s) {
  kiln::test::XorShift r{11, 0x5e9};
  OnnxBuilder b;
  b.input("x", {s.n, s.c, s.h, s.w}).output("y");
  if (s.mid_output) b.output("d");
  b.init_f("wd", {s.c, 1, 3, 3}, values(r, s.c * 9)).init_f("bd", {s.c}, values(r, s.c));
  b.init_f("wp", {s.oc, s.c, 1, 1}, values(r, s.oc * s.c)).init_f("bp", {s.oc}, values(r, s.oc));
  auto& dw = b.node("Conv", {"x", "wd", "bd"}, {"d0"});
  OnnxBuilder::attr_ints(dw, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_ints(dw, "strides", {s.stride, s.stride});
  OnnxBuilder::attr_i(dw, "group", s.c);
  b.node("Relu", {"d0"}, {"d"});
  b.node("Conv", {"d", "wp", "bp"}, {s.residual ? "p" : "p0"});
  if (s.residual)
    b.node("Add", {"p", "x"}, {"y"});
  else
    b.node("Relu", {"p0"}, {"y"});
  return b.bytes();
}

// The NHWC label of `family` among node i's candidates.
kiln::Label nhwc_label(const kiln::Graph& g, int i, kiln::Isa isa, kiln::ConvFamily family) {
  for (const kiln::Label& l : kiln::candidate_labels(g, i, isa, false))
    if (l.kind == kiln::LabelKind::conv && l.conv.family == family &&
        l.conv.src == kiln::Layout::nhwc && l.conv.dst == kiln::Layout::nhwc)
      return l;
  FAIL("no NHWC " << kiln::conv_family_name(family) << " label for node " << i);
  return {};
}

// Plans g (the reference session's graph: its constants are all there) with the two convs on
// NHWC labels; returns the output of a run on x and counts the fused steps.
std::vector<kiln::Tensor> run_planned(const kiln::Graph& g, kiln::Isa isa, bool fuse,
                                      const std::vector<kiln::Tensor>& x, int* fused) {
  kiln::Selection sel;
  sel.nodes.resize(g.nodes.size());
  sel.kernels.resize(g.nodes.size());
  int convs = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    REQUIRE(g.nodes[i].op == "Conv");  // the Relus and the Add went into the convs
    sel.nodes[i].label = nhwc_label(
        g, int(i), isa, convs++ == 0 ? kiln::ConvFamily::depthwise : kiln::ConvFamily::gemm1x1);
  }
  REQUIRE(convs == 2);
  if (fuse) sel.separable.push_back({0, 1, 0.0});
  kiln::PlanOptions po;
  po.isa = isa;
  kiln::Plan p = kiln::build_plan(g, po, sel);
  *fused = 0;
  for (const kiln::Step& st : p.steps)
    if (st.fused_node >= 0) {
      ++*fused;
      CHECK(st.kernel->name().rfind("conv_dwpw_f32_nhwc_", 0) == 0);
    }
  std::vector<kiln::Tensor> out;
  for (kiln::ValueId v : g.outputs) out.emplace_back(kiln::DType::f32, g.value(v).shape);
  kiln::Executor(g, p, 2).run(x, out);
  return out;
}

TEST_CASE("a depthwise conv and its 1x1 run as one separable step, equal to the reference") {
  const std::vector<SepNet> nets = {{1, 32, 20, 18, 1, 32, true, false},
                                    {2, 24, 15, 11, 2, 40, false, false},
                                    {1, 19, 9, 30, 1, 21, false, false},
                                    {1, 16, 8, 8, 1, 16, false, true}};
  for (kiln::Isa isa : kiln::testing::jit_isas())
    for (const SepNet& s : nets) {
      INFO(kiln::isa_name(isa) << " n" << s.n << " c" << s.c << " " << s.h << "x" << s.w << " s"
                               << s.stride << " oc" << s.oc);
      const std::string bytes = build(s);
      kiln::SessionOptions o;
      o.reference = true;
      auto ref = kiln::sessiontest::load(bytes, o);
      std::vector<kiln::Tensor> x{kiln::sessiontest::normal_tensor({s.n, s.c, s.h, s.w}, 5)};
      std::vector<kiln::Tensor> want;
      for (const auto& io : ref->outputs()) want.emplace_back(io.dtype, io.shape);
      ref->run(x, want);
      for (bool fuse : {true, false}) {
        int fused = 0;
        const auto got = run_planned(ref->graph(), isa, fuse, x, &fused);
        // Fused only when asked and the intermediate is read by the 1x1 alone.
        CHECK(fused == (fuse && !s.mid_output ? 1 : 0));
        for (size_t k = 0; k < want.size(); ++k)
          CHECK(kiln::sessiontest::rel_error(got[k], want[k]) < 1e-5);
      }
    }
}

}  // namespace

namespace {

// Steps running a separable kernel, as (depthwise node, 1x1 node).
std::vector<std::pair<int, int>> fused_steps(const kiln::Plan& p) {
  std::vector<std::pair<int, int>> v;
  for (const kiln::Step& st : p.steps)
    if (st.fused_node >= 0) v.push_back({st.fused_node, st.node});
  return v;
}

}  // namespace

// Whether a pair is fused depends on this machine's measurements; what must hold whatever they
// are: the selection lists only pairs on NHWC labels whose fused time beats theirs, the plan
// fuses exactly those, a warm load (plan from the tuning cache) restores the same list, and
// the outputs equal the reference path's. With `fast` in the tuning cache before the first
// load, the separable kernel's time is nearly nothing: the solver must fuse the pair.
TEST_CASE("the selection's separable pairs: consistent with the plan and kept in the cache") {
  for (bool fast : {false, true}) {
    INFO("separable time planted in the cache: " << fast);
    const SepNet s{2, 48, 40, 40, 1, 48, true, false};
    const std::string bytes = build(s);
    const auto dir = kiln::sessiontest::fresh_dir("separable_cache");
    std::vector<kiln::Tensor> x{kiln::sessiontest::normal_tensor({s.n, s.c, s.h, s.w}, 9)};
    kiln::SessionOptions ro;
    ro.reference = true;
    auto ref = kiln::sessiontest::load(bytes, ro);
    const kiln::Tensor want = kiln::sessiontest::run(*ref, x[0]);
    if (fast) {
      const kiln::Graph& g = ref->graph();  // its nodes: the depthwise conv, the 1x1
      REQUIRE(g.nodes.size() == 2);
      kiln::TuningCache cache(dir.string(), kiln::CacheContext::current(kiln::effective_isa(), 1));
      for (const char* suffix : {"", " weights:cold"})
        cache.put_time(kiln::separable_problem(g, 0, 1) + suffix, kiln::kSeparableLabelKey, 1e-6);
      REQUIRE(cache.flush());
    }
    std::vector<std::pair<int, int>> first;
    for (int load = 0; load < 2; ++load) {
      kiln::SessionOptions o;
      o.cache_dir = dir.string();
      o.threads = 1;
      auto sess = kiln::sessiontest::load(bytes, o);
      const kiln::Selection& sel = sess->selection();
      CHECK(sel.plan_from_cache == (load == 1));
      std::vector<std::pair<int, int>> listed;
      for (const kiln::SeparablePair& q : sel.separable) {
        CHECK(kiln::nhwc_conv_label(sel.nodes[size_t(q.dw)].label, kiln::ConvFamily::depthwise));
        CHECK(kiln::nhwc_conv_label(sel.nodes[size_t(q.pw)].label));
        CHECK(q.ms < sel.nodes[size_t(q.dw)].ms + sel.nodes[size_t(q.pw)].ms);
        listed.push_back({q.dw, q.pw});
      }
      CHECK(fused_steps(sess->plan()) == listed);
      if (load == 0) {
        first = listed;
        if (fast) {
          CHECK(listed == std::vector<std::pair<int, int>>{{0, 1}});
          // The solver priced the pair at the separable kernel's time, not at its two kernels'.
          CHECK(sel.predicted_ms < sel.nodes[0].ms + sel.nodes[1].ms);
        }
      } else {
        CHECK(listed == first);
      }
      CHECK(kiln::sessiontest::rel_error(kiln::sessiontest::run(*sess, x[0]), want) < 1e-5);
    }
  }
}
