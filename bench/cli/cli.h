// Shared declarations of the `kiln` command-line tool: parsed arguments, the commands, and the
// statistics/JSON helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "runtime/report.h"  // json_escape, percentile
#include "runtime/session.h"

namespace kiln::cli {

// A bad command line: printed with a usage hint, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string command;  // "info", "run", "bench"
  std::string model;
  std::vector<std::string> inputs;  // --input (repeatable; bench: instead of random data)
  std::string output;               // --output
  std::string json;                 // --json
  int64_t batch = 0;
  std::string shapes;  // --shape, comma-joined (parse_input_shapes' text)
  int threads = 0;
  int runs = 50;
  double seconds = 0;  // --seconds: run for this long instead of --runs
  std::string trace;   // --trace: Chrome trace of one profiled run
  int warmup = 5;
  int loads = 0;          // --loads N (bench): N more loads in this process, reported as reload_ms
  int concurrency = 1;    // --concurrency N (bench): requests running at once
  bool sessions = false;  // --sessions (bench): each request thread its own session
  std::optional<LogLevel> log_level;    // --log-level
  std::optional<Isa> max_isa;           // --max-isa; none = no cap
  bool reference = false;               // --reference: scalar reference kernels only
  bool layers = false;                  // --layers (bench): per-step timing table
  std::vector<std::string> strategies;  // --strategy a,b,c (bench: several; others: one)
  std::string tune;                     // --tune none|fast|full ("" = the default, fast)
  std::string accuracy;                 // --accuracy strict|default|fast ("" = default)
  std::string precision;                // --precision f32|bf16 ("" = f32)
  std::string check;                    // --check REF.npy (bench): compare output 0 with it
  std::string cache_dir;                // --cache DIR
  bool no_cache = false;                // --no-cache
  std::string dot;                      // --dot FILE (plan)
  std::optional<ConvFamily> family;     // --family NAME: force a conv family where it applies
  double profile_budget_ms = 0;         // --profile-budget MS (0 = by tuning mode)
  std::string out;                      // --out (quantize)
  std::string calib;                    // --calib DIR (quantize)
  int random = 0;                       // --random N (quantize; 0 = the default)
  bool per_channel = false;             // --per-channel (quantize)
  std::string method;                   // --method minmax|percentile (quantize)
};

// --- args.cpp: the option table, help and dispatch -----------------------------------------

// Fills `a` from the command line; returns 0 when help or the version was printed, else -1.
// Throws UsageError for a bad line.
int parse(int argc, char** argv, Args& a);
// Fails (io_error) at once when an output file given (--json, --trace, --dot, --output) cannot
// be written: its folder is missing or not writable. Creates nothing.
void check_output_paths(const Args& a);
int run_command(const Args& a);
// Where a usage error should send the user: "kiln bench --help", or "kiln --help".
std::string command_help_hint(const std::string& command);

using Clock = std::chrono::steady_clock;
// Session options from the arguments; `strategy` overrides a.strategies (bench loops over them).
SessionOptions session_options(const Args& a, const std::string& strategy = "");
// The --input files, checked against the session's inputs (count, dtype, shape; with
// any_batch, dim 0 may differ: Session::run plans that batch); the errors name the file and
// the input.
std::vector<Tensor> read_inputs(const Args& a, const Session& s, bool any_batch = false);
double ms_between(Clock::time_point a, Clock::time_point b);

int cmd_info(const Args& a);
int cmd_run(const Args& a);
int cmd_bench(const Args& a);
int cmd_plan(const Args& a);
int cmd_quantize(const Args& a);  // quantize_cmd.cpp

// --- stats.cpp ------------------------------------------------------------------------------

// Output 0 against a reference output (`kiln bench --check`): max|out - ref| / max|ref|, and,
// reading the last dim as classes (a row per image), the rows whose top-1 class is the
// reference's and the rows whose reference top-1 is among the output's top 5.
struct Check {
  double max_rel_error = 0;
  int64_t rows = 0, top1_agree = 0, top5_contains = 0;
};
// Throws invalid_argument when the shapes differ or either is not f32 (naming `ref_path`).
Check check_output(const Tensor& out, const Tensor& ref, const std::string& ref_path);

struct Summary {
  double min = 0, max = 0, mean = 0;
};
Summary summarize(const Tensor& t);  // f32 or i64; all zeros for an empty tensor

// Figures of the optimised graph for `kiln info`.
struct GraphStats {
  std::map<std::string, int> op_counts;
  int64_t params = 0;  // elements of f32 constants read by nodes
  double macs = 0;     // multiply-accumulates of Conv/Gemm/MatMul
};
GraphStats graph_stats(const Graph& g);

// "Y.npy" + index 1 -> "Y_1.npy" (suffix inserted before a .npy extension, else appended).
std::string indexed_path(const std::string& path, size_t index);

}  // namespace kiln::cli
