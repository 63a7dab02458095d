// Einsum: equation parsing, shape inference and the rewrite into Transpose / ReduceSum /
// Reshape / MatMul (graph/einsum.h).
#include "graph/einsum.h"

#include <algorithm>
#include <cctype>

#include "graph/infer.h"
#include "graph/infer_util.h"
#include "graph/passes.h"

namespace kiln {

namespace {

constexpr int kMaxEllipsisDims = 10;  // labels '0'..'9'

bool is_ellipsis_label(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

EinsumSpec einsum_spec(const Node& n, const std::vector<Shape>& shapes) {
  std::string eq;
  for (char c : n.attr_s("equation", ""))
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  if (eq.empty()) n.fail(Code::invalid_model, "has no equation");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',')
      terms.emplace_back();
    else
      terms.back() += c;
  }
  if (terms.size() != shapes.size())
    n.fail(Code::invalid_model, "equation '" + eq + "' names " + std::to_string(terms.size()) +
                                    " operands but the node has " + std::to_string(shapes.size()) +
                                    " inputs");
  // A term's letters around its optional ellipsis.
  struct Term {
    std::string before, after;
    bool ellipsis = false;
  };
  auto split = [&](const std::string& t, const char* what) {
    Term r;
    const size_t e = t.find("...");
    r.ellipsis = e != std::string::npos;
    r.before = t.substr(0, r.ellipsis ? e : t.size());
    r.after = r.ellipsis ? t.substr(e + 3) : "";
    for (char c : r.before + r.after)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        n.fail(Code::invalid_model, std::string("equation '") + eq + "': " + what + " '" + t +
                                        "' holds '" + c + "' (labels are letters, plus one '...')");
    return r;
  };
  std::vector<Term> parsed;
  int64_t E = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    parsed.push_back(split(terms[i], "operand"));
    const Term& t = parsed.back();
    const int64_t named = int64_t(t.before.size() + t.after.size()), r = int64_t(shapes[i].size());
    if ((!t.ellipsis && named != r) || (t.ellipsis && named > r))
      n.fail(Code::invalid_model, "equation '" + eq + "': operand " + std::to_string(i) + " '" +
                                      terms[i] + "' does not fit its shape " +
                                      shape_str(shapes[i]));
    if (t.ellipsis) E = std::max(E, r - named);
  }
  if (E > kMaxEllipsisDims)
    n.fail(Code::unsupported, "an ellipsis of more than 10 dims is not supported");
  EinsumSpec s;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = parsed[i];
    const int64_t e = int64_t(shapes[i].size() - t.before.size() - t.after.size());
    std::string labels = t.before;
    for (int64_t j = E - (t.ellipsis ? e : 0); j < E && t.ellipsis; ++j) labels += char('0' + j);
    labels += t.after;
    for (size_t d = 0; d < labels.size(); ++d) {
      const char c = labels[d];
      const int64_t dim = shapes[i][d];
      auto it = s.size.find(c);
      if (it == s.size.end()) {
        s.size[c] = dim;
      } else if (it->second != dim) {
        if (is_ellipsis_label(c) && (it->second == 1 || dim == 1))
          it->second = std::max(it->second, dim);
        else
          n.fail(Code::invalid_model,
                 "equation '" + eq + "': label '" +
                     (is_ellipsis_label(c) ? std::string("...") : std::string(1, c)) +
                     "' has sizes " + std::to_string(it->second) + " and " + std::to_string(dim));
      }
    }
    s.in.push_back(labels);
  }
  std::string ell;
  for (int64_t j = 0; j < E; ++j) ell += char('0' + j);
  if (arrow != std::string::npos) {
    const Term t = split(eq.substr(arrow + 2), "output");
    s.out = t.before + (t.ellipsis ? ell : "") + t.after;
    for (size_t d = 0; d < s.out.size(); ++d) {
      const char c = s.out[d];
      if (!s.size.count(c))
        n.fail(Code::invalid_model,
               "equation '" + eq + "': output label '" + c + "' is in no operand");
      if (s.out.find(c) != d)
        n.fail(Code::invalid_model, "equation '" + eq + "': output label '" + c + "' repeats");
    }
  } else {  // implicit: the ellipsis, then the letters seen once, in alphabetical order
    std::map<char, int> count;
    for (const std::string& l : s.in)
      for (char c : l) ++count[c];
    s.out = ell;
    for (const auto& [c, k] : count)
      if (k == 1 && !is_ellipsis_label(c)) s.out += c;
  }
  return s;
}

namespace infer_detail {

void infer_einsum(Graph& g, Node& n) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    expect_dtype(g, n, i, DType::f32, Code::unsupported);
    shapes.push_back(input(g, n, i).shape);
  }
  const EinsumSpec s = einsum_spec(n, shapes);
  Shape out;
  for (char c : s.out) out.push_back(s.size.at(c));
  set_output(g, n, 0, DType::f32, out);
}

}  // namespace infer_detail

namespace {

// One operand on its way through the rewrite: its value and the label of each dim.
struct Operand {
  ValueId v;
  std::string labels;
};

class EinsumRewriter {
 public:
  EinsumRewriter(Graph& g, std::vector<Node>& nodes, const Node& n) : g_(g), nodes_(nodes), n_(n) {}

  // Sums the dims whose labels are in `drop` (keepdims 0).
  void reduce(Operand& x, const std::string& drop) {
    std::vector<int64_t> axes;
    std::string kept;
    for (size_t d = 0; d < x.labels.size(); ++d) {
      if (drop.find(x.labels[d]) != std::string::npos)
        axes.push_back(int64_t(d));
      else
        kept += x.labels[d];
    }
    if (axes.empty()) return;
    Node r = make("ReduceSum");
    r.inputs = {x.v, g_.add_const(unique_value_name(g_, n_.name + "_axes"), ints_tensor(axes))};
    r.attrs["keepdims"] = attr_i(0);
    x = {emit_node(g_, nodes_, std::move(r), n_.name + "_sum"), kept};
  }

  // Permutes x's dims into the label order `want` (a permutation of x.labels).
  void transpose(Operand& x, const std::string& want, ValueId out = kNoValue) {
    if (want == x.labels && out == kNoValue) return;
    std::vector<int64_t> perm;
    for (char c : want) perm.push_back(int64_t(x.labels.find(c)));
    Node t = make("Transpose");
    t.inputs = {x.v};
    t.attrs["perm"] = attr_ints(perm);
    x = {emit_node(g_, nodes_, std::move(t), n_.name + "_t", out), want};
  }

  ValueId reshape(ValueId x, const Shape& shape, ValueId out = kNoValue) {
    if (g_.value(x).shape == shape && out == kNoValue) return x;
    Node r = make("Reshape");
    r.inputs = {x, g_.add_const(unique_value_name(g_, n_.name + "_shape"), ints_tensor(shape))};
    return emit_node(g_, nodes_, std::move(r), n_.name + "_r", out);
  }

  ValueId matmul(ValueId a, ValueId b, ValueId out = kNoValue) {
    Node m = make("MatMul");
    m.inputs = {a, b};
    return emit_node(g_, nodes_, std::move(m), n_.name + "_mm", out);
  }

  Node make(const std::string& op) const {
    Node x;
    x.name = n_.name + "_" + op;
    x.op = op;
    return x;
  }

  int64_t dim(const Operand& x, char c) const { return g_.value(x.v).shape[x.labels.find(c)]; }

  // A label repeated within x (a diagonal, "ii->i"): x times the identity over the two dims,
  // summed over the second, until every label is x's once.
  void diagonals(Operand& x) {
    for (size_t d2 = 0; d2 < x.labels.size(); ++d2) {
      const size_t d1 = x.labels.find(x.labels[d2]);
      if (d1 == d2) continue;
      const Shape xs = g_.value(x.v).shape;
      Shape ms(xs.size(), 1);
      ms[d1] = ms[d2] = xs[d1];
      Tensor eye(DType::f32, ms);  // (zero-filled)
      const int64_t s1 = shape_numel(Shape(ms.begin() + int64_t(d1) + 1, ms.end()));
      const int64_t s2 = shape_numel(Shape(ms.begin() + int64_t(d2) + 1, ms.end()));
      for (int64_t i = 0; i < xs[d1]; ++i) eye.data<float>()[i * s1 + i * s2] = 1.f;
      Node m = make("Mul");
      m.inputs = {x.v, g_.add_const(unique_value_name(g_, n_.name + "_eye"), std::move(eye))};
      x.v = emit_node(g_, nodes_, std::move(m), n_.name + "_diag");
      Node r = make("ReduceSum");
      r.inputs = {
          x.v, g_.add_const(unique_value_name(g_, n_.name + "_axes"), ints_tensor({int64_t(d2)}))};
      r.attrs["keepdims"] = attr_i(0);
      x.v = emit_node(g_, nodes_, std::move(r), n_.name + "_sum");
      x.labels.erase(d2, 1);
      d2 = 0;  // (rescan: the labels moved; position 0 is never a repeat)
    }
  }

 private:
  Graph& g_;
  std::vector<Node>& nodes_;
  const Node& n_;
};

bool has(const std::string& s, char c) {
  return s.find(c) != std::string::npos;
}

// Operand a times b (labels not in `keep` and in both summed: a MatMul over them), the result's
// labels the batch, a-only, b-only labels in `keep`'s order; written into y (in `keep`'s order)
// when y is given.
Operand contract(EinsumRewriter& r, const EinsumSpec& s, Operand a, Operand b,
                 const std::string& keep, ValueId y) {
  std::string batch, m, nn, k;
  for (char c : keep) {
    if (has(a.labels, c) && has(b.labels, c))
      batch += c;
    else if (has(a.labels, c))
      m += c;
    else if (has(b.labels, c))
      nn += c;
  }
  for (char c : a.labels)
    if (has(b.labels, c) && !has(keep, c)) k += c;
  auto prod = [&](const Operand& x, const std::string& ls) {
    int64_t p = 1;
    for (char c : ls) p *= r.dim(x, c);
    return p;
  };
  auto batch_dims = [&](const Operand& x) {
    Shape d;
    for (char c : batch) d.push_back(r.dim(x, c));
    return d;
  };
  r.transpose(a, batch + m + k);
  r.transpose(b, batch + k + nn);
  Shape sa = batch_dims(a), sb = batch_dims(b);
  sa.push_back(prod(a, m));
  sa.push_back(prod(a, k));
  sb.push_back(prod(b, k));
  sb.push_back(prod(b, nn));
  Shape full;
  for (char c : batch + m + nn) full.push_back(s.size.at(c));
  // One label each side and already in the output's order (attention's "bhid,bhjd->bhij"): the
  // MatMul's output is y itself - no identity Reshape between it and its consumer, which would
  // hide the pattern from the attention fusion (graph/rewrites.cpp).
  if (y != kNoValue && m.size() == 1 && nn.size() == 1 && batch + m + nn == keep)
    return {r.matmul(r.reshape(a.v, sa), r.reshape(b.v, sb), y), keep};
  const ValueId mm = r.matmul(r.reshape(a.v, sa), r.reshape(b.v, sb));
  if (y == kNoValue) return {r.reshape(mm, full), batch + m + nn};
  if (batch + m + nn == keep) return {r.reshape(mm, full, y), keep};
  Operand out{r.reshape(mm, full), batch + m + nn};
  r.transpose(out, keep, y);
  return out;
}

// The rewrite of one Einsum; false (nothing emitted) where it does not apply.
bool rewrite_one(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.inputs.empty() || n.outputs.size() != 1) return false;
  std::vector<Shape> shapes;
  for (ValueId v : n.inputs) {
    if (v == kNoValue || g.value(v).dtype != DType::f32) return false;
    shapes.push_back(g.value(v).shape);
  }
  const EinsumSpec s = einsum_spec(n, shapes);
  // A summed label must have one size wherever it appears: a summed dim is not broadcast.
  for (const auto& [c, size] : s.size) {
    if (has(s.out, c)) continue;
    for (size_t i = 0; i < s.in.size(); ++i)
      for (size_t d = 0; d < s.in[i].size(); ++d)
        if (s.in[i][d] == c && shapes[i][d] != size) return false;
  }
  EinsumRewriter r(g, nodes, n);
  std::vector<Operand> ops;
  for (size_t i = 0; i < n.inputs.size(); ++i) ops.push_back({n.inputs[i], s.in[i]});
  for (Operand& x : ops) r.diagonals(x);
  // Labels neither the output nor another operand has are summed first.
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string needed = s.out;
    for (size_t j = 0; j < ops.size(); ++j)
      if (j != i) needed += ops[j].labels;
    std::string drop;
    for (char c : ops[i].labels)
      if (!has(needed, c)) drop += c;
    r.reduce(ops[i], drop);
  }
  const ValueId y = n.outputs[0];
  if (ops.size() == 1) {
    if (ops[0].labels != s.out) {
      r.transpose(ops[0], s.out, y);
    } else {
      r.reshape(ops[0].v, g.value(y).shape, y);  // a plain copy (only a sum or nothing)
    }
    return true;
  }
  // Left to right, two operands at a time; an intermediate keeps the labels the output or a
  // later operand has.
  Operand acc = ops[0];
  for (size_t j = 1; j < ops.size(); ++j) {
    if (j + 1 == ops.size()) {
      contract(r, s, acc, ops[j], s.out, y);
      break;
    }
    std::string later = s.out, keep;
    for (size_t t = j + 1; t < ops.size(); ++t) later += ops[t].labels;
    for (char c : acc.labels + ops[j].labels)
      if (has(later, c) && !has(keep, c)) keep += c;
    acc = contract(r, s, acc, ops[j], keep, kNoValue);
  }
  return true;
}

}  // namespace

int rewrite_einsums(Graph& g) {
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    return n.op == "Einsum" && rewrite_one(g, nodes, n);
  });
}

}  // namespace kiln
