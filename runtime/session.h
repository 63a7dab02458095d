// A loaded model ready to run: the C++ core behind the C API and the CLI.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"
#include "jit/cpu.h"
#include "runtime/log.h"
#include "runtime/selection.h"

namespace kiln {

struct DynamicTail;
struct ImportOptions;
struct Plan;
struct RunProfile;
struct Selection;
class Executor;
class TailKernels;

struct SessionOptions {
  int threads = 0;    // 0 = host_cpu().cores (the CPUs this process may run on)
  int64_t batch = 0;  // 0 = what the model says (a symbolic batch dim becomes 1)
  // Shapes of inputs set at load (parse_input_shapes reads the text form), symbolic dims or
  // not; every symbolic dim but the batch (dim 0) must be set. `batch`, if set, is dim 0 of
  // every input, these shapes' included.
  std::map<std::string, Shape> input_shapes;
  // The C API's integers become these enums in one place (runtime/c_api.cpp), which rejects
  // values outside them; the CLI parses names into them.
  std::optional<LogLevel> log_level;  // this session's messages; none: the process's threshold
  std::optional<Isa> max_isa;         // cap on the ISA; none: no cap (KILN_MAX_ISA applies)
  bool reference = false;  // run every op with the scalar reference kernels (for comparison)
  Strategy strategy = Strategy::global;
  TuneMode tune = TuneMode::fast;
  std::string cache_dir;  // tuning cache folder; "" = default_cache_dir() (KILN_CACHE_DIR, XDG)
  bool use_cache = true;  // false: neither read nor write the tuning cache
  bool progress = false;  // profiling progress on stderr: a bar on a terminal, else 10% lines
  std::optional<ConvFamily> force_family;  // a family every conv uses where it applies (tests)
  double profile_budget_ms = 0;  // load-time profiling budget (0: by tuning mode; selection.h)
  Accuracy accuracy = Accuracy::guarded;     // which conv families may add error (selection.h)
  double accuracy_budget = kAccuracyBudget;  // the guard's limit (tests change it)
  double bf16_accuracy_budget = kBf16AccuracyBudget;  // the same for bf16 plans
  int guard_share_probes = 0;  // cap on the guard's share probes a round (tests; selection.h)
  // bf16: convolutions may compute in bf16 where the CPU has AVX512-BF16 and the solver finds
  // it faster (labels.h); elsewhere, and for every other op, f32 as with f32.
  Precision precision = Precision::f32;
};

struct IoInfo {
  std::string name;
  DType dtype;  // as the caller passes / receives it (uint8, int8, int32 included)
  Shape shape;
  // The shape is decided by each run (an output after NonMaxSuppression, NonZero, ...;
  // graph/dynamic.h): `shape` holds the dims the model declares, -1 where unknown (no dims
  // when it declares none).
  bool dynamic = false;
};

// invalid_argument naming `io` when it is dynamic: what needs its size before a run (a caller's
// buffer) cannot have it.
void require_static(const IoInfo& io);

// Load-time figures, milliseconds.
struct LoadStats {
  double parse_ms = 0, passes_ms = 0, plan_ms = 0, total_ms = 0;
  // Parts of plan_ms: timing candidates, solving, generating the chosen kernels' code (jit_ms)
  // and packing their weights (pack_ms), memory planning and the rest. Code generation and
  // packing happen together in each kernel factory, on several threads: their wall time is
  // split in the ratio of the thread time each took.
  double profile_ms = 0, solve_ms = 0, jit_ms = 0, pack_ms = 0;
};

// "NAME:1x3x320x320,OTHER:2x5" (the CLI's --shape, the C API's input_shapes) -> name -> dims.
// A name runs to the item's last ':', so "input:0:1x3x8x8" names "input:0"; names holding ','
// cannot be given. invalid_argument naming the item for bad syntax, dims <= 0 or too large,
// and a name given twice.
std::map<std::string, Shape> parse_input_shapes(const std::string& text);

class Session {
 public:
  // Throw Error (io_error, invalid_model, unsupported, ...) with a message naming the problem.
  static std::unique_ptr<Session> load_file(const std::string& path, const SessionOptions& o);
  static std::unique_ptr<Session> load_memory(const void* data, size_t size,
                                              const SessionOptions& o);
  ~Session();

  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  const Graph& graph() const { return graph_; }
  const LoadStats& load_stats() const { return stats_; }
  Isa isa() const { return isa_; }
  int threads() const { return threads_; }
  // The lowered plan (kernels, layouts, conversions); defined in runtime/plan.h.
  const Plan& plan() const { return *plan_; }
  // How each node's kernel was chosen (labels, predicted times, cache use, optimality).
  const Selection& selection() const { return *sel_; }

  // The batch the session was loaded at: dim 0 of its first input that has dims (0: none).
  int64_t batch() const { return batch_; }
  // The session at another batch: planned on first use with the same options (the model is
  // imported again from the file, or from a copy of the bytes a memory load keeps), then kept
  // (at most kMaxBatchPlans other batches; the least recently used is dropped). Thread-safe:
  // creation is serialised per batch, runs of other batches are not held up. Returns this
  // session (not owned) for batch().
  static constexpr size_t kMaxBatchPlans = 8;
  std::shared_ptr<const Session> at_batch(int64_t batch) const;

  // inputs[i] / outputs[i] follow inputs() / outputs() order. Shapes and dtypes must match
  // exactly (shape_mismatch otherwise), except that every input's dim 0 may be another batch:
  // then the run uses at_batch(that batch) and the outputs must have its shapes. Output
  // tensors are written in place (use Tensor::wrap for caller memory). Safe to call
  // concurrently from several threads: each run has its own intermediate buffers.
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const;
  // The same, also timing every plan step and each thread's share of it.
  void run_profiled(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                    RunProfile& profile) const;
  // A run whose outputs the session allocates: the only way to run a model with dynamic
  // outputs (the two above refuse them). With a profile, the planned steps are timed and the
  // run-time tail as a whole (RunProfile::tail_ms).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, RunProfile* profile = nullptr) const;
  // The nodes computed per run on the reference kernels because output sizes depend on the
  // data (graph/dynamic.h); null for a model planned entirely at load.
  const DynamicTail* tail() const { return tail_.get(); }

 private:
  Session() = default;
  struct Source;
  // Both loads and other batches: imports the model from `src` with o's shapes, then
  // prepare(). read_env: take a new snapshot of the environment (not while this session runs).
  static std::unique_ptr<Session> load(const SessionOptions& o, std::shared_ptr<const Source> src,
                                       bool read_env);
  void prepare(const SessionOptions& o);
  // run / run_profiled at this session's batch: inputs and outputs of a boundary dtype (uint8,
  // int8, int32) converted to and from what the plan holds (runtime/io_dtypes.h).
  void run_planned(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                   RunProfile* profile) const;
  // The batch the inputs ask for: batch_ when they match inputs() exactly, another when only
  // the dim 0 of every input differs, the same in all; else a shape_mismatch error.
  int64_t batch_of(const std::vector<Tensor>& inputs) const;
  // Where the model came from (another batch imports it again) and how it was loaded.
  struct BatchPlan;
  std::shared_ptr<const Source> source_;
  SessionOptions options_;
  int64_t batch_ = 0;
  mutable std::mutex batches_mu_;  // guards batches_ and use_clock_
  mutable std::map<int64_t, std::shared_ptr<BatchPlan>> batches_;
  mutable uint64_t use_clock_ = 0;
  Graph graph_;
  std::vector<IoInfo> inputs_, outputs_;
  LoadStats stats_;
  Isa isa_ = Isa::scalar;
  int threads_ = 1;
  int log_level_ = -1;
  std::unique_ptr<Selection> sel_;
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<DynamicTail> tail_;
  std::unique_ptr<TailKernels> tail_kernels_;  // the tail's evaluator
};

}  // namespace kiln
