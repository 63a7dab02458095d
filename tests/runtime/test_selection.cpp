// Label selection end to end: candidates and their keys, every strategy and tuning mode gives
// correct outputs, the PBQP choice is never predicted worse than local/fixed under the same
// measured costs, and the tuning cache makes the second load skip profiling and solving.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/npy.h"
#include "runtime/plan.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "session_test_util.h"

namespace fs = std::filesystem;
using kiln::Tensor;

namespace {

fs::path fixture(const std::string& name) {
  return fs::path(KILN_FIXTURE_DIR) / "models" / name;
}

using kiln::sessiontest::rel_error;

// Loads the fixture with `o`, runs its stored input, returns the error vs its stored output.
double fixture_error(const std::string& name, const kiln::SessionOptions& o,
                     std::unique_ptr<kiln::Session>* keep = nullptr) {
  auto s = kiln::Session::load_file((fixture(name) / "model.onnx").string(), o);
  Tensor in = kiln::read_npy((fixture(name) / "input_0.npy").string());
  Tensor ref = kiln::read_npy((fixture(name) / "output_0.npy").string());
  std::vector<Tensor> out;
  for (const auto& io : s->outputs()) out.emplace_back(io.dtype, io.shape);
  s->run({in}, out);
  double e = rel_error(out[0], ref);
  if (keep) *keep = std::move(s);
  return e;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(KILN_TEST_TMP) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<kiln::Isa> isas() {
  return kiln::testing::jit_isas();
}

constexpr kiln::Strategy kAllStrategies[] = {kiln::Strategy::global, kiln::Strategy::local,
                                             kiln::Strategy::fixed, kiln::Strategy::heuristic};
constexpr kiln::TuneMode kAllTuneModes[] = {kiln::TuneMode::none, kiln::TuneMode::fast,
                                            kiln::TuneMode::full};

}  // namespace

TEST_CASE("label keys round-trip and garbage keys are refused") {
  using kiln::Label;
  for (const char* k :
       {"conv.direct.nChw16c.nChw16c", "conv.gemm1x1.nhwc.nhwc", "conv.direct.nchw.nChw8c",
        "conv.winograd4.nChw16c.nChw16c", "conv.direct.nChw16c.nChw16c.u14o2", "pool.nhwc",
        "eltwise.nchw", "ref.nchw", "fc.nchw", "concat.nChw8c", "bcast.nChw16c", "view.nchw.nhwc",
        "eltwise.nChw16c.nChw16c_u8"}) {
    auto l = Label::parse(k);
    REQUIRE(l);
    CHECK(l->key() == k);
  }
  for (const char* k : {"", "conv", "conv.direct.nchw", "conv.nope.nchw.nchw", "pool.nChw4c",
                        "pool", "ref.nchw.x", "conv.direct.nchw.nchw.u99o1", "zzz.nchw",
                        "conv.direct.nchw.nchw.ux", "view.nchw.nchw", "pool.nchw.nhwc"})
    CHECK_FALSE(Label::parse(k));
}

TEST_CASE("candidates: convs get several families and layouts, other ops layout labels") {
  for (kiln::Isa isa : isas()) {
    CAPTURE(kiln::isa_name(isa));
    auto s = kiln::Session::load_file((fixture("tiny_resnet_op13") / "model.onnx").string(), {});
    const kiln::Graph& g = s->graph();
    int convs = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      auto c = kiln::candidate_labels(g, int(i), isa, false);
      REQUIRE(!c.empty());
      CHECK(c.back().kind == kiln::LabelKind::ref);  // the fallback is always there, last
      for (const auto& l : c) CHECK(kiln::Label::parse(l.key()));
      if (g.nodes[i].op == "Conv") {
        ++convs;
        CHECK(c.size() >= 3);
      }
      // The reference path offers exactly the reference label.
      auto r = kiln::candidate_labels(g, int(i), isa, true);
      REQUIRE(r.size() == 1);
      CHECK(r[0].key() == "ref.nchw");
    }
    CHECK(convs > 0);
  }
}

TEST_CASE("every strategy and tuning mode computes the right outputs on both ISAs") {
  const fs::path cache = fresh_dir("sel_cache_all");
  for (kiln::Isa isa : isas())
    for (const char* model : {"tiny_resnet_op13", "tiny_squeezenet_op13", "tiny_mobilenetv2_op13"})
      for (kiln::Strategy strategy : kAllStrategies)
        for (kiln::TuneMode tune : kAllTuneModes) {
          CAPTURE(kiln::isa_name(isa));
          CAPTURE(model);
          CAPTURE(kiln::strategy_name(strategy));
          CAPTURE(kiln::tune_mode_name(tune));
          kiln::SessionOptions o;
          o.threads = 2;
          o.max_isa = isa;
          o.strategy = strategy;
          o.tune = tune;
          o.cache_dir = cache.string();
          std::unique_ptr<kiln::Session> s;
          CHECK(fixture_error(model, o, &s) <= 1e-4);
          const kiln::Selection& sel = s->selection();
          CHECK(sel.nodes.size() == s->graph().nodes.size());
          CHECK(std::isfinite(sel.predicted_ms));
          if (tune == kiln::TuneMode::none || strategy == kiln::Strategy::heuristic)
            CHECK(sel.measurements == 0);
        }
}

TEST_CASE("global is never predicted worse than local or fixed under the same measured costs") {
  // The first load measures and caches every time; the others read the same times back, so
  // all strategies are judged on identical costs and PBQP's optimum must be <= theirs.
  const fs::path cache = fresh_dir("sel_cache_cmp");
  for (const char* model : {"tiny_resnet_op13", "tiny_squeezenet_op13", "tiny_mobilenetv2_op13"}) {
    CAPTURE(model);
    kiln::SessionOptions o;
    o.threads = 1;
    o.tune = kiln::TuneMode::full;  // every candidate has a measured time
    o.cache_dir = cache.string();
    std::unique_ptr<kiln::Session> g, l, f;
    o.strategy = kiln::Strategy::global;
    CHECK(fixture_error(model, o, &g) <= 1e-4);
    o.strategy = kiln::Strategy::local;
    CHECK(fixture_error(model, o, &l) <= 1e-4);
    o.strategy = kiln::Strategy::fixed;
    CHECK(fixture_error(model, o, &f) <= 1e-4);
    CHECK(g->selection().optimal);
    CHECK(l->selection().measurements == 0);  // everything came from the cache
    CHECK(f->selection().measurements == 0);
    CHECK(g->selection().predicted_ms <= l->selection().predicted_ms * (1 + 1e-9));
    CHECK(g->selection().predicted_ms <= f->selection().predicted_ms * (1 + 1e-9));
    // Local ignores conversions when choosing, so it may need more of them than global.
    CHECK(l->plan().reorders >= 0);
  }
}

TEST_CASE("a warm load takes the plan from the tuning cache and measures nothing") {
  const fs::path cache = fresh_dir("sel_cache_warm");
  kiln::SessionOptions o;
  o.threads = 1;
  o.cache_dir = cache.string();
  std::unique_ptr<kiln::Session> cold, warm;
  CHECK(fixture_error("tiny_resnet_op13", o, &cold) <= 1e-4);
  CHECK_FALSE(cold->selection().plan_from_cache);
  CHECK(cold->selection().measurements > 0);
  CHECK(cold->selection().cache_misses > 0);
  CHECK(fixture_error("tiny_resnet_op13", o, &warm) <= 1e-4);
  CHECK(warm->selection().plan_from_cache);
  CHECK(warm->selection().measurements == 0);
  // Same choice, same predicted total.
  REQUIRE(warm->selection().nodes.size() == cold->selection().nodes.size());
  for (size_t i = 0; i < cold->selection().nodes.size(); ++i)
    CHECK(warm->selection().nodes[i].label.key() == cold->selection().nodes[i].label.key());
  CHECK(warm->selection().predicted_ms == doctest::Approx(cold->selection().predicted_ms));

  // Another thread count is another cache context: measured again.
  o.threads = 2;
  std::unique_ptr<kiln::Session> other;
  CHECK(fixture_error("tiny_resnet_op13", o, &other) <= 1e-4);
  CHECK_FALSE(other->selection().plan_from_cache);
  CHECK(other->selection().measurements > 0);

  // Damage every cache file: the next load is still correct and re-measures.
  for (const auto& e : fs::directory_iterator(cache)) {
    if (e.path().extension() != ".kc") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0, std::ios::end);
    const auto size = int64_t(f.tellp());
    for (int64_t pos = 7; pos < size; pos += 13) {
      f.seekg(pos);
      char c = 0;
      f.read(&c, 1);
      f.seekp(pos);
      c = char(c ^ 0x5a);
      f.write(&c, 1);
    }
  }
  o.threads = 1;
  std::unique_ptr<kiln::Session> damaged;
  CHECK(fixture_error("tiny_resnet_op13", o, &damaged) <= 1e-4);
  CHECK_FALSE(damaged->selection().plan_from_cache);
  CHECK(damaged->selection().measurements > 0);

  // The cache switched off: nothing is read or written.
  const fs::path off = fresh_dir("sel_cache_off");
  o.cache_dir = off.string();
  o.use_cache = false;
  std::unique_ptr<kiln::Session> nocache;
  CHECK(fixture_error("tiny_resnet_op13", o, &nocache) <= 1e-4);
  CHECK(fs::is_empty(off));
}

TEST_CASE("strategy and tuning names") {
  kiln::Strategy s;
  kiln::TuneMode t;
  for (const char* n : {"global", "local", "fixed", "heuristic"}) {
    REQUIRE(kiln::parse_strategy(n, &s));
    CHECK(std::string(kiln::strategy_name(s)) == n);
  }
  for (const char* n : {"none", "fast", "full"}) {
    REQUIRE(kiln::parse_tune_mode(n, &t));
    CHECK(std::string(kiln::tune_mode_name(t)) == n);
  }
  CHECK_FALSE(kiln::parse_strategy("best", &s));
  CHECK_FALSE(kiln::parse_tune_mode("", &t));
}

TEST_CASE("the original conv and FC weights are released after packing; runs stay correct") {
  for (kiln::Isa isa : isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.max_isa = isa;
    o.tune = kiln::TuneMode::none;
    std::unique_ptr<kiln::Session> s;
    CHECK(fixture_error("tiny_resnet_op13", o, &s) <= 1e-4);
    const kiln::Graph& g = s->graph();
    int released = 0, kept = 0;
    for (const kiln::Node& n : g.nodes) {
      if (n.op != "Conv" && n.op != "Gemm") continue;
      const kiln::Value& w = g.value(n.inputs[1]);
      REQUIRE(w.is_const());
      (w.constant->raw() ? kept : released) += 1;
    }
    CHECK(released > 0);
    CHECK(kept == 0);
    // Reading released data is an error, not a null dereference.
    for (const kiln::Node& n : g.nodes)
      if (n.op == "Conv") CHECK_THROWS(g.value(n.inputs[1]).constant->data<float>());
  }
  // The reference path reads the originals and keeps them.
  kiln::SessionOptions r;
  r.reference = true;
  std::unique_ptr<kiln::Session> ref;
  CHECK(fixture_error("tiny_resnet_op13", r, &ref) <= 1e-4);
  for (const kiln::Node& n : ref->graph().nodes)
    if (n.op == "Conv") CHECK(ref->graph().value(n.inputs[1]).constant->raw() != nullptr);
}

// Regression (fuzz_session timeout): a 65535-image batch profiled for 80 s, mostly filling
// gigabytes of scratch with random numbers. Operands beyond 512 MB are not allocated for
// timing, and a profiling budget bounds the rest.
TEST_CASE("profiling stays bounded on a huge batch: big nodes keep the cost model") {
  kiln::SessionOptions o;
  o.batch = 30000;  // the stem conv's operands: 368 MB in + 246 MB out
  o.use_cache = false;
  o.profile_budget_ms = 1;  // nothing else fits either
  auto s = kiln::Session::load_file((fixture("dynamic_batch_op13") / "model.onnx").string(), o);
  const kiln::Selection& sel = s->selection();
  int convs = 0;
  for (const kiln::Node& n : s->graph().nodes) convs += n.op == "Conv";
  CHECK(convs > 0);
  CHECK(sel.unprofiled >= convs);
  for (size_t i = 0; i < sel.nodes.size(); ++i)
    if (s->graph().nodes[i].op == "Conv") CHECK_FALSE(sel.nodes[i].measured);
  // A normal batch with the default budget measures its convs.
  kiln::SessionOptions d;
  d.use_cache = false;
  auto small = kiln::Session::load_file((fixture("dynamic_batch_op13") / "model.onnx").string(), d);
  CHECK(small->selection().unprofiled == 0);
  CHECK(small->selection().measurements > 0);
}

// The profiling budget is wall-clock time: at the deadline measuring stops and the nodes not
// measured yet keep the cost model's choice. A plan cut short is not cached, but the times
// measured are, so later loads go on measuring until a whole plan is solved and kept.
TEST_CASE("profiling stops at the load's wall-clock budget; later loads continue") {
  const fs::path dir = fresh_dir("budget_cache");
  kiln::SessionOptions o;
  o.cache_dir = dir.string();
  o.profile_budget_ms = 0.001;  // gone after the first measurement, if any starts at all
  std::unique_ptr<kiln::Session> s;
  CHECK(fixture_error("tiny_resnet_op13", o, &s) <= 1e-4);
  const kiln::Selection& cut = s->selection();
  CHECK(cut.over_budget > 0);
  CHECK(cut.budget_exhausted);
  CHECK(cut.measurements <= 1);
  CHECK(cut.profile_budget_ms == doctest::Approx(0.001));
  int marked = 0;
  for (const kiln::NodeChoice& c : cut.nodes) {
    marked += c.over_budget;
    if (c.over_budget) CHECK_FALSE(c.measured);
  }
  CHECK(marked == cut.over_budget);

  // The next loads with room to measure: no stored plan from the cut load; once a load
  // measured everything, its plan is stored and the one after takes it.
  kiln::SessionOptions d;
  d.cache_dir = dir.string();
  auto full = kiln::Session::load_file((fixture("tiny_resnet_op13") / "model.onnx").string(), d);
  CHECK_FALSE(full->selection().plan_from_cache);
  CHECK(full->selection().over_budget == 0);
  CHECK_FALSE(full->selection().budget_exhausted);
  auto warm = kiln::Session::load_file((fixture("tiny_resnet_op13") / "model.onnx").string(), d);
  CHECK(warm->selection().plan_from_cache);
}

// A huge batch cannot keep a load busy: kernels are timed on a sample of their tiles, fresh
// scratch is charged to the budget before it is allocated, and measuring stops at the
// deadline. (A bound with a wide margin for a loaded machine and the sanitizers, not a speed
// figure.)
TEST_CASE("a huge batch loads within its profiling budget") {
  kiln::SessionOptions o;
  o.batch = 4096;
  o.use_cache = false;
  o.profile_budget_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  auto s = kiln::Session::load_file((fixture("dynamic_batch_op13") / "model.onnx").string(), o);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s->selection().profile_ms < 300 + 3000);
  CHECK(ms < 300 + 6000);
  MESSAGE("batch 4096: load " << ms << " ms, profiling " << s->selection().profile_ms << " ms, "
                              << s->selection().measurements << " measurements");
}

// Regression: with fast tuning, the fixed strategy's direct labels were pruned wherever
// another family was much faster (and per layout signature only the cheapest label was
// offered), so "fixed" quietly ran Winograd on VGG-16.
TEST_CASE("the fixed strategy runs direct (or depthwise) convs on the blocked layout") {
  for (kiln::Isa isa : isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.max_isa = isa;
    o.strategy = kiln::Strategy::fixed;
    o.use_cache = false;
    std::unique_ptr<kiln::Session> s;
    CHECK(fixture_error("tiny_resnet_op13", o, &s) <= 1e-4);
    const kiln::Layout b = isa == kiln::Isa::avx512 ? kiln::Layout::nChw16c : kiln::Layout::nChw8c;
    int convs = 0;
    for (size_t i = 0; i < s->graph().nodes.size(); ++i) {
      const kiln::Label& l = s->selection().nodes[i].label;
      if (l.kind != kiln::LabelKind::conv) continue;
      ++convs;
      CAPTURE(l.key());
      CHECK((l.conv.family == kiln::ConvFamily::direct ||
             l.conv.family == kiln::ConvFamily::depthwise));
      CHECK(l.conv.src == b);
      CHECK(l.conv.dst == b);
    }
    CHECK(convs > 0);
  }
}

// Regression (fuzz_session timeout): fast tuning timed a node's only label, a scalar reference
// Transpose of a 65535-image batch (1 s; 33 s under the sanitizers). A sole label has no choice
// to inform: fast leaves it to the cost model, full still measures it. (Transpose, Gather,
// ScatterND and Einsum have JIT labels now; a ConvTranspose of computed weights has only the
// reference one.)
TEST_CASE("fast tuning does not time a node's only label; full does") {
  kiln::test::OnnxBuilder b;
  b.input("x", {2, 8, 3, 3}).input("w", {8, 4, 2, 2}).output("y");
  b.node("ConvTranspose", {"x", "w"}, {"y"});
  const std::string bytes = b.bytes();
  for (kiln::TuneMode tune : {kiln::TuneMode::fast, kiln::TuneMode::full}) {
    CAPTURE(kiln::tune_mode_name(tune));
    kiln::SessionOptions o;
    o.use_cache = false;
    o.tune = tune;
    auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
    const kiln::Selection& sel = s->selection();
    int sole = 0;
    for (size_t i = 0; i < sel.nodes.size(); ++i) {
      if (sel.nodes[i].candidates != 1) continue;
      ++sole;
      CHECK(sel.nodes[i].measured == (tune == kiln::TuneMode::full));
    }
    CHECK(sole > 0);
  }
}

// A node whose every label is a reference kernel (a ConvTranspose whose weights are a model
// input: its lowering needs constant weights) has nothing worth timing: the cost model picks
// for it without calling that "over budget", and the plan is kept in the cache like any fully
// measured one.
TEST_CASE("a node with only reference labels is not over budget; its plan is cached") {
  kiln::test::OnnxBuilder b;
  b.input("x", {1, 16, 8, 8}).input("wi", {16, 4, 1, 1}).output("y");
  std::vector<float> w(16 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) / 8;
  b.init_f("w", {16, 16, 1, 1}, w);
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Relu", {"c"}, {"r"});
  b.node("ConvTranspose", {"r", "wi"}, {"y"});
  const std::string bytes = b.bytes();
  const fs::path dir = fresh_dir("ref_only_cache");
  kiln::SessionOptions o;
  o.cache_dir = dir.string();
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  const kiln::Graph& g = s->graph();
  int ref_only = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto c = kiln::candidate_labels(g, int(i), s->isa(), false);
    if (!c.empty() && std::all_of(c.begin(), c.end(), [](const kiln::Label& l) {
          return l.kind == kiln::LabelKind::ref;
        }))
      ++ref_only;
  }
  REQUIRE(ref_only > 0);  // else this test tests nothing
  CHECK(s->selection().over_budget == 0);
  auto warm = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  CHECK(warm->selection().plan_from_cache);
}
