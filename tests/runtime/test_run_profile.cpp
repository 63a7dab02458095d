// Session::run_profiled (runtime/executor.cpp): every plan step timed, per-piece events only
// when asked for (a trace), from each thread's own list; the outputs are those of a plain run.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "jit/kernel.h"
#include "runtime/executor.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "session_test_util.h"
#include "test_rng.h"

namespace {

using kiln::test::OnnxBuilder;

// Three 3x3 convs with ReLUs and a residual Add: steps of many tiles, enough for both threads.
std::string profile_net() {
  kiln::test::XorShift r{5, 0x9f1};
  auto vals = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = r.uniform(-0.2f, 0.2f);
    return v;
  };
  OnnxBuilder b;
  b.input("x", {1, 32, 28, 28}).output("y");
  std::string in = "x";
  for (int k = 0; k < 3; ++k) {
    const std::string w = "w" + std::to_string(k), c = "c" + std::to_string(k);
    b.init_f(w, {32, 32, 3, 3}, vals(32 * 32 * 9));
    auto& n = b.node("Conv", {in, w}, {c});
    OnnxBuilder::attr_ints(n, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1});
    in = "r" + std::to_string(k);
    b.node("Relu", {c}, {in});
  }
  b.node("Add", {in, "x"}, {"y"});
  return b.bytes();
}

}  // namespace

TEST_CASE("profiled runs: step times always, per-piece events only for a trace") {
  const std::string bytes = profile_net();
  const kiln::Tensor x = kiln::sessiontest::normal_tensor({1, 32, 28, 28}, 7);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    kiln::SessionOptions o;
    o.tune = kiln::TuneMode::none;
    o.use_cache = false;
    o.threads = threads;
    auto s = kiln::sessiontest::load(bytes, o);
    const kiln::Plan& p = s->plan();
    const kiln::Tensor want = kiln::sessiontest::run(*s, x);
    for (bool events : {false, true}) {
      CAPTURE(events);
      kiln::RunProfile prof;
      prof.record_events = events;
      for (int run = 0; run < 2; ++run) {  // a second run starts from an empty record
        std::vector<kiln::Tensor> out;
        for (const auto& io : s->outputs()) out.emplace_back(io.dtype, io.shape);
        s->run_profiled({x}, out, prof);
        CHECK(kiln::sessiontest::rel_error(out[0], want) == 0.0);
        REQUIRE(prof.step_ms.size() == p.steps.size());
        double total = 0;
        for (double ms : prof.step_ms) {
          CHECK(ms >= 0.0);
          total += ms;
        }
        CHECK(total > 0.0);
        if (!events) {
          CHECK(prof.events.empty());
          continue;
        }
        // Every step with tiles has pieces, each on a thread of the session, no event twice.
        std::vector<int> pieces(p.steps.size(), 0);
        for (const auto& e : prof.events) {
          REQUIRE(e.step >= 0);
          REQUIRE(size_t(e.step) < p.steps.size());
          CHECK(e.thread >= 0);
          CHECK(e.thread < threads);
          CHECK(e.begin_us <= e.end_us);
          ++pieces[size_t(e.step)];
        }
        for (size_t i = 0; i < p.steps.size(); ++i) {
          CAPTURE(i);
          const int64_t tiles = p.steps[i].kernel->tiles();
          CHECK(pieces[i] <= tiles);
          CHECK((pieces[i] > 0) == (tiles > 0));
          if (threads == 1) CHECK(pieces[i] == (tiles > 0 ? 1 : 0));  // one piece a step
        }
      }
    }
  }
}
