// The label selector behind select_labels() (runtime/selection.h), shared by the files that
// implement it: runtime/selection.cpp (candidates, profiling, the solve, the plan cache) and
// runtime/accuracy_guard.cpp (the accuracy guards: probing a plan and sending its lossy or bf16
// layers back to exact f32 families). Internal: not for use outside those two files.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/clock.h"
#include "runtime/profiler.h"
#include "runtime/selection.h"
#include "solver/network.h"

namespace kiln::selection_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// The weight of the rounding error a label's transforms add (0: exact; conv_families.h).
double transform_error(const Label& l);

// max|y - ref| / max|ref| (max|y - ref| when ref is all zeros).
double relative_error(const std::vector<float>& y, const std::vector<float>& ref);

class Selector {
 public:
  Selector(const Graph& g, const SelectOptions& o);

  Selection run();

 private:
  // Solves for the current costs and builds the chosen kernels; a label whose factory refuses
  // it (possible only with model costs, which never instantiate) is made illegal and the
  // choice redone. max_search_nodes: the solver's cap on branch-and-bound subproblems (< 0:
  // none; SolveOptions).
  void solve_and_build(int64_t max_search_nodes = -1);

  // --- depthwise conv + 1x1 pairs (jit/dw/dw_pw_kernel.h) --------------------------------

  // The depthwise -> 1x1 and 1x1 -> depthwise pairs of the graph whose nodes both have NHWC
  // f32 candidates.
  void find_separable();

  // Times the chain kernel of every pair (tuning cache first; not with `--tune none`, not past
  // the budget): the solver then weighs it against the two kernels (network()).
  void measure_separable();

  // Node i's f32 NHWC conv label (a depthwise one for a depthwise node).
  Label nhwc_label(int i) const;

  // Conv nodes keep only the forced family's labels that really apply (checked by building
  // them), plus the reference fallback; nodes it does not apply to keep all candidates.
  void force_family();

  // --- costs ----------------------------------------------------------------------------

  // Whether node i can be timed on scratch buffers: every non-constant operand is f32
  // (random integers could be out-of-range indices for a reference Gather and the like).
  bool measurable(int i) const;

  // The profiling budget: wall-clock milliseconds one load may spend measuring.
  double budget_ms() const;

  // True once the load's profiling deadline has passed (and notes that it cut profiling).
  bool out_of_time();

  void measure_nodes();

  // Whether timing k on operands of these sizes is predicted to fit what is left of the
  // budget: fresh scratch for its operands, and its runs (a kernel with enough tiles is timed
  // on a sample of them; one with too few runs whole). Notes it when not.
  bool fits(const Kernel& k, const std::vector<int64_t>& src_bytes,
            const std::vector<int64_t>& dst_bytes, double est_ms);

  // What timing node i's kernel under l reads and writes: bytes per input slot (0: none, or
  // the constant in consts) and per output.
  struct Operands {
    std::vector<int64_t> src_bytes, dst_bytes;
    std::vector<const void*> consts;
  };
  Operands operands(int i, const Label& l) const;

  // Median time of label l on node i (est_ms: the model's estimate); nullopt when it is not
  // measured because the load's profiling budget would not cover it.
  std::optional<double> measure(int i, const Label& l, double est_ms);

  double reorder_ms(const Shape& s, Layout from, Layout to);

  // --- choice ---------------------------------------------------------------------------

  // The network problem over the current costs. Per node only the cheapest label of each
  // (input layouts, output layouts) signature is offered: the others can never win.
  NetworkProblem network(std::vector<std::vector<int>>* offered);

  std::vector<int> choose(int64_t max_search_nodes);

  // --- accuracy guards (runtime/accuracy_guard.cpp) -----------------------------------------

  // Whether l rounds to bf16: a bf16 tensor in or out, or bf16 operands inside (fc).
  static bool rounds_bf16(const Label& l);

  // The error weight the guard gives l: its family's transform error; in the bf16 guard 1 for a
  // label that rounds to bf16 and 0 for every f32 one (Winograd's error is far below bf16's,
  // and that guard's reference is exact).
  double lossiness(const Label& l) const;

  double guard_budget() const { return bf16_guard_ ? o_.bf16_accuracy_budget : o_.accuracy_budget; }

  // The nodes whose chosen label satisfies `pred`.
  template <class Pred>
  std::vector<size_t> nodes_where(Pred pred) const {
    std::vector<size_t> r;
    for (size_t i = 0; i < sel_.nodes.size(); ++i)
      if (pred(sel_.nodes[i].label)) r.push_back(i);
    return r;
  }
  std::vector<size_t> bf16_nodes() const { return nodes_where(rounds_bf16); }
  std::vector<size_t> lossy_nodes() const;

  // An exact stand-in for node i's lossy label: family f (else direct; grouped convs:
  // grouped) in the same layouts when offered, else its fastest measured label of that
  // family; built once per label.
  std::pair<Label, std::unique_ptr<Kernel>>& stand_in(size_t i, ConvFamily f);

  // The probe's output with each of `nodes` on its exact stand-in of family f; the chosen
  // labels and kernels are put back afterwards. Empty when the model cannot be probed.
  std::vector<float> probe_with(const std::vector<size_t>& nodes, ConvFamily f);

  // The current plan's probe output against ref, max|y - ref| / max|ref|: not finite (warned)
  // when the output is not.
  double probe_against(const std::vector<float>& ref, const char* guard_name);

  // The share probes the profiling budget still allows a guard that began at t0 with probes0
  // probes (its time so far per probe; two kept for the probes after demoting).
  double share_probes_left(Clock::time_point t0, int probes0) const;

  // The probe's output with `nodes` exact: on direct stand-ins (probe_with), in the bf16 guard
  // in f32 (probe_f32).
  std::vector<float> probe_exact(const std::vector<size_t>& nodes);

  // The bf16 guard's probe: the network solved again with the labels that round to bf16
  // forbidden on `nodes` and on every node not rounding now (so that none turns bf16 instead),
  // and the other nodes that round now kept on their labels (alone among f32 layers, a node
  // would often be solved f32 too, and its error share read as none); with exact_ref bf16 and
  // Winograd are forbidden on every node. Then the costs go back and the plan is solved back
  // (the same plan: the solver is deterministic; its kernels wait in spares_).
  std::vector<float> probe_f32(const std::vector<size_t>& nodes, bool exact_ref = false);

  // Accuracy strict or default, a plan that rounds to bf16: the probe runs the plan (y) and the
  // network in f32 on exact families (y_f), and while max|y - y_f| / max|y_f| exceeds
  // bf16_accuracy_budget the layers that round to bf16 get error shares and those saving least
  // time per unit of share go back to f32 (measure_shares and demote, as in guard(); a group's
  // share is the error with only it in bf16). On random-weight CNNs bf16's error comes mostly
  // from the first layers, whose rounding every later layer carries (bench/NOTES.md, "bf16
  // guard"). Where a probe would not fit the profiling budget the plan stays as solved,
  // unverified.
  void guard_bf16();

  // Accuracy::guarded. The probe runs the plan (y), the plan with its lossy convs on direct
  // (y_d) and on im2col (y_i), two exact families that round differently. |y - y_d| holds the
  // lossy layers' error and direct's own on those layers, |y_d - y_i| about twice the latter,
  // so sqrt(|y - y_d|^2 - |y_d - y_i|^2) estimates what the lossy families add beyond exact
  // rounding. While that exceeds the budget, each lossy layer's share is measured once (by
  // bisection over groups of them: measure_shares), the layers saving least time per unit of
  // their share are demoted until the rest is predicted within the budget (shares add in
  // quadrature), and the network is solved and probed again. Measurements behind this:
  // bench/NOTES.md, "accuracy guard".
  void guard();

  // Measures the error share of each lossy node that has none yet (shares_). A group's share is
  // the plan with only that group lossy, against y_d: its members' transform error and direct's
  // own rounding on them (about noise^2 * members / lossy, taken off). The shares are found by
  // bisection (bench/NOTES.md, "The accuracy guard by bisection"): the group of every
  // unmeasured node (its share is the measured total when that is every lossy node, no probe),
  // then, largest share first, a group's first half is probed and its second half gets the rest
  // (shares add in quadrature; probed too when the first half holds most of it), until each
  // group is one node or too small to matter next to the budget, or `probes` are spent. Each
  // member of a group gets an equal part of its share (in quadrature): a few layers usually add
  // most of the error, and they are found in a few probes each instead of one per layer. The
  // guard scales a share by the family's transform_error weight when the node moves to a
  // milder family, and all of them to the measured total. False when over_time stopped it (and
  // demoted and solved already).
  bool measure_shares(const std::vector<size_t>& lossy, const std::vector<float>& y_d, double noise,
                      double probes, const std::function<bool()>& over_time);

  // Demotes the lossy nodes that save least time per unit of their error share (squared:
  // shares add in quadrature) until the rest sum within (budget / 1.2)^2; at least one. A
  // demoted node loses its label's family and every family adding as much error or more.
  // exact_only: every lossy family goes, not only the node's and worse ones.
  void demote(const std::vector<size_t>& lossy, const std::vector<double>& share, double budget,
              bool exact_only = false);

  // Gives node i an exact f32 label (lossiness 0; no_transforms: no Winograd either) when it has
  // none with a time: exact convs the fast tuning did not measure (the model found them far
  // slower) are timed now, or take the model's estimate once the profiling budget is spent.
  void admit_exact(size_t i, bool no_transforms = false);

  // --- plan cache -------------------------------------------------------------------------

  std::string serialize() const;

  // A warm load: the solved plan is in the cache; build only the chosen kernels. Anything
  // that does not fit this graph (or no longer applies) falls back to a fresh selection.
  bool from_cached_plan(const std::string& key);

  // Builds sel_.kernels[i] for sel_.nodes[i].label, for the given nodes, on the session's
  // threads: JIT code generation and weight packing dominate a warm load, and they are
  // independent per node. Returns why each one that did not apply failed.
  std::vector<std::string> build_kernels(const std::vector<size_t>& nodes);

  // The fixed strategy's labels: one layout, one family: the families marked as the fixed
  // baseline in the family table (direct conv, depthwise where direct cannot) on the blocked
  // layout; other ops on the blocked layout where they can be.
  bool fixed_label(const Label& l) const;

  // Fast tuning measures only the labels the cost model finds plausible, and those alone may
  // not chain (an int8 conv whose only plausible label reads uint8, after a view that cannot
  // give it). Then the labels it passed over come back at the model's estimates: a model that
  // loads without tuning loads with it. False when there were none. A label whose layouts a
  // measured label of its node already has adds no way to chain, only the model's guess beside
  // a measurement: it stays out (a scalar reference Transpose, its model estimate below its JIT
  // kernel's time measured while CI ran another test, was chosen).
  bool admit_pruned();

  // No plan exists: when a node has no label left (even its reference kernel failed), that
  // node's own error is the model's problem; otherwise the layouts cannot be chained, a bug.
  [[noreturn]] void report_infeasible();

  bool reject(const std::string& key, const std::string& why);

  // On a terminal a bar redrawn in place; otherwise (a log, CI) a line at the start and one
  // per 10%, so a long load does not look hung and the log stays short.
  void progress(int done, int total);

  const Graph& g_;
  SelectOptions o_;
  TuneMode tune_;
  Profiler prof_;
  std::string problem_suffix_;
  Selection sel_;
  int64_t build_ns_ = 0, codegen_ns_ = 0;  // thread time building kernels, and its codegen part
  std::vector<SeparablePair> sep_;         // find_separable (ms: inf, not measured)
  std::vector<std::vector<Label>> cands_;
  std::vector<std::vector<double>> cost_;
  // Per node and label: the cost model's estimate of a label fast tuning left unmeasured as
  // implausible (NaN: measured, or none to give), see admit_pruned().
  std::vector<std::vector<double>> pruned_;
  std::map<std::pair<std::string, std::string>, double> reorder_memo_;
  std::vector<std::pair<Label, std::unique_ptr<Kernel>>> kept_;  // per node, see measure()
  // The guard's exact stand-ins by (node, label key), see stand_in().
  std::map<std::pair<size_t, std::string>, std::pair<Label, std::unique_ptr<Kernel>>> stand_ins_;
  std::map<size_t, std::pair<double, double>> shares_;  // guard: node -> (weight, error share)
  bool bf16_guard_ = false;                             // guard_bf16 runs: lossiness() is bf16's
  // While keep_spares_, kernels a new solution replaces wait here by (node, label key) for the
  // next (guard_bf16 solves back and forth).
  bool keep_spares_ = false;
  std::map<std::pair<size_t, std::string>, std::unique_ptr<Kernel>> spares_;
  std::vector<double> kept_ms_;
  std::vector<std::pair<Code, std::string>> failure_;      // per node: the last label's failure
  Clock::time_point deadline_ = Clock::time_point::max();  // end of this load's profiling
  Clock::time_point progress_start_;                       // progress(): when measuring began
  int progress_tenth_ = -1;  // progress(): the last tenth reported as a line
};

}  // namespace kiln::selection_detail
