#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace kiln::bench {

std::vector<float> random_buffer(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int32_t(s >> 8) % 2001 - 1000) / 1000.f;
  }
  return v;
}

void Candidate::once() const {
  const float* ins[] = {src, nullptr, nullptr};
  float* outs[] = {dst};
  KernelArgs a;
  a.src = ins;
  a.dst = outs;
  a.scratch = scratch ? scratch->slice() : nullptr;
  k->run(a, 0, k->tiles());
}

void time_candidates(std::vector<Candidate>& cs, int reps, const FmaProbe& probe, const L2Probe& l2,
                     double peak, double clean, int tries, std::vector<float>* evict) {
  // Clean: the FMA probe reaches `clean` x peak and a pass over the L2 probe's buffer is
  // within 1 / clean of its best (nobody else evicted our caches meanwhile).
  // The FMA probe's GFLOP/s right before and after each sample (their mean) is kept with the
  // sample: how much of the core this thread had at the time.
  double last_g = 0;
  auto quiet = [&] {
    const double g = probe.gflops();
    last_g = g;
    if (clean <= 0) return true;
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
    c.inner = evict ? 1 : std::max(1, int(0.002 / std::max(secs(t0), 1e-7)));
  }
  for (int r = 0; r < reps; ++r)
    for (Candidate& c : cs) {
      double s = 0, w = 0, g = 0;
      bool ok = false;
      for (int t = 0; t < tries && !ok; ++t) {
        if (!evict) c.once();  // warm: the operands are cache-resident as far as they fit
        const bool before = quiet();
        const double g0 = last_g;
        if (evict)  // one write per cache line
          for (size_t i = 0; i < evict->size(); i += 16) (*evict)[i] += 1.f;
        auto t0 = clock::now();
        const double c0 = thread_seconds();
        for (int i = 0; i < c.inner; ++i) c.once();
        s = (thread_seconds() - c0) / c.inner;
        w = secs(t0) / c.inner;
        ok = before && quiet();
        g = 0.5 * (g0 + last_g);
      }
      (ok ? c.samples : c.shared).push_back(s);
      c.wall.push_back(w);
      c.probe_share.push_back(g / peak);
      c.contended += ok ? 0 : 1;
    }
}

Stats stats(Candidate& c) {
  Stats s;
  s.samples = int(c.samples.size() + c.shared.size());
  s.contended = c.contended;
  std::vector<double> v = c.samples;
  if (v.size() < 3) v.insert(v.end(), c.shared.begin(), c.shared.end());
  std::sort(v.begin(), v.end());
  s.us = v[v.size() / 2] * 1e6;
  // The fastest of all samples: sharing the core only ever slows a sample down.
  double lo = v[0];
  for (double x : c.shared) lo = std::min(lo, x);
  s.us_min = lo * 1e6;
  std::vector<double> w = c.wall;
  std::sort(w.begin(), w.end());
  s.us_wall = w[w.size() / 2] * 1e6;
  std::vector<double> ps = c.probe_share;
  std::sort(ps.begin(), ps.end());
  s.probe_share = ps[ps.size() / 2];
  return s;
}

}  // namespace kiln::bench
