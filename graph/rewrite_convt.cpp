// ConvTranspose as sub-pixel convolution: along each spatial dim, output position t (before
// cropping by the begin pad) = s * q + r receives x[q - j] * w[r + s * j] (dilated kernel
// index), so each phase r is an ordinary stride-1 convolution of the input with a flipped,
// sub-sampled kernel. All s_h * s_w phases become one Conv with M * s_h * s_w output channels
// (phases padded to a common ceil(k_eff / s) taps with zeros; channel (m * s_h + r_h) * s_w +
// r_w), which the solver runs on its fast conv families, followed by a SubpixelInterleave that
// scatters the phase planes into the output and applies the crop. FLOPs match the scatter
// form when s divides the effective kernel (k 2/s 2, k 4/s 2) on large maps; otherwise the zero
// taps cost (s * ceil(k / s) / k)^2 more (k 3/s 2: 1.8x), and the phases' common planes one
// row and column more than each phase needs (a 4x4 input's k 4/s 2: 1.56x). Where that costs
// over 15%, each phase is its own Conv instead (its own taps, pads and rows; the phases
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

// The per-phase form: a Conv per stride phase (its own taps, pads and rows), the absorbed unary
// ops after each (fused into it later), a Concat of the phases and a phase-major interleave
// from the phases' origins into the last absorbed node's output.
void emit_phases(Graph& g, std::vector<Node>& nodes, const Node& n, const Tensor& w,
                 const Epilogue& epi, const PhaseDim& ph, const PhaseDim& pw) {
  const Shape x = g.value(n.inputs[0]).shape, y = g.value(n.outputs[0]).shape;
  const std::vector<int64_t> s = n.attr_ints("strides"), d = n.attr_ints("dilations"),
                             p = n.attr_ints("pads");
  const int64_t G = n.attr_i("group", 1), M = y[1], Cg = x[1] / G, Mg = M / G;
  const int64_t KH = w.shape()[2], KW = w.shape()[3];
  const float* wp = w.data<float>();
  // (A copy: adding constants may move the values.)
  std::vector<float> b(size_t(M), 0.f);
  if (n.in(2) != kNoValue) std::copy_n(g.value(n.inputs[2]).constant->data<float>(), M, b.begin());
  std::vector<ValueId> phases;
  for (int64_t rh = 0; rh < s[0]; ++rh)
    for (int64_t rw = 0; rw < s[1]; ++rw) {
      const int64_t th = ph.taps[size_t(rh)], tw = pw.taps[size_t(rw)];
      Tensor wc(DType::f32, {M, Cg, th, tw});
      float* cp = wc.data<float>();
      for (int64_t m = 0; m < M; ++m)
        for (int64_t ci = 0; ci < Cg; ++ci)
          for (int64_t mh = 0; mh < th; ++mh)
            for (int64_t mw = 0; mw < tw; ++mw) {
              const int64_t eh = rh + s[0] * (th - 1 - mh), ew = rw + s[1] * (tw - 1 - mw);
              if (eh % d[0] || ew % d[1]) continue;  // between dilated taps: 0
              const int64_t c = (m / Mg) * Cg + ci;  // ConvTranspose weight [C, M/G, kH, kW]
              cp[((m * Cg + ci) * th + mh) * tw + mw] =
                  wp[((c * Mg + m % Mg) * KH + eh / d[0]) * KW + ew / d[1]] * epi.scale[size_t(m)];
            }
      const std::string tag = n.name + "_phase" + std::to_string(rh * s[1] + rw);
      Node conv;
      conv.name = tag;
      conv.op = "Conv";
      conv.inputs = {n.inputs[0], g.add_const(unique_value_name(g, tag + "_w"), wc)};
      if (n.in(2) != kNoValue || epi.shifted) {
        Tensor bc(DType::f32, {M});
        for (int64_t m = 0; m < M; ++m)
          bc.data<float>()[m] = b[size_t(m)] * epi.scale[size_t(m)] + epi.shift[size_t(m)];
        conv.inputs.push_back(g.add_const(unique_value_name(g, tag + "_b"), bc));
      }
      conv.attrs["group"] = attr_i(G);
      conv.attrs["kernel_shape"] = attr_ints({th, tw});
      conv.attrs["pads"] =
          attr_ints({ph.pb[size_t(rh)], pw.pb[size_t(rw)], ph.pe[size_t(rh)], pw.pe[size_t(rw)]});
      conv.outputs = {g.add_value(unique_value_name(g, tag))};
      infer_node(g, conv);
      ValueId cur = conv.outputs[0];
      nodes.push_back(std::move(conv));
      for (const Node& u : epi.unary) {
        Node op = u;
        op.name = u.name + "_" + tag;
        op.inputs[0] = cur;
        op.outputs = {g.add_value(unique_value_name(g, op.name))};
        infer_node(g, op);
        cur = op.outputs[0];
        nodes.push_back(std::move(op));
      }
      phases.push_back(cur);
    }
  Node cat;
  cat.name = n.name + "_phases";
  cat.op = "Concat";
  cat.inputs = phases;
  cat.attrs["axis"] = attr_i(1);
  cat.outputs = {phase_value(g, n.name)};
  infer_node(g, cat);
  Node il;
  il.name = n.name;
  il.op = "SubpixelInterleave";
  il.inputs = {cat.outputs[0]};
  il.outputs = {epi.out};
  il.attrs["strides"] = attr_ints(s);
  il.attrs["offsets"] = attr_ints({p[0], p[1]});
  il.attrs["out_hw"] = attr_ints({y[2], y[3]});
  il.attrs["phase_major"] = attr_i(1);
  il.attrs["origins_h"] = attr_ints(ph.start);
  il.attrs["origins_w"] = attr_ints(pw.start);
  nodes.push_back(std::move(cat));
  infer_node(g, il);
  nodes.push_back(std::move(il));
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
    // A Conv per phase where the one Conv's extra phase rows and zero taps cost over 15% more
    // (a 4x4 input's k4s2p1: 5x5 phase planes, 1.56x; k3s2: half its taps zero).
    if (S > 1) {
      const auto ph = plan_phases(x[2], y[2], KH, s[0], d[0], p[0]);
      const auto pw = plan_phases(x[3], y[3], KW, s[1], d[1], p[1]);
      if (ph && pw) {
        const double one = double(S) * double(x[2] + dh.pad_begin + dh.pad_end - dh.taps + 1) *
                           double(x[3] + dw.pad_begin + dw.pad_end - dw.taps + 1) *
                           double(dh.taps * dw.taps);
        double each = 0;
        for (int64_t th : ph->taps)
          for (int64_t tw : pw->taps) each += double(ph->rows * pw->rows * th * tw);
        if (each <= 0.85 * one) {
          emit_phases(g, nodes, n, w, epi, *ph, *pw);
          ++rewritten;
          continue;
        }
      }
    }
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
