// wino-gemm: the GEMM of one Winograd group in isolation (all data in L1/L2), its FLOP rate on
// ResNet-50 / VGG-16 3x3 layers, F(2x2,3x3) and F(4x4,3x3): the conf's K chunk against none
// (sampled alternately), the GEMMs of one kernel tile (all xi x the slice's chunks) as the
// kernel runs them. --mrnr MR,NR forces the register tile.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "jit/winograd/winograd_conf.h"
#include "jit/winograd/winograd_gen.h"
#include "micro_bench.h"

namespace kiln::bench {

int wino_gemm(const ModeArgs& args) {
  struct Case {
    const char* name;
    int64_t c, hw;
  };
  const Case cases[] = {{"64@56", 64, 56},
                        {"128@28", 128, 28},
                        {"256@14", 256, 14},
                        {"512@14", 512, 14},
                        {"512@28", 512, 28}};
  const std::string mrnr = args.get("--mrnr", "");
  for (const Case& cs : cases)
    for (Isa isa : bench_isas(args.get("--isa", "")))
      for (int m : {2, 4}) {
        ConvProblem p;
        p.ic = p.oc = cs.c;
        p.ih = p.iw = p.oh = p.ow = cs.hw;
        p.kh = p.kw = 3;
        p.pt = p.pl = p.pb = p.pr = 1;
        p.bias = true;
        ConvImpl impl;
        impl.family = m == 2 ? ConvFamily::winograd2 : ConvFamily::winograd4;
        impl.src = impl.dst = blocked_layout(isa);
        if (!mrnr.empty()) std::sscanf(mrnr.c_str(), "%d,%d", &impl.ur_w, &impl.oc_blocks);
        auto c = convjit::init_wino_conf(p, impl, isa);
        if (!c) {
          std::printf("gemm %-8s %-7s F%d n/a: %s\n", cs.name, isa_name(isa), m, c.reason.c_str());
          continue;
        }
        convjit::WinoConf w = *c.conf, w1 = w;
        w1.kc = p.ic;
        convjit::WinoGemmGen g(w, w.nr, int(w.tpg % w.mr), p.ic, "bench_gemm");
        convjit::WinoGemmGen g1(w1, w1.nr, int(w1.tpg % w1.mr), p.ic, "bench_gemm1");
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
                  a.u = u.data() + w.u_offset(w.plane_of[size_t(xi)], ch);
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
  return 0;
}

}  // namespace kiln::bench
