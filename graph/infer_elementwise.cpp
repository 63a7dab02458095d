// Shape inference for elementwise ops: unary activations, Clip, Identity, Dropout (inference
// only) and the broadcasting binary/variadic arithmetic ops.
#include <cmath>
#include <string>

#include "graph/infer_util.h"
#include "graph/post_ops.h"

namespace kiln::infer_detail {

void infer_unary_f32(Graph& g, Node& n) {
  // Relu and friends are defined for integers in recent opsets; Kiln only computes floats.
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  if (n.op == "LeakyRelu" || n.op == "HardSigmoid") {
    float alpha = n.attr_f("alpha", n.op == "LeakyRelu" ? 0.01f : 0.2f);
    float beta = n.attr_f("beta", 0.5f);
    if (!std::isfinite(alpha) || !std::isfinite(beta))
      n.fail(Code::invalid_model, "attributes alpha/beta must be finite");
  }
  if (n.op == "Gelu") {
    const std::string a = n.attr_s("approximate", "none");
    if (a != "none" && a != "tanh")
      n.fail(Code::invalid_model,
             "attribute approximate must be 'none' or 'tanh', got '" + a + "'");
  }
  // The parameters graph/post_ops's table accepts (the reference computes these ops with it).
  const bool parametric =
      n.op == "Elu" || n.op == "Selu" || n.op == "Celu" || n.op == "ThresholdedRelu";
  if (parametric && !glue_unary_post_op(n))
    n.fail(Code::invalid_model, "attributes must be finite (and Celu's alpha nonzero)");
  const Value& x = input(g, n, 0);
  set_output(g, n, 0, x.dtype, x.shape);
}

void infer_identity(Graph& g, Node& n) {
  const Value& x = input(g, n, 0);
  set_output(g, n, 0, x.dtype, x.shape);
}

void infer_clip(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  for (size_t i = 1; i < 3; ++i) {
    if (!has_input(n, i)) continue;
    expect_same_dtype(g, n, 0, i);
    expect_scalar(g, n, i);
  }
  const Value& x = input(g, n, 0);
  set_output(g, n, 0, x.dtype, x.shape);
}

void infer_dropout(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  if (has_input(n, 1)) {
    expect_scalar(g, n, 1);
    const Value& r = input(g, n, 1);
    if (r.dtype != DType::f32)
      n.fail(Code::invalid_model,
             input_desc(g, n, 1) + " (ratio) should be float32 but is " + dtype_name(r.dtype));
  }
  if (has_input(n, 2)) {
    // Only inference is supported: training_mode must be known to be false at load time, or
    // the ratio a constant 0, which drops nothing (PyTorch exports F.dropout(x, p=0.0) so).
    expect_scalar(g, n, 2);
    const Value& t = input(g, n, 2);
    if (!t.is_const())
      n.fail(Code::unsupported, input_desc(g, n, 2) +
                                    " (training_mode) must be a constant false; it is computed at "
                                    "run time");
    const bool zero_ratio = has_input(n, 1) && input(g, n, 1).is_const() &&
                            input(g, n, 1).constant->data<float>()[0] == 0.f;
    if (tensor_as_ints(*t.constant).at(0) != 0 && !zero_ratio)
      n.fail(Code::unsupported,
             "training_mode=true with a ratio other than a constant 0 is not supported "
             "(inference only)");
  }
  const Value& x = input(g, n, 0);
  set_output(g, n, 0, x.dtype, x.shape);
  if (has_output(n, 1)) set_output(g, n, 1, DType::boolean, x.shape);  // all true: nothing dropped
}

void infer_binary_arith(Graph& g, Node& n) {
  DType d = expect_f32_or_i64(g, n, 0);
  expect_same_dtype(g, n, 0, 1);
  Shape out = broadcast_shapes(n, input(g, n, 0).shape, input(g, n, 1).shape);
  set_output(g, n, 0, d, out);
}

void infer_prelu(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_dtype(g, n, 1, DType::f32);
  const Shape& x = input(g, n, 0).shape;
  if (broadcast_shapes(n, x, input(g, n, 1).shape) != x)
    n.fail(Code::invalid_model,
           input_desc(g, n, 1) + " (slope) does not broadcast to X's shape " + shape_str(x));
  set_output(g, n, 0, DType::f32, x);
}

void infer_pow(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);  // ONNX also defines integer Pow
  expect_dtype(g, n, 1, DType::f32, Code::unsupported);
  set_output(g, n, 0, DType::f32, broadcast_shapes(n, input(g, n, 0).shape, input(g, n, 1).shape));
}

void infer_sum(Graph& g, Node& n) {
  Shape out;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!has_input(n, i)) n.fail(Code::invalid_model, "input " + std::to_string(i) + " is missing");
    // ONNX's Max / Min take integers (not run by Kiln); Sum / Mean only floats.
    expect_dtype(g, n, i, DType::f32,
                 n.op == "Max" || n.op == "Min" ? Code::unsupported : Code::invalid_model);
    out = i == 0 ? input(g, n, i).shape : broadcast_shapes(n, out, input(g, n, i).shape);
  }
  set_output(g, n, 0, DType::f32, out);
}

namespace {

// Output shape of an op broadcasting all of its (present) inputs.
Shape broadcast_inputs(const Graph& g, const Node& n) {
  Shape out = input(g, n, 0).shape;
  for (size_t i = 1; i < n.inputs.size(); ++i) out = broadcast_shapes(n, out, input(g, n, i).shape);
  return out;
}

}  // namespace

void infer_compare(Graph& g, Node& n) {
  // Equal is defined for bool too; the ordered comparisons for numbers only.
  if (n.op != "Equal" || input(g, n, 0).dtype != DType::boolean) expect_f32_or_i64(g, n, 0);
  expect_same_dtype(g, n, 0, 1);
  set_output(g, n, 0, DType::boolean, broadcast_inputs(g, n));
}

void infer_logic(Graph& g, Node& n) {  // Not, And, Or, Xor
  for (size_t i = 0; i < n.inputs.size(); ++i) expect_dtype(g, n, i, DType::boolean);
  set_output(g, n, 0, DType::boolean, broadcast_inputs(g, n));
}

void infer_where(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::boolean);
  expect_same_dtype(g, n, 1, 2);
  set_output(g, n, 0, input(g, n, 1).dtype, broadcast_inputs(g, n));
}

void infer_float_test(Graph& g, Node& n) {  // IsNaN, IsInf
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  set_output(g, n, 0, DType::boolean, input(g, n, 0).shape);
}

void infer_sign(Graph& g, Node& n) {
  const DType d = expect_f32_or_i64(g, n, 0);
  set_output(g, n, 0, d, input(g, n, 0).shape);
}

void infer_mod(Graph& g, Node& n) {
  const DType d = expect_f32_or_i64(g, n, 0);
  expect_same_dtype(g, n, 0, 1);
  if (!attr_flag(n, "fmod", false) && d == DType::f32)
    n.fail(Code::invalid_model, "fmod must be 1 for float inputs");
  set_output(g, n, 0, d, broadcast_inputs(g, n));
}

namespace {

// Cast's `to` as the DType Kiln computes it in.
DType cast_target(const Node& n, int64_t to) {
  // float16 is computed as float32 rounded to half precision (Kiln has no f16 tensors), float64
  // as float32; int32 is widened to int64 like int32 initializers.
  switch (to) {
    case 1:
    case 10:
    case 11:
      return DType::f32;
    case 6:
    case 7:
      return DType::i64;
    case 9:
      return DType::boolean;
    default:
      n.fail(Code::unsupported,
             "cast to ONNX data type " + std::to_string(to) +
                 " is not supported (float, float16, double, int32, int64, bool)");
  }
}

}  // namespace

void infer_cast(Graph& g, Node& n) {  // Cast, CastLike (to = input 1's dtype)
  if (n.op == "Cast" && !n.has("to")) n.fail(Code::invalid_model, "attribute 'to' is missing");
  const DType to = n.op == "CastLike" ? input(g, n, 1).dtype : cast_target(n, n.attr_i("to", 0));
  set_output(g, n, 0, to, input(g, n, 0).shape);
}

}  // namespace kiln::infer_detail
