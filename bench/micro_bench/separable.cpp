// kiln_micro_bench separable --shape N,C,H,W,OC [--stride S] [--expand CIN] [--isa ..] [--reps R]:
// the separable kernel (jit/dw/dw_pw_kernel.h) of a 3x3 pad-1 depthwise conv over C channels of
// H x W images (stride S) and the 1x1 to OC channels after it, against its parts, one thread,
// operands warm from the repetition before (medians of R), in buffers from the arena's allocator:
// the depthwise and the 1x1 kernels alone (NHWC, whole images), the 1x1 alone over band-high images
// (what the fused kernel runs per band; whole bands only), and the fused kernel at its own band and
// at 1, 2, 4, 8 rows. Tells where the fused kernel's time goes: its 1x1 in bands against whole
// images, its depthwise part band by band. --expand: an expand 1x1 from CIN channels before the
// depthwise conv (an inverted residual block): its time alone, and the chains expand -> depthwise,
// depthwise -> project and all three at their own bands.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/alloc.h"
#include "graph/error.h"
#include "jit/conv/conv_kernel.h"
#include "jit/dw/dw_pw_kernel.h"
#include "micro_bench.h"

namespace kiln::bench {
namespace {

Tensor filled(Shape s, float step) {
  Tensor t(DType::f32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i % 17 - 8) * step;
  return t;
}

// All tiles of k on one thread with scratch of its own.
void run_all_tiles(const Kernel& k, const float* const* src, float* const* dst,
                   const ScratchBuffer& scratch) {
  KernelArgs a;
  a.src = src;
  a.dst = dst;
  a.scratch = scratch.slice();
  k.run(a, 0, k.tiles());
}

}  // namespace

int separable_bench(const ModeArgs& a) {
  int64_t n = 0, c = 0, h = 0, w = 0, oc = 0;
  if (std::sscanf(a.get("--shape", "1,64,112,112,128").c_str(), "%ld,%ld,%ld,%ld,%ld", &n, &c, &h,
                  &w, &oc) != 5 ||
      std::min({n, c, h, w, oc}) < 1)
    fail(Code::invalid_argument, "--shape takes N,C,H,W,OC (each >= 1)");
  const int reps = std::stoi(a.get("--reps", "15"));
  const int64_t stride = std::stol(a.get("--stride", "1")), cin = std::stol(a.get("--expand", "0"));
  if (stride < 1 || cin < 0) fail(Code::invalid_argument, "--stride >= 1, --expand >= 0");
  ConvProblem dw;
  dw.n = n;
  dw.ic = dw.oc = dw.groups = c;
  dw.ih = h;
  dw.iw = w;
  dw.oh = (h - 1) / stride + 1;
  dw.ow = (w - 1) / stride + 1;
  dw.kh = dw.kw = 3;
  dw.sh = dw.sw = stride;
  dw.pt = dw.pl = dw.pb = dw.pr = 1;
  dw.bias = true;
  ConvProblem pw;
  pw.n = n;
  pw.ic = c;
  pw.oc = oc;
  pw.ih = pw.oh = dw.oh;
  pw.iw = pw.ow = dw.ow;
  pw.bias = true;
  ConvProblem ep = pw;  // the expand conv (--expand)
  ep.ic = cin;
  ep.oc = c;
  ep.ih = ep.oh = h;
  ep.iw = ep.ow = w;
  h = dw.oh;  // the depthwise output's (the 1x1 band sweeps below)
  w = dw.ow;
  const Tensor dww = filled({c, 1, 3, 3}, 0.01f), dwb = filled({c}, 0.01f);
  const Tensor pww = filled({oc, c, 1, 1}, 0.001f), pwb = filled({oc}, 0.01f);
  const Tensor ew = filled({c, std::max<int64_t>(cin, 1), 1, 1}, 0.001f), eb = filled({c}, 0.01f);
  // The operands from the allocator the run arena comes from (huge pages from 2 MiB: with 4 KiB
  // pages the big maps' page walks make the memory-bound halves look slower than they run).
  auto buffer = [](int64_t floats) {
    return std::static_pointer_cast<float>(alloc_zeroed(size_t(floats) * 4));
  };
  const int64_t in_px = n * dw.ih * dw.iw;
  const std::shared_ptr<float> xb = buffer(in_px * c), midb = buffer(n * c * h * w),
                               yb = buffer(n * oc * h * w), eb_in = buffer(in_px * cin);
  float *x = xb.get(), *mid = midb.get(), *y = yb.get(), *ex = eb_in.get();
  std::fill(x, x + in_px * c, 0.5f);
  std::fill(ex, ex + in_px * cin, 0.5f);
  const float* dw_src[] = {x, nullptr, nullptr};
  float* dw_dst[] = {mid};
  const float* pw_src[] = {mid, nullptr, nullptr};
  float* pw_dst[] = {y};
  const float* fused_src[] = {x, nullptr, nullptr, nullptr, nullptr, nullptr};
  for (Isa isa : bench_isas(a.get("--isa", ""))) {
    ConvImpl di, pi;
    di.family = ConvFamily::depthwise;
    pi.family = ConvFamily::gemm1x1;
    di.src = di.dst = pi.src = pi.dst = Layout::nhwc;
    std::string why;
    auto dk = create_conv_kernel(dw, di, isa, dww, &dwb, &why);
    if (!dk) fail(Code::unsupported, "depthwise: " + why);
    auto pk = create_conv_kernel(pw, pi, isa, pww, &pwb, &why);
    if (!pk) fail(Code::unsupported, "1x1: " + why);
    const ScratchBuffer ds(dk->scratch_bytes()), ps(pk->scratch_bytes());
    const double tdw = median_ms(reps, [&] { run_all_tiles(*dk, dw_src, dw_dst, ds); });
    const double tpw = median_ms(reps, [&] { run_all_tiles(*pk, pw_src, pw_dst, ps); });
    std::printf("%s  n%ld c%ld %ldx%ld s%ld -> oc%ld\n  %-52s %8.3f ms\n  %-52s %8.3f ms\n",
                isa_name(isa), n, c, dw.ih, dw.iw, stride, oc, dk->name().c_str(), tdw,
                pk->name().c_str(), tpw);
    if (cin) {
      auto ek = create_conv_kernel(ep, pi, isa, ew, &eb, &why);
      if (!ek) fail(Code::unsupported, "expand 1x1: " + why);
      const ScratchBuffer es(ek->scratch_bytes());
      const float* e_src[] = {ex, nullptr, nullptr};
      float* e_dst[] = {x};
      const double te = median_ms(reps, [&] { run_all_tiles(*ek, e_src, e_dst, es); });
      std::printf("  %-52s %8.3f ms\n  %-52s %8.3f ms\n", ek->name().c_str(), te,
                  "apart (sum of the three)", te + tdw + tpw);
      const ChainConv ec{ep, &ew, &eb, 3}, dc{dw, &dww, &dwb, 3}, pc{pw, &pww, &pwb, 3};
      const float* chain_src[] = {ex,      nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr, nullptr};
      const struct {
        const ChainConv *e, *p;
        double apart;  // the time of the conv the chain leaves out
      } chains[] = {{&ec, nullptr, tpw}, {nullptr, &pc, te}, {&ec, &pc, 0}};
      for (const auto& ch : chains)
        for (int64_t band : {int64_t(0), int64_t(1), int64_t(2), int64_t(4), int64_t(8)}) {
          if (band > h) continue;
          auto fk = create_dw_chain_kernel(ch.e, dc, ch.p, isa, &why, band);
          if (!fk) fail(Code::unsupported, "chain: " + why);
          const ScratchBuffer fs(fk->scratch_bytes());
          const float* const* src = ch.e ? chain_src : fused_src;
          float* const* dst = ch.p ? pw_dst : dw_dst;
          const double t = median_ms(reps, [&] { run_all_tiles(*fk, src, dst, fs); });
          std::printf("  %-52s %8.3f ms  (+ the rest apart: %.3f ms)%s\n", fk->name().c_str(), t,
                      t + ch.apart, band ? "" : "  (its own band)");
        }
      continue;
    }
    std::printf("  %-52s %8.3f ms\n", "apart (sum)", tdw + tpw);
    for (int64_t band : {1, 2, 4, 8}) {
      if (band > h) continue;
      ConvProblem bp = pw;
      bp.n = 1;
      bp.ih = bp.oh = band;
      auto bk = create_conv_kernel(bp, pi, isa, pww, &pwb, &why);
      if (!bk) continue;
      const ScratchBuffer bs(bk->scratch_bytes());
      const double t = median_ms(reps, [&] {
        for (int64_t img = 0; img < n; ++img)
          for (int64_t r0 = 0; r0 + band <= h; r0 += band) {
            const float* s[] = {mid + (img * h + r0) * w * c, nullptr, nullptr};
            float* d[] = {y + (img * h + r0) * w * oc};
            run_all_tiles(*bk, s, d, bs);
          }
      });
      const std::string what = "1x1 alone in bands of " + std::to_string(band) + " rows";
      std::printf("  %-52s %8.3f ms\n", what.c_str(), t);
    }
    for (int64_t band : {int64_t(0), int64_t(1), int64_t(2), int64_t(4), int64_t(8)}) {
      if (band > h) continue;
      auto fk = create_dw_pw_kernel(dw, dww, &dwb, 3, pw, pww, &pwb, 3, isa, &why, band);
      if (!fk) {
        std::printf("  band %ld: %s\n", band, why.c_str());
        continue;
      }
      const ScratchBuffer fs(fk->scratch_bytes());
      const double t = median_ms(reps, [&] { run_all_tiles(*fk, fused_src, pw_dst, fs); });
      std::printf("  %-52s %8.3f ms%s\n", fk->name().c_str(), t, band ? "" : "  (its own band)");
    }
  }
  return 0;
}

}  // namespace kiln::bench
