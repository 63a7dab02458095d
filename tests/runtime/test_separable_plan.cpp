// The planner's chain fusion (runtime/plan.cpp fuse_separable, jit/dw/dw_pw_kernel.h): a
// depthwise conv and the 1x1s next to it (an expand conv before, a project conv after), all
// NHWC, become one step when the selection lists their pairs, and the plan's output equals the
// reference path's; unlisted pairs, an intermediate read twice or a graph output stay apart.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
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
  bool residual;       // the 1x1's output + the input (stride 1, oc == the input's channels)
  bool mid_output;     // the depthwise output is a graph output too
  int64_t expand = 0;  // the input's channels when an expand 1x1 (+ Clip 0..6) makes c
  int64_t in_c() const { return expand ? expand : c; }
};

std::vector<float> values(kiln::test::XorShift& r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = r.uniform(-0.5f, 0.5f);
  return v;
}

std::string build(const SepNet& s) {
  kiln::test::XorShift r{11, 0x5e9};
  OnnxBuilder b;
  b.input("x", {s.n, s.in_c(), s.h, s.w}).output("y");
  if (s.mid_output) b.output("d");
  if (s.expand) {
    b.init_f("we", {s.c, s.expand, 1, 1}, values(r, s.c * s.expand));
    b.init_f("lo", {}, {0.f}).init_f("hi", {}, {6.f});
    b.node("Conv", {"x", "we"}, {"e0"});  // (no bias: a 2-input node)
    b.node("Clip", {"e0", "lo", "hi"}, {"e"});
  }
  b.init_f("wd", {s.c, 1, 3, 3}, values(r, s.c * 9)).init_f("bd", {s.c}, values(r, s.c));
  b.init_f("wp", {s.oc, s.c, 1, 1}, values(r, s.oc * s.c)).init_f("bp", {s.oc}, values(r, s.oc));
  auto& dw = b.node("Conv", {s.expand ? "e" : "x", "wd", "bd"}, {"d0"});
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

// Plans g (the reference session's graph: its constants are all there) with its convs on
// NHWC labels, the selection listing the expand pair (if the net has one) and / or the project
// pair; returns the output of a run on x and the fused steps' kernel names.
std::vector<kiln::Tensor> run_planned(const kiln::Graph& g, kiln::Isa isa, bool expand_pair,
                                      bool project_pair, const std::vector<kiln::Tensor>& x,
                                      std::vector<std::string>* fused) {
  kiln::Selection sel;
  sel.nodes.resize(g.nodes.size());
  sel.kernels.resize(g.nodes.size());
  const int dw = int(g.nodes.size()) - 2;  // (the expand conv, if any, is node 0)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    REQUIRE(g.nodes[i].op == "Conv");  // the Clip, the Relus and the Add went into the convs
    sel.nodes[i].label = nhwc_label(
        g, int(i), isa, int(i) == dw ? kiln::ConvFamily::depthwise : kiln::ConvFamily::gemm1x1);
  }
  if (expand_pair && dw == 1) sel.separable.push_back({dw, 0, 0.0, true});
  if (project_pair) sel.separable.push_back({dw, dw + 1, 0.0, false});
  kiln::PlanOptions po;
  po.isa = isa;
  kiln::Plan p = kiln::build_plan(g, po, sel);
  fused->clear();
  for (const kiln::Step& st : p.steps)
    if (!st.fused_nodes.empty()) fused->push_back(st.kernel->name());
  std::vector<kiln::Tensor> out;
  for (kiln::ValueId v : g.outputs) out.emplace_back(kiln::DType::f32, g.value(v).shape);
  kiln::Executor(g, p, 2).run(x, out);
  return out;
}

TEST_CASE("a depthwise conv and its 1x1s run as one chain step, equal to the reference") {
  const std::vector<SepNet> nets = {
      {1, 32, 20, 18, 1, 32, true, false},   {2, 24, 15, 11, 2, 40, false, false},
      {1, 19, 9, 30, 1, 21, false, false},   {1, 16, 8, 8, 1, 16, false, true},
      {1, 48, 20, 18, 1, 8, true, false, 8}, {2, 36, 17, 13, 2, 12, false, false, 6},
      {1, 24, 9, 9, 1, 16, false, true, 5}};
  for (kiln::Isa isa : kiln::testing::jit_isas())
    for (const SepNet& s : nets) {
      INFO(kiln::isa_name(isa) << " n" << s.n << " c" << s.c << " " << s.h << "x" << s.w << " s"
                               << s.stride << " oc" << s.oc);
      const std::string bytes = build(s);
      kiln::SessionOptions o;
      o.reference = true;
      auto ref = kiln::sessiontest::load(bytes, o);
      std::vector<kiln::Tensor> x{kiln::sessiontest::normal_tensor({s.n, s.in_c(), s.h, s.w}, 5)};
      std::vector<kiln::Tensor> want;
      for (const auto& io : ref->outputs()) want.emplace_back(io.dtype, io.shape);
      ref->run(x, want);
      for (int pairs = 0; pairs < 4; ++pairs) {
        const bool ep = pairs & 1, pp = pairs & 2;
        if (ep && !s.expand) continue;
        INFO("expand pair listed " << ep << ", project pair listed " << pp);
        std::vector<std::string> fused;
        const auto got = run_planned(ref->graph(), isa, ep, pp, x, &fused);
        // Fused only when listed and the middle tensor is read by the next conv alone.
        const bool e_on = ep, p_on = pp && !s.mid_output;
        if (e_on || p_on) {
          REQUIRE(fused.size() == 1);
          const std::string want_name =
              std::string("conv_") + (e_on ? "pw" : "") + "dw" + (p_on ? "pw" : "") + "_f32_nhwc_";
          CHECK_MESSAGE(fused[0].rfind(want_name, 0) == 0, fused[0]);
        } else {
          CHECK(fused.empty());
        }
        for (size_t k = 0; k < want.size(); ++k)
          CHECK(kiln::sessiontest::rel_error(got[k], want[k]) < 1e-5);
      }
    }
}

}  // namespace

namespace {

using NodeSets = std::vector<std::vector<int>>;

// The nodes of every step running a chain kernel (each set sorted).
NodeSets fused_steps(const kiln::Plan& p) {
  NodeSets v;
  for (const kiln::Step& st : p.steps)
    if (!st.fused_nodes.empty()) {
      v.push_back(st.fused_nodes);
      v.back().push_back(st.node);
      std::sort(v.back().begin(), v.back().end());
    }
  std::sort(v.begin(), v.end());
  return v;
}

// The steps a selection's pairs make: one per depthwise conv, with the 1x1s paired with it.
NodeSets chains_of(const std::vector<kiln::SeparablePair>& pairs) {
  std::map<int, std::vector<int>> by_dw;
  for (const kiln::SeparablePair& q : pairs) {
    auto& v = by_dw[q.dw];
    if (v.empty()) v.push_back(q.dw);
    v.push_back(q.pw);
  }
  NodeSets out;
  for (auto& [dw, v] : by_dw) {
    std::sort(v.begin(), v.end());
    out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Whether a pair is fused depends on this machine's measurements; what must hold whatever they
// are: the selection lists only pairs on NHWC labels whose fused time beats theirs, the plan
// fuses exactly those (a depthwise conv in two pairs: one step of all three), a warm load (plan
// from the tuning cache) restores the same list, and the outputs equal the reference path's.
// With `fast` in the tuning cache before the first load, both pairs' chain kernels take nearly
// nothing: the solver must fuse both, and the plan runs the three convs as one step.
TEST_CASE("the selection's chain pairs: consistent with the plan and kept in the cache") {
  for (bool fast : {false, true}) {
    INFO("chain times planted in the cache: " << fast);
    const SepNet s{2, 48, 40, 40, 1, 16, true, false, 16};
    const std::string bytes = build(s);
    const auto dir = kiln::sessiontest::fresh_dir("separable_cache");
    std::vector<kiln::Tensor> x{kiln::sessiontest::normal_tensor({s.n, s.in_c(), s.h, s.w}, 9)};
    kiln::SessionOptions ro;
    ro.reference = true;
    auto ref = kiln::sessiontest::load(bytes, ro);
    const kiln::Tensor want = kiln::sessiontest::run(*ref, x[0]);
    if (fast) {
      const kiln::Graph& g = ref->graph();  // its nodes: the expand, depthwise, project convs
      REQUIRE(g.nodes.size() == 3);
      kiln::TuningCache cache(dir.string(), kiln::CacheContext::current(kiln::effective_isa(), 1));
      for (const char* suffix : {"", " weights:cold"}) {
        cache.put_time(kiln::separable_problem(g, 1, 2) + suffix, kiln::kSeparableLabelKey, 1e-6);
        cache.put_time(kiln::separable_problem(g, 1, 0, true) + suffix, kiln::kExpandLabelKey,
                       1e-6);
      }
      REQUIRE(cache.flush());
    }
    std::vector<kiln::SeparablePair> first;
    for (int load = 0; load < 2; ++load) {
      kiln::SessionOptions o;
      o.cache_dir = dir.string();
      o.threads = 1;
      auto sess = kiln::sessiontest::load(bytes, o);
      const kiln::Selection& sel = sess->selection();
      CHECK(sel.plan_from_cache == (load == 1));
      const std::vector<kiln::SeparablePair>& listed = sel.separable;
      for (const kiln::SeparablePair& q : listed) {
        CHECK(kiln::nhwc_conv_label(sel.nodes[size_t(q.dw)].label, kiln::ConvFamily::depthwise));
        CHECK(kiln::nhwc_conv_label(sel.nodes[size_t(q.pw)].label));
        CHECK(q.ms < sel.nodes[size_t(q.dw)].ms + sel.nodes[size_t(q.pw)].ms);
        CHECK(q.pw == (q.expand ? 0 : 2));
      }
      CHECK(fused_steps(sess->plan()) == chains_of(listed));
      auto same = [](const std::vector<kiln::SeparablePair>& a,
                     const std::vector<kiln::SeparablePair>& b) {
        return a.size() == b.size() &&
               std::equal(a.begin(), a.end(), b.begin(), [](auto& x, auto& y) {
                 return x.dw == y.dw && x.pw == y.pw && x.expand == y.expand;
               });
      };
      if (load == 0) {
        first = listed;
        if (fast) {
          CHECK(listed.size() == 2);
          CHECK(fused_steps(sess->plan()) == NodeSets{{0, 1, 2}});
          // The solver priced the chain at the pair kernels' times, not at its three kernels'.
          CHECK(sel.predicted_ms < sel.nodes[0].ms + sel.nodes[1].ms + sel.nodes[2].ms);
        }
      } else {
        CHECK(same(listed, first));
      }
      CHECK(kiln::sessiontest::rel_error(kiln::sessiontest::run(*sess, x[0]), want) < 1e-5);
    }
  }
}

// Xception's / MobileNetV4's sequence: depthwise -> 1x1 -> depthwise -> 1x1. The middle 1x1 is
// the project of the first depthwise conv and the expand of the second: with every pair's chain
// time planted near zero in the tuning cache, the solver would take all three pairs; the
// selection keeps the middle 1x1 in one of them, the plan's steps follow the list, and the
// output equals the reference path's.
TEST_CASE("a 1x1 between two depthwise convs runs in one chain") {
  kiln::test::XorShift r{17, 0x3c1};
  OnnxBuilder b;
  b.input("x", {1, 16, 20, 20}).output("y");
  b.init_f("w1", {16, 1, 3, 3}, values(r, 16 * 9)).init_f("p1", {32, 16, 1, 1}, values(r, 512));
  b.init_f("w2", {32, 1, 3, 3}, values(r, 32 * 9)).init_f("p2", {24, 32, 1, 1}, values(r, 768));
  const char* names[] = {"w1", "p1", "w2", "p2"};
  std::string in = "x";
  for (int k = 0; k < 4; ++k) {
    const std::string out = k == 3 ? "y" : "t" + std::to_string(k), raw = out + "r";
    auto& c = b.node("Conv", {in, names[k]}, {k == 3 ? out : raw});
    if (k % 2 == 0) {
      OnnxBuilder::attr_ints(c, "kernel_shape", {3, 3});
      OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
      OnnxBuilder::attr_i(c, "group", k == 0 ? 16 : 32);
    }
    if (k < 3) b.node("Relu", {raw}, {out});
    in = out;
  }
  const std::string bytes = b.bytes();
  kiln::SessionOptions ro;
  ro.reference = true;
  auto ref = kiln::sessiontest::load(bytes, ro);
  const kiln::Tensor x = kiln::sessiontest::normal_tensor({1, 16, 20, 20}, 3);
  const kiln::Tensor want = kiln::sessiontest::run(*ref, x);
  const kiln::Graph& g = ref->graph();  // depthwise, 1x1, depthwise, 1x1
  REQUIRE(g.nodes.size() == 4);
  const auto dir = kiln::sessiontest::fresh_dir("chain_conflict");
  {
    kiln::TuningCache cache(dir.string(), kiln::CacheContext::current(kiln::effective_isa(), 1));
    for (const char* suffix : {"", " weights:cold"}) {
      cache.put_time(kiln::separable_problem(g, 0, 1) + suffix, kiln::kSeparableLabelKey, 1e-6);
      cache.put_time(kiln::separable_problem(g, 2, 1, true) + suffix, kiln::kExpandLabelKey, 1e-6);
      cache.put_time(kiln::separable_problem(g, 2, 3) + suffix, kiln::kSeparableLabelKey, 1e-6);
    }
    REQUIRE(cache.flush());
  }
  for (int load = 0; load < 2; ++load) {
    kiln::SessionOptions o;
    o.cache_dir = dir.string();
    o.threads = 1;
    auto sess = kiln::sessiontest::load(bytes, o);
    const std::vector<kiln::SeparablePair>& listed = sess->selection().separable;
    INFO("load " << load << ", pairs listed " << listed.size());
    CHECK(listed.size() == 2);  // (the middle 1x1 in one of its two pairs, and the last pair)
    std::map<int, int> uses;
    for (const kiln::SeparablePair& q : listed) ++uses[q.pw];
    CHECK(uses[1] == 1);
    // The prediction prices only the listed pairs' savings (conversions add to it).
    const kiln::Selection& sel = sess->selection();
    double priced = 0;
    for (const kiln::NodeChoice& c : sel.nodes) priced += c.ms;
    for (const kiln::SeparablePair& q : listed)
      priced -= sel.nodes[size_t(q.dw)].ms + sel.nodes[size_t(q.pw)].ms - q.ms;
    CHECK(sel.predicted_ms >= priced * (1 - 1e-9));
    CHECK(fused_steps(sess->plan()) == chains_of(listed));
    CHECK(kiln::sessiontest::rel_error(kiln::sessiontest::run(*sess, x), want) < 1e-5);
  }
}
