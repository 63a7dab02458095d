// glue: throughput of the JIT glue kernels on ResNet-50-sized tensors, single thread, next to
// the plain C++ kernels they replace (runtime/glue_kernels.h). GB/s counts bytes read + bytes
// written once per call; the tensors (0.1-13 MB) mostly live in L2/L3 across repetitions, as
// activations do between layers. Best of several runs.
#include "jit/glue/glue.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/layout.h"
#include "micro_bench.h"
#include "runtime/glue_kernels.h"
#include "timing.h"

namespace kiln::bench {
namespace {

// Seconds per call: best of 7 timed batches (each batch long enough to time).
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

std::vector<float> buffer(int64_t n, uint32_t seed) {
  return random_buffer(size_t(n), seed);
}

void reorders(Isa isa) {
  const Shape shapes[] = {{1, 64, 112, 112}, {1, 256, 56, 56}, {1, 2048, 7, 7}, {1, 3, 224, 224}};
  const std::pair<Layout, Layout> pairs[] = {
      {Layout::nchw, Layout::nChw16c},   {Layout::nChw16c, Layout::nchw},
      {Layout::nchw, Layout::nChw8c},    {Layout::nChw8c, Layout::nchw},
      {Layout::nchw, Layout::nhwc},      {Layout::nhwc, Layout::nchw},
      {Layout::nhwc, Layout::nChw16c},   {Layout::nChw16c, Layout::nhwc},
      {Layout::nChw8c, Layout::nChw16c}, {Layout::nChw16c, Layout::nChw8c},
      {Layout::nChw16c, Layout::nChw16c}};
  std::printf("--- reorders, %s\n", isa_name(isa));
  for (const Shape& s : shapes)
    for (auto [from, to] : pairs) {
      std::string why;
      auto k = create_reorder_kernel(s, from, to, isa, &why);
      if (!k) {
        std::printf("reorder %s -> %s n/a: %s\n", layout_name(from), layout_name(to), why.c_str());
        continue;
      }
      auto ref = make_reorder_kernel(s, from, to);
      std::vector<float> src = buffer(layout_elems(from, s), 1), dst(size_t(layout_elems(to, s)));
      const double bytes = 4.0 * double(src.size() + dst.size());
      const double tj = time_kernel(*k, {src.data()}, {dst.data()});
      const double tc = time_kernel(*ref, {src.data()}, {dst.data()});
      report(k->name(), shape_str(s), bytes, tj, tc);
    }
}

Node pool_node(const std::string& op) {
  Node n;
  n.name = "p";
  n.op = op;
  if (op == "MaxPool") {
    n.attrs["kernel_shape"] = attr_ints({3, 3});
    n.attrs["strides"] = attr_ints({2, 2});
    n.attrs["pads"] = attr_ints({1, 1, 1, 1});
    n.attrs["dilations"] = attr_ints({1, 1});
  }
  return n;
}

void pooling(Isa isa) {
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
      std::string why;
      auto k = create_pool_kernel(q, l, isa, &why);
      if (!k) {
        std::printf("pool %s %s n/a: %s\n", q.str().c_str(), layout_name(l), why.c_str());
        continue;
      }
      std::vector<float> src = buffer(layout_elems(l, q.src), 2),
                         dst(size_t(layout_elems(l, q.dst)));
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

void eltwise_concat(Isa isa) {
  PostOp relu, sig, add;
  relu.kind = PostOp::Kind::relu;
  sig.kind = PostOp::Kind::swish;
  add.kind = PostOp::Kind::add;
  const int64_t n = 256 * 56 * 56;
  std::printf("--- eltwise / concat, %s\n", isa_name(isa));
  for (const auto& ops :
       {std::vector<PostOp>{relu}, std::vector<PostOp>{sig}, std::vector<PostOp>{add, relu}}) {
    std::string why;
    auto k = create_eltwise_kernel(n, ops, isa, &why);
    if (!k) {
      std::printf("eltwise n/a: %s\n", why.c_str());
      continue;
    }
    std::vector<float> x = buffer(n, 3), r = buffer(n, 4), y(static_cast<size_t>(n));
    const double bytes = 4.0 * double(n) * (ops.size() == 2 ? 3 : 2);
    report(k->name(), "[1,256,56,56]", bytes, time_kernel(*k, {x.data(), r.data()}, {y.data()}), 0);
  }
  for (Layout l : {Layout::nChw16c, Layout::nhwc}) {
    const Shape out{1, 256, 56, 56}, half{1, 128, 56, 56};
    std::string why;
    auto k = create_concat_kernel(out, {128, 128}, l, isa, &why);
    if (!k) {
      std::printf("concat %s n/a: %s\n", layout_name(l), why.c_str());
      continue;
    }
    std::vector<float> a = buffer(layout_elems(l, half), 5), b = buffer(layout_elems(l, half), 6),
                       y(size_t(layout_elems(l, out)));
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

}  // namespace

int glue_bench(const ModeArgs& a) {
  for (Isa isa : bench_isas(a.get("--isa", ""))) {
    reorders(isa);
    pooling(isa);
    eltwise_concat(isa);
  }
  return 0;
}

}  // namespace kiln::bench
