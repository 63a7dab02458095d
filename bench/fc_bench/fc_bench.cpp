// FC kernel benchmark: the batch-1 GEMV shapes of the zoo's classifier heads at one thread,
// reported as GB/s of weights streamed and GFLOP/s, next to this core's read bandwidth over a
// buffer of the same size (the roof for that working set) and over one much larger than L3
// (the DRAM roof).
//
//   kiln_fc_bench [--isa avx512|avx2|all] [--reps N] [--cold] [--sweep] [--m M] [--shape LABEL]
//
// --cold streams a 1 GiB buffer before every timed run so the weights come from DRAM even when
// they would fit in L3; --sweep also times forced blockings (block width, accumulator sets,
// K unroll, prefetch distance; for M > 1 the register tile); --m times M > 1 instead of the
// GEMV; --shape runs only the shapes whose label contains LABEL ("vgg", "resnet", ...).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/gemm/fc_conf.h"
#include "jit/gemm/fc_kernel.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

struct Shape2 {
  const char* what;
  int64_t k, n;
};

const Shape2 kShapes[] = {
    {"resnet50 fc", 2048, 1000},
    {"vgg16 fc6", 25088, 4096},
    {"vgg16 fc7", 4096, 4096},
    {"vgg16 fc8", 4096, 1000},
    {"mobilenetv2 fc", 1280, 1000},
    {"l2-resident", 256, 1000},  // 1 MB: the kernel's own limit rather than memory's
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Sums the buffer with 8 independent AVX-512 (or AVX2) accumulators: a pure read stream. The
// buffer is read as 4 interleaved sequential streams (quarters), which measured up to ~30%
// faster than one stream from DRAM here (more misses in flight); the tail past a multiple of
// 4 x 128 floats is not read (negligible for these sizes).
__attribute__((target("avx512f"))) float read_avx512(const float* p, size_t n) {
  __m512 a[8];
  for (auto& v : a) v = _mm512_setzero_ps();
  const size_t q = n / 4 / 128 * 128;
  for (size_t i = 0; i < q; i += 32)
    for (int j = 0; j < 8; ++j)
      a[j] = _mm512_add_ps(a[j], _mm512_load_ps(p + (j & 3) * q + i + 16 * (j >> 2)));
  for (int j = 1; j < 8; ++j) a[0] = _mm512_add_ps(a[0], a[j]);
  float t[16];
  _mm512_storeu_ps(t, a[0]);
  float s = 0;
  for (float v : t) s += v;
  return s;
}

__attribute__((target("avx2"))) float read_avx2(const float* p, size_t n) {
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  const size_t q = n / 4 / 128 * 128;
  for (size_t i = 0; i < q; i += 16)
    for (int j = 0; j < 8; ++j)
      a[j] = _mm256_add_ps(a[j], _mm256_load_ps(p + (j & 3) * q + i + 8 * (j >> 2)));
  for (int j = 1; j < 8; ++j) a[0] = _mm256_add_ps(a[0], a[j]);
  float t[8];
  _mm256_storeu_ps(t, a[0]);
  float s = 0;
  for (float v : t) s += v;
  return s;
}

volatile float g_sink;

float read_stream(Isa isa, const float* p, size_t n) {
  return isa == Isa::avx512 ? read_avx512(p, n) : read_avx2(p, n);
}

// The 1 GiB buffer used for the DRAM roof and for flushing the caches in --cold.
const Tensor& big_buffer() {
  static Tensor t = [] {
    Tensor b(DType::f32, {int64_t(1) << 28});
    float* p = b.data<float>();
    for (int64_t i = 0; i < b.numel(); i += 1024) p[i] = 1.f;  // touch every page
    return b;
  }();
  return t;
}

void flush_caches(Isa isa) {
  const Tensor& b = big_buffer();
  g_sink = read_stream(isa, b.data<float>(), size_t(b.numel()));
}

// Median GB/s of reading `floats` floats, hot (repeated) or after a flush.
double stream_gbs(Isa isa, const float* p, size_t floats, int reps, bool cold) {
  std::vector<double> t;
  g_sink = read_stream(isa, p, floats);
  for (int r = 0; r < reps; ++r) {
    if (cold) flush_caches(isa);
    auto t0 = Clock::now();
    g_sink = read_stream(isa, p, floats);
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return double(floats) * 4 / median(t) / 1e9;
}

struct Result {
  double sec = 0;   // median kernel time
  double roof = 0;  // median GB/s of the read stream over as many bytes as the packed weights
  std::string name;
};

// Alternates rounds of 5 read-stream runs and 5 kernel runs, so that both see the same
// neighbours on a shared machine; the first run of a round pays for the switch (the median
// hides it).
Result time_kernel(const fcjit::FcConf& c, const Tensor& w, const Tensor& b, int reps, bool cold) {
  auto k = fcjit::make_fc_kernel(c, w, false, 1.f, &b);
  std::vector<float> x(size_t(c.p.m * c.p.k), 0.5f), y(size_t(c.p.m * c.p.n));
  const float* src[] = {x.data()};
  float* dst[] = {y.data()};
  KernelArgs a;
  a.src = src;
  a.dst = dst;
  const float* stream = big_buffer().data<float>();
  const size_t floats = size_t(c.packed_floats());
  std::vector<double> tk, ts;
  auto timed = [&](auto f) {
    if (cold) flush_caches(c.isa);
    auto t0 = Clock::now();
    f();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (int r = 0; r < reps; r += 5) {
    for (int i = 0; i < 5; ++i)
      ts.push_back(timed([&] { g_sink = read_stream(c.isa, stream, floats); }));
    for (int i = 0; i < 5; ++i) tk.push_back(timed([&] { k->run_all(a); }));
  }
  return {median(tk), double(floats) * 4 / median(ts) / 1e9, k->name()};
}

void row(const char* what, const fcjit::FcConf& c, const std::string& variant, const Result& r) {
  const double wbytes = double(c.p.k) * double(c.p.n) * 4;
  const double gbs = wbytes / r.sec / 1e9;
  std::printf(
      "%-15s %-16s %-26s %-27s %9.1f us %6.1f GB/s %6.1f GFLOP/s | roof %6.1f GB/s %4.0f%%\n", what,
      c.p.str().c_str(), r.name.c_str(), variant.c_str(), r.sec * 1e6, gbs,
      2 * c.p.macs() / r.sec / 1e9, r.roof, 100 * gbs / r.roof);
}

std::string impl_str(const fcjit::FcConf& c) {
  return "nb" + std::to_string(c.nb) + " mr" + std::to_string(c.mr) + " ku" + std::to_string(c.ku) +
         " u" + std::to_string(c.k_unroll) + " pf" + std::to_string(c.prefetch) +
         (c.bcast_emb ? " emb" : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Isa> isas;
  int reps = 21;
  int64_t m = 1;
  bool cold = false, sweep = false;
  std::string only;  // run only shapes whose label contains this
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--isa" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "all") isas.push_back(parse_isa(v));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--m" && i + 1 < argc) {
      m = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--shape" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--cold") {
      cold = true;
    } else if (a == "--sweep") {
      sweep = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--isa avx512|avx2|all] [--reps N] [--cold] [--sweep] [--m M] "
                   "[--shape LABEL]\n",
                   argv[0]);
      return 2;
    }
  }
  if (isas.empty())
    for (Isa i : {Isa::avx512, Isa::avx2})
      if (int(i) <= int(detect_isa())) isas.push_back(i);

  reps = (reps + 4) / 5 * 5;
  std::printf("# %s, 1 thread, median of %d, %s weights\n", host_cpu().summary().c_str(), reps,
              cold ? "cold (1 GiB flush before each run)" : "hot (repeated runs)");
  std::printf(
      "# GB/s counts the K*N*4 weight bytes; roof: a plain read of as many bytes as the\n"
      "# packed weights, timed in the same rounds\n");
  for (Isa isa : isas) {
    const Tensor& big = big_buffer();
    std::printf(
        "# %s: DRAM read stream (1 GiB buffer): %.1f GB/s\n", isa_name(isa),
        stream_gbs(isa, big.data<float>(), size_t(big.numel()), std::max(3, reps / 4), false));
    for (const Shape2& s : kShapes) {
      if (!only.empty() && std::string(s.what).find(only) == std::string::npos) continue;
      FcProblem p;
      p.m = m;
      p.k = s.k;
      p.n = s.n;
      p.bias = true;
      Tensor w(DType::f32, {s.k, s.n}), b(DType::f32, {s.n});
      std::fill_n(w.data<float>(), w.numel(), 0.01f);
      auto c = fcjit::init_fc_conf(p, isa);
      if (!c) {
        std::printf("%s: %s\n", s.what, c.reason.c_str());
        continue;
      }
      row(s.what, *c.conf, "default " + impl_str(*c.conf), time_kernel(*c.conf, w, b, reps, cold));
      if (!sweep) continue;
      std::vector<fcjit::FcImpl> impls;
      if (m > 1) {
        // Register tiles: rows x vectors, each with the conf's own choice of the rest.
        for (int mr : {1, 2, 3, 4, 6, 8, 12, 16, 28})
          for (int nb : {1, 2, 3, 4, 6, 8})
            for (int emb : {0, 1}) {
              if (mr > m || (emb && isa != Isa::avx512)) continue;
              fcjit::FcImpl i;
              i.mr = mr;
              i.nb = nb;
              i.bcast_emb = emb;
              impls.push_back(i);
            }
      } else {
        for (int nb : {2, 4, 8})
          for (int ku : {1, 2, 4})
            for (int pf : {0, 512, 2048}) {
              fcjit::FcImpl i;
              i.nb = nb;
              i.ku = ku;
              i.prefetch = pf;
              impls.push_back(i);
            }
        for (int u : {2, 8, 16}) {
          fcjit::FcImpl i;
          i.k_unroll = u;
          impls.push_back(i);
        }
        for (int pf : {256, 1024, 4096}) {
          fcjit::FcImpl i;
          i.prefetch = pf;
          impls.push_back(i);
        }
      }
      for (const fcjit::FcImpl& i : impls) {
        auto ci = fcjit::init_fc_conf(p, isa, i);
        if (!ci) continue;
        row(s.what, *ci.conf, impl_str(*ci.conf), time_kernel(*ci.conf, w, b, reps, cold));
      }
    }
  }
  return 0;
}
