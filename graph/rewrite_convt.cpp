// ConvTranspose as sub-pixel convolution: along each spatial dim, output position t (before
// cropping by the begin pad) = s * q + r receives x[q - j] * w[r + s * j] (dilated kernel
// index), so each phase r is an ordinary stride-1 convolution of the input with a flipped,
// sub-sampled kernel. All s_h * s_w phases become one Conv with M * s_h * s_w output channels
// (phases padded to a common ceil(k_eff / s) taps with zeros; channel (m * s_h + r_h) * s_w +
// r_w), which the solver runs on its fast conv families, followed by a SubpixelInterleave that
// scatters the phase planes into the output and applies the crop. FLOPs match the scatter
// form when s divides the effective kernel (k 2/s 2, k 4/s 2) on large maps; otherwise the zero
// taps cost (s * ceil(k / s) / k)^2 more, and the phases' common planes a row and column more
// than each phase needs (((H + 1) / H)^2 on an H x H input). Where that is too much
// (kPhasesBelow), each phase is its own Conv instead (its own taps, pads and rows; the phases
// concatenated, then a phase-major interleave from per-phase origins: graph/subpixel.h).
// Dilation is handled by the dilated kernel's zero taps (rare in models; its waste grows with d).
#include <algorithm>
#include <optional>
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

// One spatial dim of the per-phase form: phase r is its own Conv with taps[r] taps (the
// effective kernel's r + s * j), computing `rows` phase rows from start[r] (the interleave's
// origin) with pads pb[r] / pe[r]. Every phase computes the same rows, so their outputs
// concatenate. Empty where a phase has no taps or no outputs, or the begin pad is negative.
struct PhaseDim {
  std::vector<int64_t> taps, start, pb, pe;
  int64_t rows = 0;
};

std::optional<PhaseDim> plan_phases(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d,
                                    int64_t pad_begin) {
  const int64_t keff = (k - 1) * d + 1;
  if (pad_begin < 0 || out < s) return std::nullopt;
  PhaseDim r;
  std::vector<int64_t> needed(static_cast<size_t>(s), 0);
  for (int64_t ph = 0; ph < s; ++ph) {
    const int64_t taps = ph < keff ? (keff - ph + s - 1) / s : 0;
    const int64_t o0 = ((ph - pad_begin) % s + s) % s;  // first output of this phase
    if (taps == 0 || o0 >= out) return std::nullopt;
    const int64_t last = o0 + (out - 1 - o0) / s * s;
    // Phase row q = (o + pad_begin) / s reads x[q - taps + 1 ..= q]: start at the first one
    // needed, or earlier where that would take a negative pad.
    const int64_t q0 = (o0 + pad_begin) / s, q1 = (last + pad_begin) / s;
    const int64_t start = std::min(q0, taps - 1);
    r.taps.push_back(taps);
    r.start.push_back(start);
    r.pb.push_back(taps - 1 - start);
    needed[size_t(ph)] = q1 - start + 1;
  }
  // With no end pad phase ph's conv gives in - start rows: pad the others up to the most.
  for (int64_t ph = 0; ph < s; ++ph)
    r.rows = std::max({r.rows, needed[size_t(ph)], in - r.start[size_t(ph)]});
  for (int64_t ph = 0; ph < s; ++ph) r.pe.push_back(r.rows - (in - r.start[size_t(ph)]));
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

// A ConvTranspose with constant weights as the sub-pixel forms read it.
struct ConvT {
  const Node& n;
  Shape x, y;
  Tensor w;  // a shallow copy: add_const moves values
  std::vector<int64_t> s, d, p;
  int64_t G, M, Cg, Mg, KH, KW;
  std::vector<float> bias;  // per output channel, the absorbed BNs applied (valid if has_bias)
  bool has_bias;

  ConvT(const Graph& g, const Node& node, const Epilogue& epi)
      : n(node),
        x(g.value(node.inputs[0]).shape),
        y(g.value(node.outputs[0]).shape),
        w(*g.value(node.inputs[1]).constant),
        s(node.attr_ints("strides")),
        d(node.attr_ints("dilations")),
        p(node.attr_ints("pads")),
        G(node.attr_i("group", 1)),
        M(y[1]),
        Cg(x[1] / G),
        Mg(M / G),
        KH(w.shape()[2]),
        KW(w.shape()[3]),
        bias(size_t(M), 0.f),
        has_bias(node.in(2) != kNoValue || epi.shifted) {
    const float* b =
        node.in(2) != kNoValue ? g.value(node.inputs[2]).constant->data<float>() : nullptr;
    for (size_t m = 0; m < size_t(M); ++m) bias[m] = (b ? b[m] : 0.f) * epi.scale[m] + epi.shift[m];
  }

  // Phase (rh, rw)'s flipped taps ([M][Cg][th][tw], output channel m at out + m * m_stride):
  // tap (mh, mw) is the dilated kernel's (rh + s * (th - 1 - mh), ...) when it lands on a real
  // tap, else 0 (out zero-filled); times the absorbed BNs' scale.
  void phase_weights(int64_t rh, int64_t rw, int64_t th, int64_t tw, const Epilogue& epi,
                     float* out, int64_t m_stride) const {
    const float* wp = w.data<float>();
    const int64_t keh = (KH - 1) * d[0] + 1, kew = (KW - 1) * d[1] + 1;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t mh = 0; mh < th; ++mh)
          for (int64_t mw = 0; mw < tw; ++mw) {
            const int64_t eh = rh + s[0] * (th - 1 - mh), ew = rw + s[1] * (tw - 1 - mw);
            if (eh >= keh || ew >= kew || eh % d[0] || ew % d[1]) continue;
            const int64_t c = (m / Mg) * Cg + ci;  // ConvTranspose weight [C, M/G, kH, kW]
            out[m * m_stride + (ci * th + mh) * tw + mw] =
                wp[((c * Mg + m % Mg) * KH + eh / d[0]) * KW + ew / d[1]] * epi.scale[size_t(m)];
          }
  }
};

// Conv(input) named `tag` with weights wc (and bias bc if any), group G, kernel / pads, then the
// absorbed unary ops (fused into it later; renamed with the tag when `copies`: one chain per
// phase), the last into last_out; other outputs are new values named after `values`. Returns
// the chain's output.
ValueId emit_conv_chain(Graph& g, std::vector<Node>& nodes, const std::string& tag,
                        const std::string& values, bool copies, ValueId input, Tensor wc,
                        std::optional<Tensor> bc, int64_t G, std::vector<int64_t> kernel,
                        std::vector<int64_t> pads, const Epilogue& epi, ValueId last_out) {
  Node conv;
  conv.name = tag;
  conv.op = "Conv";
  conv.inputs = {input, g.add_const(unique_value_name(g, tag + "_w"), std::move(wc))};
  if (bc) conv.inputs.push_back(g.add_const(unique_value_name(g, tag + "_b"), std::move(*bc)));
  conv.attrs["group"] = attr_i(G);
  conv.attrs["kernel_shape"] = attr_ints(std::move(kernel));
  conv.attrs["pads"] = attr_ints(std::move(pads));
  auto out = [&](bool last) {
    return last && last_out != kNoValue ? last_out : phase_value(g, values);
  };
  conv.outputs = {out(epi.unary.empty())};
  infer_node(g, conv);
  ValueId cur = conv.outputs[0];
  nodes.push_back(std::move(conv));
  for (size_t u = 0; u < epi.unary.size(); ++u) {
    Node op = epi.unary[u];
    if (copies) op.name += "_" + tag;
    op.inputs[0] = cur;
    op.outputs = {out(u + 1 == epi.unary.size())};
    infer_node(g, op);
    cur = op.outputs[0];
    nodes.push_back(std::move(op));
  }
  return cur;
}

// SubpixelInterleave of `planes` into the ConvTranspose's (last absorbed node's) output.
Node interleave(const ConvT& k, ValueId planes, ValueId out, std::vector<int64_t> offsets) {
  Node il;
  il.name = k.n.name;
  il.op = "SubpixelInterleave";
  il.inputs = {planes};
  il.outputs = {out};
  il.attrs["strides"] = attr_ints(k.s);
  il.attrs["offsets"] = attr_ints(std::move(offsets));
  il.attrs["out_hw"] = attr_ints({k.y[2], k.y[3]});
  return il;
}

// The per-phase form: a Conv per stride phase (its own taps, pads and rows), its unary ops, a
// Concat of the phases and a phase-major interleave from the phases' origins.
void emit_phases(Graph& g, std::vector<Node>& nodes, const ConvT& k, const Epilogue& epi,
                 const PhaseDim& ph, const PhaseDim& pw) {
  Node cat;
  cat.name = k.n.name + "_phases";
  cat.op = "Concat";
  cat.attrs["axis"] = attr_i(1);
  for (int64_t rh = 0; rh < k.s[0]; ++rh)
    for (int64_t rw = 0; rw < k.s[1]; ++rw) {
      const int64_t th = ph.taps[size_t(rh)], tw = pw.taps[size_t(rw)];
      Tensor wc(DType::f32, {k.M, k.Cg, th, tw});
      k.phase_weights(rh, rw, th, tw, epi, wc.data<float>(), k.Cg * th * tw);
      std::optional<Tensor> bc;
      if (k.has_bias) {
        bc.emplace(DType::f32, Shape{k.M});
        std::copy(k.bias.begin(), k.bias.end(), bc->data<float>());
      }
      const std::string tag = k.n.name + "_phase" + std::to_string(rh * k.s[1] + rw);
      cat.inputs.push_back(emit_conv_chain(
          g, nodes, tag, tag, true, k.n.inputs[0], std::move(wc), std::move(bc), k.G, {th, tw},
          {ph.pb[size_t(rh)], pw.pb[size_t(rw)], ph.pe[size_t(rh)], pw.pe[size_t(rw)]}, epi,
          kNoValue));
    }
  cat.outputs = {phase_value(g, k.n.name)};
  infer_node(g, cat);
  Node il = interleave(k, cat.outputs[0], epi.out, {k.p[0], k.p[1]});
  il.attrs["phase_major"] = attr_i(1);
  il.attrs["origins_h"] = attr_ints(ph.start);
  il.attrs["origins_w"] = attr_ints(pw.start);
  nodes.push_back(std::move(cat));
  infer_node(g, il);
  nodes.push_back(std::move(il));
}

// The per-phase form is taken where it does at most this share of the one Conv's
// multiply-adds: below it the saving outweighs the extra steps and the concat.
constexpr double kPhasesBelow = 0.85;

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
    const std::vector<int64_t> s = n.attr_ints("strides"), d = n.attr_ints("dilations"),
                               p = n.attr_ints("pads");
    const int64_t G = n.attr_i("group", 1), Cg = x[1] / G, M = y[1];
    const Tensor& w = *g.value(n.inputs[1]).constant;
    const Dim dh = plan_dim(x[2], y[2], w.shape()[2], s[0], d[0], p[0]);
    const Dim dw = plan_dim(x[3], y[3], w.shape()[3], s[1], d[1], p[1]);
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
    const ConvT k(g, n, epi);
    ++rewritten;
    // The one Conv's phase planes: rows x cols.
    const int64_t rows = x[2] + dh.pad_begin + dh.pad_end - dh.taps + 1;
    const int64_t cols = x[3] + dw.pad_begin + dw.pad_end - dw.taps + 1;
    // A Conv per phase where that needs at most kPhasesBelow of the one Conv's multiply-adds.
    if (S > 1) {
      const auto ph = plan_phases(x[2], y[2], k.KH, s[0], d[0], p[0]);
      const auto pw = plan_phases(x[3], y[3], k.KW, s[1], d[1], p[1]);
      if (ph && pw) {
        double each = 0;
        for (int64_t th : ph->taps)
          for (int64_t tw : pw->taps) each += double(ph->rows * pw->rows * th * tw);
        if (each <= kPhasesBelow * double(S * rows * cols * dh.taps * dw.taps)) {
          emit_phases(g, nodes, k, epi, *ph, *pw);
          continue;
        }
      }
    }
    // One Conv [M * S, C / G, taps_h, taps_w]: phase (rh, rw) of output channel m is channel
    // m * S + rh * s_w + rw.
    const int64_t taps = dh.taps * dw.taps;
    Tensor wc(DType::f32, {M * S, Cg, dh.taps, dw.taps});
    for (int64_t rh = 0; rh < s[0]; ++rh)
      for (int64_t rw = 0; rw < s[1]; ++rw)
        k.phase_weights(rh, rw, dh.taps, dw.taps, epi,
                        wc.data<float>() + (rh * s[1] + rw) * Cg * taps, S * Cg * taps);
    std::optional<Tensor> bc;
    if (k.has_bias) {
      bc.emplace(DType::f32, Shape{M * S});
      for (int64_t j = 0; j < M * S; ++j) bc->data<float>()[j] = k.bias[size_t(j / S)];
    }
    // Stride 1 with nothing to crop: the Conv (with its unary ops) writes the output itself.
    const bool direct = S == 1 && dh.offset == 0 && dw.offset == 0 && rows == y[2] && cols == y[3];
    const ValueId cur = emit_conv_chain(g, nodes, n.name + "_subpixel", n.name, false, n.inputs[0],
                                        std::move(wc), std::move(bc), G, {dh.taps, dw.taps},
                                        {dh.pad_begin, dw.pad_begin, dh.pad_end, dw.pad_end}, epi,
                                        direct ? epi.out : kNoValue);
    if (direct) continue;
    Node il = interleave(k, cur, epi.out, {dh.offset, dw.offset});
    infer_node(g, il);
    nodes.push_back(std::move(il));
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace kiln
