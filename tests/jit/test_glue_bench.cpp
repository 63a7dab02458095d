// Throughput of the glue kernels on ResNet-50-sized tensors, single thread, next to the plain
// C++ kernels they replace (runtime/glue_kernels.h). Not run by default (doctest::skip):
//   test_jit -tc="glue bench*" --no-skip
// GB/s counts bytes read + bytes written once per call; the tensors (0.1-13 MB) mostly live
// in L2/L3 across repetitions, as activations do between layers. Best of several runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/glue_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

// Seconds per call: best of `reps` timed batches (each batch long enough to time).
double time_kernel(const Kernel& k, const std::vector<const float*>& src,
                   const std::vector<float*>& dst) {
  KernelArgs a;
  a.src = src.data();
  a.dst = dst.data();
  k.run_all(a);  // warm up (page faults, caches)
  using clk = std::chrono::steady_clock;
  int iters = 1;
  for (;;) {
    auto t0 = clk::now();
    for (int i = 0; i < iters; ++i) k.run_all(a);
    const double s = std::chrono::duration<double>(clk::now() - t0).count();
    if (s > 0.02 || iters > (1 << 20)) break;
    iters *= 2;
  }
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    auto t0 = clk::now();
    for (int i = 0; i < iters; ++i) k.run_all(a);
    best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count() / iters);
  }
  return best;
}

void report(const std::string& what, const std::string& shape, double bytes, double jit_s,
            double cpp_s) {
  if (cpp_s > 0)
    std::printf("%-34s %-18s %8.1f GB/s  (%7.1f us)   C++ %7.1f GB/s  x%.1f\n", what.c_str(),
                shape.c_str(), bytes / jit_s * 1e-9, jit_s * 1e6, bytes / cpp_s * 1e-9,
                cpp_s / jit_s);
  else
    std::printf("%-34s %-18s %8.1f GB/s  (%7.1f us)\n", what.c_str(), shape.c_str(),
                bytes / jit_s * 1e-9, jit_s * 1e6);
}

const Shape kShapes[] = {{1, 64, 112, 112}, {1, 256, 56, 56}, {1, 2048, 7, 7}, {1, 3, 224, 224}};

TEST_CASE("glue bench: reorders" * doctest::skip()) {
  const std::pair<Layout, Layout> pairs[] = {
      {Layout::nchw, Layout::nChw16c},   {Layout::nChw16c, Layout::nchw},
      {Layout::nchw, Layout::nChw8c},    {Layout::nChw8c, Layout::nchw},
      {Layout::nchw, Layout::nhwc},      {Layout::nhwc, Layout::nchw},
      {Layout::nhwc, Layout::nChw16c},   {Layout::nChw16c, Layout::nhwc},
      {Layout::nChw8c, Layout::nChw16c}, {Layout::nChw16c, Layout::nChw8c},
      {Layout::nChw16c, Layout::nChw16c}};
  for (Isa isa : test::glue_isas()) {
    std::printf("--- reorders, %s\n", isa_name(isa));
    for (const Shape& s : kShapes)
      for (auto [from, to] : pairs) {
        auto k = create_reorder_kernel(s, from, to, isa, nullptr);
        REQUIRE(k);
        auto ref = make_reorder_kernel(s, from, to);
        GuardedBuf src(size_t(layout_elems(from, s))), dst(size_t(layout_elems(to, s)));
        src.random(1);
        dst.fill(0);
        const double bytes = 4.0 * double(src.size() + dst.size());
        const double tj = time_kernel(*k, {src.data()}, {dst.data()});
        const double tc = time_kernel(*ref, {src.data()}, {dst.data()});
        report(k->name(), shape_str(s), bytes, tj, tc);
      }
  }
}

Node pool_node(const std::string& op) {
  Node n;
  n.name = "p";
  n.op = op;
  auto ints = [](std::vector<int64_t> v) {
    Attribute a;
    a.kind = Attribute::Kind::ints;
    a.ints = std::move(v);
    return a;
  };
  if (op == "MaxPool") {
    n.attrs["kernel_shape"] = ints({3, 3});
    n.attrs["strides"] = ints({2, 2});
    n.attrs["pads"] = ints({1, 1, 1, 1});
    n.attrs["dilations"] = ints({1, 1});
  }
  return n;
}

TEST_CASE("glue bench: pooling" * doctest::skip()) {
  for (Isa isa : test::glue_isas()) {
    std::printf("--- pooling, %s\n", isa_name(isa));
    for (Layout l : {Layout::nChw16c, Layout::nChw8c, Layout::nhwc}) {
      PoolProblem p;  // ResNet-50's stem max pool
      p.kh = p.kw = 3;
      p.sh = p.sw = 2;
      p.pt = p.pl = p.pb = p.pr = 1;
      p.src = {1, 64, 112, 112};
      p.dst = {1, 64, 56, 56};
      PoolProblem g;  // its global average pool
      g.global = true;
      g.max = false;
      g.src = {1, 2048, 7, 7};
      g.dst = {1, 2048, 1, 1};
      for (const PoolProblem& q : {p, g}) {
        auto k = create_pool_kernel(q, l, isa, nullptr);
        REQUIRE(k);
        GuardedBuf src(size_t(layout_elems(l, q.src))), dst(size_t(layout_elems(l, q.dst)));
        src.random(2);
        const double bytes = 4.0 * double(src.size() + dst.size());
        const double tj = time_kernel(*k, {src.data()}, {dst.data()});
        double tc = 0;
        if (layout_block(l) > 1) {
          auto ref = make_blocked_pool_kernel(pool_node(q.global ? "GlobalAveragePool" : "MaxPool"),
                                              q.src, q.dst, l);
          tc = time_kernel(*ref, {src.data()}, {dst.data()});
        }
        report(k->name(), shape_str(q.src), bytes, tj, tc);
      }
    }
  }
}

TEST_CASE("glue bench: eltwise and concat" * doctest::skip()) {
  PostOp relu, sig, add;
  relu.kind = PostOp::Kind::relu;
  sig.kind = PostOp::Kind::swish;
  add.kind = PostOp::Kind::add;
  const int64_t n = 256 * 56 * 56;
  for (Isa isa : test::glue_isas()) {
    std::printf("--- eltwise / concat, %s\n", isa_name(isa));
    for (const auto& ops :
         {std::vector<PostOp>{relu}, std::vector<PostOp>{sig}, std::vector<PostOp>{add, relu}}) {
      auto k = create_eltwise_kernel(n, ops, isa, nullptr);
      REQUIRE(k);
      GuardedBuf x{size_t(n)}, r{size_t(n)}, y{size_t(n)};
      x.random(3);
      r.random(4);
      const double bytes = 4.0 * double(n) * (ops.size() == 2 ? 3 : 2);
      report(k->name(), "[1,256,56,56]", bytes, time_kernel(*k, {x.data(), r.data()}, {y.data()}),
             0);
    }
    for (Layout l : {Layout::nChw16c, Layout::nhwc}) {
      const Shape out{1, 256, 56, 56}, half{1, 128, 56, 56};
      auto k = create_concat_kernel(out, {128, 128}, l, isa, nullptr);
      REQUIRE(k);
      GuardedBuf a(size_t(layout_elems(l, half))), b(size_t(layout_elems(l, half))),
          y(size_t(layout_elems(l, out)));
      a.random(5);
      b.random(6);
      const double bytes = 4.0 * double(a.size() + b.size() + y.size());
      const double tj = time_kernel(*k, {a.data(), b.data()}, {y.data()});
      double tc = 0;
      if (layout_block(l) > 1) {
        auto ref = make_blocked_concat_kernel({half, half}, l);
        tc = time_kernel(*ref, {a.data(), b.data()}, {y.data()});
      }
      report(k->name(), shape_str(out), bytes, tj, tc);
    }
  }
}

}  // namespace
}  // namespace kiln
