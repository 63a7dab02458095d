// kiln_dw_bench: the depthwise family on MobileNetV2's depthwise layers (batch 1, 3x3, pad 1,
// bias + ReLU6 fused as in the model), 1 thread, median time, GFLOP/s and GB/s (bytes =
// input + output + weights), against this machine's single-core copy bandwidth measured for
// buffers far larger than L3 (DRAM), L3-sized and L2-sized.
//
//   kiln_dw_bench [--isa avx512|avx2|both] [--layout blocked|nhwc|both] [--reps N]
//                 [--cold] [--no-post] [--sweep] [--layer SUBSTR] [--stream-mb N]
// --cold evicts the caches (writes a 2x L3 buffer) before every timed run; by default the
// operands stay warm between runs, as when the previous layer has just written the input.
// --sweep times every (weight mode, block width) that fits (tuning the cost model).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/dw/dw_conf.h"
#include "jit/dw/dw_kernel.h"
#include "jit/layout.h"

namespace kiln::bench {

double measure_copy_gbs(Isa isa, size_t bytes, int reps, double* best);
double measure_fma_gflops(Isa isa, int runs);

namespace {

struct Layer {
  const char* name;
  int64_t hw, c, s;
};

// MobileNetV2 (torchvision): input size and channels of each distinct depthwise layer.
const Layer kLayers[] = {
    {"112x112x32_s1", 112, 32, 1}, {"112x112x96_s2", 112, 96, 2}, {"56x56x144_s1", 56, 144, 1},
    {"56x56x144_s2", 56, 144, 2},  {"28x28x192_s1", 28, 192, 1},  {"28x28x192_s2", 28, 192, 2},
    {"14x14x384_s1", 14, 384, 1},  {"14x14x576_s1", 14, 576, 1},  {"14x14x576_s2", 14, 576, 2},
    {"7x7x960_s1", 7, 960, 1},
};

struct Options {
  std::vector<Isa> isas;
  std::vector<bool> nhwc{false, true};
  int reps = 0;  // 0: by time
  bool cold = false, post = true, sweep = false;
  std::string layer;
  size_t stream_mb = 512;
  int64_t row_chunks = 0, cv_chunks = 0;  // --tiles R,C: override the tile plan (experiments)
  std::vector<Layer> shapes;              // --shape HW,C,S: other layers instead
  std::vector<std::string> names;
};

ConvProblem make_problem(const Layer& l, bool post) {
  ConvProblem p;
  p.ic = p.oc = p.groups = l.c;
  p.ih = p.iw = l.hw;
  p.kh = p.kw = 3;
  p.sh = p.sw = l.s;
  p.pt = p.pl = p.pb = p.pr = 1;
  p.oh = p.ow = (l.hw + 2 - 3) / l.s + 1;
  p.bias = true;
  if (post) {
    PostOp relu6;
    relu6.kind = PostOp::Kind::clip;
    relu6.alpha = 0;
    relu6.beta = 6;
    p.post.push_back(relu6);
  }
  return p;
}

std::vector<float> random_buffer(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = float(seed >> 8) / float(1 << 24) - 0.5f;
  }
  return v;
}

struct Timing {
  double median_s = 0, min_s = 0;
};

Timing time_kernel(const Kernel& k, const KernelArgs& a, const Options& o,
                   std::vector<float>& evict) {
  for (int i = 0; i < 3; ++i) k.run_all(a);  // warm-up
  std::vector<double> ts;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0;; ++r) {
    if (o.cold)
      for (size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.f;  // one write per line
    const auto t0 = std::chrono::steady_clock::now();
    k.run_all(a);
    ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.reps ? r + 1 >= o.reps : (r + 1 >= 20 && total > 0.3) || r + 1 >= 2000) break;
  }
  std::sort(ts.begin(), ts.end());
  return {ts[ts.size() / 2], ts.front()};
}

struct Stream {
  double dram = 0, l3 = 0, l2 = 0;
};

void bench_layer(const Layer& l, Isa isa, bool nhwc, const Options& o, const Stream& bw,
                 std::vector<float>& evict) {
  const ConvProblem p = make_problem(l, o.post);
  const Layout lay = nhwc ? Layout::nhwc : isa == Isa::avx512 ? Layout::nChw16c : Layout::nChw8c;
  ConvImpl impl;
  impl.family = ConvFamily::depthwise;
  impl.src = impl.dst = lay;
  const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
  // 64-byte aligned like the runtime's arena: a vector load never splits a cache line.
  Tensor x(DType::f32, {layout_elems(lay, xs)}), y(DType::f32, {layout_elems(lay, ys)});
  const std::vector<float> xr = random_buffer(size_t(x.numel()), 1);
  std::copy(xr.begin(), xr.end(), x.data<float>());
  Tensor w(DType::f32, {p.oc, 1, 3, 3}), b(DType::f32, {p.oc});
  std::vector<float> wr = random_buffer(size_t(w.numel()), 2), br = random_buffer(size_t(p.oc), 3);
  std::copy(wr.begin(), wr.end(), w.data<float>());
  std::copy(br.begin(), br.end(), b.data<float>());
  const float* ins[] = {x.data<float>(), nullptr, nullptr};
  float* outs[] = {y.data<float>()};
  KernelArgs a;
  a.src = ins;
  a.dst = outs;
  const double bytes =
      4.0 * double(p.n * p.ic * p.ih * p.iw + p.n * p.oc * p.oh * p.ow + p.oc * 9 + p.oc);

  // The candidates: the family's choice, or (sweep) every blocking that fits.
  std::vector<convjit::DwConf> confs;
  auto c0 = convjit::init_dw_conf(p, impl, isa);
  if (!c0) {
    std::printf("%-16s %-7s %-8s  not applicable: %s\n", l.name, isa_name(isa), layout_name(lay),
                c0.reason.c_str());
    return;
  }
  confs.push_back(*c0.conf);
  if (o.row_chunks) {
    confs[0].row_chunks = std::min(o.row_chunks, p.oh);
    confs[0].cv_chunks = std::min(o.cv_chunks, confs[0].cv);
  }
  if (o.sweep)
    for (auto wm : {convjit::DwWeights::all, convjit::DwWeights::row})
      for (int ur = 1; ur <= std::min<int64_t>(p.ow, 28); ++ur) {
        ConvImpl f = impl;
        f.ur_w = ur;
        auto c = convjit::init_dw_conf(p, f, isa, wm);
        if (c && !(c.conf->ur_w == c0.conf->ur_w && c.conf->weights == c0.conf->weights))
          confs.push_back(*c.conf);
      }
  for (size_t i = 0; i < confs.size(); ++i) {
    auto k = convjit::make_dw_kernel(confs[i], w, &b);
    const Timing t = time_kernel(*k, a, o, evict);
    const double gflops = 2.0 * k->macs() / t.median_s * 1e-9;
    const double gbs = bytes / t.median_s * 1e-9;
    std::printf("%-16s %-7s %-8s %-44s %9.1f %9.1f %7.1f %7.1f %6.0f%% %5.0f%% %5.0f%%%s\n", l.name,
                isa_name(isa), layout_name(lay), k->name().c_str(), t.median_s * 1e6, t.min_s * 1e6,
                gflops, gbs, 100 * gbs / bw.dram, 100 * gbs / bw.l3, 100 * gbs / bw.l2,
                i == 0 && o.sweep ? "  <- chosen" : "");
  }
}

int run(int argc, char** argv) {
  Options o;
  std::string isa_arg = "both", layout_arg = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(Code::invalid_argument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--isa")
      isa_arg = next();
    else if (a == "--layout")
      layout_arg = next();
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--cold")
      o.cold = true;
    else if (a == "--no-post")
      o.post = false;
    else if (a == "--sweep")
      o.sweep = true;
    else if (a == "--layer")
      o.layer = next();
    else if (a == "--tiles") {
      const std::string v = next();
      o.row_chunks = std::stoll(v);
      o.cv_chunks = std::stoll(v.substr(v.find(',') + 1));
    } else if (a == "--shape") {
      int64_t hw = 0, c = 0, st = 0;
      if (std::sscanf(next().c_str(), "%ld,%ld,%ld", &hw, &c, &st) != 3)
        fail(Code::invalid_argument, "--shape takes HW,C,S");
      o.names.push_back(std::to_string(hw) + "x" + std::to_string(hw) + "x" + std::to_string(c) +
                        "_s" + std::to_string(st));
      o.shapes.push_back({nullptr, hw, c, st});
    } else if (a == "--stream-mb")
      o.stream_mb = size_t(std::stoul(next()));
    else
      fail(Code::invalid_argument, "unknown option " + a);
  }
  if (isa_arg == "both")
    o.isas = {Isa::avx512, Isa::avx2};
  else
    o.isas = {parse_isa(isa_arg)};
  o.isas.erase(std::remove_if(o.isas.begin(), o.isas.end(),
                              [](Isa i) { return int(i) > int(detect_isa()); }),
               o.isas.end());
  if (layout_arg == "blocked")
    o.nhwc = {false};
  else if (layout_arg == "nhwc")
    o.nhwc = {true};

  // Copy bandwidth of one core: buffers of stream_mb each (far beyond L3), 8 MB (in L3),
  // 256 KB (in L2), with the widest vectors this CPU has.
  const Isa widest = detect_isa();
  Stream bw;
  double best = 0;
  bw.dram = measure_copy_gbs(widest, o.stream_mb << 20, 7, &best);
  std::printf("# copy bandwidth, 1 core (read+write bytes, median; best in brackets):\n");
  std::printf("#   DRAM 2x%zu MB: %.1f GB/s (%.1f)\n", o.stream_mb, bw.dram, best);
  bw.l3 = measure_copy_gbs(widest, 8 << 20, 101, &best);
  std::printf("#   L3   2x8 MB:   %.1f GB/s (%.1f)\n", bw.l3, best);
  bw.l2 = measure_copy_gbs(widest, 256 << 10, 2001, &best);
  std::printf("#   L2   2x256 KB: %.1f GB/s (%.1f)\n", bw.l2, best);
  for (Isa isa : o.isas)
    std::printf("# FMA peak, 1 core, %s: %.0f GFLOP/s\n", isa_name(isa),
                measure_fma_gflops(isa, 200));
  std::printf("# cpu: %s; %s operands; post-op: %s\n", cpu_description().c_str(),
              o.cold ? "cold (caches evicted)" : "warm", o.post ? "bias+relu6" : "bias");
  std::printf("%-16s %-7s %-8s %-44s %9s %9s %7s %7s %7s %6s %6s\n", "layer", "isa", "layout",
              "kernel", "med_us", "min_us", "GFLOP/s", "GB/s", "%DRAM", "%L3", "%L2");

  std::vector<float> evict(o.cold ? size_t(o.stream_mb << 20) / 4 : 0, 0.f);
  for (size_t i = 0; i < o.shapes.size(); ++i) o.shapes[i].name = o.names[i].c_str();
  const std::vector<Layer> layers =
      o.shapes.empty() ? std::vector<Layer>(std::begin(kLayers), std::end(kLayers)) : o.shapes;
  for (const Layer& l : layers) {
    if (!o.layer.empty() && std::string(l.name).find(o.layer) == std::string::npos) continue;
    for (Isa isa : o.isas)
      for (bool nhwc : o.nhwc) bench_layer(l, isa, nhwc, o, bw, evict);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  try {
    return kiln::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_dw_bench: %s\n", e.what());
    return 1;
  }
}
