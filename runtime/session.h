// A loaded model ready to run: the C++ core behind the C API and the CLI.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"
#include "jit/cpu.h"
#include "runtime/log.h"
#include "runtime/selection.h"

namespace kiln {

struct ImportOptions;
struct Plan;
struct RunProfile;
struct Selection;
class Executor;

struct SessionOptions {
  int threads = 0;    // 0 = host_cpu().cores (the CPUs this process may run on)
  int64_t batch = 0;  // 0 = what the model says (a symbolic batch dim becomes 1)
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
};

struct IoInfo {
  std::string name;
  DType dtype;
  Shape shape;
};

// Load-time figures, milliseconds.
struct LoadStats {
  double parse_ms = 0, passes_ms = 0, plan_ms = 0, total_ms = 0;
  // Parts of plan_ms: timing candidates, solving, generating the chosen kernels' code (jit_ms)
  // and packing their weights (pack_ms), memory planning and the rest. Code generation and
  // packing happen together in each kernel factory, on several threads: their wall time is
  // split in the ratio of the thread time each took.
  double profile_ms = 0, solve_ms = 0, jit_ms = 0, pack_ms = 0;
};

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

  // inputs[i] / outputs[i] follow inputs() / outputs() order. Shapes and dtypes must match
  // exactly (shape_mismatch otherwise). Output tensors are written in place (use
  // Tensor::wrap for caller memory). Safe to call concurrently from several threads: each run
  // has its own intermediate buffers.
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const;
  // The same, also timing every plan step and each thread's share of it.
  void run_profiled(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                    RunProfile& profile) const;

 private:
  Session() = default;
  // Both loads: `import` parses the model with the given import options, then prepare().
  static std::unique_ptr<Session> load(const SessionOptions& o, ImportOptions io,
                                       const std::function<Graph(const ImportOptions&)>& import);
  void prepare(const SessionOptions& o);
  Graph graph_;
  std::vector<IoInfo> inputs_, outputs_;
  LoadStats stats_;
  Isa isa_ = Isa::scalar;
  int threads_ = 1;
  int log_level_ = -1;
  std::unique_ptr<Selection> sel_;
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<Executor> exec_;
};

}  // namespace kiln
