#include "runtime/session.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "graph/clock.h"
#include "graph/dynamic.h"
#include "graph/env.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "jit/shared_code.h"
#include "runtime/executor.h"
#include "runtime/int8_conv.h"
#include "runtime/io_dtypes.h"
#include "runtime/log.h"
#include "runtime/plan.h"
#include "runtime/ref/ref_kernels.h"
#include "runtime/selection.h"
#include "runtime/tail_kernels.h"
#include "runtime/tuning_cache.h"

namespace kiln {
namespace {

void run_ref(const Node& n, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
  RefKernel k = find_ref_kernel(n.op);
  if (!k) n.fail(Code::unsupported, "no kernel implements operator " + n.op);
  k(n, in, out);
}

// More threads than this is a mistake, not a machine: TBB crashes creating an arena for
// INT_MAX threads.
constexpr int kMaxThreads = 4096;
constexpr int64_t kMaxBatch = int64_t(1) << 20;

// min 0: a load's option (0 = the model's batch); min 1: a batch to run.
void check_batch(int64_t batch, int64_t min = 0) {
  if (batch < min || batch > kMaxBatch)
    fail(Code::invalid_argument, "batch size " + std::to_string(batch) + " is out of range (1.." +
                                     std::to_string(kMaxBatch) + ")");
}

void check_options(const SessionOptions& o) {
  if (o.threads < 0 || o.threads > kMaxThreads)
    fail(Code::invalid_argument, "threads must be 0.." + std::to_string(kMaxThreads) + ", got " +
                                     std::to_string(o.threads));
  check_batch(o.batch);
  for (const auto& [name, dims] : o.input_shapes) {
    for (int64_t d : dims)
      if (d <= 0 || d > kMaxTensorElements)
        fail(Code::invalid_argument, "the shape given for input '" + name + "', " +
                                         shape_str(dims) + ", has a dim outside 1.." +
                                         std::to_string(kMaxTensorElements));
  }
}

// The session's log level as LogScope takes it (-1: the process threshold).
int level_or_process(const SessionOptions& o) {
  return o.log_level ? int(*o.log_level) : -1;
}

// What every load does first: the environment is read now and not again until the next load
// (graph/env.h). (The caller then opens a LogScope: its messages use the session's level.)
void begin_load(const SessionOptions& o) {
  snapshot_env();
  read_log_level_env();
  check_options(o);
}

// The accuracy guard's probe (selection.h): the graph lowered with sel's kernels, run once on
// fixed random-normal inputs; the kernels go back to sel. Its f32 outputs, concatenated.
std::vector<float> probe_outputs(const Graph& g, const PlanOptions& po, int threads,
                                 Selection& sel) {
  std::vector<Tensor> in, out;
  std::mt19937 rng(20261202);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (ValueId v : g.inputs) {
    const Value& val = g.value(v);
    if (val.dtype != DType::f32) return {};
    in.emplace_back(val.dtype, val.shape);
    float* p = in.back().data<float>();
    for (int64_t k = 0; k < in.back().numel(); ++k) p[k] = normal(rng);
  }
  for (ValueId v : g.outputs) out.emplace_back(g.value(v).dtype, g.value(v).shape);
  Plan plan = build_plan(g, po, sel);
  {
    Executor exec(g, plan, threads);
    exec.run(in, out);
  }
  for (Step& st : plan.steps)
    if (st.node >= 0 && st.kernel && st.fused_nodes.empty())  // (fused: handed back already)
      sel.kernels[size_t(st.node)] = std::move(st.kernel);
  std::vector<float> y;
  for (const Tensor& t : out)
    if (t.dtype() == DType::f32) y.insert(y.end(), t.data<float>(), t.data<float>() + t.numel());
  return y;
}

// The process's minor page faults so far (the loads' logs: fresh memory is a load's big cost).
long minor_faults() {
  rusage u{};
  return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

}  // namespace

std::map<std::string, Shape> parse_input_shapes(const std::string& text) {
  std::map<std::string, Shape> shapes;
  for (size_t b = 0, e = 0; e < text.size(); b = e + 1) {  // "" has no items, "x:1," two
    e = std::min(text.find(',', b), text.size());
    const std::string item = text.substr(b, e - b);
    const size_t colon = item.rfind(':');
    auto bad = [&](const std::string& why) {
      fail(Code::invalid_argument, "input shape '" + item + "' " + why +
                                       " (expected NAME:DIMxDIMx..., e.g. input:1x3x224x224, "
                                       "items separated by ',')");
    };
    if (colon == std::string::npos || colon == 0) bad("has no 'NAME:' before its dims");
    Shape dims;
    const std::string ds = item.substr(colon + 1);
    for (size_t p = 0, q; p <= ds.size(); p = q + 1) {
      q = std::min(ds.find('x', p), ds.size());
      const std::string d = ds.substr(p, q - p);
      if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos)
        bad("has a dim '" + d + "' that is not a positive integer");
      const int64_t v = std::stoll(d);
      if (v < 1 || v > kMaxTensorElements)
        bad("has dim " + d + ", expected 1.." + std::to_string(kMaxTensorElements));
      dims.push_back(v);
    }
    if (!shapes.emplace(item.substr(0, colon), std::move(dims)).second)
      bad("names an input given before");
  }
  return shapes;
}

// A file load keeps its path, a memory load a copy of the model's bytes (made once the load
// succeeded: the caller's buffer is read only as the importer reads it).
struct Session::Source {
  bool file = false;
  std::string path;
  const void* data = nullptr;
  size_t size = 0;
  std::string bytes;
  Graph import(ImportOptions io) const {
    if (file) return import_onnx_file(path, io);
    io.borrow = true;  // the kernels pack straight from the bytes; prepare() owns the rest
    return import_onnx(data, size, io);
  }
};

// One other batch's session; its mutex serialises its creation.
struct Session::BatchPlan {
  std::mutex mu;
  std::shared_ptr<const Session> session;
  uint64_t used = 0;  // use_clock_ at the last lookup (the least recent is dropped first)
};

Session::~Session() = default;

std::unique_ptr<Session> Session::load(const SessionOptions& o, std::shared_ptr<const Source> src,
                                       bool read_env) {
  if (read_env)
    begin_load(o);
  else
    check_options(o);
  LogScope scope(level_or_process(o));
  auto t0 = Clock::now();
  const AllocStats mem0 = alloc_stats();
  const long faults0 = minor_faults();
  std::unique_ptr<Session> s(new Session());
  ImportOptions io;
  io.batch = o.batch;
  io.shapes = o.input_shapes;
  std::vector<std::string> dims_set;
  io.dims_set = &dims_set;
  s->graph_ = src->import(io);
  s->source_ = std::move(src);
  s->options_ = o;
  s->stats_.parse_ms = ms_since(t0);
  try {
    s->prepare(o);
  } catch (const Error& e) {
    // Shape inference refusing a size the caller chose: say which sizes were chosen.
    if (dims_set.empty() || (e.code() != Code::invalid_model && e.code() != Code::shape_mismatch))
      throw;
    fail(Code::shape_mismatch,
         "the model cannot take the input sizes set at load (" + join(dims_set) + "): " + e.what());
  }
  s->stats_.total_ms = ms_since(t0);
  const AllocStats mem1 = alloc_stats();  // other threads' loads count too
  log_debug(
      "large buffers: {:.1f} MiB fresh, {:.1f} MiB reused from earlier loads; {} page faults; "
      "huge pages {}",
      double(mem1.fresh - mem0.fresh) / 1048576, double(mem1.reused - mem0.reused) / 1048576,
      minor_faults() - faults0, huge_pages_eager() ? "asked for up front" : "left to khugepaged");
  return s;
}

std::unique_ptr<Session> Session::load_file(const std::string& path, const SessionOptions& o) {
  auto src = std::make_shared<Source>();
  src->file = true;
  src->path = path;
  auto s = load(o, std::move(src), true);
  LogScope scope(level_or_process(o));
  log_info("loaded '{}' in {:.1f} ms ({} nodes)", path, s->stats_.total_ms, s->graph_.nodes.size());
  return s;
}

std::unique_ptr<Session> Session::load_memory(const void* data, size_t size,
                                              const SessionOptions& o) {
  auto src = std::make_shared<Source>();
  src->data = data;
  src->size = size;
  auto s = load(o, src, true);
  src->bytes.assign(static_cast<const char*>(data), size);  // kept to plan other batches
  src->data = src->bytes.data();
  return s;
}

std::shared_ptr<const Session> Session::at_batch(int64_t batch) const {
  if (batch == batch_)
    return std::shared_ptr<const Session>(std::shared_ptr<const Session>(), this);
  check_batch(batch, 1);
  std::shared_ptr<BatchPlan> slot;
  {
    std::lock_guard<std::mutex> lock(batches_mu_);
    std::shared_ptr<BatchPlan>& e = batches_[batch];
    if (!e) e = std::make_shared<BatchPlan>();
    e->used = ++use_clock_;
    slot = e;
    if (batches_.size() > kMaxBatchPlans) {  // runs still using a dropped plan keep it alive
      auto oldest = batches_.begin();
      for (auto it = batches_.begin(); it != batches_.end(); ++it)
        if (it->second->used < oldest->second->used) oldest = it;
      batches_.erase(oldest);
    }
  }
  std::lock_guard<std::mutex> lock(slot->mu);
  if (!slot->session) {
    SessionOptions o = options_;
    o.batch = batch;
    o.progress = false;
    auto t0 = Clock::now();
    // The environment was read at this session's load: not again while it runs.
    std::shared_ptr<const Session> made = load(o, source_, false);
    // Its runs must not come back here (Session::run would plan again, without end).
    if (made->batch() != batch)
      fail(Code::internal, "batch " + std::to_string(batch) + " was planned as batch " +
                               std::to_string(made->batch()));
    slot->session = std::move(made);
    LogScope scope(log_level_);
    log_info("planned batch {} (loaded at {}) in {:.1f} ms", batch, batch_, ms_since(t0));
  }
  return slot->session;
}

// The dtype a caller passes / receives for graph input or output `name` held as `held`: what
// the model declares when the graph holds that as `held` (uint8 as float32, ...), else `held`.
static DType caller_dtype(const Graph& g, const std::string& name, DType held) {
  const auto it = g.io_dtypes.find(name);
  return it != g.io_dtypes.end() && held_dtype(it->second) == held ? it->second : held;
}

// The model's outputs as the caller sees them: the planned part's, and the tail's as the model
// declares them (their sizes are decided per run).
std::vector<IoInfo> model_outputs(const Graph& g, const DynamicTail* tail) {
  std::vector<IoInfo> out;
  auto planned = [&](const Value& v) {
    out.push_back({v.name, caller_dtype(g, v.name, v.dtype), v.shape});
  };
  if (!tail) {
    for (ValueId v : g.outputs) planned(g.value(v));
    return out;
  }
  for (const DynamicTail::Ref& r : tail->outputs) {
    if (r.kind == DynamicTail::Ref::planned) {
      planned(g.value(g.outputs[r.index]));
      continue;
    }
    const std::string& name = tail->graph.value(tail->graph.outputs[r.index]).name;
    const auto it = tail->graph.declared_outputs.find(name);
    if (it == tail->graph.declared_outputs.end() || !it->second.dtype)
      fail(Code::unsupported, "output '" + name + "', whose size each run decides (after " +
                                  tail->first + "), declares no element type Kiln supports");
    out.push_back(
        {name, caller_dtype(g, name, *it->second.dtype), it->second.dims.value_or(Shape{}), true});
  }
  return out;
}

void Session::prepare(const SessionOptions& o) {
  auto t0 = Clock::now();
  if (auto tail = split_dynamic_tail(graph_, Evaluator(run_ref))) {
    tail_ = std::make_unique<DynamicTail>(std::move(*tail));
    log_info(
        "{} nodes from {} on run per run on the reference kernels: their output sizes "
        "depend on the data",
        tail_->graph.nodes.size(), tail_->first);
  }
  PassStats ps = optimize(graph_, Evaluator(run_ref));
  int fused = fuse_epilogues(graph_);
  mark_int8_convs(graph_);  // (the graph is final: the QDQ convs' int8 operands, decided once)
  stats_.passes_ms = ms_since(t0);
  log_debug("passes: {} folded, {} identities, {} batchnorms folded, {} dead removed, {} fused",
            ps.folded, ps.identities, ps.batchnorms, ps.dead, fused);
  for (const Node& n : graph_.nodes)
    if (!find_ref_kernel(n.op)) n.fail(Code::unsupported, "no kernel implements operator " + n.op);
  for (ValueId v : graph_.inputs) {
    const Value& val = graph_.value(v);
    inputs_.push_back({val.name, caller_dtype(graph_, val.name, val.dtype), val.shape});
  }
  outputs_ = model_outputs(graph_, tail_.get());
  for (const IoInfo& io : inputs_)
    if (!io.shape.empty()) {
      batch_ = io.shape[0];
      break;
    }

  auto t1 = Clock::now();
  log_level_ = level_or_process(o);
  isa_ = effective_isa(o.max_isa ? int(*o.max_isa) : -1);
  threads_ = o.threads > 0 ? o.threads : host_cpu().cores;
  if (threads_ < 1) threads_ = 1;
  if (tail_) {  // its layers with a constant weight on JIT kernels
    std::set<std::string> jit;
    for (const Node& n : tail_->graph.nodes)
      if ((n.op == "Gemm" || n.op == "MatMul" || n.op == "Conv" || n.op == "ConvTranspose") &&
          n.inputs.size() > 1 && tail_->graph.value(n.inputs[1]).is_const())
        jit.insert(n.name);
    tail_kernels_ =
        std::make_unique<TailKernels>(o.reference ? Isa::scalar : isa_, threads_, std::move(jit));
  }
  SelectOptions so;
  so.strategy = o.strategy;
  so.tune = o.reference ? TuneMode::none : o.tune;
  so.isa = isa_;
  so.threads = threads_;
  so.reference = o.reference;
  so.progress = o.progress;
  so.force_family = o.force_family;
  if (!(o.profile_budget_ms >= 0)) fail(Code::invalid_argument, "profile_budget_ms must be >= 0");
  so.profile_budget_ms = o.profile_budget_ms;
  so.accuracy = o.accuracy;
  so.accuracy_budget = o.accuracy_budget;
  so.bf16_accuracy_budget = o.bf16_accuracy_budget;
  so.guard_share_probes = o.guard_share_probes;
  so.precision = o.precision;
  PlanOptions po;
  po.isa = isa_;
  po.reference = o.reference;
  so.probe = [&](Selection& sel) { return probe_outputs(graph_, po, threads_, sel); };
  std::unique_ptr<TuningCache> cache;
  if (o.use_cache && !o.reference && so.tune != TuneMode::none) {
    std::string dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
    if (!dir.empty())
      cache = std::make_unique<TuningCache>(dir, CacheContext::current(isa_, threads_));
  }
  so.cache = cache.get();
  const SharedCodeStats code0 = shared_code_stats();
  sel_ = std::make_unique<Selection>(select_labels(graph_, so));
  stats_.profile_ms = sel_->profile_ms;
  stats_.solve_ms = sel_->solve_ms;
  auto t2 = Clock::now();
  plan_ = std::make_unique<Plan>(build_plan(graph_, po, *sel_));
  // Building the plan itself (conversion kernels, memory plan) counts as JIT.
  stats_.pack_ms = sel_->jit_ms * (1 - sel_->codegen_share);
  stats_.jit_ms = sel_->jit_ms + ms_since(t2) - stats_.pack_ms;
  const SharedCodeStats code1 = shared_code_stats();  // other sessions' loads count too
  log_debug("kernel code: {} of {} generators shared with kernels built before",
            code1.reused - code0.reused, code1.lookups - code0.lookups);
  // The kernels own packed copies of their weights: the originals are dead weight now.
  const int64_t released = o.reference ? 0 : release_unread_constants(graph_, *plan_);
  log_debug("released {:.1f} MiB of constants the kernels packed", double(released) / 1048576);
  // A model loaded from memory: copy what the plan still reads of the caller's bytes (the
  // Executor resolves constant pointers next), the run-time tail's constants included.
  if (tail_) own_tensors_of(tail_->graph, graph_.borrowed);
  own_borrowed(graph_);
  exec_ = std::make_unique<Executor>(graph_, *plan_, threads_);
  log_info("steps run {}", exec_->uses_graph() ? "through a flow graph (branches overlap)"
                                               : "in plan order (independent steps overlap)");
  stats_.plan_ms = ms_since(t1);
  if (log_enabled(kInfo))
    for (const Step& st : plan_->steps) {
      if (st.node < 0) continue;
      const NodeChoice& c = sel_->nodes[size_t(st.node)];
      log_info("{}: {} [{}] {:.1f} us ({})", graph_.nodes[size_t(st.node)].where(),
               st.kernel->name(), c.label.key(), c.ms * 1e3,
               c.cached     ? "cache hit"
               : c.measured ? "measured"
                            : "model");
    }
  log_info(
      "plan: {} strategy ({} tuning{}), predicted {:.3f} ms{}, isa {}, {} threads, {} steps ({} "
      "JIT, {} views, {} layout conversions), arena {} KiB per run ({} KiB of it kernel scratch; "
      "one buffer per tensor: {} KiB)",
      strategy_name(sel_->strategy), tune_mode_name(sel_->tune),
      sel_->plan_from_cache ? ", plan from the tuning cache" : "", sel_->predicted_ms,
      sel_->optimal ? " (proven optimal)" : "", isa_name(isa_), threads_, plan_->steps.size(),
      plan_->jit_steps, plan_->views, plan_->reorders, plan_->run_bytes(threads_) / 1024,
      plan_->scratch_bytes * threads_ / 1024, plan_->naive_bytes / 1024);
}

static void check_io(const char* kind, const std::vector<IoInfo>& want,
                     const std::vector<Tensor>& got, const std::string& hint = "") {
  if (got.size() != want.size())
    fail(Code::invalid_argument, std::string("expected ") + std::to_string(want.size()) + " " +
                                     kind + "s, got " + std::to_string(got.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].dtype() != want[i].dtype || got[i].shape() != want[i].shape)
      fail(Code::shape_mismatch, std::string(kind) + " '" + want[i].name + "' must be " +
                                     dtype_name(want[i].dtype) + shape_str(want[i].shape) +
                                     ", got " + dtype_name(got[i].dtype()) +
                                     shape_str(got[i].shape()) + hint);
    if (!got[i].raw() && got[i].numel() > 0)
      fail(Code::invalid_argument, std::string(kind) + " '" + want[i].name + "' has no data");
  }
}

int64_t Session::batch_of(const std::vector<Tensor>& inputs) const {
  int64_t b = 0;
  bool other = inputs.size() == inputs_.size();
  for (size_t i = 0; i < inputs.size() && other; ++i) {
    const Shape& want = inputs_[i].shape;
    const Shape& got = inputs[i].shape();
    if (got.size() != want.size() ||
        !std::equal(got.begin() + !got.empty(), got.end(), want.begin() + !want.empty()))
      other = false;
    else if (!got.empty() && b == 0)
      b = got[0];
    else if (!got.empty() && got[0] != b)
      other = false;
  }
  if (other && b > 0 && b != batch_) return b;
  check_io("input", inputs_, inputs,
           other ? "" : " (only dim 0, the batch, may differ, the same in every input)");
  return batch_;
}

void require_static(const IoInfo& io) {
  if (io.dynamic)
    fail(Code::invalid_argument,
         "output '" + io.name +
             "' has a size each run decides (it follows an op such as NonMaxSuppression): run "
             "the model with outputs Kiln allocates (kiln_session_run_outputs)");
}

// Runs into caller buffers need every output's size before the run.
static void check_static(const std::vector<IoInfo>& outputs) {
  for (const IoInfo& io : outputs) require_static(io);
}

// The caller's inputs as the plan reads them (uint8 widened to float32, ...; graph/ir.h).
static std::vector<Tensor> held_inputs(const std::vector<Tensor>& inputs) {
  if (!any_narrow(inputs)) return inputs;
  std::vector<Tensor> held;
  for (const Tensor& t : inputs) held.push_back(to_held(t));
  return held;
}

// Runs into the caller's outputs; those of a boundary dtype (uint8, ...) through held copies.
void Session::run_planned(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                          RunProfile* profile) const {
  check_static(outputs_);
  check_io("output", outputs_, outputs);
  const std::vector<Tensor> in = held_inputs(inputs);
  if (!any_narrow(outputs)) return exec_->run(in, outputs, profile);
  std::vector<Tensor> held;
  for (const Tensor& t : outputs)
    held.push_back(held_dtype(t.dtype()) == t.dtype() ? t
                                                      : Tensor(held_dtype(t.dtype()), t.shape()));
  exec_->run(in, held, profile);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (held[i].dtype() != outputs[i].dtype()) narrow_into(held[i], outputs[i]);
}

void Session::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const {
  LogScope scope(log_level_);
  const int64_t b = batch_of(inputs);
  if (b != batch_) return at_batch(b)->run(inputs, outputs);
  run_planned(inputs, outputs, nullptr);
}

void Session::run_profiled(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                           RunProfile& profile) const {
  LogScope scope(log_level_);
  const int64_t b = batch_of(inputs);
  if (b != batch_) return at_batch(b)->run_profiled(inputs, outputs, profile);
  run_planned(inputs, outputs, &profile);
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs, RunProfile* profile) const {
  LogScope scope(log_level_);
  const int64_t b = batch_of(inputs);
  if (b != batch_) return at_batch(b)->run(inputs, profile);
  const std::vector<Tensor> held_in = held_inputs(inputs);
  std::vector<Tensor> planned;
  for (ValueId v : graph_.outputs)
    planned.emplace_back(graph_.value(v).dtype, graph_.value(v).shape);
  exec_->run(held_in, planned, profile);
  // Outputs of a boundary dtype (uint8, ...) narrowed from what the graph holds.
  auto narrowed = [&](std::vector<Tensor>& out) {
    for (size_t i = 0; i < out.size(); ++i)
      if (outputs_[i].dtype != out[i].dtype()) {
        Tensor t(outputs_[i].dtype, out[i].shape());
        narrow_into(out[i], t);
        out[i] = std::move(t);
      }
    return out;
  };
  if (!tail_) return narrowed(planned);
  const auto t0 = Clock::now();
  std::vector<Tensor> reads;
  for (const DynamicTail::Ref& r : tail_->reads)
    reads.push_back(r.kind == DynamicTail::Ref::model_input ? held_in[r.index] : planned[r.index]);
  const TailKernels* tk = tail_kernels_.get();
  const std::vector<Tensor> computed =
      run_tail(*tail_, reads,
               [tk](const Node& n, const std::vector<const Tensor*>& in,
                    const std::vector<Tensor*>& out) { (*tk)(n, in, out); });
  std::vector<Tensor> out;
  for (const DynamicTail::Ref& r : tail_->outputs)
    out.push_back(r.kind == DynamicTail::Ref::tail ? computed[r.index] : planned[r.index]);
  for (size_t i = 0; i < out.size(); ++i) {  // what the model declared for the dynamic ones
    const IoInfo& io = outputs_[i];
    bool fits = out[i].dtype() == held_dtype(io.dtype) &&
                (io.shape.empty() || io.shape.size() == out[i].shape().size());
    for (size_t d = 0; fits && d < io.shape.size(); ++d)
      fits = io.shape[d] < 0 || io.shape[d] == out[i].shape()[d];
    if (!fits)
      fail(Code::invalid_model, "output '" + io.name + "' was computed as " +
                                    dtype_name(out[i].dtype()) + shape_str(out[i].shape()) +
                                    ", but the model declares " + dtype_name(held_dtype(io.dtype)) +
                                    shape_str(io.shape));
  }
  if (profile) profile->tail_ms = ms_since(t0);
  return narrowed(out);
}

}  // namespace kiln
