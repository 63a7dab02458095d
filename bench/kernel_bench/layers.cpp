#include "layers.h"

#include <cstdio>

#include "graph/error.h"
#include "shapes/shape_list.h"

namespace kiln::bench {

std::vector<std::string> set_names() {
  return {"resnet50", "vgg16", "mobilenetv2"};
}

std::vector<Layer> layer_set(const std::string& set) {
  std::vector<Layer> v;
  if (set == "all") {
    for (const std::string& s : set_names()) {
      auto l = layer_set(s);
      v.insert(v.end(), l.begin(), l.end());
    }
    return v;
  }
  for (shapes::ShapeLine& s : shapes::read_shape_list(set)) {
    Layer l;
    l.set = set;
    l.name = std::move(s.name);
    l.p = std::move(s.p);
    l.count = s.count;
    v.push_back(std::move(l));
  }
  return v;
}

Layer custom_layer(const std::string& spec) {
  Layer l;
  l.set = "custom";
  l.name = "shape_" + spec;
  if (spec.find("ic") != std::string::npos) {
    l.p = ConvProblem::parse(spec);
    l.name = spec;
    return l;
  }
  long ic = 0, ih = 0, oc = 0, k = 0, s = 0, g = 1;
  if (std::sscanf(spec.c_str(), "%ld,%ld,%ld,%ld,%ld,%ld", &ic, &ih, &oc, &k, &s, &g) < 5)
    fail(Code::invalid_argument, "--shape takes IC,IH,OC,K,S[,G] or a conv problem string");
  ConvProblem& p = l.p;
  p.ic = ic;
  p.ih = p.iw = ih;
  p.oc = oc;
  p.groups = g;
  p.kh = p.kw = k;
  p.sh = p.sw = s;
  p.pt = p.pl = p.pb = p.pr = k / 2;
  p.oh = p.ow = (ih + 2 * (k / 2) - k) / s + 1;
  p.bias = true;
  return l;
}

ConvProblem make_problem(const Layer& l, const std::string& post) {
  ConvProblem p = l.p;
  if (post == "relu") {
    PostOp op;  // relu
    if (l.depthwise()) {
      op.kind = PostOp::Kind::clip;
      op.alpha = 0;
      op.beta = 6;
    }
    p.post.push_back(op);
  }
  return p;
}

double min_bytes(const ConvProblem& p) {
  const double in = double(p.n * p.ic * p.ih * p.iw), out = double(p.n * p.oc * p.oh * p.ow);
  const double w = double(p.oc * (p.ic / p.groups) * p.kh * p.kw) + (p.bias ? double(p.oc) : 0);
  return 4 * (in + out + w);
}

}  // namespace kiln::bench
