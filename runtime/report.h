// What a loaded session reports about itself, as JSON: the machine, the plan, per-step times.
// One place for the CLI (`kiln plan`, `kiln bench --json`), the C API (kiln_session_plan_json,
// kiln_session_profile_json, kiln_machine_json) and so the Python package.
#pragma once

#include <string>
#include <vector>

#include "runtime/session.h"

namespace kiln {

struct Step;
struct NodeChoice;

// A JSON string literal (with its quotes).
std::string json_escape(const std::string& s);

// Linear-interpolated percentile (NumPy's default) of an unsorted sample; p in [0, 100].
double percentile(std::vector<double> xs, double p);

// {"cpu", "vendor", "family", "model", "stepping", "isa", "features": [...], "cores",
//  "cache": {"l1d", "l2", "l3"}, "kiln_version", "build_id"}: the machine and this build.
std::string machine_json();

// Random normal inputs for timing (fixed seed, so runs compare); int64 inputs stay zero.
std::vector<Tensor> random_inputs(const Session& s);
// Buffers for s's outputs, allocated once for many runs; none for a model with dynamic outputs.
std::vector<Tensor> make_outputs(const Session& s);
// One run into `outputs` (from make_outputs), timed into `profile` when given; for a model with
// dynamic outputs `outputs` become the run's (Session::run's allocating form).
void run_into(const Session& s, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
              RunProfile* profile = nullptr);

// A step's op ("(convert)" for inserted layout conversions), whether it runs a reference
// kernel, and where its node's predicted time came from ("cache", "measured", "budget",
// "model"; "-" for a conversion).
std::string step_op(const Session& s, const Step& st);
bool is_reference_step(const Session& s, const Step& st);
// The step's predicted milliseconds: its node's, a separable step's own (Selection::separable),
// 0 for a conversion.
double step_pred_ms(const Session& s, const Step& st);
const char* choice_source(const NodeChoice& c);
struct Plan;
std::string step_layouts(const Plan& p, const Step& st);  // "nChw16c>nchw": first src > first dst

// The session's plan: the selection's summary, the run-time tail ("tail": {"nodes", "first"}
// or null) and one object per step (node, op, label, family, layouts, predicted ms, time
// source, kernel). What `kiln plan` prints.
std::string plan_json(const Session& s);

// Per-step times: the median of each plan step over `runs` profiled runs.
struct LayerProfile {
  int runs = 0;
  std::vector<double> ms;   // per plan step
  double total_ms = 0;      // sum of the medians
  double reference_ms = 0;  // of it, steps on reference kernels (and the tail)
  double tail_ms = 0;       // the run-time tail (graph/dynamic.h), also in total_ms
};
LayerProfile profile_layers(const Session& s, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>& outputs, int runs);
// "[{step, node, op, kernel, layouts, ms, gflop_per_s, tiles, reference}, ...]"
std::string layers_json(const Session& s, const LayerProfile& p);
// {"runs", "total_ms", "reference_ms", "layers": layers_json}
std::string profile_json(const Session& s, const LayerProfile& p);

}  // namespace kiln
