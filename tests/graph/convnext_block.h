// A small ConvNeXt block as torchvision exports it (opset 13): depthwise conv, Transpose to
// channels-last, LayerNorm decomposed into ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add,
// MatMul + bias, GELU as Div/Erf/Add/Mul/Mul, MatMul + bias, Transpose back, layer-scale Mul and
// the residual Add. Shared by the rewrite tests (tests/graph) and the session test
// (tests/runtime). Knobs make near-misses.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"

namespace kiln::test {

struct BlockOpts {
  int64_t n = 1, c = 8, h = 5, w = 3;
  float sqrt2 = 1.41421356f;     // the GELU's divisor
  float pow = 2.f;               // the LayerNorm's square
  bool gelu_half_first = false;  // Mul(Mul(h, 0.5), 1 + erf) instead of Mul(Mul(h, ..), 0.5)
  bool stem_ln = true;           // a LayerNorm2d (Transpose, LN, Transpose) before the block
};

// Deterministic pseudo-random weights in [-a, a].
inline std::vector<float> block_weights(size_t n, float a, unsigned seed) {
  std::vector<float> v(n);
  unsigned s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = a * (float(s >> 8) / float(1u << 24) * 2 - 1);
  }
  return v;
}

// The decomposed LayerNorm over the last axis of `x` (prefix p), result in `out`.
inline void add_layernorm(OnnxBuilder& b, const std::string& p, const std::string& x,
                          const std::string& out, int64_t c, float pow = 2.f) {
  b.init_f(p + "two", {}, {pow}).init_f(p + "eps", {}, {1e-6f});
  b.init_f(p + "g", {c}, block_weights(size_t(c), 1.f, 7));
  b.init_f(p + "b", {c}, block_weights(size_t(c), 0.5f, 8));
  OnnxBuilder::attr_ints(b.node("ReduceMean", {x}, {p + "m"}), "axes", {-1});
  b.node("Sub", {x, p + "m"}, {p + "d"});
  b.node("Pow", {p + "d", p + "two"}, {p + "sq"});
  OnnxBuilder::attr_ints(b.node("ReduceMean", {p + "sq"}, {p + "v"}), "axes", {-1});
  b.node("Add", {p + "v", p + "eps"}, {p + "ve"});
  b.node("Sqrt", {p + "ve"}, {p + "s"});
  b.node("Div", {p + "d", p + "s"}, {p + "y"});
  b.node("Mul", {p + "y", p + "g"}, {p + "yg"});
  b.node("Add", {p + "yg", p + "b"}, {out});
}

inline OnnxBuilder convnext_block(const BlockOpts& o = {}) {
  const int64_t c = o.c, e = 4 * o.c;
  OnnxBuilder b;
  b.input("x", {o.n, c, o.h, o.w}).output("y");
  std::string in = "x";
  if (o.stem_ln) {
    OnnxBuilder::attr_ints(b.node("Transpose", {"x"}, {"st"}), "perm", {0, 2, 3, 1});
    add_layernorm(b, "stem_", "st", "sln", c);
    OnnxBuilder::attr_ints(b.node("Transpose", {"sln"}, {"x0"}), "perm", {0, 3, 1, 2});
    in = "x0";
  }
  b.init_f("dw", {c, 1, 3, 3}, block_weights(size_t(c * 9), 0.5f, 1));
  b.init_f("dwb", {c}, block_weights(size_t(c), 0.1f, 2));
  auto& dw = b.node("Conv", {in, "dw", "dwb"}, {"dwo"});
  OnnxBuilder::attr_i(dw, "group", c);
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_ints(b.node("Transpose", {"dwo"}, {"t"}), "perm", {0, 2, 3, 1});
  add_layernorm(b, "ln_", "t", "lno", c, o.pow);
  b.init_f("w1", {c, e}, block_weights(size_t(c * e), 0.4f, 3));
  b.init_f("b1", {e}, block_weights(size_t(e), 0.2f, 4));
  b.node("MatMul", {"lno", "w1"}, {"mm1"});
  b.node("Add", {"b1", "mm1"}, {"h"});
  b.init_f("sqrt2", {}, {o.sqrt2}).init_f("one", {}, {1.f}).init_f("half", {}, {0.5f});
  b.node("Div", {"h", "sqrt2"}, {"hd"});
  b.node("Erf", {"hd"}, {"er"});
  b.node("Add", {"er", "one"}, {"er1"});
  if (o.gelu_half_first) {
    b.node("Mul", {"h", "half"}, {"hh"});
    b.node("Mul", {"hh", "er1"}, {"ge"});
  } else {
    b.node("Mul", {"h", "er1"}, {"he"});
    b.node("Mul", {"he", "half"}, {"ge"});
  }
  b.init_f("w2", {e, c}, block_weights(size_t(c * e), 0.3f, 5));
  b.init_f("b2", {c}, block_weights(size_t(c), 0.2f, 6));
  b.node("MatMul", {"ge", "w2"}, {"mm2"});
  b.node("Add", {"b2", "mm2"}, {"o2"});
  OnnxBuilder::attr_ints(b.node("Transpose", {"o2"}, {"ob"}), "perm", {0, 3, 1, 2});
  b.init_f("ls", {c, 1, 1}, block_weights(size_t(c), 1.f, 9));
  b.node("Mul", {"ls", "ob"}, {"scaled"});
  b.node("Add", {"scaled", in}, {"y"});
  return b;
}

}  // namespace kiln::test
