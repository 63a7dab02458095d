#include "layers.h"

#include "graph/error.h"

namespace kiln::bench {
namespace {

Layer conv(const char* set, const char* name, int64_t ic, int64_t ih, int64_t oc, int64_t k,
           int64_t s, int count) {
  Layer l;
  l.set = set;
  l.name = name;
  l.ic = ic;
  l.ih = ih;
  l.oc = oc;
  l.k = k;
  l.s = s;
  l.count = count;
  return l;
}

std::vector<Layer> resnet50() {
  const char* r = "resnet50";
  return {
      conv(r, "conv1_7x7s2", 3, 224, 64, 7, 2, 1),
      conv(r, "1x1_64to64@56", 64, 56, 64, 1, 1, 1),
      conv(r, "1x1_64to256@56", 64, 56, 256, 1, 1, 4),
      conv(r, "1x1_256to64@56", 256, 56, 64, 1, 1, 2),
      conv(r, "1x1_256to128@56", 256, 56, 128, 1, 1, 1),
      conv(r, "1x1_256to512s2@56", 256, 56, 512, 1, 2, 1),
      conv(r, "1x1_128to512@28", 128, 28, 512, 1, 1, 4),
      conv(r, "1x1_512to128@28", 512, 28, 128, 1, 1, 3),
      conv(r, "1x1_512to256@28", 512, 28, 256, 1, 1, 1),
      conv(r, "1x1_512to1024s2@28", 512, 28, 1024, 1, 2, 1),
      conv(r, "1x1_256to1024@14", 256, 14, 1024, 1, 1, 6),
      conv(r, "1x1_1024to256@14", 1024, 14, 256, 1, 1, 5),
      conv(r, "1x1_1024to512@14", 1024, 14, 512, 1, 1, 1),
      conv(r, "1x1_1024to2048s2@14", 1024, 14, 2048, 1, 2, 1),
      conv(r, "1x1_512to2048@7", 512, 7, 2048, 1, 1, 3),
      conv(r, "1x1_2048to512@7", 2048, 7, 512, 1, 1, 2),
      conv(r, "3x3_64@56", 64, 56, 64, 3, 1, 3),
      conv(r, "3x3_128@56s2", 128, 56, 128, 3, 2, 1),
      conv(r, "3x3_128@28", 128, 28, 128, 3, 1, 3),
      conv(r, "3x3_256@28s2", 256, 28, 256, 3, 2, 1),
      conv(r, "3x3_256@14", 256, 14, 256, 3, 1, 5),
      conv(r, "3x3_512@14s2", 512, 14, 512, 3, 2, 1),
      conv(r, "3x3_512@7", 512, 7, 512, 3, 1, 2),
  };
}

std::vector<Layer> vgg16() {
  const char* v = "vgg16";
  return {
      conv(v, "vgg_3to64@224", 3, 224, 64, 3, 1, 1),
      conv(v, "vgg_64to64@224", 64, 224, 64, 3, 1, 1),
      conv(v, "vgg_64to128@112", 64, 112, 128, 3, 1, 1),
      conv(v, "vgg_128to128@112", 128, 112, 128, 3, 1, 1),
      conv(v, "vgg_128to256@56", 128, 56, 256, 3, 1, 1),
      conv(v, "vgg_256to256@56", 256, 56, 256, 3, 1, 2),
      conv(v, "vgg_256to512@28", 256, 28, 512, 3, 1, 1),
      conv(v, "vgg_512to512@28", 512, 28, 512, 3, 1, 2),
      conv(v, "vgg_512to512@14", 512, 14, 512, 3, 1, 3),
  };
}

// Input size x channels of each distinct depthwise 3x3 conv (pad 1) of MobileNetV2.
std::vector<Layer> mobilenetv2() {
  const char* m = "mobilenetv2";
  auto dw = [&](const char* name, int64_t hw, int64_t c, int64_t s, int count) {
    Layer l = conv(m, name, c, hw, c, 3, s, count);
    l.groups = c;
    return l;
  };
  return {
      dw("dw_112x112x32_s1", 112, 32, 1, 1), dw("dw_112x112x96_s2", 112, 96, 2, 1),
      dw("dw_56x56x144_s1", 56, 144, 1, 1),  dw("dw_56x56x144_s2", 56, 144, 2, 1),
      dw("dw_28x28x192_s1", 28, 192, 1, 2),  dw("dw_28x28x192_s2", 28, 192, 2, 1),
      dw("dw_14x14x384_s1", 14, 384, 1, 4),  dw("dw_14x14x576_s1", 14, 576, 1, 2),
      dw("dw_14x14x576_s2", 14, 576, 2, 1),  dw("dw_7x7x960_s1", 7, 960, 1, 3),
  };
}

}  // namespace

std::vector<std::string> set_names() {
  return {"resnet50", "vgg16", "mobilenetv2"};
}

std::vector<Layer> layer_set(const std::string& set) {
  if (set == "resnet50") return resnet50();
  if (set == "vgg16") return vgg16();
  if (set == "mobilenetv2") return mobilenetv2();
  if (set == "all") {
    std::vector<Layer> v;
    for (const std::string& s : set_names()) {
      auto l = layer_set(s);
      v.insert(v.end(), l.begin(), l.end());
    }
    return v;
  }
  fail(Code::invalid_argument, "unknown --set " + set + " (resnet50|vgg16|mobilenetv2|all)");
}

ConvProblem make_problem(const Layer& l, const std::string& post) {
  ConvProblem p;
  p.ic = l.ic;
  p.ih = p.iw = l.ih;
  p.oc = l.oc;
  p.groups = l.groups;
  p.kh = p.kw = l.k;
  p.sh = p.sw = l.s;
  p.pt = p.pl = p.pb = p.pr = l.k / 2;
  p.oh = p.ow = (l.ih + 2 * (l.k / 2) - l.k) / l.s + 1;
  p.bias = true;
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
