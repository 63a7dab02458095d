// Single-thread GFLOP/s of the im2col conv family on a few ResNet-50 layers, next to the
// direct / gemm1x1 families on the same shape. Not run by default (doctest::skip):
//   test_jit -tc="im2col bench*" --no-skip
// A sample is the thread CPU time of >= 20 ms of back-to-back runs (same buffers) after a
// warm-up; the machine is shared, so the median and the min of 11 samples are printed, with %
// of the measured 1-core FMA peak (178.8 GFLOP/s AVX-512, ~94 AVX2).
#include <doctest/doctest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "jit/im2col/im2col_conf.h"
#include "jit/im2col/im2col_kernel.h"
#include "jit/im2col/im2col_pack.h"
#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Timing {
  double median = 0, min = 0;  // seconds per run
};

Timing time_kernel(const Kernel& k, KernelArgs a) {
  const ScratchBuffer scratch(k.scratch_bytes());  // once, not per run
  a.scratch = scratch.slice();
  k.run_all(a);
  int iters = 1;
  for (;;) {
    const double t0 = thread_seconds();
    for (int i = 0; i < iters; ++i) k.run_all(a);
    if (thread_seconds() - t0 > 0.02) break;
    iters *= 2;
  }
  std::vector<double> s;
  for (int r = 0; r < 11; ++r) {
    const double t0 = thread_seconds();
    for (int i = 0; i < iters; ++i) k.run_all(a);
    s.push_back((thread_seconds() - t0) / iters);
  }
  std::sort(s.begin(), s.end());
  return {s[s.size() / 2], s.front()};
}

void bench(const char* what, const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  Operands o = make_operands(p, 7);
  std::string why;
  auto k = create_conv_kernel(p, impl, isa, o.w, p.bias ? &o.b : nullptr, &why);
  if (!k) {
    std::printf("%-14s %-8s %-48s n/a: %s\n", what, isa_name(isa), conv_family_name(impl.family),
                why.c_str());
    return;
  }
  const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
  std::vector<float> src(size_t(layout_elems(impl.src, xs)), 0.5f);
  std::vector<float> dst(size_t(layout_elems(impl.dst, ys)));
  const float* ins[] = {src.data(), nullptr, nullptr};
  float* outs[] = {dst.data()};
  const Timing t = time_kernel(*k, KernelArgs{ins, outs});
  const double flop = 2 * p.macs(), peak = isa == Isa::avx512 ? 178.8 : 94.0;
  const double med = flop / t.median / 1e9, best = flop / t.min / 1e9;
  std::printf("%-14s %-8s %-48s median %6.1f GFLOP/s (%4.1f%%)  best %6.1f (%4.1f%%)  %.3f ms\n",
              what, isa_name(isa), k->name().c_str(), med, 100 * med / peak, best,
              100 * best / peak, 1e3 * t.median);
}

ConvImpl impl(ConvFamily f, Layout src, Layout dst) {
  ConvImpl i;
  i.family = f;
  i.src = src;
  i.dst = dst;
  return i;
}

TEST_CASE("im2col bench" * doctest::skip()) {
  struct L {
    const char* name;
    Shp s;
  };
  const L layers[] = {
      {"conv1_7x7s2",
       {.ic = 3,
        .ih = 224,
        .iw = 224,
        .oc = 64,
        .kh = 7,
        .kw = 7,
        .sh = 2,
        .sw = 2,
        .pt = 3,
        .pl = 3,
        .pb = 3,
        .pr = 3}},
      {"3x3_64@56",
       {.ic = 64,
        .ih = 56,
        .iw = 56,
        .oc = 64,
        .kh = 3,
        .kw = 3,
        .pt = 1,
        .pl = 1,
        .pb = 1,
        .pr = 1}},
      {"1x1_256to64@56", {.ic = 256, .ih = 56, .iw = 56, .oc = 64}},
      {"3x3_128@28",
       {.ic = 128,
        .ih = 28,
        .iw = 28,
        .oc = 128,
        .kh = 3,
        .kw = 3,
        .pt = 1,
        .pl = 1,
        .pb = 1,
        .pr = 1}},
  };
  for (Isa isa : isas())
    for (const L& l : layers) {
      const ConvProblem p = problem(l.s, chain({op(PostOp::Kind::relu)}));
      const Layout b = blocked(isa);
      bench(l.name, p, impl(ConvFamily::im2col, Layout::nchw, Layout::nchw), isa);
      bench(l.name, p, impl(ConvFamily::im2col, Layout::nhwc, Layout::nhwc), isa);
      bench(l.name, p, impl(ConvFamily::direct, p.ic < 8 ? Layout::nchw : b, b), isa);
      if (p.kh == 1) bench(l.name, p, impl(ConvFamily::gemm1x1, Layout::nhwc, Layout::nhwc), isa);
    }
}

}  // namespace
}  // namespace kiln::convtest

namespace kiln::convtest {
namespace {

// Tuning aid: conf variations of one shape (IM2COL_SWEEP = shape index, IM2COL_LAYOUT = nchw /
// nhwc, IM2COL_ISA) timed in interleaved rounds so load changes hit all alike; the packing alone
// is timed too.
TEST_CASE("im2col bench: sweep" * doctest::skip()) {
  const Shp shapes[] = {
      {.ic = 3,
       .ih = 224,
       .iw = 224,
       .oc = 64,
       .kh = 7,
       .kw = 7,
       .sh = 2,
       .sw = 2,
       .pt = 3,
       .pl = 3,
       .pb = 3,
       .pr = 3},
      {.ic = 64,
       .ih = 56,
       .iw = 56,
       .oc = 64,
       .kh = 3,
       .kw = 3,
       .pt = 1,
       .pl = 1,
       .pb = 1,
       .pr = 1},
      {.ic = 256, .ih = 56, .iw = 56, .oc = 64},
      {.ic = 128,
       .ih = 28,
       .iw = 28,
       .oc = 128,
       .kh = 3,
       .kw = 3,
       .pt = 1,
       .pl = 1,
       .pb = 1,
       .pr = 1},
  };
  auto env = [](const char* n, const char* d) {
    const char* e = std::getenv(n);
    return std::string(e ? e : d);
  };
  Shp shp = shapes[std::stoi(env("IM2COL_SWEEP", "1"))];
  if (std::getenv("IM2COL_SHAPE")) {  // "IC,IH,OC,K,S" (square, pad K/2)
    int64_t v[5];
    if (std::sscanf(std::getenv("IM2COL_SHAPE"), "%ld,%ld,%ld,%ld,%ld", &v[0], &v[1], &v[2], &v[3],
                    &v[4]) == 5)
      shp = {.ic = v[0],
             .ih = v[1],
             .iw = v[1],
             .oc = v[2],
             .kh = v[3],
             .kw = v[3],
             .sh = v[4],
             .sw = v[4],
             .pt = v[3] / 2,
             .pl = v[3] / 2,
             .pb = v[3] / 2,
             .pr = v[3] / 2};
  }
  const ConvProblem p = problem(shp, chain({op(PostOp::Kind::relu)}));
  const Layout l = env("IM2COL_LAYOUT", "nhwc") == "nhwc" ? Layout::nhwc : Layout::nchw;
  const Isa isa = parse_isa(env("IM2COL_ISA", "avx512"));
  if (int(isa) > int(detect_isa())) return;
  Operands o = make_operands(p, 7);
  auto c0 = im2col::init_im2col_conf(p, impl(ConvFamily::im2col, l, l), isa);
  REQUIRE(c0);
  {
    const im2col::Im2colConf& cf = *c0.conf;
    std::printf("default %s tile %lld kc %lld ldb %lld\n", cf.blocking_str().c_str(),
                (long long)cf.tile_pix, (long long)cf.kc, (long long)cf.ldb);
    if (!cf.no_copy) {
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
  }
  // Variations: register tiles x tile units x K chunk.
  std::vector<std::pair<int, int>> tiles;
  for (auto t : {std::pair{0, 0},
                 {14, 2},
                 {12, 2},
                 {8, 3},
                 {6, 4},
                 {5, 4},
                 {4, 4},
                 {3, 4},
                 {3, 6},
                 {2, 8},
                 {4, 6}})
    tiles.push_back(t);
  if (isa == Isa::avx2) tiles = {{0, 0}, {6, 2}, {4, 2}, {3, 3}, {4, 3}, {2, 4}, {12, 1}};
  std::vector<int64_t> kcs = {0, 64, 128, c0.conf->k};  // IM2COL_KCS="16,32,..." replaces
  if (std::getenv("IM2COL_KCS")) {
    kcs = {0};
    std::string v = env("IM2COL_KCS", "");
    for (size_t at = 0; at < v.size();) {
      size_t e = v.find(',', at);
      if (e == std::string::npos) e = v.size();
      kcs.push_back(std::stoll(v.substr(at, e - at)));
      at = e + 1;
    }
  }
  std::vector<std::string> names;
  std::vector<std::unique_ptr<Kernel>> ks;
  for (auto [mr, nr] : tiles) {
    ConvImpl i = impl(ConvFamily::im2col, l, l);
    i.ur_w = mr;
    i.oc_blocks = nr;
    auto c = im2col::init_im2col_conf(p, i, isa);
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
          if (units != 1 || std::getenv("IM2COL_FORCE_COPY") == nullptr) continue;
          cf.no_copy = false;  // tuning: what packing the 1x1 input would give
          cf.tile_pix = c.conf->tile_pix;
          cf.tiles_per_image = c.conf->tiles_per_image;
          if (!cf.nhwc) cf.ldb = cf.tile_pix + (cf.tile_pix / 16 % 2 ? 0 : 16);
          if (cf.nhwc) cf.lda = im2col::spread_stride(cf.k, cf.mr);
          cf.pack_floats = cf.nhwc ? cf.tile_pix * cf.lda : cf.k * cf.ldb;
        }
        names.push_back(cf.blocking_str() + " tile" + std::to_string(cf.tile_pix) + " kc" +
                        std::to_string(cf.kc) + (mr ? "" : " (default)"));
        ks.push_back(im2col::make_im2col_kernel(cf, o.w, &o.b));
      }
  }
  const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
  std::vector<float> src(size_t(layout_elems(l, xs)), 0.5f), dst(size_t(layout_elems(l, ys)));
  const float* ins[] = {src.data(), nullptr, nullptr};
  float* outs[] = {dst.data()};
  int64_t scratch_bytes = 0;
  for (const auto& k : ks) scratch_bytes = std::max(scratch_bytes, k->scratch_bytes());
  const ScratchBuffer scratch(scratch_bytes);
  const KernelArgs a{ins, outs, scratch.slice()};
  std::vector<std::vector<double>> samples(ks.size());
  for (int round = 0; round < 9; ++round)
    for (size_t i = 0; i < ks.size(); ++i) {
      ks[i]->run_all(a);
      int iters = 0;
      const double t0 = thread_seconds();
      double t = 0;
      do {
        ks[i]->run_all(a);
        ++iters;
        t = thread_seconds() - t0;
      } while (t < 0.01);
      samples[i].push_back(t / iters);
    }
  const double flop = 2 * p.macs(), peak = isa == Isa::avx512 ? 178.8 : 94.0;
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
}

}  // namespace
}  // namespace kiln::convtest
