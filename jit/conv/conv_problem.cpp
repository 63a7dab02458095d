#include "jit/conv/conv_problem.h"

namespace kiln {

std::string ConvProblem::str() const {
  std::string r;
  auto s = [](const char* k, int64_t v) {
    std::string t(k);
    t += std::to_string(v);
    return t;
  };
  if (n != 1) r += s("mb", n);
  if (groups != 1) r += s("g", groups);
  r += s("ic", ic) + s("ih", ih) + s("iw", iw) + "_" + s("oc", oc) + s("oh", oh) + s("ow", ow) +
       s("kh", kh) + s("kw", kw) + s("sh", sh) + s("sw", sw);
  if (dh != 1 || dw != 1) r += s("dh", dh) + s("dw", dw);
  if (pt == pb && pl == pr)
    r += s("ph", pt) + s("pw", pl);
  else
    r += s("pt", pt) + s("pl", pl) + s("pb", pb) + s("pr", pr);
  if (!bias) r += "_nobias";
  if (!post.empty()) r += "_" + post_ops_str(post);
  return r;
}

ConvProblem ConvProblem::from_node(const Graph& g, const Node& node) {
  if (node.op != "Conv") node.fail(Code::internal, "is not a Conv");
  const Shape& x = g.value(node.inputs[0]).shape;
  const Shape& y = g.value(node.outputs[0]).shape;
  ConvProblem p;
  p.n = x[0];
  p.ic = x[1];
  p.ih = x[2];
  p.iw = x[3];
  p.oc = y[1];
  p.oh = y[2];
  p.ow = y[3];
  auto k = node.attr_ints("kernel_shape"), st = node.attr_ints("strides"),
       d = node.attr_ints("dilations"), pads = node.attr_ints("pads");
  if (k.size() != 2 || st.size() != 2 || d.size() != 2 || pads.size() != 4)
    node.fail(Code::internal, "conv attributes are not explicit (shape inference not run?)");
  p.kh = k[0];
  p.kw = k[1];
  p.sh = st[0];
  p.sw = st[1];
  p.dh = d[0];
  p.dw = d[1];
  p.pt = pads[0];
  p.pl = pads[1];
  p.pb = pads[2];
  p.pr = pads[3];
  p.groups = node.attr_i("group", 1);
  p.bias = node.in(2) != kNoValue;
  p.post = parse_post_ops(node, 3);
  return p;
}

}  // namespace kiln
