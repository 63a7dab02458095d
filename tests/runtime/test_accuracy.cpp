// The accuracy modes (runtime/selection.h): names, strict plans without lossy families, the
// plan cache kept apart per mode, and the guard of the default mode on a chain of 3x3 convs
// whose output is small next to its activations (so Winograd F(4x4,3x3)'s rounding shows).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "graph/onnx_builder.h"
#include "graph/passes.h"
#include "isa_coverage.h"
#include "jit/conv/conv_families.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "session_test_util.h"

namespace fs = std::filesystem;
using kiln::Accuracy;
using kiln::Tensor;

using namespace kiln::sessiontest;

namespace {

// A padded kxk Conv of `in` with weights `w` (an initializer of b) into `out`.
void conv_k(kiln::test::OnnxBuilder& b, const std::string& w, const std::string& in,
            const std::string& out, int64_t groups = 1, int64_t k = 3) {
  auto& c = b.node("Conv", {in, w}, {out});
  kiln::test::OnnxBuilder::attr_ints(c, "kernel_shape", {k, k});
  kiln::test::OnnxBuilder::attr_ints(c, "pads", {k / 2, k / 2, k / 2, k / 2});
  if (groups > 1) kiln::test::OnnxBuilder::attr_i(c, "group", groups);
}

// `depth` 3x3 convs (`ch` channels, ReLU), then two 3x3 convs of the last activation whose
// weights differ by a factor (1 + eps), and their difference as the output: it is eps times
// smaller than either conv's output, whose rounding errors do not cancel, so every conv's
// rounding shows 1/eps times larger in the output's relative error - Winograd F(4x4,3x3)'s
// beyond the budget, the exact families' well within the tolerance.
// groups: of every conv after the first (whose input has 8 channels); pointwise: a 1x1 conv
// of the difference (the output); k: the convs' kernel size (1: no Winograd).
std::string twin_chain(int depth, int64_t ch, float eps, int64_t groups = 1, bool pointwise = false,
                       int64_t k = 3) {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 8, 20, 20});
  std::mt19937 rng(7);
  std::string cur = "x";
  int64_t ic = 8;
  std::vector<float> wv;
  int64_t g = 1;
  auto conv = [&](const std::string& n, const std::string& in, const std::string& out) {
    b.init_f("w" + n, {ch, ic / g, k, k}, wv);
    conv_k(b, "w" + n, in, out, g, k);
  };
  for (int l = 0; l <= depth; ++l) {
    g = l == 0 ? 1 : groups;
    std::normal_distribution<float> w(0.f, std::sqrt(2.f / float(k * k * ic / g)));
    wv.resize(size_t(ch * ic / g * k * k));
    for (float& v : wv) v = w(rng);
    const std::string n = std::to_string(l);
    if (l == depth) {
      conv("a", cur, "a");
      for (float& v : wv) v *= 1 + eps;
      conv("b", cur, "b");
      b.node("Sub", {"b", "a"}, {pointwise ? "d" : "y"});
      if (pointwise) {
        std::normal_distribution<float> pw(0.f, std::sqrt(1.f / float(ch)));
        std::vector<float> wp(size_t(ch * ch));
        for (float& v : wp) v = pw(rng);
        b.init_f("wp", {ch, ch, 1, 1}, wp);
        b.node("Conv", {"d", "wp"}, {"y"});
      }
      break;
    }
    conv(n, cur, "c" + n);
    b.node("Relu", {"c" + n}, {"r" + n});
    cur = "r" + n;
    ic = ch;
  }
  b.output("y");
  return b.bytes();
}

Tensor normal_input(uint64_t seed) {
  return normal_tensor({1, 8, 20, 20}, seed);
}

Tensor reference_output(const std::string& model, const Tensor& x) {
  kiln::SessionOptions ro;
  ro.reference = true;
  return run(*load(model, ro), x);
}

// One thread on `isa`, plans from the cost model (which picks F4 for wide 3x3 convs).
kiln::SessionOptions untuned(kiln::Isa isa) {
  kiln::SessionOptions o;
  o.threads = 1;
  o.max_isa = isa;
  o.tune = kiln::TuneMode::none;
  return o;
}

int lossy_nodes(const kiln::Selection& sel) {
  int n = 0;
  for (const kiln::NodeChoice& c : sel.nodes)
    n += c.label.kind == kiln::LabelKind::conv &&
         kiln::conv_family(c.label.conv.family).transform_error > 0;
  return n;
}

// Model m's plan in the fast mode (every lossy family, no guard) on the first JIT ISA, one thread,
// untuned (the guard is the same on each ISA): its lossy convs and its error on a normal input,
// which must exceed the guard's budget.
struct FastPlan {
  FastPlan(const std::string& model, uint64_t seed)
      : x(normal_input(seed)), ref(reference_output(model, x)) {
    const std::vector<kiln::Isa> isas = kiln::testing::jit_isas();
    REQUIRE(!isas.empty());
    o = untuned(isas.front());
    o.accuracy = Accuracy::fast;
    fast = load(model, o);
    lossy = lossy_nodes(fast->selection());
    e_fast = rel_error(run(*fast, x), ref);
    REQUIRE(e_fast > kiln::kAccuracyBudget);
  }
  // The same options in the default (guarded) mode.
  kiln::SessionOptions guarded() const {
    kiln::SessionOptions g = o;
    g.accuracy = Accuracy::guarded;
    return g;
  }
  Tensor x, ref;
  kiln::SessionOptions o;
  std::unique_ptr<kiln::Session> fast;
  int lossy = 0;
  double e_fast = 0;
};

}  // namespace

TEST_CASE("accuracy mode names parse; other names are refused") {
  for (Accuracy a : {Accuracy::strict, Accuracy::guarded, Accuracy::fast}) {
    Accuracy back = Accuracy::fast;
    REQUIRE(kiln::parse_accuracy(kiln::accuracy_name(a), &back));
    CHECK(back == a);
  }
  CHECK(std::string(kiln::accuracy_name(Accuracy::guarded)) == "default");
  Accuracy x = Accuracy::guarded;
  for (const char* bad : {"", "guarded", "Strict", "fast ", "exact"})
    CHECK_FALSE(kiln::parse_accuracy(bad, &x));
  CHECK(x == Accuracy::guarded);
}

TEST_CASE("strict plans have no lossy family; default's guard removes F4 where it adds error") {
  const std::string m = twin_chain(2, 32, 1.f / 64);
  const Tensor x = normal_input(1);
  const Tensor ref = reference_output(m, x);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o = untuned(isa);  // the cost model picks F4 for these wide 3x3 convs
    o.accuracy = Accuracy::fast;
    auto fast = load(m, o);
    REQUIRE(lossy_nodes(fast->selection()) > 0);
    CHECK(fast->selection().probes == 0);
    const double e_fast = rel_error(run(*fast, x), ref);
    CHECK(e_fast > kiln::kAccuracyBudget);  // the fixture shows what F4 adds

    o.accuracy = Accuracy::strict;
    auto strict = load(m, o);
    CHECK(lossy_nodes(strict->selection()) == 0);
    const double e_strict = rel_error(run(*strict, x), ref);

    o.accuracy = Accuracy::guarded;
    auto def = load(m, o);
    const kiln::Selection& sel = def->selection();
    CHECK(sel.probes >= 3);  // exact twice, then the plan
    CHECK(sel.demoted > 0);
    CHECK(sel.probe_error <= kiln::kAccuracyBudget);
    const double e_def = rel_error(run(*def, x), ref);
    CAPTURE(e_fast);
    CAPTURE(e_strict);
    CAPTURE(e_def);
    CHECK(e_def < e_fast / 2);
    CHECK(e_def < e_strict + kiln::kAccuracyBudget);

    // A budget the fixture's F4 meets: nothing is demoted.
    o.accuracy_budget = 1.0;
    auto loose = load(m, o);
    CHECK(loose->selection().demoted == 0);
    CHECK(lossy_nodes(loose->selection()) == lossy_nodes(fast->selection()));
  }
}

// Grouped convs on Winograd (groups of 32 channels): the guard's exact stand-ins are the
// grouped family's (no direct conv applies to them).
TEST_CASE("default's guard demotes grouped Winograd convs onto the grouped family") {
  const std::string m = twin_chain(2, 64, 1.f / 64, 2);
  const Tensor x = normal_input(2);
  const Tensor ref = reference_output(m, x);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o = untuned(isa);  // the cost model picks F4 for 32 channels a group
    o.accuracy = Accuracy::fast;
    auto fast = load(m, o);
    REQUIRE(lossy_nodes(fast->selection()) == 3);
    const double e_fast = rel_error(run(*fast, x), ref);
    CHECK(e_fast > kiln::kAccuracyBudget);
    o.accuracy = Accuracy::guarded;
    auto def = load(m, o);
    const kiln::Selection& sel = def->selection();
    CHECK(sel.demoted > 0);
    CHECK(sel.probe_error <= kiln::kAccuracyBudget);
    for (const kiln::NodeChoice& c : sel.nodes)
      if (c.label.kind == kiln::LabelKind::conv && c.label.conv.family != kiln::ConvFamily::direct)
        CHECK((c.label.conv.family == kiln::ConvFamily::grouped ||
               kiln::conv_family(c.label.conv.family).transform_error > 0));
    const double e_def = rel_error(run(*def, x), ref);
    CAPTURE(e_fast);
    CAPTURE(e_def);
    CHECK(e_def < e_fast / 2);
  }
}

int bf16_nodes(const kiln::Selection& sel) {
  int n = 0;
  for (const kiln::NodeChoice& c : sel.nodes)
    n += kiln::layout_bf16(c.label.in) || kiln::layout_bf16(c.label.out) ||
         c.label.precision == kiln::Precision::bf16;
  return n;
}

// A bf16 plan whose error is within the bf16 guard's budget (here: any) keeps the Winograd convs
// the f32 plan of the same model loses (the probe's output would differ at bf16's rounding, not
// Winograd's): the Winograd guard does not run, the bf16 guard probes twice (f32, the plan).
// With every bf16 layer sent back, the plan is an f32 one and the Winograd guard takes over: the
// layers it moves off Winograd must not fall to their bf16 labels, which no probe would check
// (a DBNet-like model did: bench/NOTES.md, session 50).
TEST_CASE("a bf16 plan keeps its Winograd convs; one sent back to f32 stays f32") {
  if (!kiln::testing::has_bf16()) return;
  const std::string m = twin_chain(2, 256, 1.f / 64, 1, true);
  const Tensor x = normal_input(3);
  const Tensor ref = reference_output(m, x);
  kiln::SessionOptions o = untuned(kiln::Isa::avx512);
  o.precision = kiln::Precision::bf16;
  o.accuracy = Accuracy::guarded;
  o.bf16_accuracy_budget = 1.0;
  auto s = load(m, o);
  const kiln::Selection& sel = s->selection();
  REQUIRE(bf16_nodes(sel) > 0);
  REQUIRE(lossy_nodes(sel) > 0);
  CHECK(sel.guard_bf16);
  CHECK(sel.demoted == 0);
  CHECK(sel.probes == 2);
  // The output is a 1x1 conv of the difference of two convs, 64x smaller than either: bf16's
  // relative error on it is ~64 x 2^-9.
  CHECK(rel_error(run(*s, x), ref) < 0.5);

  o.bf16_accuracy_budget = 1e-12;  // every bf16 layer goes back
  o.accuracy_budget = 1e-12;       // and every Winograd one
  auto f = load(m, o);
  const kiln::Selection& back = f->selection();
  CHECK(back.guard_bf16);
  CHECK(bf16_nodes(back) == 0);
  CHECK(lossy_nodes(back) == 0);
  const double e = rel_error(run(*f, x), ref);
  CAPTURE(e);
  CHECK(e <= 64 * kiln::kAccuracyBudget);
}

// The twin convs' own roundings show 64x larger in the output (their inputs are rounded alike and
// cancel); the convs before them and the 1x1 after add bf16's ordinary error. The bf16 guard puts
// what exceeds its budget back in f32 and leaves bf16 where it costs little, in strict mode too
// (no Winograd there); the fast mode rounds everything.
TEST_CASE("the bf16 guard puts the layers that add bf16's error back in f32") {
  if (!kiln::testing::has_bf16()) return;
  const std::string m = twin_chain(2, 256, 1.f / 64, 1, true, 1);
  const Tensor x = normal_input(5);  // not the probe's input
  const Tensor ref = reference_output(m, x);
  kiln::SessionOptions o = untuned(kiln::Isa::avx512);
  o.precision = kiln::Precision::bf16;
  o.accuracy = Accuracy::fast;
  auto fast = load(m, o);
  const int all = bf16_nodes(fast->selection());
  const double e_fast = rel_error(run(*fast, x), ref);
  CAPTURE(all);
  CAPTURE(e_fast);
  CHECK_FALSE(fast->selection().guard_bf16);
  REQUIRE(e_fast > 2 * kiln::kBf16AccuracyBudget);
  for (Accuracy acc : {Accuracy::guarded, Accuracy::strict}) {
    CAPTURE(kiln::accuracy_name(acc));
    o.accuracy = acc;
    auto s = load(m, o);
    const kiln::Selection& sel = s->selection();
    CHECK(sel.guard_bf16);
    CHECK(sel.demoted > 0);
    CHECK(sel.probe_error <= kiln::kBf16AccuracyBudget);
    const int left = bf16_nodes(sel);
    CAPTURE(left);
    CHECK(left > 0);
    CHECK(left < all);
    const double e = rel_error(run(*s, x), ref);
    CAPTURE(e);
    CHECK(e <= 1.5 * kiln::kBf16AccuracyBudget);
    CHECK(e < e_fast / 3);
    if (acc == Accuracy::strict) CHECK(lossy_nodes(sel) == 0);
  }
}

TEST_CASE("strict refuses a forced lossy family; a forced family skips the guard") {
  const std::string m = twin_chain(1, 32, 1.f / 64);
  kiln::SessionOptions o;
  o.threads = 1;
  o.tune = kiln::TuneMode::none;
  o.force_family = kiln::ConvFamily::winograd4;
  o.accuracy = Accuracy::strict;
  try {
    load(m, o);
    FAIL("strict accepted a forced winograd4");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Code::invalid_argument);
    CHECK(std::string(e.what()).find("winograd4") != std::string::npos);
  }
  o.accuracy = Accuracy::guarded;
  auto s = load(m, o);
  CHECK(s->selection().probes == 0);
  CHECK(lossy_nodes(s->selection()) > 0);
}

TEST_CASE("the tuning cache keeps plans apart per accuracy mode") {
  const std::string m = twin_chain(1, 32, 1.f / 64);
  const fs::path dir = fresh_dir("accuracy_cache");
  kiln::SessionOptions o;
  o.threads = 1;
  o.cache_dir = dir.string();
  o.accuracy = Accuracy::fast;
  auto first = load(m, o);
  CHECK_FALSE(first->selection().plan_from_cache);
  o.accuracy = Accuracy::strict;
  auto strict = load(m, o);
  CHECK_FALSE(strict->selection().plan_from_cache);  // fast's plan is not strict's
  CHECK(strict->selection().cache_hits > 0);         // but the kernel times are shared
  CHECK(lossy_nodes(strict->selection()) == 0);
  auto strict2 = load(m, o);
  CHECK(strict2->selection().plan_from_cache);
  CHECK(lossy_nodes(strict2->selection()) == 0);
  o.accuracy = Accuracy::fast;
  auto fast2 = load(m, o);
  CHECK(fast2->selection().plan_from_cache);
  CHECK(lossy_nodes(fast2->selection()) == lossy_nodes(first->selection()));
}

TEST_CASE("a model the guard cannot probe (an int64 input) gets exact families only") {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 8, 20, 20});
  b.input("idx", {2}, onnx::TensorProto::INT64);
  std::mt19937 rng(3);
  std::normal_distribution<float> w(0.f, 0.1f);
  int64_t ic = 8;
  std::string cur = "x";
  for (int l = 0; l < 2; ++l) {
    std::vector<float> wv(size_t(32 * ic * 9));
    for (float& v : wv) v = w(rng);
    const std::string n = std::to_string(l);
    b.init_f("w" + n, {32, ic, 3, 3}, wv);
    auto& c = b.node("Conv", {cur, "w" + n}, {"c" + n});
    kiln::test::OnnxBuilder::attr_ints(c, "kernel_shape", {3, 3});
    kiln::test::OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
    cur = "c" + n;
    ic = 32;
  }
  b.init_f("table", {4, 3}, std::vector<float>(12, 1.f));
  b.node("Gather", {"table", "idx"}, {"z"});
  b.output(cur).output("z");
  const std::string m = b.bytes();
  kiln::SessionOptions o;
  o.threads = 1;
  o.tune = kiln::TuneMode::none;
  o.accuracy = Accuracy::fast;
  REQUIRE(lossy_nodes(load(m, o)->selection()) > 0);
  o.accuracy = Accuracy::guarded;
  auto s = load(m, o);
  CHECK(lossy_nodes(s->selection()) == 0);
  CHECK(s->selection().demoted > 0);
}

// The guard's probes count against the profiling budget (a huge batch made each probe cost
// seconds): when three runs of the plan would not fit it, or once the probes pass it, the
// lossy convs are demoted without (more) probes. Here the budget is tiny, so no probe is
// started; the same model with room keeps its Winograd convs (the guard clears them) and
// probes three times.
TEST_CASE("the guard stops probing past the profiling budget and keeps exact families only") {
  const std::string m = twin_chain(1, 32, 1.f / 2);  // eps 1/2: Winograd's error within budget
  kiln::SessionOptions o;
  o.threads = 1;
  o.tune = kiln::TuneMode::none;  // the cost model picks Winograd for the 3x3 convs
  o.accuracy = Accuracy::guarded;
  auto roomy = load(m, o);
  REQUIRE(lossy_nodes(roomy->selection()) > 0);
  CHECK(roomy->selection().probes == 3);
  CHECK(roomy->selection().demoted == 0);
  o.profile_budget_ms = 1e-3;
  auto tight = load(m, o);
  const kiln::Selection& sel = tight->selection();
  CHECK(lossy_nodes(sel) == 0);
  CHECK(sel.demoted == lossy_nodes(roomy->selection()));
  CHECK(sel.probes == 0);
  CHECK(kiln::accuracy_summary(sel).find("0 probes, error not measured") != std::string::npos);
  CHECK(kiln::accuracy_summary(roomy->selection()).find("added, 0 convs demoted") !=
        std::string::npos);
  const Tensor x = normal_input(4);
  CHECK(rel_error(run(*tight, x), reference_output(m, x)) < 1e-4);
}

// With fewer probes left than its bisection needs (here capped: the profiling budget's time left
// sets the cap otherwise), the guard measures error shares of larger groups of adjacent layers
// and still ends within its budget, with fewer probes.
TEST_CASE("the guard measures shares in groups when too few probes are left") {
  const std::string m = twin_chain(5, 32, 1.f / 64);
  const FastPlan f(m, 5);
  const int lossy = f.lossy;
  const double e_fast = f.e_fast;
  REQUIRE(lossy >= 5);
  kiln::SessionOptions o = f.guarded();
  auto each = load(m, o);
  CHECK(each->selection().probes > 4);  // exact twice, the plan, share probes, the plan again
  for (int cap : {1, 2}) {
    CAPTURE(cap);
    o.guard_share_probes = cap;
    auto grouped = load(m, o);
    const kiln::Selection& sel = grouped->selection();
    CHECK(sel.demoted > 0);
    CHECK(sel.probe_error >= 0);
    CHECK(sel.probe_error <= kiln::kAccuracyBudget);
    CHECK(sel.probes < each->selection().probes);
    const double e = rel_error(run(*grouped, f.x), f.ref);
    CAPTURE(e_fast);
    CAPTURE(e);
    CHECK(e < e_fast / 2);
  }
}

// A 1x1 conv (exact on every family) to `ch` channels, the twin convs of twin_chain and their
// difference, then `depth` 3x3 convs (ReLU) of it: the twins' rounding shows 1/eps larger in
// the output, the chain's only at its own relative size, so two layers add nearly all the error.
// (In twin_chain every layer shows alike: any change before the twins re-draws their amplified
// rounding.)
std::string twins_first(int depth, int64_t ch, float eps) {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 8, 20, 20});
  std::mt19937 rng(11);
  auto weights = [&](int64_t oc, int64_t ic, int64_t k) {
    std::normal_distribution<float> w(0.f, std::sqrt(2.f / float(ic * k * k)));
    std::vector<float> v(size_t(oc * ic * k * k));
    for (float& x : v) x = w(rng);
    return v;
  };
  b.init_f("w_in", {ch, 8, 1, 1}, weights(ch, 8, 1));
  b.node("Conv", {"x", "w_in"}, {"p"});
  b.node("Relu", {"p"}, {"r"});
  std::vector<float> wt = weights(ch, ch, 3);
  b.init_f("wa", {ch, ch, 3, 3}, wt);
  for (float& v : wt) v *= 1 + eps;
  b.init_f("wb", {ch, ch, 3, 3}, wt);
  conv_k(b, "wa", "r", "a");
  conv_k(b, "wb", "r", "b");
  b.node("Sub", {"b", "a"}, {"d0"});
  std::string cur = "d0";
  for (int l = 0; l < depth; ++l) {
    const std::string n = std::to_string(l);
    b.init_f("w" + n, {ch, ch, 3, 3}, weights(ch, ch, 3));
    conv_k(b, "w" + n, cur, "c" + n);
    cur = "d" + std::to_string(l + 1);
    b.node("Relu", {"c" + n}, {cur});
  }
  b.output(cur);
  return b.bytes();
}

// The guard's bisection over groups of layers finds the two that add the error with fewer
// share probes than layers, demotes them and keeps the chain's Winograd convs.
TEST_CASE("the guard finds the few layers that add the error in fewer probes than layers") {
  const std::string m = twins_first(12, 32, 1.f / 64);
  const FastPlan f(m, 6);
  const int lossy = f.lossy;
  const double e_fast = f.e_fast;
  REQUIRE(lossy >= 12);
  kiln::SessionOptions o = f.guarded();
  auto def = load(m, o);
  const kiln::Selection& sel = def->selection();
  CHECK(sel.probe_error <= kiln::kAccuracyBudget);
  CHECK(sel.probes < 3 + lossy);  // fewer than a share probe per layer
  CHECK(sel.demoted >= 1);
  CHECK(sel.demoted <= 3);
  // A demoted conv moves to a family adding less error (F4 -> F2, or an exact one).
  const kiln::Graph& g = def->graph();
  REQUIRE(g.nodes.size() == f.fast->graph().nodes.size());
  auto error_of = [](const kiln::NodeChoice& c) {
    return c.label.kind == kiln::LabelKind::conv
               ? kiln::conv_family(c.label.conv.family).transform_error
               : 0.0;
  };
  int twins_milder = 0, others_kept = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const double before = error_of(f.fast->selection().nodes[i]), after = error_of(sel.nodes[i]);
    if (before == 0) continue;
    bool twin = false;  // the twin convs: the two whose outputs the Sub reads
    for (const kiln::Node& user : g.nodes)
      twin |= user.op == "Sub" && !g.nodes[i].outputs.empty() &&
              std::count(user.inputs.begin(), user.inputs.end(), g.nodes[i].outputs[0]) > 0;
    if (twin)
      twins_milder += after < before;
    else
      others_kept += after == before;
  }
  CHECK(twins_milder >= 1);
  CHECK(others_kept >= lossy - 3);
  const double e = rel_error(run(*def, f.x), f.ref);
  CAPTURE(e_fast);
  CAPTURE(e);
  CHECK(e < e_fast / 2);
}

// The guard's memory bound counts the activations alive at once, not all of them: a long chain
// holds two at a time (a video net's 2.7 GB of tensors had a few hundred MB live, and its
// Winograd convs were demoted unprobed).
TEST_CASE("peak_live_bytes: activations alive at once") {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 1000});
  b.node("Relu", {"x"}, {"a"}, "r0");
  b.node("Relu", {"a"}, {"c"}, "r1");
  b.node("Relu", {"c"}, {"d"}, "r2");
  b.node("Relu", {"d"}, {"e"}, "r3");
  b.node("Relu", {"e"}, {"f"}, "r4");
  b.output("f");
  kiln::Graph chain = kiln::test::import(b);
  kiln::infer_shapes(chain);
  CHECK(kiln::peak_live_bytes(chain) == 8000);  // input and output of one Relu
  // x read again at the end: alive throughout; y2 a second output, alive to the end.
  kiln::test::OnnxBuilder b2;
  b2.input("x", {1, 1000});
  b2.init_f("w", {1, 1000}, std::vector<float>(1000, 1.f));  // a constant: no activation
  b2.node("Relu", {"x"}, {"a"}, "r0");
  b2.node("Mul", {"a", "w"}, {"y2"}, "m");
  b2.node("Relu", {"y2"}, {"c"}, "r1");
  b2.node("Relu", {"c"}, {"d"}, "r2");
  b2.node("Add", {"d", "x"}, {"y"}, "add");
  b2.output("y");
  b2.output("y2");
  kiln::Graph g = kiln::test::import(b2);
  kiln::infer_shapes(g);
  CHECK(kiln::peak_live_bytes(g) == 16000);  // x, y2 and a Relu's input and output
}
