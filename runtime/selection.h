// Choosing one label per node for the whole network (pipeline steps 3-4): candidates from
// runtime/labels.h, costs measured by the profiler (or remembered by the tuning cache, or
// estimated by the heuristic model), then a strategy:
//   global    - the PBQP optimum over node costs + measured layout-conversion costs
//               (solver/network.h: a conversion is paid once per tensor and target layout);
//   local     - each node's fastest label, conversions ignored when choosing (but inserted
//               and paid at run time): the cuDNN-autotuner way;
//   fixed     - one layout (the ISA's blocked one) and one conv family (direct; depthwise
//               where direct cannot) everywhere;
//   heuristic - global over the no-profiling cost model (no measurement at all).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "runtime/labels.h"

namespace kiln {

class TuningCache;

enum class Strategy : int { global = 0, local = 1, fixed = 2, heuristic = 3 };
enum class TuneMode : int { none = 0, fast = 1, full = 2 };
// Which conv families may be chosen, by the error their transforms add (conv_families.h):
//   strict  - only exact families (no Winograd);
//   guarded - "default": every family, then the accuracy guard (below) demotes lossy layers
//             until the error they add on a probe input is within kAccuracyBudget;
//   fast    - every family, no guard.
// A plan that rounds to bf16 (Precision::bf16) is guarded under strict and guarded alike, for
// bf16's error against the network in f32 (bf16_accuracy_budget); fast rounds wherever faster.
enum class Accuracy : int { strict = 0, guarded = 1, fast = 2 };
const char* strategy_name(Strategy s);
const char* tune_mode_name(TuneMode m);
const char* accuracy_name(Accuracy a);  // "strict", "default", "fast"
bool parse_strategy(const std::string& s, Strategy* out);
bool parse_tune_mode(const std::string& s, TuneMode* out);
bool parse_accuracy(const std::string& s, Accuracy* out);

// The accuracy guard's limit on max|y - y_exact| / max|y_exact|, where y is the network's
// output under the chosen plan and y_exact the same plan with every lossy conv on the direct
// family, both on one random-normal probe input. Why this value: bench/NOTES.md, "accuracy
// guard".
constexpr double kAccuracyBudget = 6e-5;
// The same limit for a plan that rounds to bf16 (precision bf16, accuracy strict or default),
// measured against the network in f32: the bound on the zoo is 3e-2 of the output's max
// against PyTorch, and a probe input is not the user's (bench/NOTES.md, "bf16 guard").
constexpr double kBf16AccuracyBudget = 2e-2;

struct Selection;
// Runs the graph once with sel's labels and kernels (every node's kernel built) on a fixed
// probe input and returns every f32 output, concatenated; the kernels stay in sel. Empty: the
// model cannot be probed (an input is not f32).
using AccuracyProbe = std::function<std::vector<float>(Selection& sel)>;

struct SelectOptions {
  Strategy strategy = Strategy::global;
  TuneMode tune = TuneMode::fast;
  Isa isa = Isa::scalar;
  int threads = 1;
  bool reference = false;
  TuningCache* cache = nullptr;  // null: no persistence
  double solve_budget_ms = 2000;
  bool progress = false;  // progress on stderr (SessionOptions::progress)
  // A family every conv must use wherever that family applies (for tests and benchmarks of
  // one family end to end); other convs keep their normal candidates.
  std::optional<ConvFamily> force_family;
  // Wall-clock milliseconds of measurement one load may spend (0: kFastProfileBudgetMs or
  // kFullProfileBudgetMs by tuning mode). The problems predicted costliest to measure are
  // left out first when the estimates exceed it; at the deadline measuring stops, and the
  // nodes not measured yet keep the cost model's estimates. A plan cut short is not cached.
  double profile_budget_ms = 0;
  Accuracy accuracy = Accuracy::guarded;
  Precision precision = Precision::f32;
  AccuracyProbe probe;  // the guard's way to run a plan (session.cpp); none: no guard
  double accuracy_budget = kAccuracyBudget;
  double bf16_accuracy_budget = kBf16AccuracyBudget;
  // At most this many probes measure error shares per round of the guard (0: as many as the
  // profiling budget leaves time for); fewer than the layers to measure: measured in groups.
  int guard_share_probes = 0;
};

// The activation bytes a run of g holds at its peak (a probe's arena, roughly: the memory plan
// packs tensors by liveness in node order): each non-constant value alive from the node that
// writes it (graph inputs: from the start) to the last that reads it (graph outputs: to the
// end). Views count as copies (an overestimate).
double peak_live_bytes(const Graph& g);
// The accuracy guard does not probe a plan whose peak_live_bytes exceed this.
constexpr int64_t kMaxProbeBytes = int64_t(1) << 30;
// Default profiling budgets per load (wall clock).
constexpr double kFastProfileBudgetMs = 10000;
constexpr double kFullProfileBudgetMs = 60000;

struct NodeChoice {
  Label label;
  double ms = 0;             // predicted time of the node's kernel (measured or modelled)
  bool measured = false;     // from a measurement (this load or the cache), not the model
  bool cached = false;       // the time came from the tuning cache
  int candidates = 0;        // labels considered / measured for this node
  bool over_budget = false;  // left to the cost model for lack of profiling budget
};

// A depthwise conv and a 1x1 next to it run as one chain kernel (jit/dw/dw_pw_kernel.h): the
// solver chose NHWC labels for both, and the fused kernel's measured time `ms` is below theirs
// together (the plan fuses exactly these pairs; a depthwise conv in two pairs runs as one
// kernel of all three).
struct SeparablePair {
  int dw = -1, pw = -1;  // nodes
  double ms = 0;
  bool expand = false;  // pw is the 1x1 whose output dw reads (else the one reading dw's)
  int first() const { return expand ? pw : dw; }  // the producer of the pair's middle tensor
  int second() const { return expand ? dw : pw; }
};

struct Selection {
  std::vector<NodeChoice> nodes;                 // per graph node
  std::vector<std::unique_ptr<Kernel>> kernels;  // per node: the chosen kernel, built
  std::vector<SeparablePair> separable;
  Strategy strategy = Strategy::global;
  TuneMode tune = TuneMode::fast;
  double predicted_ms = 0;  // nodes + conversions under the cost model the choice used
  bool optimal = false;     // global: PBQP proved the minimum
  bool plan_from_cache = false;
  int64_t cache_hits = 0, cache_misses = 0;  // time lookups
  int measurements = 0;                      // kernels + conversions timed this load
  int sampled = 0;      // of the kernels, those timed on a sample of their tiles (too big whole)
  int unprofiled = 0;   // profiled nodes whose kernels the cost model chose (none measured)
  int over_budget = 0;  // of those, the ones left out for lack of profiling budget
  // A measurement was refused for lack of time left (else the plan alone left nodes out).
  bool budget_exhausted = false;
  double profile_budget_ms = 0;  // the budget this load had
  double profile_ms = 0, solve_ms = 0, jit_ms = 0;
  // Of the thread time spent building the chosen kernels, the share that was code generation
  // (the rest packs weights): splits jit_ms, which is wall time, between the two.
  double codegen_share = 0;
  int pbqp_nodes = 0, pbqp_edges = 0;
  // The accuracy guard (Accuracy::guarded with lossy labels chosen): runs of the probe, its
  // last measured error (-1: not probed), lossy nodes demoted to exact families, and the
  // guard's milliseconds (building the exact kernels, probing, solving again).
  Accuracy accuracy = Accuracy::guarded;
  Precision precision = Precision::f32;  // what the session allowed (SelectOptions::precision)
  int probes = 0;
  double probe_error = -1;
  int demoted = 0;
  double guard_ms = 0;
  bool guard_bf16 = false;  // the guard limited bf16's error (probe_error: from f32)
};

Selection select_labels(const Graph& g, const SelectOptions& o);

// "accuracy: MODE (guard: PROBES probes, ADDED added, K convs demoted, T ms)" for reports; a
// bf16 guard: "(bf16 guard: PROBES probes, E from f32, K layers back in f32, T ms)".
std::string accuracy_summary(const Selection& s);

}  // namespace kiln
