// A measurement, not product code (bench/NOTES.md, session 51): a first conv (direct family,
// NHWC output) and the 3x3 / 2 max pool after it, run as two kernels over the whole image
// against one pass over bands of pool rows whose conv rows go to a small scratch (the layout of
// the chain kernel, jit/dw/dw_pw_kernel.h). It checks the two agree bit for bit and prints the
// median of 201 timings, hot and with the conv and pool outputs flushed first ("cold": where a
// network's steps find them). The direct conv's tiles of one image are its output rows (times
// the oc groups, rows outer for small weights), so a row range runs through a dst pointer moved
// back by the rows before it; the NHWC pool's tiles are its output rows likewise.
// Build (after the README's build): g++ -O2 -std=gnu++20 -DFMT_SHARED -DONNX_ML=1
//   -DONNX_NAMESPACE=onnx -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB
//   -DASMJIT_STATIC -I. -Ibuild -Ibuild/generated bench/conv_pool_fusion.cpp -o /tmp/conv_pool
//   build/libkiln_core.a -lonnx_proto -lprotobuf -ltbb -lspdlog -lfmt
//   /usr/lib/x86_64-linux-gnu/libasmjit.a -lpthread
// Run: /tmp/conv_pool [CONV_PROBLEM [BAND]] (default: ResNet's 7x7 / 2 stem, 8 pool rows a band).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_problem.h"
#include "jit/glue/glue.h"
using namespace kiln;
static void flush(const void* p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) _mm_clflush((const char*)p + o);
  _mm_mfence();
}
int main(int argc, char** argv) {
  const char* ps = argc > 1 ? argv[1] : "ic3ih224iw224_oc64oh112ow112kh7kw7sh2sw2ph3pw3_relu";
  int band = argc > 2 ? atoi(argv[2]) : 8;
  ConvProblem p = ConvProblem::parse(ps);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  Tensor w(DType::f32, {p.oc, p.ic, p.kh, p.kw});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = nd(rng) * 0.1f;
  ConvImpl impl;
  impl.family = ConvFamily::direct;
  impl.src = p.ic <= 4 ? Layout::nchw : Layout::nhwc;
  impl.dst = Layout::nhwc;
  std::string why;
  Tensor bz(DType::f32, {p.oc});
  for (int64_t i = 0; i < p.oc; ++i) bz.data<float>()[i] = 0.01f * float(i % 7);
  auto ck = create_conv_kernel(p, impl, Isa::avx512, w, p.bias ? &bz : nullptr, &why);
  if (!ck) {
    printf("conv: %s\n", why.c_str());
    return 1;
  }
  PoolProblem pp;
  pp.src = {p.n, p.oc, p.oh, p.ow};
  pp.kh = pp.kw = 3;
  pp.sh = pp.sw = 2;
  pp.pt = pp.pl = pp.pb = pp.pr = 1;
  const int64_t POH = (p.oh + 2 - 3) / 2 + 1, POW = (p.ow + 2 - 3) / 2 + 1;
  pp.dst = {p.n, p.oc, POH, POW};
  auto pk = create_pool_kernel(pp, Layout::nhwc, Isa::avx512, &why);
  if (!pk) {
    printf("pool: %s\n", why.c_str());
    return 1;
  }
  printf("%s tiles %ld (OH %ld) ; %s tiles %ld\n", ck->name().c_str(), ck->tiles(), p.oh,
         pk->name().c_str(), pk->tiles());
  const int64_t G = ck->tiles() / (p.n * p.oh);
  std::vector<float> x(p.n * p.ic * p.ih * p.iw);
  for (auto& v : x) v = nd(rng);
  const int64_t row = p.ow * p.oc;  // floats per conv output row (nhwc)
  std::vector<float> A(p.n * p.oh * row), B(p.n * POH * POW * p.oc), B2(B.size());
  std::vector<float> S((band * 2 + 3) * row + 16);
  ScratchBuffer csc(std::max<int64_t>(ck->scratch_bytes(), 64));
  auto separate = [&] {
    const float* s1[8] = {x.data()};
    float* d1[1] = {A.data()};
    KernelArgs a{s1, d1, csc.slice()};
    ck->run(a, 0, ck->tiles());
    const float* s2[1] = {A.data()};
    float* d2[1] = {B.data()};
    KernelArgs b{s2, d2, nullptr};
    pk->run(b, 0, pk->tiles());
  };
  auto fused = [&] {
    for (int64_t n = 0; n < p.n; ++n) {
      int64_t h0 = 0, h1 = 0;  // conv rows held in S: [h0, h1) at S[0..]
      for (int64_t q0 = 0; q0 < POH; q0 += band) {
        const int64_t q1 = std::min(POH, q0 + band);
        const int64_t i0 = std::max<int64_t>(0, q0 * 2 - 1),
                      i1 = std::min(p.oh, (q1 - 1) * 2 - 1 + 3);
        if (i0 >= h1) {
          h0 = h1 = i0;
        } else if (i0 > h0) {
          std::memmove(S.data(), S.data() + (i0 - h0) * row, (h1 - i0) * row * 4);
          h0 = i0;
        }
        if (h1 < i1) {
          float* virt = S.data() + (h1 - h0) * row - (n * p.oh + h1) * row;
          const float* s1[8] = {x.data()};
          float* d1[1] = {virt};
          KernelArgs a{s1, d1, csc.slice()};
          ck->run(a, (n * p.oh + h1) * G, (n * p.oh + i1) * G);
          h1 = i1;
        }
        const float* s2[1] = {S.data() - (n * p.oh + h0) * row};
        float* d2[1] = {B2.data()};
        KernelArgs b{s2, d2, nullptr};
        pk->run(b, n * POH + q0, n * POH + q1);
      }
    }
  };
  separate();
  fused();
  double md = 0;
  for (size_t i = 0; i < B.size(); ++i) md = std::max(md, (double)std::abs(B[i] - B2[i]));
  printf("max diff %g\n", md);
  auto flush_outputs = [&] {
    flush(A.data(), A.size() * 4);
    flush(B.data(), B.size() * 4);
    flush(B2.data(), B2.size() * 4);
  };
  using C = std::chrono::steady_clock;
  for (int cold = 0; cold < 2; ++cold) {
    std::vector<double> ts, tf;
    for (int r = 0; r < 201; ++r) {
      if (cold) flush_outputs();
      auto t0 = C::now();
      separate();
      auto t1 = C::now();
      if (cold) flush_outputs();
      auto t2 = C::now();
      fused();
      auto t3 = C::now();
      ts.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      tf.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    }
    std::sort(ts.begin(), ts.end());
    std::sort(tf.begin(), tf.end());
    printf("%s: separate %.3f ms, fused %.3f ms (band %d)\n", cold ? "cold" : "hot", ts[100],
           tf[100], band);
  }
}
