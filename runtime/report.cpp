// JSON reports on a session and the machine (see report.h).
#include "runtime/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "graph/dynamic.h"
#include "jit/cpu.h"
#include "jit/layout.h"
#include "runtime/executor.h"
#include "runtime/plan.h"
#include "runtime/selection.h"
#include "runtime/tuning_cache.h"

namespace kiln {
namespace {

// A finite number as JSON ("%.6f" keeps milliseconds to the nanosecond); JSON has no NaN/Inf.
std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", x);
  return buf;
}

const char* boolean(bool b) {
  return b ? "true" : "false";
}

}  // namespace

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  double pos = std::clamp(p, 0.0, 100.0) / 100.0 * double(xs.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, xs.size() - 1);
  double frac = pos - double(lo);
  return xs[lo] + (xs[hi] - xs[lo]) * frac;
}

std::string machine_json() {
  const CpuInfo& c = host_cpu();
  std::ostringstream o;
  o << "{\"cpu\": " << json_escape(c.brand) << ", \"vendor\": " << json_escape(c.vendor)
    << ", \"family\": " << c.family << ", \"model\": " << c.model
    << ", \"stepping\": " << c.stepping << ", \"isa\": " << json_escape(isa_name(c.isa))
    << ", \"features\": [";
  const auto features = c.extra_features();
  for (size_t i = 0; i < features.size(); ++i) o << (i ? ", " : "") << json_escape(features[i]);
  o << "], \"cores\": " << c.cores << ", \"cache\": {\"l1d\": " << c.cache.l1d
    << ", \"l2\": " << c.cache.l2 << ", \"l3\": " << c.cache.l3
    << ", \"reported\": " << boolean(c.cache_reported)
    << "}, \"kiln_version\": " << json_escape(KILN_VERSION)
    << ", \"build_id\": " << json_escape(kiln_build_id()) << "}";
  return o.str();
}

std::vector<Tensor> random_inputs(const Session& s) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Tensor> ins;
  for (const IoInfo& io : s.inputs()) {
    Tensor t(io.dtype, io.shape);
    if (io.dtype == DType::f32) {
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
    }
    ins.push_back(std::move(t));
  }
  return ins;
}

std::string step_op(const Session& s, const Step& st) {
  return st.node >= 0 ? s.graph().nodes[size_t(st.node)].op : "(convert)";
}

// The plan node a step runs, or for an inserted conversion the tensor it converts.
std::string step_node(const Session& s, const Step& st) {
  if (st.node >= 0) return s.graph().nodes[size_t(st.node)].name;
  return s.graph().value(s.plan().tensors[size_t(st.src[0])].value).name;
}

double step_pred_ms(const Session& s, const Step& st) {
  if (st.node < 0) return 0;
  const Selection& sel = s.selection();
  auto ms = [&](int n) { return sel.nodes[size_t(n)].ms; };
  auto in_step = [&](int n) {
    return n == st.node || std::count(st.fused_nodes.begin(), st.fused_nodes.end(), n) > 0;
  };
  // A chain: its nodes' times less the savings of its pairs (the solver's price).
  double t = ms(st.node);
  for (int n : st.fused_nodes) t += ms(n);
  if (!st.fused_nodes.empty())
    for (const SeparablePair& q : sel.separable)
      if (in_step(q.dw) && in_step(q.pw)) t -= ms(q.dw) + ms(q.pw) - q.ms;
  return t;
}

bool is_reference_step(const Session& s, const Step& st) {
  return st.node >= 0 && s.selection().nodes[size_t(st.node)].label.kind == LabelKind::ref;
}

std::string step_layouts(const Plan& p, const Step& st) {
  auto layout_of = [&](int t) { return t < 0 ? "-" : layout_name(p.tensors[size_t(t)].layout); };
  return std::string(st.src.empty() ? "-" : layout_of(st.src[0])) + ">" +
         (st.dst.empty() ? "-" : layout_of(st.dst[0]));
}

const char* choice_source(const NodeChoice& c) {
  return c.cached ? "cache" : c.measured ? "measured" : c.over_budget ? "budget" : "model";
}

std::string plan_json(const Session& s) {
  const Plan& p = s.plan();
  const Graph& g = s.graph();
  const Selection& sel = s.selection();
  const LoadStats& ls = s.load_stats();
  std::ostringstream o;
  int conversions = 0;
  for (const Step& st : p.steps) conversions += st.node < 0;
  o << "{\"isa\": " << json_escape(isa_name(s.isa())) << ", \"threads\": " << s.threads()
    << ", \"strategy\": " << json_escape(strategy_name(sel.strategy))
    << ", \"tune\": " << json_escape(tune_mode_name(sel.tune))
    << ", \"accuracy\": " << json_escape(accuracy_name(sel.accuracy))
    << ", \"precision\": " << json_escape(precision_name(sel.precision))
    << ", \"accuracy_summary\": " << json_escape(accuracy_summary(sel))
    << ", \"predicted_ms\": " << num(sel.predicted_ms) << ", \"optimal\": " << boolean(sel.optimal)
    << ", \"solve_ms\": " << num(sel.solve_ms) << ", \"pbqp_nodes\": " << sel.pbqp_nodes
    << ", \"pbqp_edges\": " << sel.pbqp_edges << ", \"cache_hits\": " << sel.cache_hits
    << ", \"cache_misses\": " << sel.cache_misses
    << ", \"plan_from_cache\": " << boolean(sel.plan_from_cache)
    << ", \"measurements\": " << sel.measurements << ", \"sampled\": " << sel.sampled
    << ", \"profile_ms\": " << num(sel.profile_ms)
    << ", \"profile_budget_ms\": " << num(sel.profile_budget_ms)
    << ", \"over_budget\": " << sel.over_budget << ", \"nodes\": " << g.nodes.size()
    << ", \"conversions\": " << conversions << ", \"inplace_concats\": " << p.inplace_concats
    << ", \"load_ms\": {\"total\": " << num(ls.total_ms) << ", \"parse\": " << num(ls.parse_ms)
    << ", \"passes\": " << num(ls.passes_ms) << ", \"plan\": " << num(ls.plan_ms)
    << ", \"profile\": " << num(ls.profile_ms) << ", \"solve\": " << num(ls.solve_ms)
    << ", \"jit\": " << num(ls.jit_ms) << ", \"pack\": " << num(ls.pack_ms) << "}"
    << ", \"arena_bytes\": " << p.run_bytes(s.threads());
  // The nodes run per run after the plan (graph/dynamic.h): how many, from which on.
  if (const DynamicTail* t = s.tail())
    o << ", \"tail\": {\"nodes\": " << t->graph.nodes.size()
      << ", \"first\": " << json_escape(t->first) << "}";
  else
    o << ", \"tail\": null";
  o << ", \"steps\": [";
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& st = p.steps[i];
    o << (i ? ",\n  " : "\n  ") << "{\"step\": " << i
      << ", \"node\": " << json_escape(step_node(s, st))
      << ", \"op\": " << json_escape(step_op(s, st));
    if (st.node >= 0) {
      const NodeChoice& c = sel.nodes[size_t(st.node)];
      o << ", \"label\": " << json_escape(c.label.key())
        << ", \"family\": " << json_escape(label_family(c.label))
        << ", \"pred_ms\": " << num(step_pred_ms(s, st))
        << ", \"source\": " << json_escape(choice_source(c));
      if (!st.fused_nodes.empty()) {
        o << ", \"fused\": [";
        for (size_t k = 0; k < st.fused_nodes.size(); ++k)
          o << (k ? ", " : "") << json_escape(s.graph().nodes[size_t(st.fused_nodes[k])].name);
        o << "]";
      }
    } else {
      o << ", \"label\": \"\", \"family\": \"convert\", \"pred_ms\": null, \"source\": \"-\"";
    }
    o << ", \"layouts\": " << json_escape(step_layouts(p, st))
      << ", \"kernel\": " << json_escape(st.kernel->name()) << "}";
  }
  o << "\n]}";
  return o.str();
}

std::vector<Tensor> make_outputs(const Session& s) {
  std::vector<Tensor> outs;
  if (s.tail()) return outs;
  for (const IoInfo& io : s.outputs()) outs.emplace_back(io.dtype, io.shape);
  return outs;
}

void run_into(const Session& s, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
              RunProfile* profile) {
  if (s.tail())
    outputs = s.run(inputs, profile);
  else if (profile)
    s.run_profiled(inputs, outputs, *profile);
  else
    s.run(inputs, outputs);
}

LayerProfile profile_layers(const Session& s, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>& outputs, int runs) {
  const Plan& plan = s.plan();
  std::vector<std::vector<double>> samples(plan.steps.size());
  std::vector<double> tail;
  RunProfile prof;
  LayerProfile lp;
  lp.runs = std::max(runs, 1);
  for (int r = 0; r < lp.runs; ++r) {
    run_into(s, inputs, outputs, &prof);
    for (size_t i = 0; i < prof.step_ms.size() && i < samples.size(); ++i)
      samples[i].push_back(prof.step_ms[i]);
    tail.push_back(prof.tail_ms);
  }
  lp.ms.resize(plan.steps.size());
  for (size_t i = 0; i < lp.ms.size(); ++i) {
    lp.total_ms += lp.ms[i] = percentile(samples[i], 50);
    if (is_reference_step(s, plan.steps[i])) lp.reference_ms += lp.ms[i];
  }
  lp.tail_ms = percentile(tail, 50);
  lp.total_ms += lp.tail_ms;
  lp.reference_ms += lp.tail_ms;
  return lp;
}

std::string layers_json(const Session& s, const LayerProfile& lp) {
  const Plan& plan = s.plan();
  std::ostringstream js;
  js << "[";
  for (size_t i = 0; i < plan.steps.size() && i < lp.ms.size(); ++i) {
    const Step& st = plan.steps[i];
    const double macs = st.kernel->macs(), ms = lp.ms[i];
    js << (i ? ",\n    " : "\n    ") << "{\"step\": " << i
       << ", \"node\": " << json_escape(step_node(s, st))
       << ", \"op\": " << json_escape(step_op(s, st))
       << ", \"kernel\": " << json_escape(st.kernel->name())
       << ", \"layouts\": " << json_escape(step_layouts(plan, st)) << ", \"ms\": " << num(ms)
       << ", \"gflop_per_s\": " << num(macs > 0 && ms > 0 ? 2.0 * macs / (ms * 1e6) : 0.0)
       << ", \"tiles\": " << st.kernel->tiles()
       << ", \"reference\": " << boolean(is_reference_step(s, st)) << "}";
  }
  js << "\n  ]";
  return js.str();
}

std::string profile_json(const Session& s, const LayerProfile& lp) {
  std::ostringstream o;
  o << "{\"runs\": " << lp.runs << ", \"total_ms\": " << num(lp.total_ms)
    << ", \"reference_ms\": " << num(lp.reference_ms) << ", \"tail_ms\": " << num(lp.tail_ms)
    << ", \"layers\": " << layers_json(s, lp) << "}";
  return o.str();
}

}  // namespace kiln
