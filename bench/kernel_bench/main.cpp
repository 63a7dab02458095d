// kiln_kernel_bench: per-layer GFLOP/s of the JIT conv families on ResNet-50's distinct conv
// shapes (batch 1, torchvision v1.5: the stride sits on the 3x3), at 1 thread, against this
// machine's measured single-core FMA peak.
//
//   kiln_kernel_bench [--isa avx512|avx2|both] [--reps N] [--json FILE] [--layer SUBSTR]
//                     [--post relu] [--sweep]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "graph/error.h"
#include "jit/conv/conv_kernel.h"
#include "jit/cpu.h"
#include "jit/layout.h"

namespace kiln::bench {
namespace {

struct Layer {
  const char* name;
  int64_t ic, ih, oc, k, s;
  int count;  // occurrences in ResNet-50
};

// pad = k / 2; oh = (ih + 2 * pad - k) / s + 1.
const Layer kLayers[] = {
    {"conv1_7x7s2", 3, 224, 64, 7, 2, 1},         {"1x1_64to64@56", 64, 56, 64, 1, 1, 1},
    {"1x1_64to256@56", 64, 56, 256, 1, 1, 4},     {"1x1_256to64@56", 256, 56, 64, 1, 1, 2},
    {"1x1_256to128@56", 256, 56, 128, 1, 1, 1},   {"1x1_256to512s2@56", 256, 56, 512, 1, 2, 1},
    {"1x1_128to512@28", 128, 28, 512, 1, 1, 4},   {"1x1_512to128@28", 512, 28, 128, 1, 1, 3},
    {"1x1_512to256@28", 512, 28, 256, 1, 1, 1},   {"1x1_512to1024s2@28", 512, 28, 1024, 1, 2, 1},
    {"1x1_256to1024@14", 256, 14, 1024, 1, 1, 6}, {"1x1_1024to256@14", 1024, 14, 256, 1, 1, 5},
    {"1x1_1024to512@14", 1024, 14, 512, 1, 1, 1}, {"1x1_1024to2048s2@14", 1024, 14, 2048, 1, 2, 1},
    {"1x1_512to2048@7", 512, 7, 2048, 1, 1, 3},   {"1x1_2048to512@7", 2048, 7, 512, 1, 1, 2},
    {"3x3_64@56", 64, 56, 64, 3, 1, 3},           {"3x3_128@56s2", 128, 56, 128, 3, 2, 1},
    {"3x3_128@28", 128, 28, 128, 3, 1, 3},        {"3x3_256@28s2", 256, 28, 256, 3, 2, 1},
    {"3x3_256@14", 256, 14, 256, 3, 1, 5},        {"3x3_512@14s2", 512, 14, 512, 3, 2, 1},
    {"3x3_512@7", 512, 7, 512, 3, 1, 2},
};

ConvProblem make_problem(const Layer& l, bool relu) {
  ConvProblem p;
  p.ic = l.ic;
  p.ih = p.iw = l.ih;
  p.oc = l.oc;
  p.kh = p.kw = l.k;
  p.sh = p.sw = l.s;
  p.pt = p.pl = p.pb = p.pr = l.k / 2;
  p.oh = p.ow = (l.ih + 2 * (l.k / 2) - l.k) / l.s + 1;
  p.bias = true;
  if (relu) p.post.push_back(PostOp{});  // relu
  return p;
}

struct Row {
  std::string layer, problem, kernel, family, isa, src, dst;
  double us = 0, gflops = 0, pct = 0;
  int count = 1;
  double macs = 0;
  bool best = false;
};

Layout blocked(Isa isa) {
  return isa == Isa::avx512 ? Layout::nChw16c : Layout::nChw8c;
}

std::vector<float> random_buffer(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int32_t(s >> 8) % 2001 - 1000) / 1000.f;
  }
  return v;
}

// Median seconds per run of `k` over `reps` samples (each sample repeats the run until it
// lasts >= 2 ms), after a warm-up, with the same (cache-resident) buffers.
double time_kernel(const Kernel& k, const ConvProblem& p, const ConvImpl& impl, int reps) {
  const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
  std::vector<float> src = random_buffer(size_t(layout_elems(impl.src, xs)), 1);
  std::vector<float> dst(size_t(layout_elems(impl.dst, ys)), 0.f);
  const float* ins[] = {src.data(), nullptr, nullptr};
  float* outs[] = {dst.data()};
  KernelArgs a;
  a.src = ins;
  a.dst = outs;
  using clock = std::chrono::steady_clock;
  auto once = [&] { k.run(a, 0, k.tiles()); };
  once();
  auto t0 = clock::now();
  once();
  const double first = std::chrono::duration<double>(clock::now() - t0).count();
  const int inner = std::max(1, int(0.002 / std::max(first, 1e-7)));
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    t0 = clock::now();
    for (int i = 0; i < inner; ++i) once();
    samples.push_back(std::chrono::duration<double>(clock::now() - t0).count() / inner);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct Options {
  std::vector<Isa> isas;
  int reps = 15;
  std::string json, layer;
  bool relu = false, sweep = false;
};

void usage() {
  std::fprintf(stderr,
               "usage: kiln_kernel_bench [--isa avx512|avx2|both] [--reps N] [--json FILE]\n"
               "                         [--layer SUBSTR] [--post relu] [--sweep]\n");
}

Options parse(int argc, char** argv) {
  Options o;
  std::string isa = "both";
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(Code::invalid_argument, std::string(argv[i]) + " needs a value");
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--isa"))
      isa = next();
    else if (!std::strcmp(argv[i], "--reps"))
      o.reps = std::max(1, std::atoi(next().c_str()));
    else if (!std::strcmp(argv[i], "--json"))
      o.json = next();
    else if (!std::strcmp(argv[i], "--layer"))
      o.layer = next();
    else if (!std::strcmp(argv[i], "--post")) {
      if (next() != "relu") fail(Code::invalid_argument, "--post takes relu");
      o.relu = true;
    } else if (!std::strcmp(argv[i], "--sweep"))
      o.sweep = true;
    else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage();
      std::exit(0);
    } else {
      fail(Code::invalid_argument, std::string("unknown option ") + argv[i]);
    }
  }
  if (isa == "both")
    o.isas = {Isa::avx512, Isa::avx2};
  else
    o.isas = {parse_isa(isa)};
  std::vector<Isa> ok;
  for (Isa i : o.isas) {
    if (i == Isa::scalar) fail(Code::invalid_argument, "--isa scalar has no JIT kernels");
    if (int(i) <= int(detect_isa()))
      ok.push_back(i);
    else
      std::fprintf(stderr, "skipping %s: not supported by this CPU\n", isa_name(i));
  }
  o.isas = ok;
  return o;
}

// The implementations tried per layer: direct (blocked; NCHW src for few input channels) and,
// for 1x1, gemm1x1 blocked and NHWC.
std::vector<ConvImpl> impls(const ConvProblem& p, Isa isa) {
  std::vector<ConvImpl> v;
  ConvImpl d;
  d.family = ConvFamily::direct;
  d.src = d.dst = blocked(isa);
  v.push_back(d);
  if (p.ic <= 4) {
    d.src = Layout::nchw;
    v.push_back(d);
  }
  if (p.kh == 1 && p.kw == 1) {
    ConvImpl g;
    g.family = ConvFamily::gemm1x1;
    g.src = g.dst = blocked(isa);
    v.push_back(g);
    g.src = g.dst = Layout::nhwc;
    v.push_back(g);
  }
  return v;
}

void write_json(const Options& o, const std::map<Isa, double>& peak, const std::vector<Row>& rows,
                const std::map<Isa, double>& net_pct) {
  std::ofstream f(o.json);
  if (!f) fail(Code::io_error, "cannot write " + o.json);
  f << "{\n  \"cpu\": \"" << cpu_description() << "\",\n  \"threads\": 1,\n  \"batch\": 1,\n";
  f << "  \"post\": \"" << (o.relu ? "bias_relu" : "bias") << "\",\n  \"peak_gflops\": {";
  bool first = true;
  for (auto& [isa, g] : peak) {
    f << (first ? "" : ", ") << "\"" << isa_name(isa) << "\": " << g;
    first = false;
  }
  f << "},\n  \"network_best_pct_of_peak\": {";
  first = true;
  for (auto& [isa, g] : net_pct) {
    f << (first ? "" : ", ") << "\"" << isa_name(isa) << "\": " << g;
    first = false;
  }
  f << "},\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << "    {\"layer\": \"" << r.layer << "\", \"problem\": \"" << r.problem
      << "\", \"kernel\": \"" << r.kernel << "\", \"family\": \"" << r.family << "\", \"isa\": \""
      << r.isa << "\", \"src\": \"" << r.src << "\", \"dst\": \"" << r.dst
      << "\", \"count\": " << r.count << ", \"macs\": " << r.macs << ", \"us\": " << r.us
      << ", \"gflops\": " << r.gflops << ", \"pct_of_peak\": " << r.pct
      << ", \"best\": " << (r.best ? "true" : "false") << "}" << (i + 1 < rows.size() ? "," : "")
      << "\n";
  }
  f << "  ]\n}\n";
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::printf("cpu: %s\n", cpu_description().c_str());
  std::map<Isa, double> peak;
  for (Isa isa : o.isas) {
    peak[isa] = measure_fma_peak(isa);
    std::printf("measured 1-core FMA peak %-6s: %7.1f GFLOP/s\n", isa_name(isa), peak[isa]);
  }
  std::vector<Row> rows;
  std::map<Isa, double> net_time, net_flops;
  std::printf("\n%-20s %-6s %-52s %9s %8s %6s\n", "layer", "isa", "kernel", "us", "GFLOP/s",
              "%peak");
  for (const Layer& l : kLayers) {
    if (!o.layer.empty() && std::string(l.name).find(o.layer) == std::string::npos) continue;
    const ConvProblem p = make_problem(l, o.relu);
    const Tensor w = [&] {
      Tensor t(DType::f32, {p.oc, p.ic, p.kh, p.kw});
      auto v = random_buffer(size_t(t.numel()), 2);
      std::copy(v.begin(), v.end(), t.data<float>());
      return t;
    }();
    Tensor b(DType::f32, {p.oc});
    for (Isa isa : o.isas) {
      size_t best = rows.size();
      for (ConvImpl impl : impls(p, isa)) {
        std::vector<std::pair<int, int>> blockings{{0, 0}};
        if (o.sweep)
          for (int ob = 1; ob <= (isa == Isa::avx512 ? 8 : 6); ++ob)
            for (int ur = 1; ur <= (isa == Isa::avx512 ? 28 : 14); ++ur)
              if (ur * ob >= (isa == Isa::avx512 ? 14 : 8) &&
                  ur * ob + ob + 1 <= (isa == Isa::avx512 ? 32 : 16))
                blockings.push_back({ur, ob});
        for (auto [ur, ob] : blockings) {
          impl.ur_w = ur;
          impl.oc_blocks = ob;
          std::string why;
          auto k = create_conv_kernel(p, impl, isa, w, &b, &why);
          if (!k) continue;
          Row r;
          r.layer = l.name;
          r.problem = p.str();
          r.kernel = k->name();
          r.family = conv_family_name(impl.family);
          r.isa = isa_name(isa);
          r.src = layout_name(impl.src);
          r.dst = layout_name(impl.dst);
          r.count = l.count;
          r.macs = k->macs();
          r.us = time_kernel(*k, p, impl, o.reps) * 1e6;
          r.gflops = 2 * r.macs / r.us / 1e3;
          r.pct = 100 * r.gflops / peak[isa];
          if (!o.sweep || ur == 0)
            std::printf("%-20s %-6s %-52s %9.1f %8.1f %5.1f%%\n", r.layer.c_str(), r.isa.c_str(),
                        r.kernel.c_str(), r.us, r.gflops, r.pct);
          if (best == rows.size() || r.gflops > rows[best].gflops) best = rows.size();
          rows.push_back(r);
        }
      }
      if (best < rows.size()) {
        rows[best].best = true;
        net_time[isa] += rows[best].us * l.count;
        net_flops[isa] += 2 * rows[best].macs * l.count;
        if (o.sweep)
          std::printf("%-20s %-6s best %-47s %9.1f %8.1f %5.1f%%\n", rows[best].layer.c_str(),
                      rows[best].isa.c_str(), rows[best].kernel.c_str(), rows[best].us,
                      rows[best].gflops, rows[best].pct);
      }
    }
  }
  std::printf("\nbest family per layer (%% of the measured peak of that isa)\n");
  std::printf("%-20s %5s", "layer", "count");
  for (Isa isa : o.isas)
    std::printf(" | %-7s %-40s %8s %6s", isa_name(isa), "kernel", "GFLOP/s", "%peak");
  std::printf("\n");
  for (const Layer& l : kLayers) {
    bool any = false;
    for (const Row& r : rows) any = any || (r.layer == l.name && r.best);
    if (!any) continue;
    std::printf("%-20s %5d", l.name, l.count);
    for (Isa isa : o.isas)
      for (const Row& r : rows)
        if (r.layer == l.name && r.best && r.isa == isa_name(isa)) {
          std::string kn = r.kernel.substr(5);  // drop "conv_"
          std::printf(" | %-7s %-40s %8.1f %5.1f%%", "", kn.c_str(), r.gflops, r.pct);
        }
    std::printf("\n");
  }
  std::map<Isa, double> net_pct;
  for (Isa isa : o.isas)
    if (net_time[isa] > 0) {
      const double g = net_flops[isa] / (net_time[isa] * 1e3);
      net_pct[isa] = 100 * g / peak[isa];
      std::printf(
          "ResNet-50 convs (count-weighted, best family) %-6s: %.2f ms, %.1f GFLOP/s, "
          "%.1f%% of peak\n",
          isa_name(isa), net_time[isa] / 1e3, g, net_pct[isa]);
    }
  if (!o.json.empty()) write_json(o, peak, rows, net_pct);
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  try {
    return kiln::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_kernel_bench: %s\n", e.what());
    return 1;
  }
}
