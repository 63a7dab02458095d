// kiln_micro_bench MODE [options] (micro_bench.h). Options:
//   im2col-sweep [--shape IC,IH,OC,K,S|PROBLEM] [--layout nhwc|nchw] [--isa avx512|avx2]
//                [--kcs A,B,..] [--force-copy 1]
//   wino-gemm    [--isa ..] [--mrnr MR,NR]
//   glue         [--isa ..]
//   fresh-memory [--mb N] [--file MODEL.onnx] [--reps R]
//   threads      --problem PROBLEM[,..] [--family winograd2,winograd4,..] [--threads N]
//                [--inputs warm|split|cold]
//                [--rounds R] [--isa ..]
//   separable    [--shape N,C,H,W,OC] [--stride S] [--expand CIN] [--isa ..] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "bench_main.h"
#include "graph/error.h"
#include "micro_bench.h"

namespace kiln::bench {

std::vector<Isa> bench_isas(const std::string& isa) {
  std::vector<Isa> v;
  for (Isa i : {Isa::avx512, Isa::avx2})
    if ((isa.empty() || isa == "both" || parse_isa(isa) == i) && int(effective_isa()) >= int(i))
      v.push_back(i);
  return v;
}

double median_ms(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string ModeArgs::get(const std::string& key, const std::string& def) const {
  for (size_t i = 0; i + 1 < args.size(); i += 2)
    if (args[i] == key) return args[i + 1];
  return def;
}

namespace {

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: kiln_micro_bench im2col-sweep|wino-gemm|glue|fresh-memory|threads|separable "
        "[--key value]..\n");
    return 2;
  }
  const std::string mode = argv[1];
  ModeArgs a;
  for (int i = 2; i < argc; ++i) a.args.push_back(argv[i]);
  if (a.args.size() % 2) fail(Code::invalid_argument, "options are --key value pairs");
  for (size_t i = 0; i < a.args.size(); i += 2)
    if (a.args[i].rfind("--", 0) != 0) fail(Code::invalid_argument, "not an option: " + a.args[i]);
  if (mode == "im2col-sweep") return im2col_sweep(a);
  if (mode == "wino-gemm") return wino_gemm(a);
  if (mode == "glue") return glue_bench(a);
  if (mode == "fresh-memory") return fresh_memory(a);
  if (mode == "threads") return conv_threads(a);
  if (mode == "separable") return separable_bench(a);
  fail(Code::invalid_argument,
       "unknown mode " + mode + " (im2col-sweep|wino-gemm|glue|fresh-memory|threads|separable)");
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  return kiln::bench::bench_main("kiln_micro_bench", kiln::bench::run, argc, argv);
}
