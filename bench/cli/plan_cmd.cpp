// `kiln plan`: what the selection chose per node, the conversions the plan inserted, and a
// Graphviz picture of it.
#include <cstdio>
#include <fstream>
#include <map>

#include "cli.h"
#include "runtime/plan.h"
#include "runtime/selection.h"

namespace kiln::cli {
namespace {

const char* family_colour(const std::string& f) {
  static const std::map<std::string, const char*> colours = {
      {"direct", "#8dd3c7"},    {"gemm1x1", "#ffffb3"},   {"depthwise", "#bebada"},
      {"winograd2", "#fb8072"}, {"winograd4", "#fdb462"}, {"im2col", "#80b1d3"},
      {"fc", "#b3de69"},        {"pool", "#fccde5"},      {"concat", "#d9d9d9"},
      {"eltwise", "#bc80bd"},   {"ref", "#ffffff"},       {"convert", "#ff9999"}};
  auto it = colours.find(f);
  return it == colours.end() ? "#ffffff" : it->second;
}

// Text for a quoted DOT label: quotes and backslashes escaped (a backslash is an escape in a
// label: "\\n" would break the line), newlines as line breaks.
std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// A label of several lines: each part escaped, joined by DOT's line break "\n".
std::string dot_lines(const std::vector<std::string>& parts) {
  std::string o;
  for (size_t i = 0; i < parts.size(); ++i) o += (i ? "\\n" : "") + dot_escape(parts[i]);
  return o;
}

void write_dot(const Session& s, const std::string& path) {
  const Plan& p = s.plan();
  const Graph& g = s.graph();
  std::ofstream f(path, std::ios::trunc);
  if (!f) fail(Code::io_error, "cannot create '" + path + "'");
  f << "digraph kiln_plan {\n  rankdir=TB;\n  node [shape=box, style=filled, "
       "fontname=\"Helvetica\"];\n";
  std::vector<int> writer(p.tensors.size(), -1);
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (int t : p.steps[i].dst)
      if (t >= 0) writer[size_t(t)] = int(i);
  for (size_t i = 0; i < p.inputs.size(); ++i)
    f << "  in" << p.inputs[i] << " [label=\""
      << dot_escape(g.value(p.tensors[size_t(p.inputs[i])].value).name)
      << "\", shape=ellipse, fillcolor=\"#eeeeee\"];\n";
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& st = p.steps[i];
    std::string fam = "convert";
    std::vector<std::string> text;
    if (st.node >= 0) {
      const NodeChoice& c = s.selection().nodes[size_t(st.node)];
      const Node& n = g.nodes[size_t(st.node)];
      fam = label_family(c.label);
      char ms[48];
      std::snprintf(ms, sizeof ms, "%.3f ms (%s)", c.ms, choice_source(c));
      text = {n.name, n.op + " " + c.label.key(), ms};
    } else {
      text = {"convert " + std::string(layout_name(p.tensors[size_t(st.src[0])].layout)) + " > " +
              layout_name(p.tensors[size_t(st.dst[0])].layout)};
    }
    f << "  s" << i << " [label=\"" << dot_lines(text) << "\", fillcolor=\"" << family_colour(fam)
      << "\"];\n";
    for (int t : st.src) {
      if (t < 0) continue;
      const PlanTensor& pt = p.tensors[size_t(t)];
      if (g.value(pt.value).is_const()) continue;
      const bool step = writer[size_t(t)] >= 0;  // else a graph input
      f << "  " << (step ? "s" : "in") << (step ? writer[size_t(t)] : t) << " -> s" << i
        << " [label=\"" << layout_name(pt.layout) << "\"];\n";
    }
  }
  for (int t : p.outputs)
    if (writer[size_t(t)] >= 0)
      f << "  out" << t << " [label=\"" << dot_escape(g.value(p.tensors[size_t(t)].value).name)
        << "\", shape=ellipse, fillcolor=\"#eeeeee\"];\n  s" << writer[size_t(t)] << " -> out" << t
        << " [label=\"" << layout_name(p.tensors[size_t(t)].layout) << "\"];\n";
  f << "}\n";
  f.close();
  if (!f) fail(Code::io_error, "cannot write '" + path + "'");
}

}  // namespace

int cmd_plan(const Args& a) {
  auto s = Session::load_file(a.model, session_options(a));
  const Plan& p = s->plan();
  const Graph& g = s->graph();
  const Selection& sel = s->selection();
  std::printf("model: %s\nisa: %s  threads: %d  strategy: %s  tune: %s\n", a.model.c_str(),
              isa_name(s->isa()), s->threads(), strategy_name(sel.strategy),
              tune_mode_name(sel.tune));
  std::printf("%s\n", accuracy_summary(sel).c_str());
  std::printf("%-32s %-18s %-34s %10s %-8s %s\n", "node", "op", "label", "pred_ms", "source",
              "kernel");
  int conversions = 0;
  for (const Step& st : p.steps) {
    if (st.node < 0) {
      const PlanTensor& from = p.tensors[size_t(st.src[0])];
      const PlanTensor& to = p.tensors[size_t(st.dst[0])];
      std::printf("%-32s %-18s %-34s %10s %-8s %s\n", ("  " + g.value(from.value).name).c_str(),
                  "(convert)",
                  (std::string(layout_name(from.layout)) + " > " + layout_name(to.layout)).c_str(),
                  "", "", st.kernel->name().c_str());
      ++conversions;
      continue;
    }
    const NodeChoice& c = sel.nodes[size_t(st.node)];
    const Node& n = g.nodes[size_t(st.node)];
    std::printf("%-32s %-18s %-34s %10.4f %-8s %s\n", n.name.c_str(), n.op.c_str(),
                c.label.key().c_str(), step_pred_ms(*s, st), choice_source(c),
                st.kernel->name().c_str());
  }
  std::printf(
      "\n%zu nodes, %d layout conversions, %d concats done in place by their producers; predicted "
      "%.3f ms%s; solve %.2f ms (%d PBQP "
      "nodes, %d edges); cache %lld hits / %lld misses%s\n",
      g.nodes.size(), conversions, p.inplace_concats, sel.predicted_ms,
      sel.optimal ? " (proven optimal)" : "", sel.solve_ms, sel.pbqp_nodes, sel.pbqp_edges,
      (long long)sel.cache_hits, (long long)sel.cache_misses,
      sel.plan_from_cache ? "; plan from the cache" : "");
  if (!sel.plan_from_cache && sel.tune != TuneMode::none) {
    std::printf(
        "profiling: %d measurements (%d on a sample of the tiles) in %.0f ms (budget "
        "%.0f ms)",
        sel.measurements, sel.sampled, sel.profile_ms, sel.profile_budget_ms);
    if (sel.over_budget)
      std::printf("; budget reached: %d nodes keep the cost model's choice (source 'budget')",
                  sel.over_budget);
    std::printf("\n");
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json, std::ios::trunc);
    f << plan_json(*s) << "\n";
    f.close();
    if (!f) fail(Code::io_error, "cannot write '" + a.json + "'");
    std::printf("wrote %s\n", a.json.c_str());
  }
  if (!a.dot.empty()) {
    write_dot(*s, a.dot);
    std::printf("wrote %s\n", a.dot.c_str());
  }
  return 0;
}

}  // namespace kiln::cli
