// ConvTranspose as sub-pixel convolution: along each spatial dim, output position t (before
// cropping by the begin pad) = s * q + r receives x[q - j] * w[r + s * j] (dilated kernel
// index), so each phase r is an ordinary stride-1 convolution of the input with a flipped,
// sub-sampled kernel. All s_h * s_w phases become one Conv with M * s_h * s_w output channels
// (phases padded to a common ceil(k_eff / s) taps with zeros; channel (m * s_h + r_h) * s_w +
// r_w), which the solver runs on its fast conv families, followed by a SubpixelInterleave that
// scatters the phase planes into the output and applies the crop. FLOPs match the scatter
// form when s divides the effective kernel (k 2/s 2, k 4/s 2); otherwise the zero taps cost
// (s * ceil(k / s) / k)^2 more (k 3/s 2: 1.8x). Dilation is handled by the dilated kernel's zero
// taps (rare in models; its waste grows with d).
#include <algorithm>
#include <string>
#include <vector>

#include "graph/infer.h"
#include "graph/passes.h"

namespace kiln {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// One spatial dim of the rewrite.
struct Dim {
  int64_t s, keff, taps;  // stride, dilated kernel extent, conv taps (ceil(keff / s))
  int64_t pad_begin, pad_end, offset;
};

Dim plan_dim(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_begin) {
  Dim r;
  r.s = s;
  r.keff = (k - 1) * d + 1;
  r.taps = (r.keff + s - 1) / s;
  // Conv output u is phase row q = u + q0 (t = s * q + r): its window is x[q - taps + 1 ..= q].
  const int64_t q0 = std::min(floor_div(pad_begin, s), r.taps - 1);
  r.pad_begin = r.taps - 1 - q0;
  r.offset = pad_begin - s * q0;  // output o reads t = o + offset
  const int64_t rows = floor_div(out - 1 + pad_begin, s) - q0 + 1;
  r.pad_end = std::max<int64_t>(0, rows - in - r.pad_begin + r.taps - 1);
  return r;
}

// What follows a ConvTranspose and moves before the interleave (which only permutes
// elements): BatchNormalizations folded into the weights (y * scale + shift per output
// channel), then elementwise unary ops, which graph/fuse.cpp fuses into the Conv's epilogue
// instead of a pass over the output each.
struct Epilogue {
  std::vector<float> scale, shift;
  bool shifted = false;
  std::vector<Node> unary;  // in order; inputs[0] / outputs rewired by the caller
  ValueId out = kNoValue;   // the last absorbed node's output (or the ConvTranspose's)
};

bool movable_unary(const Graph& g, const Node& u) {
  static const char* const ops[] = {"Relu",        "LeakyRelu", "Sigmoid", "Tanh",
                                    "HardSigmoid", "HardSwish", "Clip",    "Elu"};
  bool known = false;
  for (const char* o : ops) known |= u.op == o;
  if (!known || u.outputs.size() != 1) return false;
  for (size_t k = 1; k < u.inputs.size(); ++k)  // Clip's bounds: constant scalars
    if (u.inputs[k] != kNoValue && !g.value(u.inputs[k]).is_const()) return false;
  return true;
}

Epilogue absorb_followers(Graph& g, const std::vector<std::vector<int>>& cons, const Node& ct,
                          std::vector<bool>* absorbed) {
  const int64_t m = g.value(ct.outputs[0]).shape[1];
  Epilogue e{std::vector<float>(size_t(m), 1.f),
             std::vector<float>(size_t(m), 0.f),
             false,
             {},
             ct.outputs[0]};
  ValueId v = ct.outputs[0];
  auto sole = [&](ValueId val) -> Node* {
    const auto& c = cons[size_t(val)];
    if (c.size() != 1 || g.is_output(val)) return nullptr;
    return &g.nodes[size_t(c[0])];
  };
  while (Node* u = sole(v)) {
    std::vector<float> sc, sh;
    if (!e.unary.empty() || u->inputs[0] != v || !batchnorm_affine(g, *u, &sc, &sh)) break;
    for (size_t k = 0; k < size_t(m); ++k) {
      e.scale[k] *= sc[k];
      e.shift[k] = e.shift[k] * sc[k] + sh[k];
    }
    e.shifted = true;
    (*absorbed)[size_t(&*u - g.nodes.data())] = true;
    v = u->outputs[0];
  }
  while (Node* u = sole(v)) {
    if (u->inputs[0] != v || !movable_unary(g, *u)) break;
    e.unary.push_back(*u);
    (*absorbed)[size_t(&*u - g.nodes.data())] = true;
    v = u->outputs[0];
  }
  e.out = v;
  return e;
}

ValueId phase_value(Graph& g, const std::string& node) {
  return g.add_value(unique_value_name(g, node + "_phases"));
}

}  // namespace

int rewrite_conv_transposes(Graph& g) {
  const std::vector<std::vector<int>> cons = g.consumers();
  std::vector<bool> absorbed(g.nodes.size(), false);
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  int rewritten = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (absorbed[i]) continue;
    if (n.op != "ConvTranspose" || !const_f32(g, n.in(1)) ||
        (n.in(2) != kNoValue && !const_f32(g, n.in(2))) || g.value(n.inputs[0]).shape.size() != 4) {
      nodes.push_back(std::move(n));
      continue;
    }
    const Shape x = g.value(n.inputs[0]).shape, y = g.value(n.outputs[0]).shape;
    const Tensor w = *g.value(n.inputs[1]).constant;  // a shallow copy: add_const moves values
    const std::vector<int64_t> s = n.attr_ints("strides"), d = n.attr_ints("dilations"),
                               p = n.attr_ints("pads");
    const int64_t G = n.attr_i("group", 1), C = x[1], M = y[1], Cg = C / G, Mg = M / G;
    const int64_t KH = w.shape()[2], KW = w.shape()[3];
    const Dim dh = plan_dim(x[2], y[2], KH, s[0], d[0], p[0]);
    const Dim dw = plan_dim(x[3], y[3], KW, s[1], d[1], p[1]);
    const int64_t S = s[0] * s[1];
    // Strides past the output (a 1-pixel input allows any) would make S phases of nothing:
    // such nodes stay on the reference kernel, as do sub-pixel weights past 2^28 floats and
    // absurd pads (an output_shape far past the full size).
    if (s[0] > 64 || s[1] > 64 ||
        std::max({dh.pad_begin, dh.pad_end, dw.pad_begin, dw.pad_end}) > (int64_t(1) << 20) ||
        double(M) * double(S) * double(Cg) * double(dh.taps) * double(dw.taps) > double(1 << 28)) {
      nodes.push_back(std::move(n));
      continue;
    }
    const Epilogue epi = absorb_followers(g, cons, n, &absorbed);
    // Conv weight [M * S, C / G, taps_h, taps_w]: phase (rh, rw) tap (mh, mw) is the dilated
    // kernel's (rh + s * (taps - 1 - mh), ...) when it lands on a real tap, else 0.
    Tensor wc(DType::f32, {M * S, Cg, dh.taps, dw.taps});
    const float* wp = w.data<float>();
    float* cp = wc.data<float>();
    for (int64_t m = 0; m < M; ++m)
      for (int64_t rh = 0; rh < s[0]; ++rh)
        for (int64_t rw = 0; rw < s[1]; ++rw)
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t mh = 0; mh < dh.taps; ++mh)
              for (int64_t mw = 0; mw < dw.taps; ++mw) {
                const int64_t eh = rh + s[0] * (dh.taps - 1 - mh);
                const int64_t ew = rw + s[1] * (dw.taps - 1 - mw);
                if (eh >= dh.keff || ew >= dw.keff || eh % d[0] || ew % d[1]) continue;
                const int64_t c = (m / Mg) * Cg + ci;  // ConvTranspose weight [C, M/G, kH, kW]
                cp[((((m * s[0] + rh) * s[1] + rw) * Cg + ci) * dh.taps + mh) * dw.taps + mw] =
                    wp[((c * Mg + m % Mg) * KH + eh / d[0]) * KW + ew / d[1]] *
                    epi.scale[size_t(m)];
              }
    Node conv;
    conv.name = n.name + "_subpixel";
    conv.op = "Conv";
    conv.inputs = {n.inputs[0], g.add_const(unique_value_name(g, n.name + "_subpixel_w"), wc)};
    if (n.in(2) != kNoValue || epi.shifted) {
      const float* b = n.in(2) != kNoValue ? g.value(n.inputs[2]).constant->data<float>() : nullptr;
      Tensor bc(DType::f32, {M * S});
      for (int64_t j = 0; j < M * S; ++j) {
        const size_t m = size_t(j / S);
        bc.data<float>()[j] = (b ? b[m] : 0.f) * epi.scale[m] + epi.shift[m];
      }
      conv.inputs.push_back(g.add_const(unique_value_name(g, n.name + "_subpixel_b"), bc));
    }
    conv.attrs["group"] = attr_i(G);
    conv.attrs["kernel_shape"] = attr_ints({dh.taps, dw.taps});
    conv.attrs["pads"] = attr_ints({dh.pad_begin, dw.pad_begin, dh.pad_end, dw.pad_end});
    const bool direct = S == 1 && dh.offset == 0 && dw.offset == 0 &&
                        x[2] + dh.pad_begin + dh.pad_end - dh.taps + 1 == y[2] &&
                        x[3] + dw.pad_begin + dw.pad_end - dw.taps + 1 == y[3];
    // The Conv, then the absorbed unary ops on its output (fused into it later), then the
    // interleave into the last one's output.
    const ValueId out = epi.out;
    conv.outputs = {direct && epi.unary.empty() ? out : phase_value(g, n.name)};
    infer_node(g, conv);
    ValueId cur = conv.outputs[0];
    nodes.push_back(std::move(conv));
    for (size_t u = 0; u < epi.unary.size(); ++u) {
      Node op = epi.unary[u];
      op.inputs[0] = cur;
      op.outputs = {direct && u + 1 == epi.unary.size() ? out : phase_value(g, n.name)};
      infer_node(g, op);
      cur = op.outputs[0];
      nodes.push_back(std::move(op));
    }
    ++rewritten;
    if (direct) continue;  // stride 1, nothing to crop: the Conv writes the output itself
    Node il;
    il.name = n.name;
    il.op = "SubpixelInterleave";
    il.inputs = {cur};
    il.outputs = {out};
    il.attrs["strides"] = attr_ints(s);
    il.attrs["offsets"] = attr_ints({dh.offset, dw.offset});
    il.attrs["out_hw"] = attr_ints({y[2], y[3]});
    infer_node(g, il);
    nodes.push_back(std::move(il));
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace kiln
