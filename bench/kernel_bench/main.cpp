// kiln_kernel_bench: per-layer GFLOP/s of the JIT conv families on ResNet-50's distinct conv
// shapes (batch 1, torchvision v1.5: the stride sits on the 3x3), at 1 thread, against this
// machine's measured single-core FMA peak.
//
//   kiln_kernel_bench [--isa avx512|avx2|both] [--reps N] [--json FILE] [--layer SUBSTR]
//                     [--post relu] [--sweep] [--shape IC,IH,OC,K,S]... [--kchunk A,B..]
//                     [--top N] [--clean F]
// --sweep tries every register blocking that fits (tuning); --shape benchmarks other shapes;
// --kchunk forces K splits; --clean sets the probe threshold (0 disables the filtering).
//
// Timing: per layer and isa, all implementations are sampled in interleaved rounds; a sample
// is the thread CPU time of >= 2 ms of back-to-back runs after one warm-up run (same buffers,
// so inputs and weights are cache-resident as far as they fit). Short FMA and L2 probes around
// each sample tell whether the core was shared (on the 2-vCPU VM this was written on, work on
// the other vCPU — likely a hyperthread sibling — slowed ours by 10-40%); the reported time
// is the median of the clean samples (of all samples when fewer than 3 were clean, flagged in
// the "contended" column).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "graph/error.h"
#include "jit/conv/conv_families.h"
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
  double us_min = 0;  // fastest sample (less sensitive to other load on the machine)
  int samples = 0, contended = 0;
  double us_wall = 0;  // median in wall-clock time
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

// One kernel under test with its (cache-resident) buffers.
struct Candidate {
  std::unique_ptr<Kernel> k;
  ConvImpl impl;
  std::string label;  // kernel name (+ "/k<chunk>" when a K split is forced)
  const float* src = nullptr;
  float* dst = nullptr;
  int inner = 1;                // runs per sample (a sample lasts >= 2 ms)
  std::vector<double> samples;  // seconds per run (thread CPU time), core not shared
  std::vector<double> shared;   // samples taken while the core was shared
  std::vector<double> wall;     // all samples in wall time
  int contended = 0;            // samples taken while the core was shared
  void once() const {
    const float* ins[] = {src, nullptr, nullptr};
    float* outs[] = {dst};
    KernelArgs a;
    a.src = ins;
    a.dst = outs;
    k->run(a, 0, k->tiles());
  }
};

// Samples the candidates in `reps` interleaved rounds (one warm-up run before each sample),
// so that a burst of other load hits every candidate alike. Samples are thread CPU time (time
// slices lost to other processes do not count; wall time is kept too). When `clean` > 0, a
// sample is clean if the probes right before and after it show the core unshared; a sample is
// retried up to `tries` times before a shared one is kept (and counted as contended).
void time_candidates(std::vector<Candidate>& cs, int reps, const FmaProbe& probe, const L2Probe& l2,
                     double peak, double clean, int tries) {
  // Clean: the FMA probe reaches `clean` x peak and a pass over the L2 probe's buffer is
  // within 1 / clean of its best (nobody else evicted our caches meanwhile).
  auto quiet = [&] {
    if (clean <= 0) return true;
    const double g = probe.gflops();
    l2.seconds();  // the kernel evicted the buffer: refill, then time a second pass
    const double l = l2.seconds();
    if (std::getenv("KILN_BENCH_DEBUG"))
      std::fprintf(stderr, "probe %.1f GFLOP/s (peak %.1f), l2 %.2f us (best %.2f)\n", g, peak,
                   l * 1e6, l2.baseline() * 1e6);
    return g >= clean * peak && l <= l2.baseline() / clean;
  };
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  for (Candidate& c : cs) {
    c.once();
    auto t0 = clock::now();
    c.once();
    c.inner = std::max(1, int(0.002 / std::max(secs(t0), 1e-7)));
  }
  for (int r = 0; r < reps; ++r)
    for (Candidate& c : cs) {
      double s = 0, w = 0;
      bool ok = false;
      for (int t = 0; t < tries && !ok; ++t) {
        c.once();
        const bool before = quiet();
        auto t0 = clock::now();
        const double c0 = thread_seconds();
        for (int i = 0; i < c.inner; ++i) c.once();
        s = (thread_seconds() - c0) / c.inner;
        w = secs(t0) / c.inner;
        ok = before && quiet();
      }
      (ok ? c.samples : c.shared).push_back(s);
      c.wall.push_back(w);
      c.contended += ok ? 0 : 1;
    }
}

// A kernel with a forced K split (tuning): the family's conf with ic_chunk replaced.
std::unique_ptr<Kernel> make_with_chunk(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                        const Tensor& w, const Tensor& b, int chunk) {
  if (impl.family == ConvFamily::direct) {
    auto c = convjit::init_direct_conf(p, impl, isa);
    if (!c) return nullptr;
    c.conf->ic_chunk = chunk < 0 ? c.conf->icb_total() : chunk;
    if (chunk > 0) c.conf->rows_outer = false;
    return convjit::make_direct_kernel(*c.conf, w, &b);
  }
  auto c = convjit::init_gemm1x1_conf(p, impl, isa);
  if (!c) return nullptr;
  c.conf->ic_chunk = chunk < 0 ? c.conf->icb_total() : chunk;
  if (chunk > 0) c.conf->m_outer = false;
  return convjit::make_gemm1x1_kernel(*c.conf, w, &b);
}

struct Options {
  std::vector<Isa> isas;
  int reps = 15;
  std::string json, layer;
  bool relu = false, sweep = false;
  double clean = 0.95;  // --clean: probe threshold (0: take every sample)
  int tries = 40;       // attempts per sample before accepting a contended one
  int top = 5;          // --sweep: rows printed per layer and isa
  // --kchunk A,B,..: also try forced K splits (ic blocks per call; -1: none; 0: conf's).
  std::vector<int> kchunks{0};
  std::vector<Layer> custom;  // --shape: replaces the ResNet-50 list
  std::vector<std::string> custom_names;
};

void usage() {
  std::fprintf(stderr,
               "usage: kiln_kernel_bench [--isa avx512|avx2|both] [--reps N] [--json FILE]\n"
               "                         [--layer SUBSTR] [--post relu] [--sweep]\n"
               "                         [--shape IC,IH,OC,K,S]... [--kchunk A,B..] [--top N]\n"
               "                         [--clean F]\n");
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
    } else if (!std::strcmp(argv[i], "--sweep")) {
      o.sweep = true;
    } else if (!std::strcmp(argv[i], "--kchunk")) {
      o.kchunks.clear();
      const std::string v = next();
      for (size_t pos = 0; pos <= v.size();) {
        size_t e = v.find(',', pos);
        if (e == std::string::npos) e = v.size();
        o.kchunks.push_back(std::atoi(v.substr(pos, e - pos).c_str()));
        pos = e + 1;
      }
    } else if (!std::strcmp(argv[i], "--clean")) {
      o.clean = std::atof(next().c_str());
    } else if (!std::strcmp(argv[i], "--top")) {
      o.top = std::max(1, std::atoi(next().c_str()));
    } else if (!std::strcmp(argv[i], "--shape")) {  // IC,IH,OC,K,S (square, pad K/2)
      const std::string v = next();
      Layer l{};
      if (std::sscanf(v.c_str(), "%ld,%ld,%ld,%ld,%ld", &l.ic, &l.ih, &l.oc, &l.k, &l.s) != 5)
        fail(Code::invalid_argument, "--shape takes IC,IH,OC,K,S");
      o.custom_names.push_back("shape_" + v);
      l.count = 1;
      o.custom.push_back(l);
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
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
                const std::map<Isa, double>& net_pct, const std::map<Isa, double>& net_pct_min) {
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
  f << "},\n  \"network_best_pct_of_peak_min\": {";
  first = true;
  for (auto& [isa, g] : net_pct_min) {
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
      << ", \"us_min\": " << r.us_min << ", \"us_wall\": " << r.us_wall
      << ", \"samples\": " << r.samples << ", \"contended_samples\": " << r.contended
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
  std::map<Isa, std::unique_ptr<FmaProbe>> probes;
  const L2Probe l2probe;
  for (Isa isa : o.isas) {
    peak[isa] = measure_fma_peak(isa);
    std::printf("measured 1-core FMA peak %-6s: %7.1f GFLOP/s\n", isa_name(isa), peak[isa]);
    probes[isa] = std::make_unique<FmaProbe>(isa);
  }
  std::vector<Row> rows;
  std::map<Isa, double> net_time, net_time_min, net_flops;
  std::printf("\n%-20s %-6s %-52s %9s %8s %6s %9s\n", "layer", "isa", "kernel", "us", "GFLOP/s",
              "%peak", "contended");
  std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
  if (!o.custom.empty()) {
    layers = o.custom;
    for (size_t i = 0; i < layers.size(); ++i) layers[i].name = o.custom_names[i].c_str();
  }
  for (const Layer& l : layers) {
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
      const size_t first_row = rows.size();
      std::set<std::string> seen;
      std::vector<Candidate> cands;
      std::map<Layout, std::vector<float>> bufs;  // one src and one dst buffer per layout
      const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
      for (ConvImpl impl : impls(p, isa)) {
        std::vector<std::pair<int, int>> blockings{{0, 0}};
        if (o.sweep)
          for (int ob = 1; ob <= (isa == Isa::avx512 ? 8 : 6); ++ob)
            for (int ur = 1; ur <= (isa == Isa::avx512 ? 28 : 14); ++ur)
              if (ur * ob >= (isa == Isa::avx512 ? 14 : 8) &&
                  ur * ob + ob + 1 <= (isa == Isa::avx512 ? 32 : 16))
                blockings.push_back({ur, ob});
        for (auto [ur, ob] : blockings)
          for (int kc : o.kchunks) {
            impl.ur_w = ur;
            impl.oc_blocks = ob;
            std::string why;
            auto k = kc ? make_with_chunk(p, impl, isa, w, b, kc)
                        : create_conv_kernel(p, impl, isa, w, &b, &why);
            if (!k) continue;
            const std::string key = k->name() + (kc ? "/k" + std::to_string(kc) : "");
            if (seen.count(key)) continue;  // forced values may be clamped to the same kernel
            seen.insert(key);
            if (!bufs.count(impl.src))
              bufs[impl.src] = random_buffer(size_t(layout_elems(impl.src, xs)), 1);
            const Layout dkey = Layout(int(impl.dst) + 100);  // dst buffers apart from src ones
            if (!bufs.count(dkey)) bufs[dkey].assign(size_t(layout_elems(impl.dst, ys)), 0.f);
            Candidate c;
            c.k = std::move(k);
            c.impl = impl;
            c.label = key;
            c.src = bufs[impl.src].data();
            c.dst = bufs[dkey].data();
            cands.push_back(std::move(c));
          }
      }
      time_candidates(cands, o.reps, *probes.at(isa), l2probe, peak[isa], o.clean, o.tries);
      for (Candidate& c : cands) {
        Row r;
        r.layer = l.name;
        r.problem = p.str();
        r.kernel = c.label;
        r.family = conv_family_name(c.impl.family);
        r.isa = isa_name(isa);
        r.src = layout_name(c.impl.src);
        r.dst = layout_name(c.impl.dst);
        r.count = l.count;
        r.macs = c.k->macs();
        // The median of the clean samples when there are at least 3, else of all of them.
        r.samples = int(c.samples.size() + c.shared.size());
        if (c.samples.size() < 3)
          c.samples.insert(c.samples.end(), c.shared.begin(), c.shared.end());
        std::sort(c.samples.begin(), c.samples.end());
        r.us = c.samples[c.samples.size() / 2] * 1e6;
        r.us_min = c.samples[0] * 1e6;
        std::sort(c.wall.begin(), c.wall.end());
        r.us_wall = c.wall[c.wall.size() / 2] * 1e6;
        r.contended = c.contended;
        r.gflops = 2 * r.macs / r.us / 1e3;
        r.pct = 100 * r.gflops / peak[isa];
        if (!o.sweep || (c.impl.ur_w == 0 && c.impl.oc_blocks == 0))
          std::printf("%-20s %-6s %-52s %9.1f %8.1f %5.1f%% %5d/%-3d\n", r.layer.c_str(),
                      r.isa.c_str(), r.kernel.c_str(), r.us, r.gflops, r.pct, r.contended,
                      r.samples);
        if (best == rows.size() || r.gflops > rows[best].gflops) best = rows.size();
        rows.push_back(r);
      }
      if (best < rows.size()) {
        rows[best].best = true;
        net_time[isa] += rows[best].us * l.count;
        net_time_min[isa] += rows[best].us_min * l.count;
        net_flops[isa] += 2 * rows[best].macs * l.count;
        if (o.sweep) {  // the fastest blockings of this layer and isa
          std::vector<const Row*> mine;
          for (size_t i = first_row; i < rows.size(); ++i) mine.push_back(&rows[i]);
          std::sort(mine.begin(), mine.end(),
                    [](const Row* a, const Row* b) { return a->us_min < b->us_min; });
          for (size_t i = 0; i < mine.size() && i < size_t(o.top); ++i)
            std::printf("%-20s %-6s top%zu %-47s %9.1f %8.1f %5.1f%% (min %.1f us, %.1f%%)\n",
                        mine[i]->layer.c_str(), mine[i]->isa.c_str(), i + 1,
                        mine[i]->kernel.c_str(), mine[i]->us, mine[i]->gflops, mine[i]->pct,
                        mine[i]->us_min,
                        100 * 2 * mine[i]->macs / mine[i]->us_min / 1e3 / peak[isa]);
        }
      }
    }
  }
  std::printf(
      "\nbest family per layer: GFLOP/s and %% of the measured peak of that isa from the median "
      "time (min: from the fastest sample)\n");
  std::printf("%-20s %5s", "layer", "count");
  for (Isa isa : o.isas)
    std::printf(" | %-7s %-44s %7s %6s %6s", isa_name(isa), "kernel", "GFLOP/s", "%peak", "min");
  std::printf("\n");
  for (const Layer& l : layers) {
    bool any = false;
    for (const Row& r : rows) any = any || (r.layer == l.name && r.best);
    if (!any) continue;
    std::printf("%-20s %5d", l.name, l.count);
    for (Isa isa : o.isas)
      for (const Row& r : rows)
        if (r.layer == l.name && r.best && r.isa == isa_name(isa)) {
          std::string kn = r.kernel.substr(5);  // drop "conv_"
          kn = kn.substr(0, kn.find("__"));     // and the isa
          std::printf(" | %-7s %-44s %7.1f %5.1f%% %5.1f%%", "", kn.c_str(), r.gflops, r.pct,
                      100 * 2 * r.macs / r.us_min / 1e3 / peak[isa]);
        }
    std::printf("\n");
  }
  std::map<Isa, double> net_pct, net_pct_min;
  for (Isa isa : o.isas)
    if (net_time[isa] > 0) {
      net_pct_min[isa] = 100 * net_flops[isa] / (net_time_min[isa] * 1e3) / peak[isa];
      const double g = net_flops[isa] / (net_time[isa] * 1e3);
      net_pct[isa] = 100 * g / peak[isa];
      std::printf(
          "ResNet-50 convs (count-weighted, best family) %-6s: %.2f ms, %.1f GFLOP/s, %.1f%% of "
          "peak (min: %.2f ms, %.1f%%)\n",
          isa_name(isa), net_time[isa] / 1e3, g, net_pct[isa], net_time_min[isa] / 1e3,
          100 * net_flops[isa] / (net_time_min[isa] * 1e3) / peak[isa]);
    }
  int all = 0, bad = 0;
  for (const Row& r : rows) {
    all += r.samples;
    bad += r.contended;
  }
  if (bad)
    std::printf(
        "note: %d of %d samples were taken while the probes showed the core shared "
        "(FMA below %.0f%% of peak or slow L2 reads)\n",
        bad, all, 100 * o.clean);
  if (!o.json.empty()) write_json(o, peak, rows, net_pct, net_pct_min);
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
