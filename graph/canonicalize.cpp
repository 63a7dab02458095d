#include "graph/canonicalize.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/function_ops.h"
#include "graph/integer_ops.h"
#include "graph/post_ops.h"
#include "graph/qlinear.h"
#include "graph/recurrent.h"

namespace kiln {
namespace {

Tensor scalar_f32(float x) {
  Tensor t(DType::f32, {});
  *t.data<float>() = x;
  return t;
}

// Moves attribute `attr` (if present) into input slot `slot` as a new constant value.
void attr_to_input(Graph& g, Node& n, const std::string& attr, size_t slot, Tensor t) {
  ValueId id = g.add_const(unique_value_name(g, n.name + "_" + attr), std::move(t));
  if (n.inputs.size() <= slot) n.inputs.resize(slot + 1, kNoValue);
  if (n.inputs[slot] != kNoValue)
    n.fail(Code::invalid_model, "has both an attribute and an input for '" + attr + "'");
  n.inputs[slot] = id;
  n.attrs.erase(attr);
}

void ints_attr_to_input(Graph& g, Node& n, const std::string& attr, size_t slot) {
  if (n.has(attr)) attr_to_input(g, n, attr, slot, ints_tensor(n.attr_ints(attr)));
}

// Constant node -> constant value; returns false if the node is not a Constant.
bool fold_constant_node(Graph& g, const Node& n) {
  if (n.op != "Constant") return false;
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue || !n.inputs.empty())
    n.fail(Code::invalid_model, "must have no inputs and exactly one output");
  if (n.attrs.size() != 1) n.fail(Code::invalid_model, "must have exactly one value attribute");
  std::optional<Tensor> t = constant_value(n);  // its only attribute
  if (!t) n.fail(Code::unsupported, "attribute '" + n.attrs.begin()->first + "' is not supported");
  Value& v = g.value(n.outputs[0]);
  v.dtype = t->dtype();
  v.shape = t->shape();
  v.shape_known = true;
  v.constant = std::move(*t);
  return true;
}

// A BatchNormalization (opset < 9) with spatial = 0 whose four statistics are constants of rank
// >= 2 ([C, D...]: one per activation, not per channel).
bool per_activation_stats(const Graph& g, const Node& n) {
  if (n.attr_i("spatial", 1) != 0 || n.inputs.size() != 5) return false;
  const Value& s = g.value(n.inputs[1]);
  return s.is_const() && s.constant->shape().size() >= 2;
}

}  // namespace

ValueId const_for(Graph& g, const Node& n, const char* part, Tensor t) {
  return g.add_const(unique_value_name(g, n.name + "_" + part), std::move(t));
}

namespace {

// n's y = x * a (+ b, when given) as a Mul and an Add appended to `out` (x: n's input 0).
void scale_shift(Graph& g, const Node& n, Tensor a, std::optional<Tensor> b,
                 std::vector<Node>& out) {
  const ValueId y = b ? kNoValue : n.outputs[0];
  const ValueId s =
      append_node(g, n, "Mul", {n.inputs[0], const_for(g, n, "a", std::move(a))}, y, "scale", out);
  if (b)
    append_node(g, n, "Add", {s, const_for(g, n, "b", std::move(*b))}, n.outputs[0], "shift", out);
}

// That BatchNormalization as y = x * a + b with constants a = scale / sqrt(var + eps) and b = B -
// mean * a of the statistics' shape, which numpy-broadcasts against [N, C, D...] (the statistics
// must all be f32 constants of one shape).
void per_activation_bn(Graph& g, const Node& n, std::vector<Node>& out) {
  if (n.outputs.size() > 1)
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i] != kNoValue) n.fail(Code::unsupported, "only output Y is supported");
  const Tensor* p[4];
  for (size_t i = 0; i < 4; ++i) {
    const Value& v = g.value(n.inputs[i + 1]);
    if (!v.is_const() || v.dtype != DType::f32 || v.shape != g.value(n.inputs[1]).shape)
      n.fail(Code::unsupported, "spatial=0 needs constant float32 statistics of one shape");
    p[i] = &*v.constant;
  }
  const double eps = n.attr_f("epsilon", 1e-5f);
  Tensor a(DType::f32, p[0]->shape()), b(DType::f32, p[0]->shape());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double s =
        double(p[0]->data<float>()[i]) / std::sqrt(double(p[3]->data<float>()[i]) + eps);
    a.data<float>()[i] = float(s);
    b.data<float>()[i] = float(double(p[1]->data<float>()[i]) - double(p[2]->data<float>()[i]) * s);
  }
  scale_shift(g, n, std::move(a), std::move(b), out);
}

// ImageScaler (an experimental op of opsets 1-9, at the start of e.g. the ONNX model zoo's Tiny
// YOLOv2): y = x * scale + bias[c] over [N, C, H, W].
void image_scaler(Graph& g, const Node& n, std::vector<Node>& out) {
  if (g.opset >= 10) n.fail(Code::unsupported, "operator ImageScaler was removed in opset 10");
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.in(0) == kNoValue)
    n.fail(Code::invalid_model, "expects one input and one output");
  const std::vector<float> bias = n.attr_floats("bias");
  std::optional<Tensor> b;
  if (!bias.empty()) {
    b.emplace(DType::f32, Shape{int64_t(bias.size()), 1, 1});
    std::copy(bias.begin(), bias.end(), b->data<float>());
  }
  scale_shift(g, n, scalar_f32(n.attr_f("scale", 1.f)), std::move(b), out);
}

// Swish (opset 24): x * Sigmoid(alpha x), as the nodes exporters wrote before it (fuse_epilogues
// takes x * Sigmoid(x) into the producer).
void swish(Graph& g, const Node& n, std::vector<Node>& out) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.in(0) == kNoValue)
    n.fail(Code::invalid_model, "expects one input and one output");
  const float alpha = n.attr_f("alpha", 1.f);
  ValueId arg = n.inputs[0];
  if (alpha != 1.f)
    arg = append_node(g, n, "Mul", {arg, const_for(g, n, "alpha", scalar_f32(alpha))}, kNoValue,
                      "scaled", out);
  const ValueId s = append_node(g, n, "Sigmoid", {arg}, kNoValue, "sigmoid", out);
  append_node(g, n, "Mul", {n.inputs[0], s}, n.outputs[0], "mul", out);
}

// Resize's canonical form (graph/ops.h): inputs (X, roi?, scales?, sizes?) and every
// opset-19 attribute explicit. Opset 10 Resize and Upsample (opsets 7-9) are asymmetric with
// nearest = floor(x) (ONNX Runtime rounds up when every scale downsamples).
void canonical_resize(Graph& g, Node& n, int64_t opset) {
  const bool legacy = n.op == "Upsample" || opset < 11;
  if (legacy) {
    if (n.op == "Upsample" && n.has("scales")) {
      const std::vector<float> v = n.attr_floats("scales");
      Tensor t(DType::f32, {int64_t(v.size())});
      std::copy(v.begin(), v.end(), t.data<float>());
      attr_to_input(g, n, "scales", 1, std::move(t));
    }
    if (n.inputs.size() != 2 || n.inputs[1] == kNoValue)
      n.fail(Code::invalid_model, "needs inputs (X, scales)");
    n.inputs = {n.inputs[0], kNoValue, n.inputs[1]};
    std::string mode = n.attr_s("mode", "nearest");
    if (mode == "bilinear") mode = "linear";
    bool down = false;
    if (const Value& sv = g.value(n.inputs[2]); sv.is_const() && sv.dtype == DType::f32) {
      const float* p = sv.constant->data<float>();
      down = std::any_of(p, p + sv.constant->numel(), [](float x) { return x < 1; }) &&
             std::all_of(p, p + sv.constant->numel(), [](float x) { return x <= 1; });
    }
    n.op = "Resize";
    n.attrs.clear();
    n.attrs["mode"] = attr_s(mode);
    n.attrs["coordinate_transformation_mode"] = attr_s("asymmetric");
    n.attrs["nearest_mode"] = attr_s(down ? "ceil" : "floor");
  }
  auto def = [&](const char* name, Attribute a) {
    if (!n.has(name)) n.attrs[name] = std::move(a);
  };
  def("mode", attr_s("nearest"));
  def("coordinate_transformation_mode", attr_s("half_pixel"));
  def("nearest_mode", attr_s("round_prefer_floor"));
  def("cubic_coeff_a", attr_f(-0.75f));
  def("exclude_outside", attr_i(0));
  def("extrapolation_value", attr_f(0.f));
  def("antialias", attr_i(0));
  def("keep_aspect_ratio_policy", attr_s("stretch"));
}

// The ONNX type a Cast of opsets < 6 names in its `to` string (protobuf's enum names).
int64_t legacy_cast_type(const Node& n) {
  const std::string to = n.attr_s("to", "");
  onnx::TensorProto_DataType t;
  if (!onnx::TensorProto_DataType_Parse(to, &t))
    n.fail(Code::invalid_model, "to '" + to + "' names no ONNX type");
  return int64_t(t);
}

// Opsets 1-6 (the ONNX model zoo's Caffe2-era files): their attribute forms as opset 7's.
void canonicalize_legacy(Graph& g, Node& n) {
  const int64_t opset = g.opset;
  const std::string& op = n.op;
  n.attrs.erase("consumed_inputs");  // (opsets < 6: a memory-reuse hint)
  static const char* const kBroadcasting[] = {"Add",     "Sub",  "Mul", "Div", "Pow", "Equal",
                                              "Greater", "Less", "And", "Or",  "Xor"};
  if (std::find(std::begin(kBroadcasting), std::end(kBroadcasting), op) !=
      std::end(kBroadcasting)) {
    // broadcast = 0: equal shapes (numpy broadcasting takes them); without an axis B is
    // suffix-aligned, as numpy aligns it.
    if (n.attr_i("broadcast", 0) != 0 && n.has("axis"))
      n.attrs[kLegacyAxisAttr] = attr_i(n.attr_i("axis", 0));
    n.attrs.erase("broadcast");
    n.attrs.erase("axis");
  } else if (op == "PRelu") {
    n.attrs[kLegacyAxisAttr] = attr_i(1);  // a slope per channel
  } else if (op == "Gemm") {
    n.attrs.erase("broadcast");  // (C broadcasts as in opset 7)
  } else if (op == "BatchNormalization" || op == "Dropout") {
    n.attrs.erase("is_test");  // (inference: Kiln computes only Y)
  } else if (op == "Reshape" && opset < 5) {
    if (!n.has("shape")) n.fail(Code::invalid_model, "needs attribute 'shape'");
    ints_attr_to_input(g, n, "shape", 1);
  } else if (op == "Concat" && opset < 4 && !n.has("axis")) {
    n.attrs["axis"] = attr_i(1);
  } else if (op == "Cast" && opset < 6) {
    n.attrs["to"] = attr_i(legacy_cast_type(n));
  } else if (op == "Pad" && opset < 2 && n.has("paddings")) {
    n.attrs["pads"] = n.attrs["paddings"];
    n.attrs.erase("paddings");
  } else if ((op == "Upsample" && opset < 7) || (op == "Tile" && opset < 6)) {
    n.fail(Code::unsupported, "the opset " + std::to_string(opset) + " form of " + op);
  }
}

void canonicalize_node(Graph& g, Node& n) {
  const int64_t opset = g.opset;
  const std::string& op = n.op;
  if (opset < 7) canonicalize_legacy(g, n);
  if (op == "Clip" && opset < 11) {
    if (n.has("min")) attr_to_input(g, n, "min", 1, scalar_f32(n.attr_f("min", 0)));
    if (n.has("max")) attr_to_input(g, n, "max", 2, scalar_f32(n.attr_f("max", 0)));
  } else if (op == "TopK" && opset < 10) {
    if (!n.has("k")) n.fail(Code::invalid_model, "needs attribute 'k'");
    attr_to_input(g, n, "k", 1, ints_tensor({n.attr_i("k", 0)}));
  } else if (op == "Split" && opset < 13) {
    ints_attr_to_input(g, n, "split", 1);
  } else if (op == "Slice" && opset < 10) {
    if (!n.has("starts") || !n.has("ends"))
      n.fail(Code::invalid_model, "needs attributes 'starts' and 'ends'");
    ints_attr_to_input(g, n, "starts", 1);
    ints_attr_to_input(g, n, "ends", 2);
    ints_attr_to_input(g, n, "axes", 3);
  } else if ((op == "Squeeze" || op == "Unsqueeze") && opset < 13) {
    ints_attr_to_input(g, n, "axes", 1);
  } else if (reduce_op(op) && opset < (op == "ReduceSum" ? 13 : 18)) {
    ints_attr_to_input(g, n, "axes", 1);
  } else if (op == "Pad" && opset < 11) {
    if (!n.has("pads")) n.fail(Code::invalid_model, "needs attribute 'pads'");
    ints_attr_to_input(g, n, "pads", 1);
    float value = n.attr_f("value", 0.f);
    n.attrs.erase("value");
    attr_to_input(g, n, "value", 2, scalar_f32(value));
  } else if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    if (opset < 13) {
      n.attrs["axis"] = attr_i(n.attr_i("axis", 1));
      n.attrs["coerce_2d"] = attr_i(1);
    } else {
      n.attrs["axis"] = attr_i(n.attr_i("axis", -1));
    }
  } else if (op == "Resize" || op == "Upsample") {
    canonical_resize(g, n, opset);
  } else if (op == "BatchNormalization" && n.has("spatial")) {
    // spatial = 0 with per-channel ([C]) statistics means what spatial = 1 does; with
    // per-activation ones ([C, D...]) canonicalize_into rewrites the node (per_activation_bn).
    if (n.attr_i("spatial", 1) == 1 || !per_activation_stats(g, n)) n.attrs.erase("spatial");
  }
  // Trailing omitted optional inputs carry no meaning; drop them so counts are canonical.
  while (!n.inputs.empty() && n.inputs.back() == kNoValue) n.inputs.pop_back();
}

// A 1-D Conv / ConvTranspose (rank-3 weights, constant or of a declared shape) or MaxPool /
// AveragePool (one kernel dim) on [N, C, L] becomes its 2-D form on [N, C, 1, L] between an
// Unsqueeze and a Squeeze of axis 2 (views in nchw; rewrite_forms drops a Squeeze-Unsqueeze
// pair between two such nodes), so it runs on the 2-D kernels. Appends the nodes to `out`; false (nothing appended) otherwise.
bool lift_1d(Graph& g, Node& n, std::vector<Node>& out) {
  const bool conv = n.op == "Conv" || n.op == "ConvTranspose";
  const bool pool = n.op == "MaxPool" || n.op == "AveragePool";
  if (!conv && !pool) return false;
  if (n.in(0) == kNoValue || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return false;
  if (conv) {
    // Constant weights, or computed ones of a known rank (a graph input's declared shape).
    const ValueId w = n.in(1);
    if (w == kNoValue || (g.value(w).is_const() ? g.value(w).constant->shape().size()
                                                : g.value(w).shape.size()) != 3)
      return false;
  } else if (n.attr_ints("kernel_shape").size() != 1) {
    return false;
  }
  // Per-dim attributes get the H dim in front: kernel 1, stride 1, dilation 1, no padding.
  auto prepend = [&](const std::string& attr, int64_t h) {
    if (!n.has(attr)) return;
    std::vector<int64_t> v = n.attr_ints(attr);
    if (v.size() != 1) n.fail(Code::invalid_model, attr + " needs one value for a 1-D input");
    n.attrs[attr] = attr_ints({h, v[0]});
  };
  prepend("kernel_shape", 1);
  prepend("strides", 1);
  prepend("dilations", 1);
  prepend("output_padding", 0);
  prepend("output_shape", 1);
  if (n.has("pads")) {
    const std::vector<int64_t> p = n.attr_ints("pads");
    if (p.size() != 2) n.fail(Code::invalid_model, "pads needs two values for a 1-D input");
    n.attrs["pads"] = attr_ints({0, p[0], 0, p[1]});
  }
  auto axis2 = [&](const std::string& base) {
    return g.add_const(unique_value_name(g, base + "_axis"), ints_tensor({2}));
  };
  if (conv && !g.value(n.in(1)).is_const()) {  // weights [M, C/g, K] -> [M, C/g, 1, K]
    Node uw;
    uw.name = n.name + "_unsqueeze_w";
    uw.op = "Unsqueeze";
    uw.inputs = {n.in(1), axis2(uw.name)};
    uw.outputs = {g.add_value(unique_value_name(g, g.value(n.in(1)).name + "_2d"))};
    n.inputs[1] = uw.outputs[0];
    out.push_back(std::move(uw));
  } else if (conv) {  // (a copy: constants are immutable)
    const Tensor& w = *g.value(n.in(1)).constant;
    Shape s = w.shape();
    s.insert(s.begin() + 2, 1);
    Tensor w4(w.dtype(), s);
    std::memcpy(w4.raw(), w.stored_bytes(), w.nbytes());
    n.inputs[1] = g.add_const(unique_value_name(g, g.value(n.in(1)).name + "_2d"), std::move(w4));
  }
  Node u;
  u.name = n.name + "_unsqueeze";
  u.op = "Unsqueeze";
  u.inputs = {n.inputs[0], axis2(u.name)};
  const ValueId x4 = g.add_value(unique_value_name(g, g.value(n.inputs[0]).name + "_2d"));
  u.outputs = {x4};
  Node s;
  s.name = n.name + "_squeeze";
  s.op = "Squeeze";
  const ValueId y = n.outputs[0];
  const ValueId y4 = g.add_value(unique_value_name(g, g.value(y).name + "_2d"));
  s.inputs = {y4, axis2(s.name)};
  s.outputs = {y};
  n.inputs[0] = x4;
  n.outputs[0] = y4;
  out.push_back(std::move(u));
  out.push_back(std::move(n));
  out.push_back(std::move(s));
  return true;
}

}  // namespace

ValueId append_node(Graph& g, const Node& n, const char* op, std::vector<ValueId> in, ValueId y,
                    const char* part, std::vector<Node>& out) {
  Node m;
  m.name = n.name + "_" + part;
  m.op = op;
  m.inputs = std::move(in);
  m.outputs = {y == kNoValue ? g.add_value(unique_value_name(g, m.name)) : y};
  out.push_back(std::move(m));
  return out.back().outputs[0];
}

std::optional<Tensor> constant_value(const Node& n) {
  if (const Tensor* t = n.attr_t("value")) return *t;
  if (n.has("value_float")) return scalar_f32(n.attr_f("value_float", 0));
  if (n.has("value_floats")) {
    const std::vector<float> v = n.attr_floats("value_floats");
    Tensor t(DType::f32, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  }
  if (n.has("value_int")) {
    Tensor t(DType::i64, {});
    *t.data<int64_t>() = n.attr_i("value_int", 0);
    return t;
  }
  if (n.has("value_ints")) return ints_tensor(n.attr_ints("value_ints"));
  return std::nullopt;
}

void canonicalize_into(Graph& g, Node n, std::vector<Node>& out) {
  if (fold_constant_node(g, n) || expand_qlinear(g, n, out) || expand_integer_op(g, n, out) ||
      expand_recurrent(g, n, out) || expand_function_op(g, n, out))
    return;
  canonicalize_node(g, n);
  if (n.op == "BatchNormalization" && per_activation_stats(g, n))
    return per_activation_bn(g, n, out);
  if (n.op == "ImageScaler") return image_scaler(g, n, out);
  if (n.op == "Swish") return swish(g, n, out);
  if (!lift_1d(g, n, out)) out.push_back(std::move(n));
}

std::vector<Node> align_legacy_broadcast(Graph& g, Node n) {
  const int64_t at = n.attr_i(kLegacyAxisAttr, 0);
  n.attrs.erase(kLegacyAxisAttr);
  std::vector<Node> out;
  const ValueId a = n.in(0), b = n.in(1);
  if (a == kNoValue || b == kNoValue || !g.value(a).shape_known || !g.value(b).shape_known) {
    out.push_back(std::move(n));  // (inference names what is missing)
    return out;
  }
  const Shape sa = g.value(a).shape, sb = g.value(b).shape;
  const int64_t ra = int64_t(sa.size()), rb = int64_t(sb.size());
  const int64_t axis = at < 0 ? at + ra : at;
  bool fits = axis >= 0 && axis <= ra && rb <= ra - axis;  // (no overflow for any attribute)
  const int64_t trailing = fits ? ra - axis - rb : 0;
  for (int64_t i = 0; fits && i < rb; ++i)
    fits = sb[size_t(i)] == 1 || sb[size_t(i)] == sa[size_t(axis + i)];
  if (!fits) {
    // (A PRelu whose slope does not fit per channel: numpy broadcasting, as in opset 7.)
    if (n.op != "PRelu")
      n.fail(Code::invalid_model, "broadcast from axis " + std::to_string(at) +
                                      ": input 1's shape " + shape_str(sb) +
                                      " does not fit input 0's " + shape_str(sa));
  } else if (trailing > 0) {
    Node u;
    u.name = n.name + "_legacy_broadcast";
    u.op = "Unsqueeze";
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < trailing; ++i) axes.push_back(rb + i);
    u.inputs = {b, g.add_const(unique_value_name(g, u.name + "_axes"), ints_tensor(axes))};
    u.outputs = {g.add_value(unique_value_name(g, g.value(b).name + "_aligned"))};
    n.inputs[1] = u.outputs[0];
    out.push_back(std::move(u));
  }
  out.push_back(std::move(n));
  return out;
}

void canonicalize(Graph& g) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& n : g.nodes) canonicalize_into(g, std::move(n), kept);
  g.nodes = std::move(kept);
}

}  // namespace kiln
