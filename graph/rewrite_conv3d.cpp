// 3-D convolutions (video CNNs: R3D, MC3, R(2+1)D) lowered to the 2-D kernels. A Conv over
// X [N, C, D, H, W] with kernel [kD, kH, kW] is, per output frame t, the sum over the kD taps j
// of 2-D convs of the input frames t * sD + j * dD (after padding D): stacking those kD frames
// along the channels makes it one 2-D conv with kD * C input channels. So:
//
//   Transpose(X, 0 2 1 3 4)             [N, D, C, H, W]        (the frames' order)
//   Pad D by the conv's D pads          [N, Dp, C, H, W]       (as H of [1, N, D, C * H * W])
//   Slice D at j * dD, step sD, j < kD  kD x [N, Do, C, H, W]  (kD = 1, sD = 1: the frames)
//   Concat on C, Reshape                [N * Do, kD * C, H, W]
//   Conv 2-D (kH, kW; weights W'[m][j C + c] = W[m][c][j])  [N * Do, M, Ho, Wo]
//   Reshape, Transpose(0 2 1 3 4)       [N, M, Do, Ho, Wo]
//
// The 2-D conv then has every family (Winograd on the 3x3 part included), and the solver its
// layouts. A grouped 3-D conv (X3D's, MViT's depthwise ones) is the sum of one grouped 2-D
// conv per depth tap (stacking would interleave the groups' channels). 3-D MaxPool /
// AveragePool: the 2-D pool per frame, then the max / mean of the depth taps (a window one frame
// deep over few channels: the 2-D pool of the [N, C * D, H, W] view). Elementwise ops
// between lowered convs move into the frames' order (no Transpose pair around them). 5-D
// GlobalAveragePool becomes the 4-D one over [N, C, D * H, W].
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "graph/infer.h"
#include "graph/passes.h"
#include "graph/post_ops.h"

namespace kiln {
namespace {

Node node(const Node& n, const std::string& op, std::vector<ValueId> inputs, const char* part) {
  Node x;
  x.name = n.name + "_" + part;
  x.op = op;
  x.inputs = std::move(inputs);
  return x;
}

// [N, C, D, H, W] <-> [N, D, C, H, W] (its own inverse).
const std::vector<int64_t> kFramesPerm = {0, 2, 1, 3, 4};

Node frames(const Node& n, ValueId x, const char* part) {
  Node t = node(n, "Transpose", {x}, part);
  t.attrs["perm"] = attr_ints(kFramesPerm);
  return t;
}

ValueId ints_const(Graph& g, const Node& n, const char* part, const std::vector<int64_t>& v) {
  return g.add_const(unique_value_name(g, n.name + "_" + part), ints_tensor(v));
}

// v viewed as `to`: a Reshape named after n and part, writing `out` (kNoValue: a new value named
// base_part).
ValueId reshape(Graph& g, std::vector<Node>& nodes, const Node& n, ValueId v, const Shape& to,
                const std::string& part, const std::string& base, ValueId out = kNoValue) {
  return emit_node(g, nodes,
                   node(n, "Reshape", {v, ints_const(g, n, part.c_str(), to)}, part.c_str()),
                   base + "_" + part, out);
}

// W [A, B, kD, kH, kW] (a Conv's [M, C/g, ...] or a ConvTranspose's [C, M/g, ...]) with its
// depth taps stacked on dim 1: W' [A, kD * B, kH, kW], W'[a][j B + b] = W[a][b][j]. A constant
// W is restacked at load, a computed one by a Transpose and a view.
ValueId stacked_weights(Graph& g, std::vector<Node>& nodes, const Node& n, ValueId wv) {
  const Shape s = g.value(wv).shape;
  const int64_t A = s[0], B = s[1], kd = s[2], hw = s[3] * s[4];
  const Shape to{A, kd * B, s[3], s[4]};
  const std::string name = g.value(wv).name + "_2d";
  if (!g.value(wv).is_const()) {
    Node t = node(n, "Transpose", {wv}, "wtaps");
    t.attrs["perm"] = attr_ints(kFramesPerm);
    const ValueId v = emit_node(g, nodes, std::move(t), name + "_taps");
    return emit_node(g, nodes, node(n, "Reshape", {v, ints_const(g, n, "wview", to)}, "wview"),
                     name);
  }
  Tensor out(DType::f32, to);
  const ModelFloats in(*g.value(wv).constant);
  float* o = out.data<float>();
  for (int64_t a = 0; a < A; ++a)
    for (int64_t j = 0; j < kd; ++j)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < hw; ++i)
          o[((a * kd + j) * B + b) * hw + i] = in[((a * B + b) * kd + j) * hw + i];
  return g.add_const(unique_value_name(g, name), std::move(out));
}

// W [A, B, kD, kH, kW] -> its depth tap j, [A, B, kH, kW] (a copy at load, or a Slice and a
// view of a computed W).
ValueId tap_weights(Graph& g, std::vector<Node>& nodes, const Node& n, ValueId wv, int64_t j) {
  const Shape s = g.value(wv).shape;
  const Shape to{s[0], s[1], s[3], s[4]};
  const std::string part = "wtap" + std::to_string(j);
  const std::string name = g.value(wv).name + "_" + part;
  if (!g.value(wv).is_const()) {
    const ValueId v = emit_node(g, nodes,
                                node(n, "Slice",
                                     {wv, ints_const(g, n, (part + "s").c_str(), {j}),
                                      ints_const(g, n, (part + "e").c_str(), {j + 1}),
                                      ints_const(g, n, (part + "a").c_str(), {2})},
                                     part.c_str()),
                                name + "_slice");
    return emit_node(
        g, nodes,
        node(n, "Reshape", {v, ints_const(g, n, (part + "v").c_str(), to)}, (part + "v").c_str()),
        name);
  }
  const int64_t AB = s[0] * s[1], kd = s[2], hw = s[3] * s[4];
  Tensor out(DType::f32, to);
  const ModelFloats in(*g.value(wv).constant);
  float* o = out.data<float>();
  for (int64_t m = 0; m < AB; ++m)
    for (int64_t i = 0; i < hw; ++i) o[m * hw + i] = in[(m * kd + j) * hw + i];
  return g.add_const(unique_value_name(g, name), std::move(out));
}

// The frames v [N, D, C, H, W] padded along D by (lo, hi) frames of `value` (as H of the view
// [1, N, D, C * H * W]: the 4-D pad kernel's H padding).
ValueId pad_frames(Graph& g, std::vector<Node>& nodes, const Node& n, ValueId v, int64_t lo,
                   int64_t hi, float value, const std::string& base) {
  const Shape s = g.value(v).shape;
  const int64_t inner = s[2] * s[3] * s[4];
  v = reshape(g, nodes, n, v, {1, s[0], s[1], inner}, "dview", base);
  Tensor fill(DType::f32, {});
  *fill.data<float>() = value;
  v = emit_node(g, nodes,
                node(n, "Pad",
                     {v, ints_const(g, n, "dpads", {0, 0, lo, 0, 0, 0, hi, 0}),
                      g.add_const(unique_value_name(g, n.name + "_dfill"), std::move(fill))},
                     "dpad"),
                base + "_dpad");
  return reshape(g, nodes, n, v, {s[0], s[1] + lo + hi, s[2], s[3], s[4]}, "dback", base);
}

// The kD depth taps of padded frames v [N, Dp, C, H, W]: tap j holds frames j * dil + t * stride
// for the Do output frames t.
std::vector<ValueId> depth_taps(Graph& g, std::vector<Node>& nodes, const Node& n, ValueId v,
                                int64_t kd, int64_t dil, int64_t stride, int64_t Do,
                                const std::string& base, int64_t axis = 1) {
  std::vector<ValueId> taps;
  for (int64_t j = 0; j < kd; ++j) {
    const int64_t from = j * dil, to = from + (Do - 1) * stride + 1;
    const std::string part = "tap" + std::to_string(j);
    taps.push_back(emit_node(g, nodes,
                             node(n, "Slice",
                                  {v, ints_const(g, n, (part + "s").c_str(), {from}),
                                   ints_const(g, n, (part + "e").c_str(), {to}),
                                   ints_const(g, n, (part + "a").c_str(), {axis}),
                                   ints_const(g, n, (part + "t").c_str(), {stride})},
                                  part.c_str()),
                             base + "_" + part));
  }
  return taps;
}

// A temporal-only Conv (kernel kD x 1 x 1, spatial stride 1, no spatial padding; grouped or
// not) is a 2-D conv of [N, C, D, H * W] with kernel kD x 1: no frames' order, no depth taps.
// Taken for grouped convs (X3D's temporal depthwise stem), whose taps would otherwise be kD
// convs; a dense one stays with the stacked taps, which keep a (2+1)-D net's spatial and
// temporal convs in frames' order.
bool lower_temporal_conv(Graph& g, std::vector<Node>& nodes, const Node& n) {
  const Shape x = g.value(n.in(0)).shape, y = g.value(n.outputs[0]).shape;
  const ValueId wv = n.in(1);
  const Shape ws = g.value(wv).shape;
  const std::vector<int64_t> st = n.attr_ints("strides"), dil = n.attr_ints("dilations"),
                             pads = n.attr_ints("pads");
  if (n.attr_i("group", 1) == 1 || ws[3] != 1 || ws[4] != 1 || st[1] != 1 || st[2] != 1 ||
      pads[1] || pads[2] || pads[4] || pads[5])
    return false;
  const std::string base = g.value(n.outputs[0]).name;
  const Shape w4{ws[0], ws[1], ws[2], 1};
  ValueId w = kNoValue;
  if (g.value(wv).is_const()) {  // the same floats, 4-D (a copy: constants are immutable)
    Tensor t(DType::f32, w4);
    std::memcpy(t.raw(), g.value(wv).constant->stored_bytes(), t.nbytes());
    w = g.add_const(unique_value_name(g, g.value(wv).name + "_2d"), std::move(t));
  } else {
    w = reshape(g, nodes, n, wv, w4, "wview", base);
  }
  Node conv = node(
      n, "Conv", {reshape(g, nodes, n, n.in(0), {x[0], x[1], x[2], x[3] * x[4]}, "dview", base), w},
      "2d");
  if (n.in(2) != kNoValue) conv.inputs.push_back(n.in(2));
  conv.attrs["strides"] = attr_ints({st[0], 1});
  conv.attrs["dilations"] = attr_ints({dil[0], 1});
  conv.attrs["pads"] = attr_ints({pads[0], 0, pads[3], 0});
  conv.attrs["group"] = attr_i(n.attr_i("group", 1));
  reshape(g, nodes, n, emit_node(g, nodes, std::move(conv), base + "_2d"), y, "back", base,
          n.outputs[0]);
  return true;
}

bool lower_conv3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Conv" || n.outputs.size() != 1 || g.value(n.in(0)).shape.size() != 5) return false;
  if (lower_temporal_conv(g, nodes, n)) return true;
  const ValueId wv = n.in(1);
  const Shape x = g.value(n.in(0)).shape, y = g.value(n.outputs[0]).shape;
  const Shape& ws = g.value(wv).shape;
  const int64_t N = x[0], C = x[1], H = x[3], W = x[4], M = ws[0], kd = ws[2];
  const int64_t Do = y[2], Ho = y[3], Wo = y[4];
  // infer_conv wrote the window out in full: 3 kernel dims, strides, dilations, 6 pads.
  const std::vector<int64_t> st = n.attr_ints("strides"), dil = n.attr_ints("dilations"),
                             pads = n.attr_ints("pads");
  const std::string base = g.value(n.outputs[0]).name;

  const int64_t group = n.attr_i("group", 1);
  // The 2-D conv of the frames f [N * Do, ci, H, W] with weights w (bias when `bias`).
  auto conv2d = [&](ValueId f, ValueId w, bool bias, const std::string& part) {
    Node conv = node(n, "Conv", {f, w}, part.c_str());
    if (bias && n.in(2) != kNoValue) conv.inputs.push_back(n.in(2));
    conv.attrs["strides"] = attr_ints({st[1], st[2]});
    conv.attrs["dilations"] = attr_ints({dil[1], dil[2]});
    conv.attrs["pads"] = attr_ints({pads[1], pads[2], pads[4], pads[5]});
    if (group > 1) conv.attrs["group"] = attr_i(group);
    return emit_node(g, nodes, std::move(conv), base + "_" + part);
  };
  auto batch = [&](ValueId f, int64_t ci, const std::string& part) {
    return reshape(g, nodes, n, f, {N * Do, ci, H, W}, part, base);
  };

  ValueId v = emit_node(g, nodes, frames(n, n.in(0), "frames"), base + "_frames");
  const int64_t dp = x[2] + pads[0] + pads[3];
  if (pads[0] || pads[3]) v = pad_frames(g, nodes, n, v, pads[0], pads[3], 0.f, base);
  std::vector<ValueId> taps = {v};
  if (kd > 1 || st[0] > 1 || Do != dp)
    taps = depth_taps(g, nodes, n, v, kd, dil[0], st[0], Do, base);
  if (group == 1) {
    // The taps stacked on the channels: one 2-D conv reads them all.
    if (taps.size() > 1) {
      Node cat = node(n, "Concat", taps, "stack");
      cat.attrs["axis"] = attr_i(2);
      taps = {emit_node(g, nodes, std::move(cat), base + "_stack")};
    }
    v = conv2d(batch(taps[0], kd * C, "batch"), stacked_weights(g, nodes, n, wv), true, "2d");
  } else {
    // Stacked taps would interleave the groups' channels: one grouped 2-D conv per tap, each
    // adding the one before (a residual in its epilogue), the bias in the first.
    v = kNoValue;
    for (int64_t j = 0; j < kd; ++j) {
      const std::string part = "2d" + std::to_string(j);
      const ValueId y = conv2d(batch(taps[size_t(j)], C, "batch" + std::to_string(j)),
                               tap_weights(g, nodes, n, wv, j), j == 0, part);
      v = v == kNoValue ? y
                        : emit_node(g, nodes, node(n, "Add", {y, v}, (part + "sum").c_str()),
                                    base + "_" + part + "sum");
    }
  }
  v = reshape(g, nodes, n, v, {N, Do, M, Ho, Wo}, "unbatch", base);
  emit_node(g, nodes, frames(n, v, "back"), "", n.outputs[0]);
  return true;
}

// ConvTranspose over X [N, C, D, H, W] (weights [C, M/g, kD, kH, kW]): input frame i's tap j
// lands on output frame t = i * sD + j * dD - pD. Per input frame, the 2-D ConvTranspose of
// every tap at once: Z [N, D, kD, M * Ho * Wo] (group 1: the taps stacked on the output
// channels, W'[c][j M + m] = W[c][m][j], so Z is a view of one 2-D ConvTranspose; grouped: one
// per tap, concatenated). When each output frame takes exactly one tap (kD = sD, pD = 0, dD = 1:
// 3-D U-Nets' 2x2x2 stride-2 upsampling) Z viewed as [N, D * kD, M, Ho, Wo] is the output.
// Otherwise, per stride phase r (output frames q * sD + r), the sum over the taps j with
// (r + pD - j dD) divisible by sD of Z's frames q + (r + pD - j dD) / sD (zero outside
// [0, D)), the phases interleaved by a Concat and a view; the bias added last.
bool lower_convt3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "ConvTranspose" || n.outputs.size() != 1 || g.value(n.in(0)).shape.size() != 5)
    return false;
  const ValueId wv = n.in(1);
  const Shape x = g.value(n.in(0)).shape, y = g.value(n.outputs[0]).shape;
  const int64_t N = x[0], C = x[1], D = x[2], H = x[3], W = x[4], M = y[1], Do = y[2];
  const int64_t kd = g.value(wv).shape[2], plane = M * y[3] * y[4], group = n.attr_i("group", 1);
  // Canonical after inference: strides, dilations, pads (end pads may be negative).
  const std::vector<int64_t> st = n.attr_ints("strides"), dil = n.attr_ints("dilations"),
                             pads = n.attr_ints("pads");
  const std::string base = g.value(n.outputs[0]).name;
  const bool one_tap = st[0] == kd && dil[0] == 1 && pads[0] == 0 && Do == D * kd;
  const ValueId bias = n.in(2);
  auto view = [&](ValueId v, const Shape& to, const std::string& part) {
    return reshape(g, nodes, n, v, to, part, base);
  };
  // Bias [M] repeated for `taps` taps stacked on the channels.
  auto tiled_bias = [&](int64_t taps) {
    const ModelFloats b(*g.value(bias).constant);
    Tensor t(DType::f32, Shape{taps * M});
    for (int64_t i = 0; i < taps * M; ++i) t.data<float>()[i] = b[i % M];
    return g.add_const(unique_value_name(g, n.name + "_bias2d"), std::move(t));
  };

  ValueId f = emit_node(g, nodes, frames(n, n.in(0), "frames"), base + "_frames");
  f = view(f, {N * D, C, H, W}, "batch");
  auto convt2d = [&](ValueId wt, ValueId b, const std::string& part) {
    Node c = node(n, "ConvTranspose", {f, wt}, part.c_str());
    if (b != kNoValue) c.inputs.push_back(b);
    c.attrs["strides"] = attr_ints({st[1], st[2]});
    c.attrs["dilations"] = attr_ints({dil[1], dil[2]});
    c.attrs["pads"] = attr_ints({pads[1], pads[2], pads[4], pads[5]});
    if (group > 1) c.attrs["group"] = attr_i(group);
    return emit_node(g, nodes, std::move(c), base + "_" + part);
  };
  ValueId z;  // [N, D, kD, M * Ho * Wo]
  // (A computed bias is added last, as in the general case, unless each tap gets it whole.)
  const bool bias_in_taps = one_tap && bias != kNoValue && (group > 1 || g.value(bias).is_const());
  if (group == 1) {
    z = view(
        convt2d(stacked_weights(g, nodes, n, wv), bias_in_taps ? tiled_bias(kd) : kNoValue, "2d"),
        {N, D, kd, plane}, "taps");
  } else {
    std::vector<ValueId> taps;
    for (int64_t j = 0; j < kd; ++j) {
      const std::string part = "2d" + std::to_string(j);
      taps.push_back(
          view(convt2d(tap_weights(g, nodes, n, wv, j), bias_in_taps ? bias : kNoValue, part),
               {N, D, 1, plane}, part + "tap"));
    }
    Node cat = node(n, "Concat", taps, "taps");
    cat.attrs["axis"] = attr_i(2);
    z = emit_node(g, nodes, std::move(cat), base + "_taps");
  }

  ValueId v;
  if (one_tap) {
    v = view(z, {N, Do, M, y[3], y[4]}, "interleave");
  } else {
    const int64_t sd = st[0], Q = (Do + sd - 1) / sd;  // frames per phase (the last ones cut)
    std::vector<ValueId> phases;
    for (int64_t r = 0; r < sd; ++r) {
      ValueId sum = kNoValue;
      for (int64_t j = 0; j < kd; ++j) {
        const int64_t num = r + pads[0] - j * dil[0];
        if (((num % sd) + sd) % sd != 0) continue;
        const int64_t off = num / sd, from = std::max<int64_t>(0, off), to = std::min(D, off + Q);
        if (to <= from) continue;  // this tap reaches none of the phase's frames
        const std::string part = "p" + std::to_string(r) + "t" + std::to_string(j);
        ValueId t = emit_node(g, nodes,
                              node(n, "Slice",
                                   {z, ints_const(g, n, (part + "s").c_str(), {j, from}),
                                    ints_const(g, n, (part + "e").c_str(), {j + 1, to}),
                                    ints_const(g, n, (part + "a").c_str(), {2, 1})},
                                   part.c_str()),
                              base + "_" + part);
        if (const int64_t lo = from - off, hi = off + Q - to; lo || hi)
          t = emit_node(
              g, nodes,
              node(n, "Pad",
                   {t, ints_const(g, n, (part + "p").c_str(), {0, lo, 0, 0, 0, hi, 0, 0})},
                   (part + "pad").c_str()),
              base + "_" + part + "pad");
        sum = sum == kNoValue
                  ? t
                  : emit_node(g, nodes, node(n, "Add", {sum, t}, (part + "sum").c_str()),
                              base + "_" + part + "sum");
      }
      if (sum == kNoValue)  // no tap lands on this phase (sD > kD dD): zeros
        sum = g.add_const(unique_value_name(g, n.name + "_zeros"),
                          Tensor(DType::f32, Shape{N, Q, 1, plane}));
      phases.push_back(sum);
    }
    v = phases[0];
    if (phases.size() > 1) {
      Node cat = node(n, "Concat", phases, "phases");
      cat.attrs["axis"] = attr_i(2);
      v = emit_node(g, nodes, std::move(cat), base + "_phases");
    }
    v = view(v, {N, Q * sd, M, y[3], y[4]}, "interleave");
    if (Q * sd != Do)
      v = emit_node(g, nodes,
                    node(n, "Slice",
                         {v, ints_const(g, n, "cuts", {0}), ints_const(g, n, "cute", {Do}),
                          ints_const(g, n, "cuta", {1})},
                         "cut"),
                    base + "_cut");
  }
  if (bias != kNoValue && !bias_in_taps) {
    ValueId b;
    if (g.value(bias).is_const()) {
      Tensor t(DType::f32, Shape{M, 1, 1});
      const ModelFloats in(*g.value(bias).constant);
      for (int64_t m = 0; m < M; ++m) t.data<float>()[m] = in[m];
      b = g.add_const(unique_value_name(g, n.name + "_bias3d"), std::move(t));
    } else {
      b = view(bias, {M, 1, 1}, "biasview");
    }
    v = emit_node(g, nodes, node(n, "Add", {v, b}, "bias"), base + "_bias");
  }
  emit_node(g, nodes, frames(n, v, "back"), "", n.outputs[0]);
  return true;
}

// A constant Pad of [N, C, D, H, W] along D, H and W (PyTorch exports a 3-D average pool that
// counts its pads as one): H and W padded as those of the view [N, C * D, H, W], then D as H of
// [1, N * C, D, H * W], on the 4-D pad kernel.
bool lower_pad3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Pad" || n.outputs.size() != 1 || g.value(n.in(0)).shape.size() != 5 ||
      n.attr_s("mode", "constant") != "constant" || n.in(3) != kNoValue ||
      !g.value(n.in(1)).is_const() || (n.in(2) != kNoValue && !g.value(n.in(2)).is_const()))
    return false;
  const Tensor& pt = *g.value(n.in(1)).constant;
  if (pt.dtype() != DType::i64 || pt.numel() != 10) return false;
  std::vector<int64_t> p(pt.data<int64_t>(), pt.data<int64_t>() + 10);
  if (p[0] || p[1] || p[5] || p[6] ||
      std::any_of(p.begin(), p.end(), [](int64_t v) { return v < 0; }))
    return false;
  const Shape x = g.value(n.in(0)).shape, y = g.value(n.outputs[0]).shape;
  const std::string base = g.value(n.outputs[0]).name;
  auto pad4 = [&](ValueId v, const Shape& view, std::vector<int64_t> pads, const Shape& back,
                  const char* part, ValueId to) {
    const std::string s(part);
    v = emit_node(
        g, nodes,
        node(n, "Reshape", {v, ints_const(g, n, (s + "v").c_str(), view)}, (s + "view").c_str()),
        base + "_" + s);
    std::vector<ValueId> in = {v, ints_const(g, n, (s + "p").c_str(), pads)};
    if (n.in(2) != kNoValue) in.push_back(n.in(2));
    v = emit_node(g, nodes, node(n, "Pad", in, (s + "pad").c_str()), base + "_" + s + "pad");
    return emit_node(
        g, nodes,
        node(n, "Reshape", {v, ints_const(g, n, (s + "b").c_str(), back)}, (s + "back").c_str()),
        base + "_" + s + "back", to);
  };
  const bool depth = p[2] || p[7];
  ValueId v = n.in(0);
  if (p[3] || p[4] || p[8] || p[9])
    v = pad4(v, {x[0], x[1] * x[2], x[3], x[4]}, {0, 0, p[3], p[4], 0, 0, p[8], p[9]},
             {x[0], x[1], x[2], y[3], y[4]}, "hw", depth ? kNoValue : n.outputs[0]);
  if (depth)
    pad4(v, {1, x[0] * x[1], x[2], y[3] * y[4]}, {0, 0, p[2], 0, 0, 0, p[7], 0}, y, "d",
         n.outputs[0]);
  if (v == n.in(0) && !depth)  // no padding at all
    emit_node(g, nodes, node(n, "Identity", {v}, "nopad"), "", n.outputs[0]);
  return true;
}

// MaxPool / AveragePool over [N, C, D, H, W] (both separable): the 2-D pool on every frame,
// then along D the max (the frames padded with -inf) or the mean (padded with 0, the sum of the
// taps times 1 / the window's count per output frame: count_include_pad counts the pads, never
// what ceil_mode's last window hangs past them) of the kD strided taps.
bool lower_pool3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  const bool is_max = n.op == "MaxPool";
  if ((!is_max && n.op != "AveragePool") || n.outputs.size() != 1 ||
      g.value(n.in(0)).shape.size() != 5)
    return false;
  const Shape x = g.value(n.in(0)).shape, y = g.value(n.outputs[0]).shape;
  const int64_t N = x[0], C = x[1], D = x[2], Do = y[2];
  // infer_pool wrote the window out in full.
  const std::vector<int64_t> k = n.attr_ints("kernel_shape"), st = n.attr_ints("strides"),
                             dil = n.attr_ints("dilations"), pads = n.attr_ints("pads");
  const std::string base = g.value(n.outputs[0]).name;
  auto pool2d = [&](ValueId v) {
    Node p = node(n, n.op, {v}, "2d");
    p.attrs = n.attrs;
    p.attrs["kernel_shape"] = attr_ints({k[1], k[2]});
    p.attrs["strides"] = attr_ints({st[1], st[2]});
    p.attrs["dilations"] = attr_ints({dil[1], dil[2]});
    p.attrs["pads"] = attr_ints({pads[1], pads[2], pads[4], pads[5]});
    return emit_node(g, nodes, std::move(p), base + "_2d");
  };

  // A window one frame deep (LPRNet's MaxPool3d over [N, 1, C, H, W], strided along C): the 2-D
  // pool of every (channel, frame) plane of the view [N, C * Do, H, W], after taking every
  // sD-th frame. The frames' order would pool C-channel images, a vector's lanes mostly idle for
  // few channels (1 there); for more, it saves the transposes between lowered convs.
  if (k[0] == 1 && pads[0] == 0 && pads[3] == 0 && C < 8 && (Do - 1) * st[0] < D) {
    ValueId v = n.in(0);
    if (Do != D) v = depth_taps(g, nodes, n, v, 1, 1, st[0], Do, base, 2)[0];
    v = pool2d(reshape(g, nodes, n, v, {N, C * Do, x[3], x[4]}, "planes", base));
    reshape(g, nodes, n, v, y, "back", base, n.outputs[0]);
    return true;
  }

  ValueId v = emit_node(g, nodes, frames(n, n.in(0), "frames"), base + "_frames");
  v = pool2d(reshape(g, nodes, n, v, {N * D, C, x[3], x[4]}, "batch", base));
  v = reshape(g, nodes, n, v, {N, D, C, y[3], y[4]}, "unbatch", base);

  // The padded frames the windows cover: the D pads, and what ceil_mode's last one overhangs.
  const int64_t span = (Do - 1) * st[0] + (k[0] - 1) * dil[0] + 1;
  const int64_t lo = pads[0], hi = std::max<int64_t>(0, span - D - lo);
  if (k[0] > 1 || st[0] > 1 || lo || hi || Do != D) {
    if (lo || hi)
      v = pad_frames(g, nodes, n, v, lo, hi, is_max ? -std::numeric_limits<float>::infinity() : 0.f,
                     base);
    const std::vector<ValueId> taps = depth_taps(g, nodes, n, v, k[0], dil[0], st[0], Do, base);
    ValueId acc = taps[0];
    for (size_t j = 1; j < taps.size(); ++j) {
      const std::string part = "tap" + std::to_string(j) + "acc";
      acc = emit_node(g, nodes, node(n, is_max ? "Max" : "Add", {acc, taps[j]}, part.c_str()),
                      base + "_" + part);
    }
    if (!is_max) {
      const bool with_pads = n.attr_i("count_include_pad", 0) != 0;
      Tensor inv(DType::f32, Shape{1, Do, 1, 1, 1});
      for (int64_t t = 0; t < Do; ++t) {
        const int64_t b = t * st[0], e = b + k[0];  // window in padded frames
        const int64_t count = with_pads ? std::min(e, D + pads[0] + pads[3]) - b
                                        : std::min(e, lo + D) - std::max(b, lo);
        inv.data<float>()[t] = 1.f / float(count);
      }
      acc = emit_node(
          g, nodes,
          node(n, "Mul",
               {acc, g.add_const(unique_value_name(g, n.name + "_dcount"), std::move(inv))},
               "dmean"),
          base + "_dmean");
    }
    v = acc;
  }
  emit_node(g, nodes, frames(n, v, "back"), "", n.outputs[0]);
  return true;
}

// GlobalAveragePool over [N, C, D, H, W]: the 4-D one over the view [N, C, D * H, W].
bool lower_global_pool3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "GlobalAveragePool" || n.outputs.size() != 1) return false;
  const Shape x = g.value(n.in(0)).shape;
  if (x.size() != 5) return false;
  const std::string base = g.value(n.outputs[0]).name;
  ValueId v = reshape(g, nodes, n, n.in(0), {x[0], x[1], x[2] * x[3], x[4]}, "flat", base);
  v = emit_node(g, nodes, node(n, "GlobalAveragePool", {v}, "2d"), base + "_2d");
  reshape(g, nodes, n, v, {x[0], x[1], 1, 1, 1}, "back", base, n.outputs[0]);
  return true;
}

bool is_frames_transpose(const Node& n) {
  return n.op == "Transpose" && n.outputs.size() == 1 && n.inputs.size() == 1 &&
         n.attr_ints("perm") == kFramesPerm;
}

// Between two lowered convs the model's elementwise ops (ReLU, the residual Add) sit between a
// Transpose back and the next conv's Transpose to frames. Each such op moves before the
// Transpose (it computes the same on the frames' order), and a Transpose of a Transpose (the
// perm is its own inverse) becomes an Identity: the frames stay in frames' order from conv
// to conv. Then an op on a conv's [N, Do, M, Ho, Wo] view of its [N * Do, M, Ho, Wo] output
// moves before that Reshape (its other operand viewed as 4-D), right after the 2-D conv,
// which fuses it into its epilogue. A Concat of frames' order values moves likewise. A moved
// value's other consumers keep the Transpose or Reshape (dead otherwise).
int sink_frame_transposes(Graph& g) {
  std::unordered_map<ValueId, ValueId> transposed;  // v = Transpose(transposed[v])
  std::unordered_map<ValueId, ValueId> viewed;      // 5-D v = Reshape(4-D viewed[v])
  std::unordered_map<ValueId, ValueId> framed;      // framed[v] = Transpose(v), already made
  auto find = [](const std::unordered_map<ValueId, ValueId>& m, ValueId v) {
    const auto it = m.find(v);
    return it == m.end() ? kNoValue : it->second;
  };
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    if (is_frames_transpose(n)) {
      if (const ValueId x = find(transposed, n.in(0)); x != kNoValue) {
        emit_node(g, nodes, node(n, "Identity", {x}, "untransposed"), "", n.outputs[0]);
        return true;
      }
      transposed[n.outputs[0]] = n.in(0);
      framed.emplace(n.in(0), n.outputs[0]);
      return false;
    }
    if (n.op == "Reshape" && n.outputs.size() == 1 && g.value(n.outputs[0]).shape.size() == 5 &&
        g.value(n.in(0)).shape.size() == 4) {
      viewed[n.outputs[0]] = n.in(0);
      return false;
    }
    if (n.outputs.size() != 1 || n.inputs.empty()) return false;
    const Shape out = g.value(n.outputs[0]).shape;
    if (n.op == "Concat" && out.size() == 5) {
      // A Concat with an input in frames' order (a 3-D U-Net's decoder) concatenates the
      // inputs in frames' order, on the axis the perm moves its axis to: the others
      // transposed there (by a Transpose the graph has, or a new one).
      Node m = n;
      m.name = n.name + "_moved";
      bool any = false;
      for (ValueId v : n.inputs) any |= find(transposed, v) != kNoValue;
      if (!any) return false;
      for (size_t k = 0; k < m.inputs.size(); ++k) {
        ValueId& v = m.inputs[k];
        if (const ValueId t = find(transposed, v); t != kNoValue) {
          v = t;
        } else if (const ValueId f = find(framed, v); f != kNoValue) {
          v = f;
        } else {
          const ValueId t2 = emit_node(g, nodes, frames(n, v, ("in" + std::to_string(k)).c_str()),
                                       g.value(v).name + "_frames");
          framed.emplace(v, t2);
          v = t2;
        }
      }
      const int64_t axis = n.attr_i("axis", 0);
      m.attrs["axis"] = attr_i(kFramesPerm[size_t(axis < 0 ? axis + 5 : axis)]);
      const ValueId t = emit_node(g, nodes, std::move(m), g.value(n.outputs[0]).name + "_moved");
      emit_node(g, nodes, frames(n, t, "back"), "", n.outputs[0]);
      transposed[n.outputs[0]] = t;
      return true;
    }
    const bool unary = is_unary_elementwise_op(n.op);
    const bool binary = (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div" ||
                         n.op == "Max" || n.op == "Min") &&
                        n.inputs.size() == 2;
    if (out.size() != 5 || (!unary && !binary)) return false;
    // The operands that move: the first (unary; the others must be scalars, as Clip's bounds)
    // or both, each of the output's shape.
    const size_t moved = binary ? 2 : 1;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueId v = n.inputs[k];
      if (k < moved ? g.value(v).shape != out : v != kNoValue && shape_numel(g.value(v).shape) != 1)
        return false;
    }
    // m (n on other operands) written to `out` (a new value when kNoValue): right after the
    // conv when an operand is a conv output's view, as is otherwise.
    const std::string base = g.value(n.outputs[0]).name;
    auto emit_on_view = [&](Node m, ValueId to) {
      size_t view = moved;
      for (size_t k = 0; k < moved && view == moved; ++k)
        if (find(viewed, m.inputs[k]) != kNoValue) view = k;
      if (view == moved) return emit_node(g, nodes, std::move(m), base + "_moved", to);
      const Shape shape = g.value(m.inputs[view]).shape;  // (frames' order or not)
      const Shape& flat = g.value(find(viewed, m.inputs[view])).shape;
      for (size_t k = 0; k < moved; ++k) {
        const ValueId y = find(viewed, m.inputs[k]);
        m.inputs[k] = y != kNoValue && g.value(y).shape == flat
                          ? y
                          : emit_node(g, nodes,
                                      node(n, "Reshape",
                                           {m.inputs[k], ints_const(g, n, "flat", flat)}, "flat"),
                                      base + "_flat");
      }
      const ValueId t = emit_node(g, nodes, std::move(m), base + "_4d");
      const ValueId v =
          emit_node(g, nodes, node(n, "Reshape", {t, ints_const(g, n, "view", shape)}, "view"),
                    base + "_5d", to);
      viewed[v] = t;
      return v;
    };
    Node m = n;
    m.name = n.name + "_moved";
    bool all_transposed = true;
    for (size_t k = 0; k < moved; ++k) all_transposed &= find(transposed, n.inputs[k]) != kNoValue;
    if (all_transposed) {
      for (size_t k = 0; k < moved; ++k) m.inputs[k] = find(transposed, n.inputs[k]);
      const ValueId t = emit_on_view(std::move(m), kNoValue);
      emit_node(g, nodes, frames(n, t, "back"), "", n.outputs[0]);
      transposed[n.outputs[0]] = t;
      return true;
    }
    bool any_view = false;
    for (size_t k = 0; k < moved; ++k) any_view |= find(viewed, n.inputs[k]) != kNoValue;
    if (!any_view) return false;
    emit_on_view(std::move(m), n.outputs[0]);
    return true;
  });
}

}  // namespace

int rewrite_conv3d(Graph& g) {
  const int lowered = rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    return lower_conv3d(g, nodes, n) || lower_convt3d(g, nodes, n) || lower_pool3d(g, nodes, n) ||
           lower_pad3d(g, nodes, n) || lower_global_pool3d(g, nodes, n);
  });
  return lowered ? lowered + sink_frame_transposes(g) : 0;
}

}  // namespace kiln
