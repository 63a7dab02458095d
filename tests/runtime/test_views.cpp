// Reshaping ops (Flatten, Reshape, Squeeze, Unsqueeze, a surviving Identity, NCHW <-> NHWC
// Transposes) as zero-copy views:
// sessions on small graphs match the reference path on both ISAs and every strategy, each such
// node is a step without tiles (no reference kernel), and the memory plan never lets an alias
// share bytes with a tensor alive at the same time — views of graph inputs, views that are graph
// outputs, views with several consumers, chains of views and views feeding a concat included.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "jit/kernel.h"
#include "runtime/executor.h"
#include "runtime/labels.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "test_rng.h"

using kiln::Plan;
using kiln::Tensor;
using kiln::test::OnnxBuilder;
using kiln::test::XorShift;

namespace {

// (The tests' Transposes are all NCHW <-> NHWC ones, which are views too.)
bool is_view_op(const std::string& op) {
  return op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Identity" || op == "Transpose";
}

// Builds a graph of input "x" with random weights; names its values v1, v2, ...
struct Net {
  explicit Net(kiln::Shape x) : in(x) { b.input("x", std::move(x)); }
  kiln::Shape in;
  OnnxBuilder b;
  XorShift r{7, 0x71e5};
  int next = 0;
  std::string fresh() { return "v" + std::to_string(++next); }
  std::vector<float> values(int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = r.uniform(-0.5f, 0.5f);
    return v;
  }
  std::string conv(const std::string& x, int64_t cin, int64_t cout, int64_t k) {
    const std::string w = fresh(), bias = fresh(), y = fresh();
    b.init_f(w, {cout, cin, k, k}, values(cout * cin * k * k));
    b.init_f(bias, {cout}, values(cout));
    auto& n = b.node("Conv", {x, w, bias}, {y});
    OnnxBuilder::attr_ints(n, "kernel_shape", {k, k});
    OnnxBuilder::attr_ints(n, "pads", {k / 2, k / 2, k / 2, k / 2});
    return relu(y);
  }
  std::string relu(const std::string& x) { return op("Relu", {x}); }
  std::string gemm(const std::string& x, int64_t k, int64_t n) {
    const std::string w = fresh(), bias = fresh(), y = fresh();
    b.init_f(w, {n, k}, values(n * k));
    b.init_f(bias, {n}, values(n));
    OnnxBuilder::attr_i(b.node("Gemm", {x, w, bias}, {y}), "transB", 1);
    return y;
  }
  std::string flatten(const std::string& x) {
    const std::string y = fresh();
    OnnxBuilder::attr_i(b.node("Flatten", {x}, {y}), "axis", 1);
    return y;
  }
  // Reshape, Squeeze, Unsqueeze: the second input is an int64 constant.
  std::string shaped(const std::string& op_type, const std::string& x, std::vector<int64_t> v) {
    const std::string c = fresh();
    b.init_i(c, {int64_t(v.size())}, v);
    return op(op_type, {x, c});
  }
  std::string concat(const std::string& a, const std::string& c) {
    const std::string y = fresh();
    OnnxBuilder::attr_i(b.node("Concat", {a, c}, {y}), "axis", 1);
    return y;
  }
  std::string op(const std::string& op_type, std::vector<std::string> ins) {
    const std::string y = fresh();
    b.node(op_type, std::move(ins), {y});
    return y;
  }
};

double rel_error(const Tensor& got, const Tensor& ref) {
  double maxref = 0, maxdiff = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double g = got.data<float>()[i], w = ref.data<float>()[i];
    if (!std::isfinite(g)) return INFINITY;
    maxref = std::max(maxref, std::fabs(w));
    maxdiff = std::max(maxdiff, std::fabs(g - w));
  }
  return maxref > 0 ? maxdiff / maxref : maxdiff;
}

std::vector<Tensor> run(const kiln::Session& s, const Tensor& x) {
  std::vector<Tensor> out;
  for (const auto& io : s.outputs()) out.emplace_back(io.dtype, io.shape);
  s.run({x}, out);
  return out;
}

// Where each plan tensor's bytes live: its root (no parent) and the offset inside it.
struct Root {
  size_t root;
  int64_t at;
};
Root root_of(const Plan& p, size_t t) {
  Root r{t, 0};
  while (p.tensors[r.root].parent >= 0) {
    r.at += p.tensors[r.root].parent_offset;
    r.root = size_t(p.tensors[r.root].parent);
  }
  return r;
}

// The memory plan's promise, checked independently of its implementation: every view lies in
// its root and at the root's offset plus its place; two arena roots alive at the same step
// (first .. last step touching the root or any view of it; to the end for a root whose view
// is a graph output, copied out after the run) never share bytes.
void check_memory(const Plan& p) {
  const size_t nt = p.tensors.size(), end = p.steps.size();
  std::vector<size_t> first(nt, SIZE_MAX), last(nt, 0);
  auto use = [&](int t, size_t step) {
    if (t < 0) return;
    const size_t root = root_of(p, size_t(t)).root;
    first[root] = std::min(first[root], step);
    last[root] = std::max(last[root], step);
  };
  for (size_t i = 0; i < end; ++i) {
    for (int t : p.steps[i].src) use(t, i);
    for (int t : p.steps[i].dst) use(t, i);
  }
  for (int t : p.outputs) use(t, end);
  for (size_t t = 0; t < nt; ++t) {
    const Root r = root_of(p, t);
    CAPTURE(t);
    CHECK(r.at + p.tensors[t].bytes <= p.tensors[r.root].bytes);
    if (p.tensors[r.root].offset >= 0)
      CHECK(p.tensors[t].offset == p.tensors[r.root].offset + r.at);
  }
  for (size_t a = 0; a < nt; ++a)
    for (size_t b = a + 1; b < nt; ++b) {
      const kiln::PlanTensor &ta = p.tensors[a], &tb = p.tensors[b];
      if (ta.parent >= 0 || tb.parent >= 0 || ta.offset < 0 || tb.offset < 0) continue;
      if (first[a] == SIZE_MAX || first[b] == SIZE_MAX) continue;
      if (last[a] < first[b] || last[b] < first[a]) continue;
      CAPTURE(a);
      CAPTURE(b);
      CHECK((ta.offset + ta.bytes <= tb.offset || tb.offset + tb.bytes <= ta.offset));
    }
}

// Loads `b` on every JIT ISA with several strategies, runs it on a random input of `in_shape`
// and compares every output with the reference path; every reshaping node must be a view (a
// step without tiles), no step a reference kernel, and the memory plan sound.
void check_views(const Net& net, int want_views) {
  const std::string bytes = net.b.bytes();
  const Tensor x = kiln::test::uniform_tensor(net.in, XorShift(3, 0x51e), -1.f, 1.f);
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  ro.threads = 1;
  auto ref_session = kiln::Session::load_memory(bytes.data(), bytes.size(), ro);
  const std::vector<Tensor> want = run(*ref_session, x);
  for (kiln::Isa isa : kiln::testing::jit_isas())
    for (kiln::Strategy st : {kiln::Strategy::global, kiln::Strategy::fixed, kiln::Strategy::local})
      for (int threads : {1, 2}) {
        kiln::SessionOptions o;
        o.max_isa = isa;
        o.strategy = st;
        o.tune = kiln::TuneMode::none;
        o.use_cache = false;
        o.threads = threads;
        const std::string isa_s = kiln::isa_name(isa), st_s = kiln::strategy_name(st);
        CAPTURE(isa_s);
        CAPTURE(st_s);
        CAPTURE(threads);
        auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
        const kiln::Graph& g = s->graph();
        const Plan& p = s->plan();
        // A Transpose's view changes the layout: the whole-network solver weighs the conversions
        // around it; the fixed and local strategies may take the transpose kernel instead.
        auto must_view = [&](const std::string& op) {
          return is_view_op(op) && (op != "Transpose" || st == kiln::Strategy::global);
        };
        int view_nodes = 0, must = 0;
        for (size_t i = 0; i < g.nodes.size(); ++i)
          if (is_view_op(g.nodes[i].op)) {
            ++view_nodes;
            if (!must_view(g.nodes[i].op)) continue;
            ++must;
            CHECK(s->selection().nodes[i].label.kind == kiln::LabelKind::view);
          }
        CHECK(view_nodes == want_views);  // the passes left them (else this tests nothing)
        CHECK(p.views >= must);
        CHECK(p.views <= want_views);
        for (const kiln::Step& step : p.steps) {
          CAPTURE(step.kernel->name());
          CHECK(step.kernel->name().rfind("ref_", 0) == std::string::npos);
          if (step.node >= 0 && must_view(g.nodes[size_t(step.node)].op))
            CHECK(step.kernel->tiles() == 0);
        }
        check_memory(p);
        // Twice: a second run reuses the arena, so a view read after its bytes were reused
        // would show.
        for (int rep = 0; rep < 2; ++rep) {
          const std::vector<Tensor> got = run(*s, x);
          REQUIRE(got.size() == want.size());
          for (size_t k = 0; k < got.size(); ++k) {
            CAPTURE(k);
            CHECK(got[k].shape() == want[k].shape());
            CHECK(rel_error(got[k], want[k]) <= 1e-5);
          }
        }
      }
}

}  // namespace

TEST_CASE("views: conv -> global pool -> Flatten -> Gemm, channel tails and batches") {
  for (int64_t c : {16, 24, 32})
    for (int64_t n : {1, 2}) {
      CAPTURE(c);
      CAPTURE(n);
      Net net({n, 3, 9, 7});
      const std::string f = net.flatten(net.op("GlobalAveragePool", {net.conv("x", 3, c, 3)}));
      net.b.output(net.gemm(f, c, 10));
      check_views(net, 1);
    }
}

// The Squeeze -> Unsqueeze pair restores the conv's own shape: the graph drops it
// (rewrite_forms), leaving the Reshape as the one view.
TEST_CASE("views: a chain Squeeze -> Unsqueeze -> conv -> Reshape -> Gemm") {
  for (int64_t n : {1, 3}) {
    CAPTURE(n);
    Net net({n, 4, 6, 6});
    const std::string sq =
        net.shaped("Squeeze", net.op("GlobalAveragePool", {net.conv("x", 4, 32, 3)}), {2, 3});
    const std::string un = net.shaped("Unsqueeze", sq, {2, 3});
    const std::string r = net.shaped("Reshape", net.conv(un, 32, 24, 1), {n, 24});
    net.b.output(net.gemm(r, 24, 5));
    check_views(net, 1);
  }
}

TEST_CASE("views: Reshape of a spatial conv output into a Gemm") {
  Net net({2, 3, 5, 6});
  const std::string r = net.shaped("Reshape", net.conv("x", 3, 8, 3), {2, 8 * 5 * 6});
  net.b.output(net.gemm(r, 8 * 5 * 6, 7));
  check_views(net, 1);
}

TEST_CASE("views: of a graph input, and a graph input's view as a graph output") {
  Net net({2, 8, 3, 3});
  net.b.output(net.gemm(net.flatten("x"), 8 * 3 * 3, 6));
  const std::string id = net.op("Identity", {"x"});  // kept: its output is the model's
  net.b.output(id);
  net.b.output(net.shaped("Reshape", "x", {2, 72}));
  check_views(net, 3);
}

TEST_CASE("views: a view with two consumers that is also a graph output") {
  for (int64_t n : {1, 2}) {
    CAPTURE(n);
    Net net({n, 3, 8, 8});
    const std::string c = net.conv("x", 3, 32, 3);
    const std::string f = net.flatten(net.op("GlobalAveragePool", {c}));
    net.b.output(net.gemm(f, 32, 4));
    net.b.output(f);
    net.b.output(net.gemm(f, 32, 9));
    // More work after the views' last reader: their bytes must not be reused before the copy
    // of `f` into the caller's buffer.
    net.b.output(net.conv(net.conv(c, 32, 32, 3), 32, 16, 3));
    check_views(net, 1);
  }
}

TEST_CASE("views: views feeding a channel concat (also of the graph input)") {
  for (int64_t n : {1, 2}) {
    CAPTURE(n);
    Net net({n, 3, 4, 6});
    // Reshaping NCHW [n,c,4,6] to [n,c,6,4] reinterprets the bytes.
    const std::string a = net.shaped("Reshape", net.conv("x", 3, 16, 3), {n, 16, 6, 4});
    const std::string xt = net.shaped("Reshape", "x", {n, 3, 6, 4});
    const std::string cat = net.concat(a, net.conv(xt, 3, 16, 3));
    net.b.output(net.conv(cat, 32, 8, 1));
    check_views(net, 2);
  }
  // One pixel: blocked views too, and at batch 1 the concat could otherwise be in place (its
  // producers writing their slices): a view's output already aliases its input, it cannot be.
  for (int64_t n : {1, 2}) {
    CAPTURE(n);
    Net net({n, 3, 5, 5});
    const std::string a = net.shaped(
        "Unsqueeze", net.flatten(net.op("GlobalAveragePool", {net.conv("x", 3, 16, 3)})), {2, 3});
    const std::string c = net.op("GlobalAveragePool", {net.conv("x", 3, 16, 1)});
    net.b.output(net.gemm(net.flatten(net.concat(a, c)), 32, 6));
    check_views(net, 3);
  }
}

// TensorFlow-exported models: an NHWC graph input transposed to NCHW (0, 3, 1, 2), NCHW results
// transposed back (0, 2, 3, 1) into NHWC outputs: the first a view of the input stored nhwc, the
// second the row-major view of a tensor stored nhwc — never a transpose pass. Also a transposed
// tensor with two consumers (a conv and a graph output), and one read by a Reshape view.
TEST_CASE("views: NHWC <-> NCHW Transposes as layout views") {
  auto transpose = [](Net& net, const std::string& x, std::vector<int64_t> perm) {
    const std::string y = net.fresh();
    OnnxBuilder::attr_ints(net.b.node("Transpose", {x}, {y}), "perm", std::move(perm));
    return y;
  };
  for (int64_t n : {1, 2})
    for (int64_t c : {3, 16, 20}) {
      CAPTURE(n);
      CAPTURE(c);
      Net net({n, 9, 7, c});
      const std::string x = transpose(net, "x", {0, 3, 1, 2});
      const std::string y = net.conv(x, c, 24, 3);
      net.b.output(transpose(net, y, {0, 2, 3, 1}));
      const std::string t = transpose(net, net.conv(y, 24, 16, 1), {0, 2, 3, 1});
      net.b.output(t);
      net.b.output(net.gemm(net.shaped("Reshape", t, {n, 9 * 7 * 16}), 9 * 7 * 16, 5));
      check_views(net, 4);
    }
}

namespace {

// dst[0][t] = scale * src[0][t] for tile t; no tiles: a view's step.
struct Scale final : kiln::Kernel {
  Scale(int64_t n, float scale) : n_(n), scale_(scale) {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return n_; }
  void run(const kiln::KernelArgs& a, int64_t b, int64_t e) const override {
    for (int64_t t = b; t < e; ++t) a.dst[0][t] = scale_ * a.src[0][t];
  }
  int64_t n_;
  float scale_;
  std::string name_ = "scale";
};

}  // namespace

// Synthetic: A is written, read by a branch, aliased by a view V (a step without tiles) that is
// a graph output; later steps need arena bytes.
TEST_CASE("memory plan: a view that is a graph output keeps its root; a view writes nothing") {
  Plan p;
  auto tensor = [&](int64_t bytes, int64_t offset, int parent = -1) {
    kiln::PlanTensor t;
    t.bytes = bytes;
    t.offset = offset;
    t.parent = parent;
    p.tensors.push_back(t);
    return int(p.tensors.size()) - 1;
  };
  auto step = [&](int64_t tiles, std::vector<int> src, std::vector<int> dst) {
    kiln::Step s;
    s.kernel = std::make_unique<Scale>(tiles, 1.f);
    s.src = std::move(src);
    s.dst = std::move(dst);
    p.steps.push_back(std::move(s));
  };
  const int in = tensor(4096, -1), a = tensor(4096, -2), b = tensor(4096, -2);
  const int v = tensor(4096, -1, a), c = tensor(4096, -2), d = tensor(4096, -2);
  const int out = tensor(4096, -1);
  step(4, {in}, {a});    // 0
  step(4, {a}, {b});     // 1: a branch reading A
  step(0, {a}, {v});     // 2: the view
  step(4, {v, b}, {c});  // 3
  step(4, {c}, {d});     // 4
  step(4, {d}, {out});   // 5
  p.outputs = {v, out};
  kiln::plan_memory(&p);
  check_memory(p);
  const int64_t a_off = p.tensors[size_t(a)].offset;
  CHECK(p.tensors[size_t(v)].offset == a_off);
  for (int t : {c, d}) {  // alive after A's last reader: without the output rule they reuse it
    const int64_t o = p.tensors[size_t(t)].offset;
    CHECK((o + 4096 <= a_off || a_off + 4096 <= o));
  }
  // The view does not wait for the branch reading A (it writes nothing); its reader waits for
  // A's writer (through the bytes) and the view.
  CHECK(p.steps[2].deps == std::vector<int>{0});
  const std::vector<int>& d3 = p.steps[3].deps;
  CHECK(std::find(d3.begin(), d3.end(), 0) != d3.end());
  CHECK(std::find(d3.begin(), d3.end(), 2) != d3.end());
}

// Which view labels a node gets: NCHW always; NHWC where each image is one pixel or one channel;
// the blocked layout where each image is one pixel and no channel padding falls between images
// or (an output in the blocked layout) at all.
TEST_CASE("views: offered only where the layout stores every element where NCHW does") {
  for (kiln::Isa isa : kiln::testing::jit_isas())
    for (int64_t n : {1, 2})
      for (int64_t c : {1, 8, 16, 24})
        for (int64_t hw : {1, 6})
          for (bool unsqueeze : {false, true}) {
            CAPTURE(kiln::isa_name(isa));
            CAPTURE(n);
            CAPTURE(c);
            CAPTURE(hw);
            CAPTURE(unsqueeze);
            if (unsqueeze && hw != 1) continue;
            const int64_t h = hw == 1 ? 1 : 2, w = hw / h;
            Net net(unsqueeze ? kiln::Shape{n, c} : kiln::Shape{n, c, h, w});
            net.b.output(unsqueeze ? net.shaped("Unsqueeze", "x", {2, 3}) : net.flatten("x"));
            const std::string bytes = net.b.bytes();
            kiln::SessionOptions o;
            o.max_isa = isa;
            o.tune = kiln::TuneMode::none;
            o.use_cache = false;
            auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
            REQUIRE(s->graph().nodes.size() == 1);
            std::vector<std::string> got;
            for (const kiln::Label& l : kiln::candidate_labels(s->graph(), 0, isa, false))
              if (l.kind == kiln::LabelKind::view) got.push_back(l.key());
            const kiln::Layout b = kiln::blocked_layout(isa);
            const bool no_pad = c % kiln::layout_block(b) == 0;
            std::vector<std::string> want;
            if (hw == 1 && (unsqueeze ? no_pad : n == 1 || no_pad))
              want.push_back(std::string("view.") + kiln::layout_name(b));
            if (hw == 1 || c == 1) want.push_back("view.nhwc");
            want.push_back("view.nchw");
            CHECK(got == want);
            for (const std::string& k : got) CHECK(kiln::Label::parse(k)->key() == k);
          }
}

// A view step has no tiles and does no work: it must not make the executor pick the flow graph
// (there a step not depending on the one before, either with fewer tiles than threads, means
// branches worth overlapping), and both schedules give the same result.
TEST_CASE("executor: a step without tiles neither overlaps nor blocks") {
  kiln::Graph g;
  const kiln::ValueId xv = g.add_value("x"), yv = g.add_value("y"), zv = g.add_value("z"),
                      vv = g.add_value("v");
  g.inputs = {xv};
  g.outputs = {yv, zv};
  Plan p;
  auto tensor = [&](kiln::ValueId v, int64_t offset, int parent = -1) {
    kiln::PlanTensor t;
    t.value = v;
    t.bytes = 8 * 4;
    t.offset = offset;
    t.parent = parent;
    p.tensors.push_back(t);
    return int(p.tensors.size()) - 1;
  };
  auto step = [&](int64_t tiles, float scale, int src, int dst) {
    kiln::Step s;
    s.kernel = std::make_unique<Scale>(tiles, scale);
    s.src = {src};
    s.dst = {dst};
    p.steps.push_back(std::move(s));
  };
  const int x = tensor(xv, -1), y = tensor(yv, -1), z = tensor(zv, -1), v = tensor(vv, -2, x);
  step(8, 2.f, x, y);  // 0
  step(0, 0.f, x, v);  // 1: a view of the graph input, independent of step 0
  step(8, 3.f, v, z);  // 2
  p.inputs = {x};
  p.outputs = {y, z};
  kiln::plan_memory(&p);
  CHECK_FALSE(kiln::Executor(g, p, 2).uses_graph());
  for (auto sched : {kiln::Schedule::graph, kiln::Schedule::in_order})
    for (int threads : {1, 2}) {
      kiln::Executor ex(g, p, threads, sched);
      Tensor in(kiln::DType::f32, {8});
      for (int k = 0; k < 8; ++k) in.data<float>()[k] = float(k + 1);
      std::vector<Tensor> out = {Tensor(kiln::DType::f32, {8}), Tensor(kiln::DType::f32, {8})};
      ex.run({in}, out);
      for (int k = 0; k < 8; ++k) {
        CHECK(out[0].data<float>()[k] == 2.f * float(k + 1));
        CHECK(out[1].data<float>()[k] == 3.f * float(k + 1));
      }
    }
}
