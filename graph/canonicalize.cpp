#include "graph/canonicalize.h"

#include <algorithm>
#include <limits>

#include "graph/post_ops.h"

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

void canonicalize_node(Graph& g, Node& n) {
  const int64_t opset = g.opset;
  const std::string& op = n.op;
  if (op == "Clip" && opset < 11) {
    if (n.has("min")) attr_to_input(g, n, "min", 1, scalar_f32(n.attr_f("min", 0)));
    if (n.has("max")) attr_to_input(g, n, "max", 2, scalar_f32(n.attr_f("max", 0)));
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
    if (n.attr_i("spatial", 1) != 1)
      n.fail(Code::unsupported, "spatial=0 (per-activation statistics) is not supported");
    n.attrs.erase("spatial");
  }
  // Trailing omitted optional inputs carry no meaning; drop them so counts are canonical.
  while (!n.inputs.empty() && n.inputs.back() == kNoValue) n.inputs.pop_back();
}

}  // namespace

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

void canonicalize(Graph& g) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    if (fold_constant_node(g, n)) continue;
    canonicalize_node(g, n);
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
}

}  // namespace kiln
