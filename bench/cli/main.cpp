// `kiln` command-line tool: argument parsing and dispatch. Usage errors exit with 2, runtime
// errors with 1; every exception is caught here so the tool never crashes on bad input.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "cli.h"
#include "graph/error.h"
#include "jit/conv/conv_families.h"
#include "jit/cpu.h"
#include "runtime/log.h"

namespace kiln::cli {
namespace {

const char kUsage[] =
    "usage: kiln [--log-level LEVEL] COMMAND MODEL [options]\n"
    "\n"
    "commands:\n"
    "  info MODEL [--batch N]\n"
    "      inputs/outputs, op histogram of the optimised graph, parameter count, GFLOPs\n"
    "      (2 x multiply-accumulates of Conv/Gemm/MatMul).\n"
    "  run MODEL --input X.npy [--input Y.npy ...] [--output OUT.npy] [--batch N] [--threads N]\n"
    "      runs once on float32/int64 C-order .npy inputs (one --input per model input, in\n"
    "      order) and prints each output's shape and min/max/mean. --output writes output 0 to\n"
    "      OUT.npy; a model with several outputs writes output i to OUT_<i>.npy instead\n"
    "      (e.g. OUT_0.npy, OUT_1.npy).\n"
    "  plan MODEL [--dot FILE] [--threads N]\n"
    "      the chosen kernel and layouts per node (and where the time came from: tuning\n"
    "      cache, measured now, or the cost model), the layout conversions inserted, the\n"
    "      predicted total; --dot writes a Graphviz picture (nodes coloured by family, edges\n"
    "      labelled by layout).\n"
    "  bench MODEL [--threads N] [--runs N|--seconds S] [--warmup N] [--batch N] [--json FILE]\n"
    "        [--layers] [--trace FILE] [--strategy S1,S2,...] [--loads N]\n"
    "      load time (ms) and latency over --runs runs (default 50) after --warmup runs\n"
    "      (default 5) on random normal inputs: min, mean, p50, p90, p99 in ms. --json writes\n"
    "      {\"model\", \"threads\", \"threads_used\", \"isa\", \"reference\", \"batch\", "
    "\"runs\",\n"
    "      \"warmup\", \"load_ms\", \"latency_ms\": {\"p50\", \"p90\", \"p99\", \"min\", "
    "\"mean\"}}.\n"
    "      The first run (cold arena and caches) is reported apart from the warm runs; also\n"
    "      the load-time breakdown, arena bytes and peak RSS (all in --json too).\n"
    "      --layers also times every plan step and prints, per step, the op, kernel name,\n"
    "      layouts, median time, share of the total and GFLOP/s. --trace writes a Chrome\n"
    "      trace of one run (chrome://tracing or Perfetto), one lane per thread.\n"
    "      With several strategies each is loaded and measured in turn; --json then holds an\n"
    "      array with one object per strategy. Every object also has \"strategy\", \"tune\",\n"
    "      \"predicted_ms\", \"cache_hits\", \"cache_misses\", \"solve_ms\", \"optimal\",\n"
    "      \"plan_from_cache\", \"measurements\", \"accuracy\", \"guard_ms\" (the\n"
    "      accuracy guard's load time, 0 when it did not run).\n"
    "      --loads N loads the model N more times in the same process and reports their min\n"
    "      and median (\"reload_ms\"): session creation in a process that already made one,\n"
    "      as ONNX Runtime's is timed by ../shared/peers.\n"
    "\n"
    "options of every command:\n"
    "  --max-isa ISA       cap the kernels' instruction set: avx512, avx2 or scalar\n"
    "                      (default: the CPU's best; $KILN_MAX_ISA also caps it)\n"
    "  --reference         run every op with the scalar reference kernels\n"
    "  --strategy S        how kernels and layouts are chosen: global (default: the PBQP\n"
    "                      optimum over measured kernel and conversion times), local (each\n"
    "                      node's fastest kernel), fixed (blocked layout + direct conv\n"
    "                      everywhere), heuristic (cost model, no profiling)\n"
    "  --accuracy A        strict (no Winograd: no algorithm that adds rounding error),\n"
    "                      default (Winograd where a probe run at load shows it adds at\n"
    "                      most 6e-5 of the output's max), fast (every algorithm, no probe)\n"
    "  --tune MODE         none (cost model only), fast (default: measure the plausible\n"
    "                      candidates), full (measure every candidate)\n"
    "  --cache DIR         tuning cache folder (default $KILN_CACHE_DIR, else\n"
    "                      $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  --no-cache          neither read nor write the tuning cache\n"
    "  --profile-budget MS wall-clock milliseconds a load may spend measuring kernels\n"
    "                      (default 10000 with --tune fast, 60000 with full); what is left\n"
    "                      when it runs out keeps the cost model's choice ('budget' in plan)\n"
    "  --family F          make every conv use family F where it applies (direct, gemm1x1,\n"
    "                      depthwise, winograd2, winograd4, im2col): testing/benchmarks\n"
    "\n"
    "global options:\n"
    "  --log-level LEVEL   trace, debug, info, warn, error, critical, off or 0..6\n"
    "                      (default: $KILN_LOG_LEVEL, else warn)\n"
    "  -h, --help          this text\n"
    "  --version           print the version\n"
    "\n"
    "--batch N fixes the batch (dim 0 of every input); 0 = the model's. --threads 0 = all cores.\n"
    "Exit status: 0 success, 1 runtime error, 2 usage error.\n";

int64_t parse_int(const std::string& opt, const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    throw UsageError(opt + " expects an integer, got '" + v + "'");
  if (x < lo || x > hi)
    throw UsageError(opt + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + v);
  return x;
}

Isa parse_isa_arg(const std::string& v) {
  try {
    return parse_isa(v);
  } catch (const Error&) {
    throw UsageError("--max-isa expects avx512, avx2 or scalar, got '" + v + "'");
  }
}

// Which options each command accepts.
bool allowed(const std::string& cmd, std::string_view opt) {
  if (opt == "--batch" || opt == "--max-isa" || opt == "--reference" || opt == "--strategy" ||
      opt == "--tune" || opt == "--cache" || opt == "--no-cache" || opt == "--family" ||
      opt == "--profile-budget" || opt == "--accuracy")
    return true;
  if (cmd == "info") return false;
  if (cmd == "plan") return opt == "--dot" || opt == "--threads";
  if (cmd == "run") return opt == "--input" || opt == "--output" || opt == "--threads";
  if (cmd == "bench")
    return opt == "--threads" || opt == "--runs" || opt == "--warmup" || opt == "--json" ||
           opt == "--loads" || opt == "--layers" || opt == "--seconds" || opt == "--trace";
  return false;
}

// Returns -1 to continue, or an exit code (help/version printed).
int parse(int argc, char** argv, Args& a) {
  std::vector<std::string> positional, seen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("kiln %s\n", KILN_VERSION);
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      if (arg == "--") {
        for (++i; i < argc; ++i) positional.push_back(argv[i]);
        break;
      }
      positional.push_back(arg);
      continue;
    }
    if (arg == "--reference" || arg == "--layers" || arg == "--no-cache") {
      (arg == "--reference" ? a.reference : arg == "--layers" ? a.layers : a.no_cache) = true;
      seen.push_back(arg);
      continue;
    }
    // --opt VALUE or --opt=VALUE; every other option takes a value.
    std::string opt = arg, val;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      opt = arg.substr(0, eq);
      val = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc) throw UsageError(opt + " needs a value");
      val = argv[++i];
    }
    if (opt == "--log-level") {
      const int level = parse_log_level(val.c_str());
      if (level < 0) throw UsageError("unknown log level '" + val + "'");
      a.log_level = LogLevel(level);
      continue;
    }
    static const char* known[] = {
        "--batch", "--input",   "--output",  "--threads", "--runs",           "--warmup",
        "--json",  "--max-isa", "--seconds", "--trace",   "--strategy",       "--tune",
        "--cache", "--dot",     "--family",  "--loads",   "--profile-budget", "--accuracy"};
    bool is_known = false;
    for (const char* k : known) is_known |= opt == k;
    if (!is_known) throw UsageError("unknown option '" + opt + "'");
    seen.push_back(opt);  // checked against the command once it is known
    // Options that only store their value, and int counts with their ranges.
    static const std::map<std::string, std::string Args::*> strings = {
        {"--output", &Args::output},    {"--json", &Args::json},       {"--trace", &Args::trace},
        {"--tune", &Args::tune},        {"--cache", &Args::cache_dir}, {"--dot", &Args::dot},
        {"--accuracy", &Args::accuracy}};
    struct Count {
      int Args::*field;
      int64_t lo, hi;
    };
    static const std::map<std::string, Count> counts = {{"--threads", {&Args::threads, 0, 4096}},
                                                        {"--runs", {&Args::runs, 1, 100000000}},
                                                        {"--warmup", {&Args::warmup, 0, 100000000}},
                                                        {"--loads", {&Args::loads, 0, 1000}}};
    if (const auto s = strings.find(opt); s != strings.end())
      a.*(s->second) = val;
    else if (const auto c = counts.find(opt); c != counts.end())
      a.*(c->second.field) = int(parse_int(opt, val, c->second.lo, c->second.hi));
    else if (opt == "--batch")
      a.batch = parse_int(opt, val, 0, 1 << 20);
    else if (opt == "--input")
      a.inputs.push_back(val);
    else if (opt == "--profile-budget") {
      char* end = nullptr;
      a.profile_budget_ms = std::strtod(val.c_str(), &end);
      if (!end || *end || !(a.profile_budget_ms > 0 && a.profile_budget_ms < 1e9))
        throw UsageError("--profile-budget needs a positive number of milliseconds, got '" + val +
                         "'");
    } else if (opt == "--seconds") {
      char* end = nullptr;
      a.seconds = std::strtod(val.c_str(), &end);
      if (!end || *end || !(a.seconds > 0 && a.seconds < 1e6))
        throw UsageError("--seconds needs a positive number, got '" + val + "'");
    } else if (opt == "--max-isa")
      a.max_isa = parse_isa_arg(val);
    else if (opt == "--strategy") {
      a.strategies.clear();
      size_t b = 0;
      for (size_t e; b <= val.size(); b = e + 1) {
        e = val.find(',', b);
        if (e == std::string::npos) e = val.size();
        a.strategies.push_back(val.substr(b, e - b));
      }
    } else if (opt == "--family") {
      const auto f = parse_conv_family(val);
      if (!f) throw UsageError("unknown conv family '" + val + "'");
      a.family = *f;
    }
  }
  if (positional.empty()) throw UsageError("no command given");
  a.command = positional[0];
  if (a.command != "info" && a.command != "run" && a.command != "bench" && a.command != "plan")
    throw UsageError("unknown command '" + a.command + "'");
  if (positional.size() < 2) throw UsageError("'" + a.command + "' needs a MODEL path");
  if (positional.size() > 2) throw UsageError("unexpected argument '" + positional[2] + "'");
  a.model = positional[1];
  for (const std::string& opt : seen)
    if (!allowed(a.command, opt))
      throw UsageError("option " + opt + " is not valid for '" + a.command + "'");
  if (a.command == "run" && a.inputs.empty()) throw UsageError("'run' needs --input X.npy");
  if (a.command != "bench" && a.strategies.size() > 1)
    throw UsageError("only 'bench' takes several strategies");
  for (const std::string& st : a.strategies) session_options(a, st);  // validates the names
  if (!a.tune.empty() || !a.accuracy.empty()) session_options(a);
  return -1;
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  try {
    Args a;
    int rc = parse(argc, argv, a);
    if (rc >= 0) return rc;
    // The CLI is the host: its level is the process's.
    kiln::set_log_level(a.log_level ? int(*a.log_level) : -1);
    if (a.command == "info") return cmd_info(a);
    if (a.command == "run") return cmd_run(a);
    if (a.command == "plan") return cmd_plan(a);
    return cmd_bench(a);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kiln: %s\n(see kiln --help)\n", e.what());
    return 2;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error (%s): %s\n", kiln::code_name(e.code()), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kiln: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "kiln: error: unknown exception\n");
    return 1;
  }
}
