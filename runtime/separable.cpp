#include "runtime/separable.h"

#include <algorithm>

#include "jit/conv/conv_problem.h"

namespace kiln {

int separable_dw_node(const Graph& g, int pw, const std::vector<int>& producers,
                      const std::vector<std::vector<int>>& consumers) {
  const Node& n = g.nodes[size_t(pw)];
  auto constant_weights = [&](const Node& c) {
    return c.inputs.size() >= 2 && g.value(c.inputs[1]).is_const() &&
           (c.in(2) == kNoValue || g.value(c.inputs[2]).is_const());
  };
  if (n.op != "Conv" || !constant_weights(n) || g.value(n.inputs[0]).shape.size() != 4) return -1;
  const ValueId mid = n.inputs[0];
  const int dw = producers[size_t(mid)];
  if (dw < 0 || g.is_output(mid) || consumers[size_t(mid)].size() != 1 ||
      std::count(n.inputs.begin(), n.inputs.end(), mid) != 1)
    return -1;
  const Node& d = g.nodes[size_t(dw)];
  if (d.op != "Conv" || !constant_weights(d) || d.outputs.size() != 1) return -1;
  const ConvProblem p = ConvProblem::from_node(g, n), q = ConvProblem::from_node(g, d);
  const bool one_by_one = p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.groups == 1 &&
                          !(p.pt || p.pl || p.pb || p.pr);
  const bool depthwise = q.groups == q.ic && q.ic == q.oc;
  return one_by_one && depthwise ? dw : -1;
}

std::string separable_problem(const Graph& g, int dw, int pw) {
  return "dwpw:" + node_problem(g, dw) + "|" + node_problem(g, pw);
}

bool nhwc_conv_label(const Label& l, std::optional<ConvFamily> family) {
  return l.kind == LabelKind::conv && l.precision == Precision::f32 &&
         (!family || l.conv.family == *family) && l.conv.src == Layout::nhwc &&
         l.conv.dst == Layout::nhwc;
}

}  // namespace kiln
