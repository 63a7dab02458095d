// Timing driver (skipped by default; run with
//   test_jit -tc="winograd bench*" --no-skip
// and KILN_WINO_BENCH_LAYERS=substring to pick layers): 1-thread time of the direct family
// (its own blocking choice) and the two Winograd families on the 3x3 stride-1 layers of
// ResNet-50 and VGG-16 (batch 1), as effective GFLOP/s = direct-conv FLOPs / time.
// Kernels are sampled in interleaved rounds; a sample is the thread CPU time per run of
// >= 20 ms of back-to-back runs; reported are the median and the min over the samples.
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "test_conv_util.h"

namespace kiln::convtest {
namespace {

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Case {
  const char* name;
  int64_t c_in, hw, c_out;
};

TEST_CASE("winograd bench: direct vs winograd, 1 thread" * doctest::skip()) {
  const Case cases[] = {
      {"resnet_3x3_64@56", 64, 56, 64},    {"resnet_3x3_128@28", 128, 28, 128},
      {"resnet_3x3_256@14", 256, 14, 256}, {"resnet_3x3_512@7", 512, 7, 512},
      {"vgg_3x3_64@224", 64, 224, 64},     {"vgg_3x3_128@112", 128, 112, 128},
      {"vgg_3x3_256@56", 256, 56, 256},    {"vgg_3x3_512@28", 512, 28, 512},
      {"vgg_3x3_512@14", 512, 14, 512},
  };
  const char* filter = std::getenv("KILN_WINO_BENCH_LAYERS");
  const int rounds =
      std::getenv("KILN_WINO_BENCH_ROUNDS") ? std::atoi(std::getenv("KILN_WINO_BENCH_ROUNDS")) : 7;
  std::printf("%-20s %-7s %-10s %9s %9s %8s %8s  %s\n", "layer", "isa", "family", "med_ms",
              "min_ms", "GF/s", "x_direct", "kernel");
  for (const Case& cs : cases) {
    if (filter && !std::string(cs.name).starts_with(filter) &&
        std::string(cs.name).find(filter) == std::string::npos)
      continue;
    Shp s{.ic = cs.c_in, .ih = cs.hw, .iw = cs.hw, .oc = cs.c_out, .kh = 3, .kw = 3};
    s.pt = s.pl = s.pb = s.pr = 1;
    const ConvProblem p = problem(s);
    Operands o = make_operands(p, 9);
    for (Isa isa : isas()) {
      if (const char* only = std::getenv("KILN_WINO_BENCH_ISA"); only && parse_isa(only) != isa)
        continue;
      const Layout l = blocked(isa);
      std::vector<std::unique_ptr<Kernel>> ks;
      std::vector<std::string> fams;
      for (ConvFamily f : {ConvFamily::direct, ConvFamily::winograd2, ConvFamily::winograd4}) {
        if (const char* only = std::getenv("KILN_WINO_BENCH_FAMILY");
            only && f != ConvFamily::direct && std::string(conv_family_name(f)) != only)
          continue;
        ConvImpl impl;
        impl.family = f;
        impl.src = impl.dst = l;
        std::string why;
        auto k = create_conv_kernel(p, impl, isa, o.w, &o.b, &why);
        REQUIRE_MESSAGE(k != nullptr, why);
        ks.push_back(std::move(k));
        fams.push_back(conv_family_name(f));
      }
      const Shape ys{p.n, p.oc, p.oh, p.ow};
      const std::vector<float> src = to_layout(o.x, l);
      std::vector<float> dst(size_t(layout_elems(l, ys)));
      const float* ins[] = {src.data(), nullptr, nullptr};
      float* outs[] = {dst.data()};
      int64_t scratch_bytes = 0;
      for (const auto& k : ks) scratch_bytes = std::max(scratch_bytes, k->scratch_bytes());
      const ScratchBuffer scratch(scratch_bytes);
      KernelArgs a;
      a.src = ins;
      a.dst = outs;
      a.scratch = scratch.slice();
      std::vector<std::vector<double>> samples(ks.size());
      for (auto& k : ks) k->run_all(a);  // warm-up (scratch, caches)
      for (int r = 0; r < rounds; ++r)
        for (size_t i = 0; i < ks.size(); ++i) {
          int runs = 0;
          const double t0 = thread_seconds();
          double t = t0;
          while (t - t0 < 0.02 || runs < 2) {
            ks[i]->run_all(a);
            ++runs;
            t = thread_seconds();
          }
          samples[i].push_back((t - t0) / runs);
        }
      double direct_med = 0;
      for (size_t i = 0; i < ks.size(); ++i) {
        std::vector<double> v = samples[i];
        std::sort(v.begin(), v.end());
        const double med = v[v.size() / 2], mn = v.front();
        if (i == 0) direct_med = med;
        std::printf("%-20s %-7s %-10s %9.3f %9.3f %8.1f %8.2f  %s\n", cs.name, isa_name(isa),
                    fams[i].c_str(), med * 1e3, mn * 1e3, 2 * p.macs() / med * 1e-9,
                    direct_med / med, ks[i]->name().c_str());
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::convtest

#include "jit/winograd/winograd_gen.h"

namespace kiln::convtest {
namespace {

// The GEMM of one group in isolation (all data in L1/L2): its FLOP rate.
TEST_CASE("winograd bench: GEMM microkernel alone" * doctest::skip()) {
  const Case cases[] = {{"64@56", 64, 56, 64},
                        {"128@28", 128, 28, 128},
                        {"256@14", 256, 14, 256},
                        {"512@14", 512, 14, 512},
                        {"512@28", 512, 28, 512}};
  for (const Case& cs : cases)
    for (Isa isa : isas())
      for (int m : {2, 4}) {
        Shp s{.ic = cs.c_in, .ih = cs.hw, .iw = cs.hw, .oc = cs.c_out, .kh = 3, .kw = 3};
        s.pt = s.pl = s.pb = s.pr = 1;
        const ConvProblem p = problem(s);
        ConvImpl impl;
        impl.family = m == 2 ? ConvFamily::winograd2 : ConvFamily::winograd4;
        impl.src = impl.dst = blocked(isa);
        if (const char* e = std::getenv("KILN_WINO_BENCH_MRNR"))  // "mr,nr"
          std::sscanf(e, "%d,%d", &impl.ur_w, &impl.oc_blocks);
        auto c = convjit::init_wino_conf(p, impl, isa);
        REQUIRE(c);
        // A/B: the conf's K chunk against none, sampled alternately; the GEMMs of one kernel
        // tile (all xi x the slice's chunks) as the kernel runs them.
        convjit::WinoConf w = *c.conf, w1 = w;
        w1.kc = p.ic;
        convjit::WinoGemmGen g(w, w.nr, int(w.tpg % w.mr), "bench_gemm");
        convjit::WinoGemmGen g1(w1, w1.nr, int(w1.tpg % w1.mr), "bench_gemm1");
        g.create();
        g1.create();
        std::vector<float> v(size_t(w.v_floats()), 0.5f), u(size_t(w.u_floats()), 0.25f),
            mm(size_t(w.m_floats()));
        const int64_t nch = std::min<int64_t>(w.slice, w.chunks - 1 > 0 ? w.chunks - 1 : 1);
        using Fn = void (*)(const convjit::WinoGemmArgs*);
        const Fn fns[2] = {g.fn<Fn>(), g1.fn<Fn>()};
        std::vector<double> samples[2];
        for (int r = 0; r < 15; ++r)
          for (int i = 0; i < 2; ++i) {
            int runs = 0;
            const double t0 = thread_seconds();
            double t = t0;
            while (t - t0 < 0.01) {
              convjit::WinoGemmArgs a;
              a.blocks = w.tpg / w.mr;
              for (int xi = 0; xi < w.a2; ++xi)
                for (int64_t ch = 0; ch < nch; ++ch) {
                  a.v = v.data() + xi * w.v_xi();
                  a.u = u.data() + w.u_offset(xi, ch);
                  a.m = mm.data() + xi * w.m_xi() + ch * w.nr * w.simd;
                  fns[i](&a);
                }
              ++runs;
              t = thread_seconds();
            }
            samples[i].push_back((t - t0) / runs);
          }
        const double flops = 2.0 * w.a2 * double(w.tpg) * double(p.ic) * w.nr * w.simd * nch;
        for (int i = 0; i < 2; ++i) {
          std::sort(samples[i].begin(), samples[i].end());
          std::printf("gemm %-8s %-7s F%d %-16s med %.1f GF/s, max %.1f GF/s\n", cs.name,
                      isa_name(isa), m, (i ? w1 : w).blocking_str().c_str(),
                      flops / samples[i][samples[i].size() / 2] * 1e-9,
                      flops / samples[i][0] * 1e-9);
        }
      }
}

}  // namespace
}  // namespace kiln::convtest
