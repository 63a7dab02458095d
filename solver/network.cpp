// NetworkProblem: operators and tensors -> PBQP instance (see network.h and pbqp.h).
#include "solver/network.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>

#include "graph/error.h"

namespace kiln {

namespace {

// Fan-out tensors get one PBQP label per set of layouts; keep that enumerable.
constexpr int max_candidate_layouts = 16;
constexpr int max_tensor_labels = 4096;

}  // namespace

void NetworkProblem::check_op(int op, const char* what) const {
  if (op < 0 || op >= num_ops())
    fail(Code::invalid_argument,
         std::string("network: ") + what + ": no operator " + std::to_string(op));
}

void NetworkProblem::check_tensor(int t, const char* what) const {
  if (t < 0 || t >= num_tensors())
    fail(Code::invalid_argument,
         std::string("network: ") + what + ": no tensor " + std::to_string(t));
}

int NetworkProblem::add_op(std::string name, std::vector<OpLabel> labels) {
  if (labels.empty()) fail(Code::invalid_argument, "op '" + name + "': no labels");
  for (size_t l = 0; l < labels.size(); ++l)
    check_pbqp_cost(labels[l].cost, "op '" + name + "' label " + std::to_string(l));
  ops_.push_back(Op{std::move(name), std::move(labels)});
  return num_ops() - 1;
}

int NetworkProblem::add_tensor(std::string name, int producer, int output_slot,
                               ConversionCost conv) {
  check_op(producer, "add_tensor");
  // Duplicate checks through maps: a linear scan per call made 100k-node graphs quadratic.
  auto [it, fresh] = output_tensor_.try_emplace({producer, output_slot}, num_tensors());
  if (!fresh)
    fail(Code::invalid_argument, "tensor '" + name + "': output " + std::to_string(output_slot) +
                                     " of op '" + ops_[size_t(producer)].name +
                                     "' is already tensor '" + tensors_[size_t(it->second)].name +
                                     "'");
  Tensor t;
  t.name = std::move(name);
  t.producer = producer;
  t.out_slot = output_slot;
  t.conv = std::move(conv);
  tensors_.push_back(std::move(t));
  return num_tensors() - 1;
}

int NetworkProblem::add_input(std::string name, int layout, ConversionCost conv) {
  if (layout < 0) fail(Code::invalid_argument, "tensor '" + name + "': layout must be >= 0");
  Tensor t;
  t.name = std::move(name);
  t.input_layout = layout;
  t.conv = std::move(conv);
  tensors_.push_back(std::move(t));
  return num_tensors() - 1;
}

void NetworkProblem::add_consumer(int tensor, int op, int input_slot) {
  check_tensor(tensor, "add_consumer");
  check_op(op, "add_consumer");
  Tensor& t = tensors_[size_t(tensor)];
  if (t.producer == op)
    fail(Code::invalid_argument,
         "op '" + ops_[size_t(op)].name + "' reads its own output '" + t.name + "'");
  auto [it, fresh] = input_tensor_.try_emplace({op, input_slot}, tensor);
  if (!fresh)
    fail(Code::invalid_argument, "op '" + ops_[size_t(op)].name + "': input " +
                                     std::to_string(input_slot) + " already reads tensor '" +
                                     tensors_[size_t(it->second)].name + "'");
  t.consumers.push_back(Consumer{op, input_slot});
}

void NetworkProblem::require_layout(int tensor, int layout) {
  check_tensor(tensor, "require_layout");
  Tensor& t = tensors_[size_t(tensor)];
  if (layout < 0) fail(Code::invalid_argument, "tensor '" + t.name + "': layout must be >= 0");
  t.required.push_back(layout);
}

void NetworkProblem::add_pair_saving(int tensor, int producer_label, int consumer_label,
                                     double saving) {
  check_tensor(tensor, "add_pair_saving");
  Tensor& t = tensors_[size_t(tensor)];
  if (!(saving > 0) || !std::isfinite(saving))
    fail(Code::invalid_argument, "tensor '" + t.name + "': a pair saving must be finite and > 0");
  t.savings.push_back({producer_label, consumer_label, saving});
}

double NetworkProblem::saving(const Tensor& t, int producer_label, int consumer_label) const {
  double s = 0;
  for (const Tensor::Saving& v : t.savings)
    if (v.producer_label == producer_label && v.consumer_label == consumer_label) s += v.ms;
  return s;
}

// Every label of every operator touching a tensor must name a layout for that slot.
void NetworkProblem::validate() const {
  // `layouts` is the label's in_layouts or out_layouts; `what` says which.
  auto check = [&](const Tensor& t, int op_index, int slot, auto layouts, const char* what) {
    const Op& op = ops_[size_t(op_index)];
    for (size_t l = 0; l < op.labels.size(); ++l) {
      const auto& ls = op.labels[l].*layouts;
      if (slot < 0 || size_t(slot) >= ls.size() || ls[size_t(slot)] < 0)
        fail(Code::invalid_argument, "op '" + op.name + "' label " + std::to_string(l) +
                                         ": no layout for " + what + " " + std::to_string(slot) +
                                         " (tensor '" + t.name + "')");
    }
  };
  for (const Tensor& t : tensors_) {
    if (!t.savings.empty() && (t.producer < 0 || t.consumers.size() != 1 || !t.required.empty()))
      fail(Code::invalid_argument,
           "tensor '" + t.name + "': a pair saving needs a producer and exactly one reader");
    for (const Tensor::Saving& v : t.savings)
      if (v.producer_label < 0 || v.producer_label >= num_labels(t.producer) ||
          v.consumer_label < 0 || v.consumer_label >= num_labels(t.consumers[0].op))
        fail(Code::invalid_argument, "tensor '" + t.name + "': a pair saving names no label");
    if (t.producer >= 0) check(t, t.producer, t.out_slot, &OpLabel::out_layouts, "output");
    for (const Consumer& c : t.consumers) check(t, c.op, c.slot, &OpLabel::in_layouts, "input");
  }
}

double NetworkProblem::conv_cost(const Tensor& t, int from, int to) const {
  if (from == to) return 0.0;
  if (!t.conv) return pbqp_inf;  // no conversion function: conversions do not exist
  const double c = t.conv(from, to);
  if (std::isnan(c) || c < 0.0)
    fail(Code::invalid_argument, "tensor '" + t.name + "': conversion " + std::to_string(from) +
                                     " -> " + std::to_string(to) + " costs " + std::to_string(c) +
                                     " (must be >= 0 or +inf)");
  return c;
}

int NetworkProblem::produced_layout(const Tensor& t, const std::vector<int>& op_labels) const {
  if (t.producer < 0) return t.input_layout;
  const OpLabel& l = ops_[size_t(t.producer)].labels[size_t(op_labels[size_t(t.producer)])];
  return l.out_layouts[size_t(t.out_slot)];
}

double NetworkProblem::evaluate(const std::vector<int>& op_labels,
                                std::vector<TensorPlan>* plans) const {
  validate();
  if (op_labels.size() != ops_.size())
    fail(Code::invalid_argument, "network: evaluate: " + std::to_string(op_labels.size()) +
                                     " labels for " + std::to_string(num_ops()) + " operators");
  double total = 0.0;
  for (int o = 0; o < num_ops(); ++o) {
    const int l = op_labels[size_t(o)];
    if (l < 0 || size_t(l) >= ops_[size_t(o)].labels.size())
      fail(Code::invalid_argument,
           "op '" + ops_[size_t(o)].name + "': no label " + std::to_string(l));
    total += ops_[size_t(o)].labels[size_t(l)].cost;
  }
  if (plans) plans->assign(tensors_.size(), TensorPlan{});
  for (size_t ti = 0; ti < tensors_.size(); ++ti) {
    const Tensor& t = tensors_[ti];
    const int p = produced_layout(t, op_labels);
    std::set<int> demanded(t.required.begin(), t.required.end());
    for (const Consumer& c : t.consumers)
      demanded.insert(
          ops_[size_t(c.op)].labels[size_t(op_labels[size_t(c.op)])].in_layouts[size_t(c.slot)]);
    demanded.erase(p);
    for (int l : demanded) total += conv_cost(t, p, l);
    if (!t.savings.empty())
      total -= saving(t, op_labels[size_t(t.producer)], op_labels[size_t(t.consumers[0].op)]);
    if (plans) (*plans)[ti] = TensorPlan{p, std::vector<int>(demanded.begin(), demanded.end())};
  }
  return total;
}

Pbqp NetworkProblem::build(NetworkMapping* map) const {
  validate();
  Pbqp p;
  NetworkMapping m;
  // Slots that matter per op; labels that agree on them differ only in cost.
  std::vector<std::vector<int>> in_slots(ops_.size()), out_slots(ops_.size());
  for (const Tensor& t : tensors_) {
    if (t.producer >= 0) out_slots[size_t(t.producer)].push_back(t.out_slot);
    for (const Consumer& c : t.consumers) in_slots[size_t(c.op)].push_back(c.slot);
  }
  m.op_label_of.resize(ops_.size());
  for (size_t o = 0; o < ops_.size(); ++o) {
    const Op& op = ops_[o];
    std::map<std::vector<int>, int> group;
    std::vector<int>& rep = m.op_label_of[o];
    for (int l = 0; l < int(op.labels.size()); ++l) {
      const OpLabel& lab = op.labels[size_t(l)];
      std::vector<int> key;
      for (int s : in_slots[o]) key.push_back(lab.in_layouts[size_t(s)]);
      for (int s : out_slots[o]) key.push_back(lab.out_layouts[size_t(s)]);
      auto [it, fresh] = group.emplace(key, int(rep.size()));
      if (fresh)
        rep.push_back(l);
      else if (lab.cost < op.labels[size_t(rep[size_t(it->second)])].cost)
        rep[size_t(it->second)] = l;
    }
    std::vector<double> costs;
    for (int l : rep) costs.push_back(op.labels[size_t(l)].cost);
    m.op_node.push_back(p.add_node(std::move(costs)));
  }
  auto in_of = [&](const Consumer& c, int k) {
    return ops_[size_t(c.op)]
        .labels[size_t(m.op_label_of[size_t(c.op)][size_t(k)])]
        .in_layouts[size_t(c.slot)];
  };
  auto out_of = [&](const Tensor& t, int k) {
    return ops_[size_t(t.producer)]
        .labels[size_t(m.op_label_of[size_t(t.producer)][size_t(k)])]
        .out_layouts[size_t(t.out_slot)];
  };
  auto nlab = [&](int op) { return int(m.op_label_of[size_t(op)].size()); };

  m.tensor_node.assign(tensors_.size(), -1);
  m.tensor_sets.resize(tensors_.size());
  for (size_t ti = 0; ti < tensors_.size(); ++ti) {
    const Tensor& t = tensors_[ti];
    std::map<std::pair<int, int>, double> cache;
    auto cc = [&](int from, int to) {
      auto [it, fresh] = cache.emplace(std::make_pair(from, to), 0.0);
      if (fresh) it->second = conv_cost(t, from, to);
      return it->second;
    };
    const int pn = t.producer >= 0 ? m.op_node[size_t(t.producer)] : -1;
    const size_t slots = t.consumers.size() + t.required.size();
    if (slots == 0) continue;
    if (slots == 1 && !t.consumers.empty()) {  // one reader: a plain conversion edge
      const Consumer& c = t.consumers[0];
      const int cn = m.op_node[size_t(c.op)];
      if (pn >= 0) {
        Matrix e(nlab(t.producer), nlab(c.op));
        // (A saving makes an entry negative: the solver normalises edges, so that is exact.)
        for (int a = 0; a < e.rows(); ++a)
          for (int b = 0; b < e.cols(); ++b)
            e(a, b) = cc(out_of(t, a), in_of(c, b)) -
                      saving(t, m.op_label_of[size_t(t.producer)][size_t(a)],
                             m.op_label_of[size_t(c.op)][size_t(b)]);
        p.add_edge(pn, cn, e);
      } else {
        std::vector<double> v(size_t(nlab(c.op)));
        for (int b = 0; b < nlab(c.op); ++b) v[size_t(b)] = cc(t.input_layout, in_of(c, b));
        p.add_node_costs(cn, v);
      }
      continue;
    }
    if (slots == 1) {  // only a required output layout
      const int want = t.required[0];
      if (pn < 0) {
        m.constant += cc(t.input_layout, want);
      } else {
        std::vector<double> v(size_t(nlab(t.producer)));
        for (int a = 0; a < nlab(t.producer); ++a) v[size_t(a)] = cc(out_of(t, a), want);
        p.add_node_costs(pn, v);
      }
      continue;
    }
    // Fan-out: a node whose labels are the sets of layouts the tensor is made available in.
    std::set<int> cand(t.required.begin(), t.required.end());
    for (const Consumer& c : t.consumers)
      for (int b = 0; b < nlab(c.op); ++b) cand.insert(in_of(c, b));
    const std::vector<int> layouts(cand.begin(), cand.end());
    if (layouts.size() > size_t(max_candidate_layouts))
      fail(Code::unsupported, "tensor '" + t.name + "': " + std::to_string(layouts.size()) +
                                  " candidate layouts (at most " +
                                  std::to_string(max_candidate_layouts) + ")");
    uint32_t must = 0;
    for (int r : t.required)
      must |= 1u << (std::lower_bound(layouts.begin(), layouts.end(), r) - layouts.begin());
    std::vector<uint32_t> sets;
    for (uint32_t s = 1; s < (1u << layouts.size()); ++s)
      if ((s & must) == must && size_t(std::popcount(s)) <= slots) sets.push_back(s);
    if (sets.size() > size_t(max_tensor_labels))
      fail(Code::unsupported, "tensor '" + t.name + "': " + std::to_string(sets.size()) +
                                  " layout sets (at most " + std::to_string(max_tensor_labels) +
                                  ")");
    auto has = [&](uint32_t s, int layout) {
      auto it = std::lower_bound(layouts.begin(), layouts.end(), layout);
      return it != layouts.end() && *it == layout && (s >> (it - layouts.begin()) & 1u);
    };
    // Conversions from `from` to every layout of the set, each paid once.
    auto set_cost = [&](uint32_t s, int from) {
      double c = 0.0;
      for (size_t k = 0; k < layouts.size(); ++k)
        if (s >> k & 1u) c += cc(from, layouts[k]);
      return c;
    };
    std::vector<double> tv(sets.size(), 0.0);
    auto& names = m.tensor_sets[ti];
    for (size_t k = 0; k < sets.size(); ++k) {
      names.emplace_back();
      for (size_t b = 0; b < layouts.size(); ++b)
        if (sets[k] >> b & 1u) names.back().push_back(layouts[b]);
      if (pn < 0) tv[k] = set_cost(sets[k], t.input_layout);
    }
    const int tn = p.add_node(tv);
    m.tensor_node[ti] = tn;
    if (pn >= 0) {
      Matrix e(nlab(t.producer), int(sets.size()));
      for (int a = 0; a < e.rows(); ++a)
        for (int k = 0; k < e.cols(); ++k) e(a, k) = set_cost(sets[size_t(k)], out_of(t, a));
      p.add_edge(pn, tn, e);
    }
    for (const Consumer& c : t.consumers) {
      Matrix e(int(sets.size()), nlab(c.op));
      for (int k = 0; k < e.rows(); ++k)
        for (int b = 0; b < e.cols(); ++b)
          e(k, b) = has(sets[size_t(k)], in_of(c, b)) ? 0.0 : pbqp_inf;
      p.add_edge(tn, m.op_node[size_t(c.op)], e);
    }
  }
  if (map) *map = std::move(m);
  return p;
}

NetworkSolution NetworkProblem::solve(const SolveOptions& opts) const {
  NetworkMapping m;
  const Pbqp p = build(&m);
  const Solution s = p.solve(opts);
  NetworkSolution out;
  for (int o = 0; o < num_ops(); ++o)
    out.op_labels.push_back(
        m.op_label_of[size_t(o)][size_t(s.labels[size_t(m.op_node[size_t(o)])])]);
  // The operator-level cost of the chosen labels; at the PBQP optimum it equals the PBQP
  // total (each tensor node then holds exactly the layouts its consumers read).
  out.total = evaluate(out.op_labels, &out.tensors);
  out.feasible = out.total < pbqp_inf;
  out.optimal = s.optimal;
  out.stats = s.stats;
  out.pbqp_nodes = p.num_nodes();
  out.pbqp_edges = p.num_edges();
  return out;
}

}  // namespace kiln
