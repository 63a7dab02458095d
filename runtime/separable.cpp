#include "runtime/separable.h"

#include <algorithm>

#include "jit/conv/conv_problem.h"

namespace kiln {

namespace {

// The Conv producing node `b`'s input 0 when only b reads it, once, and both have constant
// weights; -1 otherwise.
int sole_conv_producer(const Graph& g, int b, const std::vector<int>& producers,
                       const std::vector<std::vector<int>>& consumers) {
  const Node& n = g.nodes[size_t(b)];
  auto constant_weights = [&](const Node& c) {
    return c.inputs.size() >= 2 && g.value(c.inputs[1]).is_const() &&
           (c.in(2) == kNoValue || g.value(c.inputs[2]).is_const());
  };
  if (n.op != "Conv" || !constant_weights(n) || g.value(n.inputs[0]).shape.size() != 4) return -1;
  const ValueId mid = n.inputs[0];
  const int a = producers[size_t(mid)];
  if (a < 0 || g.is_output(mid) || consumers[size_t(mid)].size() != 1 ||
      std::count(n.inputs.begin(), n.inputs.end(), mid) != 1)
    return -1;
  const Node& d = g.nodes[size_t(a)];
  return d.op == "Conv" && constant_weights(d) && d.outputs.size() == 1 ? a : -1;
}

// Whether nodes dw and pw are a depthwise conv and a dense 1x1 (a chain kernel's pair).
bool dw_and_1x1(const Graph& g, int dw, int pw) {
  return dw >= 0 && pw >= 0 && ConvProblem::from_node(g, g.nodes[size_t(dw)]).depthwise() &&
         ConvProblem::from_node(g, g.nodes[size_t(pw)]).dense_1x1();
}

}  // namespace

int separable_dw_node(const Graph& g, int pw, const std::vector<int>& producers,
                      const std::vector<std::vector<int>>& consumers) {
  const int dw = sole_conv_producer(g, pw, producers, consumers);
  return dw_and_1x1(g, dw, pw) ? dw : -1;
}

int expand_pw_node(const Graph& g, int dw, const std::vector<int>& producers,
                   const std::vector<std::vector<int>>& consumers) {
  const int pw = sole_conv_producer(g, dw, producers, consumers);
  return dw_and_1x1(g, dw, pw) ? pw : -1;
}

std::string separable_problem(const Graph& g, int dw, int pw, bool expand) {
  return expand ? "pwdw:" + node_problem(g, pw) + "|" + node_problem(g, dw)
                : "dwpw:" + node_problem(g, dw) + "|" + node_problem(g, pw);
}

std::unique_ptr<Kernel> chain_kernel(const Graph& g, int e, int dw, int p, int e_inputs,
                                     int dw_inputs, int p_inputs, Isa isa, std::string* why_not) {
  auto conv = [&](int i, int inputs) {
    const Node& n = g.nodes[size_t(i)];
    ChainConv c{ConvProblem::from_node(g, n), &*g.value(n.inputs[1]).constant, nullptr, inputs};
    if (c.p.bias) c.bias = &*g.value(n.inputs[2]).constant;
    return c;
  };
  const ChainConv d = conv(dw, dw_inputs);
  const std::optional<ChainConv> ec = e >= 0 ? std::optional(conv(e, e_inputs)) : std::nullopt,
                                 pc = p >= 0 ? std::optional(conv(p, p_inputs)) : std::nullopt;
  return create_dw_chain_kernel(ec ? &*ec : nullptr, d, pc ? &*pc : nullptr, isa, why_not);
}

bool nhwc_conv_label(const Label& l, std::optional<ConvFamily> family) {
  return l.kind == LabelKind::conv && l.precision == Precision::f32 &&
         (!family || l.conv.family == *family) && l.conv.src == Layout::nhwc &&
         l.conv.dst == Layout::nhwc;
}

}  // namespace kiln
