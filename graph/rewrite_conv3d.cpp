// 3-D convolutions (video CNNs: R3D, MC3, R(2+1)D) lowered to the 2-D kernels. A Conv over
// X [N, C, D, H, W] with kernel [kD, kH, kW] is, per output frame t, the sum over the kD taps j
// of 2-D convs of the input frames t * sD + j * dD (after padding D): stacking those kD frames
// along the channels makes it one 2-D conv with kD * C input channels. So:
//
//   Pad D by the conv's D pads          [N, C, Dp, H, W]       (as H of [N, C, D, H * W])
//   Transpose(0 2 1 3 4)                [N, Dp, C, H, W]       (the frames' order)
//   Slice D at j * dD, step sD, j < kD  kD x [N, Do, C, H, W]  (kD = 1, sD = 1: the frames)
//   Concat on C, Reshape                [N * Do, kD * C, H, W]
//   Conv 2-D (kH, kW; weights W'[m][j C + c] = W[m][c][j])  [N * Do, M, Ho, Wo]
//   Reshape, Transpose(0 2 1 3 4)       [N, M, Do, Ho, Wo]
//
// The 2-D conv then has every family (Winograd on the 3x3 part included), and the solver its
// layouts. 5-D GlobalAveragePool becomes the 4-D one over [N, C, D * H, W]. Grouped 3-D convs
// are rejected by shape inference (graph/infer_conv_pool.cpp).
#include "graph/infer.h"
#include "graph/passes.h"

namespace kiln {
namespace {

Node node(const Node& n, const std::string& op, std::vector<ValueId> inputs, const char* part) {
  Node x;
  x.name = n.name + "_" + part;
  x.op = op;
  x.inputs = std::move(inputs);
  return x;
}

ValueId ints_const(Graph& g, const Node& n, const char* part, const std::vector<int64_t>& v) {
  return g.add_const(unique_value_name(g, n.name + "_" + part), ints_tensor(v));
}

// W [M, C, kD, kH, kW] -> W' [M, kD * C, kH, kW], W'[m][j C + c] = W[m][c][j].
Tensor stack_taps(const Tensor& w) {
  const Shape& s = w.shape();
  const int64_t M = s[0], C = s[1], kd = s[2], hw = s[3] * s[4];
  Tensor out(DType::f32, Shape{M, kd * C, s[3], s[4]});
  const ModelFloats in(w);
  float* o = out.data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < kd; ++j)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < hw; ++i)
          o[((m * kd + j) * C + c) * hw + i] = in[((m * C + c) * kd + j) * hw + i];
  return out;
}

bool lower_conv3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Conv" || n.outputs.size() != 1 || g.value(n.in(0)).shape.size() != 5) return false;
  const ValueId wv = n.in(1);
  if (!g.value(wv).is_const())
    n.fail(Code::unsupported, "a 3-D convolution needs constant weights");
  const Shape x = g.value(n.in(0)).shape, y = g.value(n.outputs[0]).shape;
  const Shape& ws = g.value(wv).shape;
  const int64_t N = x[0], C = x[1], H = x[3], W = x[4], M = ws[0], kd = ws[2];
  const int64_t Do = y[2], Ho = y[3], Wo = y[4];
  // infer_conv3d wrote the window out in full: 3 kernel dims, strides, dilations, 6 pads.
  const std::vector<int64_t> st = n.attr_ints("strides"), dil = n.attr_ints("dilations"),
                             pads = n.attr_ints("pads");
  const std::string base = g.value(n.outputs[0]).name;

  ValueId v = n.in(0);
  const int64_t dp = x[2] + pads[0] + pads[3];
  if (pads[0] || pads[3]) {  // on the view [N, C, D, H * W]: the 4-D pad kernel's H padding
    v = emit_node(g, nodes,
                  node(n, "Reshape", {v, ints_const(g, n, "dview", {N, C, x[2], H * W})}, "dview"),
                  base + "_dview");
    v = emit_node(
        g, nodes,
        node(n, "Pad", {v, ints_const(g, n, "dpads", {0, 0, pads[0], 0, 0, 0, pads[3], 0})},
             "dpad"),
        base + "_dpad");
    v = emit_node(g, nodes,
                  node(n, "Reshape", {v, ints_const(g, n, "dback", {N, C, dp, H, W})}, "dback"),
                  base + "_dback");
  }
  v = emit_node(
      g, nodes,
      [&] {
        Node t = node(n, "Transpose", {v}, "frames");
        t.attrs["perm"] = attr_ints({0, 2, 1, 3, 4});
        return t;
      }(),
      base + "_frames");
  if (kd > 1 || st[0] > 1 || Do != dp) {
    std::vector<ValueId> taps;
    for (int64_t j = 0; j < kd; ++j) {
      const int64_t from = j * dil[0], to = from + (Do - 1) * st[0] + 1;
      const std::string part = "tap" + std::to_string(j);
      taps.push_back(emit_node(g, nodes,
                               node(n, "Slice",
                                    {v, ints_const(g, n, (part + "s").c_str(), {from}),
                                     ints_const(g, n, (part + "e").c_str(), {to}),
                                     ints_const(g, n, (part + "a").c_str(), {1}),
                                     ints_const(g, n, (part + "t").c_str(), {st[0]})},
                                    part.c_str()),
                               base + "_" + part));
    }
    if (taps.size() == 1) {
      v = taps[0];
    } else {
      Node cat = node(n, "Concat", taps, "stack");
      cat.attrs["axis"] = attr_i(2);
      v = emit_node(g, nodes, std::move(cat), base + "_stack");
    }
  }
  v = emit_node(g, nodes,
                node(n, "Reshape", {v, ints_const(g, n, "batch", {N * Do, kd * C, H, W})}, "batch"),
                base + "_batch");

  Node conv = node(n, "Conv",
                   {v, g.add_const(unique_value_name(g, g.value(wv).name + "_2d"),
                                   stack_taps(*g.value(wv).constant))},
                   "2d");
  if (n.in(2) != kNoValue) conv.inputs.push_back(n.in(2));
  conv.attrs["strides"] = attr_ints({st[1], st[2]});
  conv.attrs["dilations"] = attr_ints({dil[1], dil[2]});
  conv.attrs["pads"] = attr_ints({pads[1], pads[2], pads[4], pads[5]});
  v = emit_node(g, nodes, std::move(conv), base + "_2d");
  v = emit_node(g, nodes,
                node(n, "Reshape", {v, ints_const(g, n, "unbatch", {N, Do, M, Ho, Wo})}, "unbatch"),
                base + "_unbatch");
  Node back = node(n, "Transpose", {v}, "back");
  back.attrs["perm"] = attr_ints({0, 2, 1, 3, 4});
  emit_node(g, nodes, std::move(back), "", n.outputs[0]);
  return true;
}

// GlobalAveragePool over [N, C, D, H, W]: the 4-D one over the view [N, C, D * H, W].
bool lower_global_pool3d(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "GlobalAveragePool" || n.outputs.size() != 1) return false;
  const Shape x = g.value(n.in(0)).shape;
  if (x.size() != 5) return false;
  const std::string base = g.value(n.outputs[0]).name;
  ValueId v =
      emit_node(g, nodes,
                node(n, "Reshape",
                     {n.in(0), ints_const(g, n, "flat", {x[0], x[1], x[2] * x[3], x[4]})}, "flat"),
                base + "_flat");
  v = emit_node(g, nodes, node(n, "GlobalAveragePool", {v}, "2d"), base + "_2d");
  emit_node(g, nodes,
            node(n, "Reshape", {v, ints_const(g, n, "back", {x[0], x[1], 1, 1, 1})}, "back"), "",
            n.outputs[0]);
  return true;
}

}  // namespace

int rewrite_conv3d(Graph& g) {
  return rewrite_nodes(g, [&](std::vector<Node>& nodes, const Node& n) {
    return lower_conv3d(g, nodes, n) || lower_global_pool3d(g, nodes, n);
  });
}

}  // namespace kiln
