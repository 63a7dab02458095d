// threads: how conv kernels scale from one thread to N, timed as the load's profiler times them
// (runtime/profiler.h: the executor's tile split, weights evicted first), the fastest of
// --rounds interleaved rounds (the machine's speed drifts between separate runs: only
// interleaved timings compare). E.g. single-group Winograd layers (one tile group split by
// output-channel chunks) scale far less than multi-group ones (bench/NOTES.md). --inputs split
// times each run on an input just written by the threads in equal shares, as a producer step
// leaves it in a network (cold: evicted), instead of warm from the run before.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "jit/conv/conv_families.h"
#include "jit/conv/conv_problem.h"
#include "micro_bench.h"
#include "runtime/profiler.h"

namespace kiln::bench {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!x.empty()) v.push_back(x);
  return v;
}

// One profiler timing (ms) of k at `threads`, operands of the conv's blocked sizes.
double time_ms(const Kernel& k, const ConvProblem& p, int threads, Profiler::Inputs inputs) {
  const int64_t in = p.n * round_up(p.ic, 16) * p.ih * p.iw * 4,
                out = p.n * round_up(p.oc, 16) * p.oh * p.ow * 4;
  Profiler prof(threads);
  prof.set_cold_weights(true);
  prof.set_inputs(inputs);
  return prof.time_kernel(k, {in, 0, 0}, {}, {out});
}

}  // namespace

int conv_threads(const ModeArgs& a) {
  const std::vector<std::string> problems = split(a.get("--problem", ""));
  if (problems.empty())
    fail(Code::invalid_argument, "threads needs --problem PROBLEM[,PROBLEM..] (ConvProblem::str)");
  const int n = std::stoi(a.get("--threads", "2")), rounds = std::stoi(a.get("--rounds", "7"));
  if (n < 2) fail(Code::invalid_argument, "--threads must be at least 2");
  const std::string in = a.get("--inputs", "warm");
  if (in != "warm" && in != "split" && in != "cold")
    fail(Code::invalid_argument, "--inputs is warm, split or cold, not " + in);
  const Profiler::Inputs inputs = in == "split"  ? Profiler::Inputs::split
                                  : in == "cold" ? Profiler::Inputs::cold
                                                 : Profiler::Inputs::warm;
  std::vector<ConvFamily> fams;
  for (const std::string& f : split(a.get("--family", "winograd2,winograd4"))) {
    const auto id = parse_conv_family(f);
    if (!id) fail(Code::invalid_argument, "unknown conv family " + f);
    fams.push_back(*id);
  }
  for (Isa isa : bench_isas(a.get("--isa", "avx512")))
    for (const std::string& s : problems) {
      ConvProblem p = ConvProblem::parse(s);
      p.bias = true;
      Tensor w(DType::f32, Shape{p.oc, p.ic / p.groups, p.kh, p.kw}), b(DType::f32, Shape{p.oc});
      for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = float(i % 13) * 0.01f - 0.06f;
      std::printf("%s (%s)\n", s.c_str(), isa_name(isa));
      for (ConvFamily f : fams) {
        ConvImpl impl;
        impl.family = f;
        // The blocked layout on both sides (im2col: NHWC, the layout it runs best on).
        impl.src = impl.dst = f == ConvFamily::im2col ? Layout::nhwc : blocked_layout(isa);
        std::string why;
        auto k = create_conv_kernel(p, impl, isa, w, &b, &why);
        if (!k) {
          std::printf("  %-10s does not apply: %s\n", conv_family_name(f), why.c_str());
          continue;
        }
        double t1 = 1e30, tn = 1e30;
        for (int r = 0; r < rounds; ++r) {
          t1 = std::min(t1, time_ms(*k, p, 1, inputs));
          tn = std::min(tn, time_ms(*k, p, n, inputs));
        }
        std::printf("  %-62s %4lld tiles  1T %.4f ms  %dT %.4f ms  x%.2f\n", k->name().c_str(),
                    static_cast<long long>(k->tiles()), t1, n, tn, t1 / tn);
      }
    }
  return 0;
}

}  // namespace kiln::bench
