// Resize of a 3-D [N, C, L] or 5-D [N, C, D, H, W] f32 tensor (1-D signal nets, 3-D U-Nets'
// trilinear upsampling) as 4-D Resizes of views, which the resize kernels run (they take a
// 4-D tensor's H and W; runtime/labels.cpp resize_jit). Every Resize mode is separable: an
// axis's taps depend on that axis alone (graph/resize.h resize_taps), so resizing some axes,
// then the others, computes what the one Resize does. Each new node keeps each axis's own
// scale (or size), so its taps are the ones the original has:
//   [N, C, L]        -> L as W of [N, C, 1, L];
//   [N, C, D, H, W]  -> H, W of [N, C * D, H, W] and D as H of [N * C, 1, D, H * W], the pass
//                       leaving the smaller intermediate first.
// Left as they are (the reference kernel runs them): resized N or C, tf_crop_and_resize (a roi
// per axis) and keep_aspect_ratio_policy other than stretch (one scale for all axes that sizes
// cannot carry per axis).
#include "graph/infer.h"
#include "graph/passes.h"
#include "graph/resize.h"

namespace kiln {
namespace {

bool lower_resize(Graph& g, std::vector<Node>& nodes, const Node& n) {
  if (n.op != "Resize" || n.outputs.size() != 1 || n.in(0) == kNoValue) return false;
  const Shape x = g.value(n.in(0)).shape;
  if ((x.size() != 3 && x.size() != 5) || g.value(n.in(0)).dtype != DType::f32) return false;
  const Tensor* scales = const_tensor(g, n.in(2));
  if (scales && scales->numel() == 0) scales = nullptr;
  const ResizeSpec s =
      resize_spec(n, x, const_tensor(g, n.in(1)), scales, const_tensor(g, n.in(3)));
  if (s.coord == "tf_crop_and_resize" ||
      n.attr_s("keep_aspect_ratio_policy", "stretch") != "stretch")
    return false;
  std::vector<bool> resized;
  for (size_t d = 0; d < x.size(); ++d) resized.push_back(!resize_taps(s, d).identity());
  if (resized[0] || resized[1]) return false;
  const Shape& y = s.out;
  const std::string base = g.value(n.outputs[0]).name;
  auto reshape = [&](ValueId v, const Shape& to, const std::string& part, ValueId out) {
    const ValueId shape = g.add_const(unique_value_name(g, n.name + "_" + part), ints_tensor(to));
    Node r;
    r.name = n.name + "_" + part;
    r.op = "Reshape";
    r.inputs = {v, shape};
    return emit_node(g, nodes, std::move(r), base + "_" + part, out);
  };
  // A 4-D Resize of view v (shape in4) whose axes 2 and 3 take the original's axes a2 and a3
  // (-1: not resized, scale 1 / the same size), the others scale 1.
  auto resize4 = [&](ValueId v, const Shape& in4, int a2, int a3, const std::string& part) {
    Node r;
    r.name = n.name + "_" + part;
    r.op = "Resize";
    r.attrs = n.attrs;
    r.attrs.erase("axes");
    r.attrs.erase("keep_aspect_ratio_policy");
    Shape out4 = in4;
    for (int i : {2, 3})
      if (const int a = i == 2 ? a2 : a3; a >= 0) out4[size_t(i)] = y[size_t(a)];
    if (scales) {
      Tensor t(DType::f32, Shape{4});
      float* f = t.data<float>();
      f[0] = f[1] = 1.f;
      f[2] = a2 >= 0 ? float(s.scale[size_t(a2)]) : 1.f;  // (the model's float, exactly)
      f[3] = a3 >= 0 ? float(s.scale[size_t(a3)]) : 1.f;
      r.inputs = {v, kNoValue, g.add_const(unique_value_name(g, r.name + "_scales"), std::move(t))};
    } else {
      r.inputs = {v, kNoValue, kNoValue,
                  g.add_const(unique_value_name(g, r.name + "_sizes"), ints_tensor(out4))};
    }
    return std::make_pair(emit_node(g, nodes, std::move(r), base + "_" + part), out4);
  };

  if (x.size() == 3) {
    const Shape in4{x[0], x[1], 1, x[2]};
    const ValueId v = reshape(n.in(0), in4, "2d", kNoValue);
    reshape(resize4(v, in4, -1, 2, "resize").first, y, "back", n.outputs[0]);
    return true;
  }
  const bool depth = resized[2], plane = resized[3] || resized[4];
  if (!depth && !plane) {
    emit_node(g, nodes, identity_node(n.name + "_same", n.in(0), kNoValue), "", n.outputs[0]);
    return true;
  }
  ValueId v = n.in(0);
  Shape cur = x;
  auto pass_plane = [&](bool last) {
    const Shape in4{cur[0], cur[1] * cur[2], cur[3], cur[4]};
    const auto [r, out4] = resize4(reshape(v, in4, "planes", kNoValue), in4, 3, 4, "hw");
    cur = {cur[0], cur[1], cur[2], y[3], y[4]};
    v = reshape(r, cur, "hwback", last ? n.outputs[0] : kNoValue);
  };
  auto pass_depth = [&](bool last) {
    const Shape in4{cur[0] * cur[1], 1, cur[2], cur[3] * cur[4]};
    const auto [r, out4] = resize4(reshape(v, in4, "depth", kNoValue), in4, 2, -1, "d");
    cur = {cur[0], cur[1], y[2], cur[3], cur[4]};
    v = reshape(r, cur, "dback", last ? n.outputs[0] : kNoValue);
  };
  // Upsampling: the axis pass that grows the data less goes first.
  const bool depth_first = y[2] * x[3] * x[4] <= x[2] * y[3] * y[4];
  if (depth && plane) {
    depth_first ? pass_depth(false) : pass_plane(false);
    depth_first ? pass_plane(true) : pass_depth(true);
  } else {
    depth ? pass_depth(true) : pass_plane(true);
  }
  return true;
}

}  // namespace

int rewrite_resize_ranks(Graph& g) {
  return rewrite_nodes(
      g, [&](std::vector<Node>& nodes, const Node& n) { return lower_resize(g, nodes, n); });
}

}  // namespace kiln
