// The `kiln` command line: one table of commands and one of options drive parsing, which
// commands accept which option, and the help text (`kiln --help`, `kiln COMMAND --help`).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "cli.h"
#include "graph/error.h"
#include "jit/conv/conv_families.h"
#include "jit/cpu.h"
#include "runtime/log.h"
#include "runtime/quantize.h"
#include "runtime/tuning_cache.h"

namespace kiln::cli {
namespace {

// Which commands take an option: a bit per command; kGlobal options go before or after it.
enum : unsigned {
  kInfo = 1,
  kRun = 2,
  kPlan = 4,
  kBench = 8,
  kModel = kInfo | kRun | kPlan | kBench,  // every command loading a model
  kGlobal = 16,
  kQuantize = 32,
};

struct Command {
  const char* name;
  unsigned bit;
  const char* args;     // the usage line after "kiln NAME"
  const char* summary;  // its line in `kiln --help`
  const char* details;  // `kiln NAME --help`, after the usage line (wrapped there)
  int (*run)(const Args&);
};

const Command kCommands[] = {
    {"info", kInfo, "MODEL [options]", "inputs/outputs, op histogram, parameters, GFLOPs",
     "Loads MODEL and prints its inputs and outputs, the op histogram of the optimised graph, the "
     "parameter count and the GFLOPs (2 x multiply-accumulates of Conv/Gemm/MatMul).",
     cmd_info},
    {"run", kRun, "MODEL --input X.npy [--input ...] [--output OUT.npy] [options]",
     "run once on .npy inputs; print or write the outputs",
     "Runs MODEL once on float32/int64 C-order .npy inputs (one --input per model input, in order) "
     "and prints each output's shape and min/max/mean. --output writes output 0 to OUT.npy; a "
     "model with several outputs writes output i to OUT_<i>.npy instead. Inputs of another batch "
     "(dim 0) than the model's are planned for that batch first.",
     cmd_run},
    {"plan", kPlan, "MODEL [--dot FILE] [--json FILE] [options]",
     "the kernel and layouts chosen per node, conversions, predicted time",
     "Prints the kernel and layouts chosen per node and where its time came from (tuning cache, "
     "measured now, left to the cost model by the profiling budget, or the cost model), the layout "
     "conversions inserted and the predicted total.",
     cmd_plan},
    {"bench", kBench, "MODEL [--runs N|--seconds SEC] [--concurrency N] [options]",
     "load time, latency percentiles and throughput",
     "Loads MODEL (the load time and its breakdown), runs it --warmup times, then measures --runs "
     "runs on random normal inputs (or the --input files): latency min, max, mean, stddev, p50, "
     "p90, p99 in ms and the throughput (inferences/s; images/s = x batch). The first run (cold "
     "arena and caches) is reported apart; also the arena and peak RSS. --concurrency N runs N "
     "requests at once, each in its own thread doing --runs runs. With several strategies each is "
     "loaded and measured in turn (--json holds an array).",
     cmd_bench},
    {"quantize", kQuantize, "MODEL --out OUT.onnx [--calib DIR | --random N] [options]",
     "write a static int8 QDQ model (calibrated ranges) ONNX Runtime also runs",
     "Quantizes MODEL's Conv, Gemm and MatMul nodes with constant weights, and its Adds of two "
     "activations, into a standard QDQ model (QuantizeLinear / DequantizeLinear; uint8 "
     "activations per tensor, int8 symmetric weights, int32 biases) written to OUT.onnx. "
     "Activation ranges come from running MODEL in float32 on the calibration inputs: every .npy "
     "of --calib DIR (one sample per file, for a model with one input), else --random N "
     "standard-normal inputs (default 8, fixed seeds).",
     cmd_quantize},
};

using Setter = void (*)(Args& a, const std::string& opt, const std::string& value);

struct Option {
  const char* name;
  const char* value;  // the value's name in the help; nullptr: a flag
  unsigned commands;
  const char* help;  // one line; the help text wraps it
  Setter set = nullptr;
  std::string Args::*text = nullptr;   // where a plain string value goes (set is then unused)
  bool output = false;                 // a file the command writes: checked before the load
  std::string (*choices)() = nullptr;  // the valid values, appended to the help
};

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

double parse_positive(const std::string& opt, const std::string& v, double hi) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || !end || *end || !(x > 0 && x < hi))
    throw UsageError(opt + " expects a positive number, got '" + v + "'");
  return x;
}

std::string family_names() {
  std::string s;
  for (const ConvFamilyRow& f : conv_families()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

// The order here is the order of the help text.
const Option kOptions[] = {
    // Command-specific options.
    {"--input", "X.npy", kRun | kBench,
     "a float32/int64 C-order input, one per model input in order (repeat); bench: instead of "
     "random normal data",
     [](Args& a, const std::string&, const std::string& v) { a.inputs.push_back(v); }},
    {"--output", "OUT.npy", kRun, "write output 0 here (several outputs: OUT_<i>.npy)", nullptr,
     &Args::output, true},
    {"--check", "REF.npy", kBench,
     "compare output 0 of the --input with this reference: max relative error, top-1 / top-5",
     nullptr, &Args::check},
    {"--dot", "FILE", kPlan,
     "write a Graphviz picture of the plan (nodes coloured by family, edges labelled by layout)",
     nullptr, &Args::dot, true},
    {"--out", "OUT.onnx", kQuantize, "where to write the QDQ model (replaced when complete)",
     nullptr, &Args::out, true},
    {"--calib", "DIR", kQuantize,
     "calibration inputs: every .npy file of DIR, one sample each (float32, the model's input "
     "shape; dim 0 may differ)",
     nullptr, &Args::calib},
    {"--random", "N", kQuantize,
     "without --calib: calibrate on N standard-normal inputs (default 8, fixed seeds)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.random = int(parse_int(o, v, 1, 100000));
     }},
    {"--per-channel", nullptr, kQuantize,
     "one weight scale per output channel (default: one per weight tensor)",
     [](Args& a, const std::string&, const std::string&) { a.per_channel = true; }},
    {"--method", "M", kQuantize,
     "activation ranges: minmax (default: the values' min and max) or percentile (0.01th to "
     "99.99th percentile)",
     nullptr, &Args::method},
    {"--threads", "N", kRun | kPlan | kBench | kQuantize, "threads per run (default 0: all cores)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.threads = int(parse_int(o, v, 0, 4096));
     }},
    {"--runs", "N", kBench, "timed runs per request (default 50)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.runs = int(parse_int(o, v, 1, 100000000));
     }},
    {"--seconds", "SEC", kBench, "run for SEC seconds instead of --runs runs",
     [](Args& a, const std::string& o, const std::string& v) {
       a.seconds = parse_positive(o, v, 1e6);
     }},
    {"--warmup", "N", kBench, "untimed runs per request first (default 5)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.warmup = int(parse_int(o, v, 0, 100000000));
     }},
    {"--concurrency", "N", kBench,
     "N requests at once on one session, each thread running it in a loop (default 1)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.concurrency = int(parse_int(o, v, 1, 1024));
     }},
    {"--sessions", nullptr, kBench, "with --concurrency: each request thread its own session",
     [](Args& a, const std::string&, const std::string&) { a.sessions = true; }},
    {"--layers", nullptr, kBench,
     "also time every plan step: op, kernel, layouts, median ms, share, GFLOP/s",
     [](Args& a, const std::string&, const std::string&) { a.layers = true; }},
    {"--json", "FILE", kPlan | kBench,
     "write the results as JSON (bench: with the machine, Kiln's version and build id; plan: "
     "kiln_session_plan_json's object, as Python's Session.plan())",
     nullptr, &Args::json, true},
    {"--trace", "FILE", kBench,
     "write a Chrome trace of one run (chrome://tracing or Perfetto), a lane per thread", nullptr,
     &Args::trace, true},
    {"--loads", "N", kBench,
     "load the model N more times in this process and report their min and median (reload_ms)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.loads = int(parse_int(o, v, 0, 1000));
     }},
    // Options of every model command.
    {"--batch", "N", kModel, "fix the batch (dim 0 of every input); 0 = the model's (default)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.batch = parse_int(o, v, 0, 1 << 20);
     }},
    {"--shape", "SHAPE", kModel,
     "set an input's shape at load: NAME:DIMS, e.g. images:1x3x320x320 (repeat, or "
     "comma-separated); needed for symbolic dims other than the batch, and may change fixed "
     "dims where the model takes it",
     [](Args& a, const std::string&, const std::string& v) {
       a.shapes += (a.shapes.empty() ? "" : ",") + v;
     }},
    {"--strategy", "STRATEGY", kModel,
     "how kernels and layouts are chosen: global (default: the PBQP optimum over measured kernel "
     "and conversion times), local (each node's fastest), fixed (blocked layout + direct conv), "
     "heuristic (cost model only); bench takes several, comma-separated",
     [](Args& a, const std::string&, const std::string& v) {
       a.strategies.clear();
       for (size_t b = 0, e; b <= v.size(); b = e + 1) {
         e = v.find(',', b);
         if (e == std::string::npos) e = v.size();
         a.strategies.push_back(v.substr(b, e - b));
       }
     }},
    {"--tune", "MODE", kModel,
     "none (cost model only), fast (default: measure the plausible candidates), full (measure "
     "every candidate)",
     nullptr, &Args::tune},
    {"--accuracy", "ACCURACY", kModel,
     "strict (no Winograd), default (Winograd where a probe run shows it adds at most 6e-5 of the "
     "output's max), fast (every algorithm, no probe)",
     nullptr, &Args::accuracy},
    {"--precision", "PREC", kModel,
     "f32 (default: exact) or bf16 (convolutions may compute in bf16 with f32 accumulation where "
     "the CPU has AVX512-BF16 and it is faster; everything else stays f32; unless --accuracy "
     "fast, layers go back to f32 until a probe run is within 2e-2 of the output's max in f32)",
     nullptr, &Args::precision},
    {"--profile-budget", "MS", kModel,
     "milliseconds a load may spend measuring kernels (default 10000 with --tune fast, 60000 with "
     "full)",
     [](Args& a, const std::string& o, const std::string& v) {
       a.profile_budget_ms = parse_positive(o, v, 1e9);
     }},
    {"--cache", "DIR", kModel,
     "tuning cache folder (default $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)",
     nullptr, &Args::cache_dir},
    {"--no-cache", nullptr, kModel, "neither read nor write the tuning cache",
     [](Args& a, const std::string&, const std::string&) { a.no_cache = true; }},
    {"--max-isa", "ISA", kModel,
     "cap the kernels' instruction set: avx512, avx2 or scalar (default: the CPU's best; "
     "$KILN_MAX_ISA also caps it)",
     [](Args& a, const std::string& o, const std::string& v) {
       try {
         a.max_isa = parse_isa(v);
       } catch (const Error&) {
         throw UsageError(o + " expects avx512, avx2 or scalar, got '" + v + "'");
       }
     }},
    {"--reference", nullptr, kModel, "run every op with the scalar reference kernels",
     [](Args& a, const std::string&, const std::string&) { a.reference = true; }},
    {"--family", "FAMILY", kModel, "make every conv use FAMILY where it applies (testing):",
     [](Args& a, const std::string&, const std::string& v) {
       const auto f = parse_conv_family(v);
       if (!f) throw UsageError("unknown conv family '" + v + "' (" + family_names() + ")");
       a.family = *f;
     },
     nullptr, false, family_names},
    // Global options.
    {"--log-level", "LEVEL", kGlobal,
     "trace, debug, info, warn, error, critical, off or 0..6 (default: $KILN_LOG_LEVEL, else warn)",
     [](Args& a, const std::string&, const std::string& v) {
       const int level = parse_log_level(v.c_str());
       if (level < 0) throw UsageError("unknown log level '" + v + "'");
       a.log_level = LogLevel(level);
     }},
    {"--help", nullptr, kGlobal, "this text (also -h)"},
    {"--version", nullptr, kGlobal, "print the version and build id"},
};

const Option* find_option(std::string_view name) {
  if (name == "-h") name = "--help";
  for (const Option& o : kOptions)
    if (name == o.name) return &o;
  return nullptr;
}

const Command* find_command(std::string_view name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

// `text` wrapped at spaces to 80 columns, every line indented by `indent`; the first line
// starts with `head` (padded to the indent) instead.
void print_wrapped(const std::string& head, std::string_view text, size_t indent) {
  const size_t width = 80 - indent;
  for (bool first = true; first || !text.empty(); first = false) {
    size_t cut = text.size();
    if (cut > width) {
      cut = text.rfind(' ', width);
      if (cut == std::string_view::npos || cut == 0) cut = width;
    }
    std::printf("%-*s%.*s\n", int(indent), first ? head.c_str() : "", int(cut), text.data());
    text.remove_prefix(std::min(text.size(), cut + (cut < text.size() && text[cut] == ' ')));
  }
}

// A titled list of the options `pick` selects for the command `bit`.
void print_options(const char* title, bool (*pick)(const Option&, unsigned), unsigned bit) {
  bool any = false;
  for (const Option& o : kOptions) {
    if (!pick(o, bit)) continue;
    if (!any) std::printf("\n%s:\n", title);
    any = true;
    const std::string head =
        "  " + std::string(o.name) + (o.value ? std::string(" ") + o.value : "") + " ";
    print_wrapped(head, o.choices ? std::string(o.help) + " " + o.choices() : o.help, 23);
  }
}

bool own_option(const Option& o, unsigned bit) {
  return (o.commands & bit) && o.commands != kModel;
}
bool model_option(const Option& o, unsigned) {
  return o.commands == kModel;
}
bool global_option(const Option& o, unsigned) {
  return o.commands == kGlobal;
}

const char kFooter[] =
    "\nOptions take their value as `--opt VALUE` or `--opt=VALUE`.\n"
    "Exit status: 0 success, 1 runtime error, 2 usage error.\n";

void print_overview() {
  std::printf("usage: kiln [--log-level LEVEL] COMMAND MODEL [options]\n\ncommands:\n");
  for (const Command& c : kCommands) print_wrapped("  " + std::string(c.name), c.summary, 11);
  std::printf("\n`kiln COMMAND --help` (or `kiln help COMMAND`) lists a command's options.\n");
  print_options("options of every model command (info, run, plan, bench)", model_option, 0);
  print_options("global options", global_option, 0);
  std::fputs(kFooter, stdout);
}

void print_command_help(const Command& c) {
  std::printf("usage: kiln %s %s\n\n", c.name, c.args);
  print_wrapped("", c.details, 0);
  print_options("options", own_option, c.bit);
  if (c.bit & kModel) print_options("options of every model command", model_option, c.bit);
  print_options("global options", global_option, c.bit);
  std::fputs(kFooter, stdout);
}

// The command named on the line, skipping options and their values; nullptr if none.
const Command* command_on_line(int argc, char** argv, std::string* name) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--")
      return i + 1 < argc ? (*name = argv[i + 1], find_command(argv[i + 1])) : nullptr;
    if (arg.size() > 1 && arg[0] == '-') {
      const Option* o = find_option(arg.substr(0, arg.find('=')));
      if (o && o->value && arg.find('=') == std::string_view::npos) ++i;
      continue;
    }
    *name = std::string(arg);
    return find_command(arg);
  }
  return nullptr;
}

// `kiln --help`, `kiln COMMAND --help`, `kiln help [COMMAND]` and `--version` answer before
// the rest of the line is checked (a help request should not fail on what it asks about).
// Returns true when it printed something.
bool help_or_version(int argc, char** argv) {
  bool help = false;
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--version") {
      std::printf("kiln %s (build %s)\n", KILN_VERSION, kiln_build_id());
      return true;
    }
    help |= arg == "-h" || arg == "--help";
  }
  std::string name;
  const Command* c = command_on_line(argc, argv, &name);
  if (name == "help") {
    // The word after "help", if any, names the command.
    int at = 1;
    while (at < argc && std::string_view(argv[at]) != "help") ++at;
    if (at + 1 >= argc) {
      print_overview();
      return true;
    }
    c = find_command(argv[at + 1]);
    if (!c) throw UsageError("unknown command '" + std::string(argv[at + 1]) + "'");
    print_command_help(*c);
    return true;
  }
  if (!help) return false;
  if (c)
    print_command_help(*c);
  else if (name.empty())
    print_overview();
  else
    throw UsageError("unknown command '" + name + "'");
  return true;
}

// A file the command will write: its folder must exist and be writable, and the path must not
// be a folder. Checked before the load (which can take seconds); nothing is created here.
void check_output_path(const char* opt, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const std::string what = std::string(opt) + " '" + path + "'";
  if (fs::is_directory(p, ec)) fail(Code::io_error, "cannot write " + what + ": it is a folder");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    fail(Code::io_error,
         "cannot write " + what + ": the folder '" + dir.string() + "' does not exist");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    fail(Code::io_error, "cannot write " + what + ": the folder '" + dir.string() +
                             "' is not writable (" + std::strerror(errno) + ")");
  if (fs::exists(p, ec) && access(p.c_str(), W_OK) != 0)
    fail(Code::io_error, "cannot write " + what + " (" + std::strerror(errno) + ")");
}

}  // namespace

int parse(int argc, char** argv, Args& a) {
  if (help_or_version(argc, argv)) return 0;
  // Known early, so that any usage error points at the command's help.
  if (command_on_line(argc, argv, &a.command) == nullptr) a.command.clear();
  std::vector<std::string> positional;
  std::vector<const Option*> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.push_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    // --opt, --opt VALUE or --opt=VALUE.
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Option* o = find_option(name);
    if (!o) throw UsageError("unknown option '" + name + "'");
    std::string value;
    if (!o->value) {
      if (eq != std::string::npos) throw UsageError(name + " takes no value, got '" + arg + "'");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      // A value may not look like an option: `--json --layers` forgot the file name.
      if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] == '-'))
        throw UsageError(name + " needs a value (" + name + " " + o->value + ")");
      value = argv[++i];
    }
    if (o->value && value.empty()) throw UsageError(name + " needs a value, got ''");
    if (o->text)
      a.*(o->text) = value;
    else if (o->set)
      o->set(a, name, value);
    seen.push_back(o);
  }
  if (positional.empty()) throw UsageError("no command given");
  a.command = positional[0];
  const Command* c = find_command(a.command);
  if (!c) throw UsageError("unknown command '" + a.command + "'");
  if (positional.size() < 2) throw UsageError("'" + a.command + "' needs a MODEL path");
  if (positional.size() > 2) throw UsageError("unexpected argument '" + positional[2] + "'");
  a.model = positional[1];
  for (const Option* o : seen)
    if (!(o->commands & (c->bit | kGlobal)))
      throw UsageError("option " + std::string(o->name) + " is not valid for '" + a.command + "'");
  if (a.command == "run" && a.inputs.empty()) throw UsageError("'run' needs --input X.npy");
  if (a.command == "quantize" && a.out.empty()) throw UsageError("'quantize' needs --out OUT.onnx");
  CalibMethod method;
  if (!a.method.empty() && !parse_calib_method(a.method, &method))
    throw UsageError("--method expects minmax or percentile, got '" + a.method + "'");
  if (!a.check.empty() && a.inputs.empty())
    throw UsageError("--check needs the --input its reference was computed from");
  if (a.command != "bench" && a.strategies.size() > 1)
    throw UsageError("only 'bench' takes several strategies");
  for (const std::string& st : a.strategies) session_options(a, st);  // validates the names
  if (!a.tune.empty() || !a.accuracy.empty() || !a.precision.empty()) session_options(a);
  return -1;
}

void check_output_paths(const Args& a) {
  for (const Option& o : kOptions)
    if (o.output && !(a.*(o.text)).empty()) check_output_path(o.name, a.*(o.text));
}

int run_command(const Args& a) {
  const Command* c = find_command(a.command);
  if (!c) throw UsageError("unknown command '" + a.command + "'");
  return c->run(a);
}

std::string command_help_hint(const std::string& command) {
  return find_command(command) ? "kiln " + command + " --help" : "kiln --help";
}

}  // namespace kiln::cli
