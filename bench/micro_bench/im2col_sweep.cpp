// im2col-sweep: conf variations of one im2col conv (register tiles x tile sizes x K chunks),
// timed in interleaved rounds so load changes hit all alike, ranked by median time; the
// packing alone is timed too. The conv: --shape (default ResNet-50's 3x3_64@56) + ReLU.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fma_peak.h"
#include "graph/error.h"
#include "jit/im2col/im2col_conf.h"
#include "jit/im2col/im2col_kernel.h"
#include "jit/im2col/im2col_pack.h"
#include "jit/layout.h"
#include "layers.h"
#include "micro_bench.h"
#include "timing.h"

namespace kiln::bench {
namespace {

Tensor random_tensor(Shape s, uint32_t seed) {
  Tensor t(DType::f32, std::move(s));
  const std::vector<float> v = random_buffer(size_t(t.numel()), seed);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

ConvImpl im2col_impl(Layout l, int mr = 0, int nr = 0) {
  ConvImpl i;
  i.family = ConvFamily::im2col;
  i.src = i.dst = l;
  i.ur_w = mr;
  i.oc_blocks = nr;
  return i;
}

// Median and min of 11 timings of packing every tile of one image.
void time_pack(const ConvProblem& p, const im2col::Im2colConf& cf) {
  std::vector<float> src(size_t(p.ic * p.ih * p.iw), 0.5f), buf(size_t(cf.pack_floats));
  std::vector<double> s;
  for (int r = 0; r < 11; ++r) {
    const double t0 = thread_seconds();
    for (int64_t t = 0; t < cf.tiles_per_image; ++t) {
      const int64_t pix0 = t * cf.tile_pix, np = std::min(cf.tile_pix, cf.pix - pix0);
      if (cf.nhwc)
        im2col::pack_rows_nhwc(cf, src.data(), pix0, np, buf.data());
      else
        im2col::pack_cols_nchw(cf, src.data(), pix0, np, buf.data());
    }
    s.push_back(thread_seconds() - t0);
  }
  std::sort(s.begin(), s.end());
  std::printf("pack alone: median %.3f ms min %.3f ms\n", 1e3 * s[5], 1e3 * s[0]);
}

std::vector<int64_t> parse_list(const std::string& v) {
  std::vector<int64_t> r;
  for (size_t at = 0; at < v.size();) {
    size_t e = v.find(',', at);
    if (e == std::string::npos) e = v.size();
    r.push_back(std::stoll(v.substr(at, e - at)));
    at = e + 1;
  }
  return r;
}

}  // namespace

int im2col_sweep(const ModeArgs& a) {
  ConvProblem p = custom_layer(a.get("--shape", "64,56,64,3,1")).p;
  p.post.push_back(PostOp{});  // relu
  const Layout l = a.get("--layout", "nhwc") == "nhwc" ? Layout::nhwc : Layout::nchw;
  const std::vector<Isa> isas = bench_isas(a.get("--isa", "avx512"));
  if (isas.empty()) fail(Code::unsupported, "this CPU lacks the ISA asked for");
  const Isa isa = isas.front();
  const double peak = measure_fma_peak(isa);
  std::printf("%s %s %s, 1-core FMA peak %.1f GFLOP/s\n", p.str().c_str(), isa_name(isa),
              layout_name(l), peak);
  const Tensor w = random_tensor({p.oc, p.ic, p.kh, p.kw}, 2), b = random_tensor({p.oc}, 3);
  auto c0 = im2col::init_im2col_conf(p, im2col_impl(l), isa);
  if (!c0) fail(Code::unsupported, "im2col does not apply: " + c0.reason);
  {
    const im2col::Im2colConf& cf = *c0.conf;
    std::printf("default %s tile %lld kc %lld ldb %lld\n", cf.blocking_str().c_str(),
                (long long)cf.tile_pix, (long long)cf.kc, (long long)cf.ldb);
    if (!cf.no_copy) time_pack(p, cf);
  }
  // Variations: register tiles x tile units x K chunk.
  std::vector<std::pair<int, int>> tiles = {{0, 0}, {14, 2}, {12, 2}, {8, 3}, {6, 4}, {5, 4},
                                            {4, 4}, {3, 4},  {3, 6},  {2, 8}, {4, 6}};
  if (isa == Isa::avx2) tiles = {{0, 0}, {6, 2}, {4, 2}, {3, 3}, {4, 3}, {2, 4}, {12, 1}};
  std::vector<int64_t> kcs = {0, 64, 128, c0.conf->k};  // --kcs 16,32,.. replaces
  if (const std::string v = a.get("--kcs", ""); !v.empty()) {
    kcs = parse_list(v);
    kcs.insert(kcs.begin(), 0);
  }
  const bool force_copy = a.get("--force-copy", "0") == "1";
  std::vector<std::string> names;
  std::vector<std::unique_ptr<Kernel>> ks;
  for (auto [mr, nr] : tiles) {
    auto c = im2col::init_im2col_conf(p, im2col_impl(l, mr, nr), isa);
    if (!c) continue;
    for (int64_t units : {int64_t(0), int64_t(1), int64_t(4)})
      for (int64_t kc : kcs) {
        im2col::Im2colConf cf = *c.conf;
        if (kc) cf.kc = std::min(kc, cf.k);
        if (units) {
          const int64_t unit = cf.nhwc ? cf.mr : cf.group_cols();
          cf.tile_pix = units * unit;
          cf.tiles_per_image = (cf.pix + cf.tile_pix - 1) / cf.tile_pix;
          if (!cf.nhwc && !cf.no_copy)
            cf.ldb = units == 1 ? cf.tile_pix : cf.tile_pix + (cf.tile_pix / 16 % 2 ? 0 : 16);
          cf.pack_floats = cf.no_copy ? 0 : cf.nhwc ? cf.tile_pix * cf.lda : cf.k * cf.ldb;
        }
        if (cf.no_copy && units) {
          if (units != 1 || !force_copy) continue;
          cf.no_copy = false;  // tuning: what packing the 1x1 input would give
          cf.tile_pix = c.conf->tile_pix;
          cf.tiles_per_image = c.conf->tiles_per_image;
          if (!cf.nhwc) cf.ldb = cf.tile_pix + (cf.tile_pix / 16 % 2 ? 0 : 16);
          if (cf.nhwc) cf.lda = im2col::spread_stride(cf.k, cf.mr);
          cf.pack_floats = cf.nhwc ? cf.tile_pix * cf.lda : cf.k * cf.ldb;
        }
        names.push_back(cf.blocking_str() + " tile" + std::to_string(cf.tile_pix) + " kc" +
                        std::to_string(cf.kc) + (mr ? "" : " (default)"));
        ks.push_back(im2col::make_im2col_kernel(cf, w, &b));
      }
  }
  const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
  std::vector<float> src(size_t(layout_elems(l, xs)), 0.5f), dst(size_t(layout_elems(l, ys)));
  const float* ins[] = {src.data(), nullptr, nullptr};
  float* outs[] = {dst.data()};
  int64_t scratch_bytes = 0;
  for (const auto& k : ks) scratch_bytes = std::max(scratch_bytes, k->scratch_bytes());
  const ScratchBuffer scratch(scratch_bytes);
  const KernelArgs args{ins, outs, scratch.slice()};
  std::vector<std::vector<double>> samples(ks.size());
  for (int round = 0; round < 9; ++round)
    for (size_t i = 0; i < ks.size(); ++i) {
      ks[i]->run_all(args);
      int iters = 0;
      const double t0 = thread_seconds();
      double t = 0;
      do {
        ks[i]->run_all(args);
        ++iters;
        t = thread_seconds() - t0;
      } while (t < 0.01);
      samples[i].push_back(t / iters);
    }
  const double flop = 2 * p.macs();
  std::vector<std::pair<double, std::string>> rows;
  for (size_t i = 0; i < ks.size(); ++i) {
    auto& s = samples[i];
    std::sort(s.begin(), s.end());
    char line[256];
    std::snprintf(line, sizeof line, "%-40s median %5.1f%%  best %5.1f%%", names[i].c_str(),
                  100 * flop / s[s.size() / 2] / 1e9 / peak, 100 * flop / s[0] / 1e9 / peak);
    rows.push_back({s[s.size() / 2], line});
  }
  std::sort(rows.begin(), rows.end());
  for (auto& r : rows) std::printf("%s\n", r.second.c_str());
  return 0;
}

}  // namespace kiln::bench
