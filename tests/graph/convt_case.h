// ConvTranspose test cases shared by the graph, runtime and session tests: a shape + attribute
// set, its ONNX model, a deterministic sweep of cases and an independent oracle (the output-
// centric "gather" form of the ONNX definition, unlike the reference kernel's scatter).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "test_rng.h"

namespace kiln::test {

struct ConvTCase {
  int64_t n = 1, c = 4, h = 5, w = 5, m = 4, group = 1;
  int64_t kh = 3, kw = 3, sh = 2, sw = 2, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads attribute (begin..., end...)
  int64_t oph = 0, opw = 0;                // output_padding
  bool bias = true;
  int64_t out_h() const { return sh * (h - 1) + oph + (kh - 1) * dh + 1 - pt - pb; }
  int64_t out_w() const { return sw * (w - 1) + opw + (kw - 1) * dw + 1 - pl - pr; }
  std::string str() const {
    auto s = [](int64_t v) { return std::to_string(v); };
    return "n" + s(n) + "c" + s(c) + "h" + s(h) + "w" + s(w) + " m" + s(m) + "g" + s(group) + " k" +
           s(kh) + "x" + s(kw) + " s" + s(sh) + "x" + s(sw) + " d" + s(dh) + "x" + s(dw) +
           " pads " + s(pt) + "," + s(pl) + "," + s(pb) + "," + s(pr) + " op " + s(oph) + "," +
           s(opw) + (bias ? " bias" : "");
  }
  std::vector<float> weights() const {
    return randoms(size_t(c * (m / group) * kh * kw), uint32_t(7 + kh * 3 + c), -1.f, 1.f);
  }
  std::vector<float> biases() const { return randoms(size_t(m), 11, -1.f, 1.f); }
};

// x [n, c, h, w] -> ConvTranspose (constant w, b) -> y.
inline OnnxBuilder convt_model(const ConvTCase& k) {
  OnnxBuilder b;
  b.input("x", {k.n, k.c, k.h, k.w});
  b.init_f("wt", {k.c, k.m / k.group, k.kh, k.kw}, k.weights());
  std::vector<std::string> ins{"x", "wt"};
  if (k.bias) {
    b.init_f("b", {k.m}, k.biases());
    ins.push_back("b");
  }
  auto& nd = b.node("ConvTranspose", ins, {"y"}, "convt");
  OnnxBuilder::attr_ints(nd, "strides", {k.sh, k.sw});
  OnnxBuilder::attr_ints(nd, "dilations", {k.dh, k.dw});
  OnnxBuilder::attr_ints(nd, "pads", {k.pt, k.pl, k.pb, k.pr});
  if (k.oph || k.opw) OnnxBuilder::attr_ints(nd, "output_padding", {k.oph, k.opw});
  if (k.group != 1) OnnxBuilder::attr_i(nd, "group", k.group);
  b.output("y");
  return b;
}

// y[n, m, oh, ow] = b[m] + sum x[n, c, ih, iw] * w[c, m % Mg, i, j] over the group's c and the
// taps with ih * sh + i * dh - pt == oh (likewise w).
inline std::vector<float> convt_oracle(const ConvTCase& k, const std::vector<float>& x) {
  const std::vector<float> w = k.weights(), b = k.biases();
  const int64_t OH = k.out_h(), OW = k.out_w(), Mg = k.m / k.group, Cg = k.c / k.group;
  std::vector<float> y(size_t(k.n * k.m * OH * OW));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = k.bias ? b[size_t(m)] : 0.0;
          for (int64_t cg = 0; cg < Cg; ++cg) {
            const int64_t c = m / Mg * Cg + cg;
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t th = oh + k.pt - i * k.dh, tw = ow + k.pl - j * k.dw;
                if (th < 0 || tw < 0 || th % k.sh || tw % k.sw) continue;
                const int64_t ih = th / k.sh, iw = tw / k.sw;
                if (ih >= k.h || iw >= k.w) continue;
                acc += double(x[size_t(((n * k.c + c) * k.h + ih) * k.w + iw)]) *
                       w[size_t(((c * Mg + m % Mg) * k.kh + i) * k.kw + j)];
              }
          }
          y[size_t(((n * k.m + m) * OH + oh) * OW + ow)] = float(acc);
        }
  return y;
}

// A deterministic sweep: strides 1-3, kernels 1-5, dilation 1-2, pads, output_padding, groups
// 1 / 2 / depthwise, batch 1-2, channel counts around SIMD widths; every case has an output.
inline std::vector<ConvTCase> convt_sweep(int count, uint32_t seed, int64_t max_c = 9) {
  XorShift r(seed, 1);
  std::vector<ConvTCase> out;
  while (int(out.size()) < count) {
    ConvTCase k;
    k.n = r.pick(1, 3);
    k.sh = r.pick(1, 3);
    k.sw = r.pick(0, 3) == 0 ? r.pick(1, 3) : k.sh;
    k.kh = r.pick(1, 5);
    k.kw = r.pick(0, 3) == 0 ? r.pick(1, 5) : k.kh;
    k.dh = r.pick(0, 4) == 0 ? 2 : 1;
    k.dw = r.pick(0, 4) == 0 ? 2 : 1;
    const int gk = int(r.pick(0, 3));  // 0, 1: group 1; 2: group 2; 3: depthwise
    k.c = r.pick(1, max_c);
    k.m = r.pick(1, max_c);
    if (gk == 2) k.c = 2 * ((k.c + 1) / 2), k.m = 2 * ((k.m + 1) / 2), k.group = 2;
    if (gk == 3) k.m = k.c, k.group = k.c;
    k.h = r.pick(1, 7);
    k.w = r.pick(1, 7);
    k.pt = r.pick(0, k.kh - 1), k.pb = r.pick(0, k.kh - 1);
    k.pl = r.pick(0, k.kw - 1), k.pr = r.pick(0, k.kw - 1);
    k.oph = r.pick(0, std::max(k.sh, k.dh) - 1);
    k.opw = r.pick(0, std::max(k.sw, k.dw) - 1);
    k.bias = r.pick(0, 2) != 0;
    if (k.out_h() >= 1 && k.out_w() >= 1) out.push_back(k);
  }
  return out;
}

}  // namespace kiln::test
