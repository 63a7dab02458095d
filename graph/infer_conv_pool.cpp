// Shape inference for the windowed ops (Conv, MaxPool, AveragePool), global pools and
// BatchNormalization. Windowed ops get their attributes rewritten to the explicit form
// (kernel_shape, strides, dilations, pads; no auto_pad) so kernels never re-derive them.
#include <cmath>
#include <string>
#include <vector>

#include "graph/function_ops.h"
#include "graph/infer_util.h"
#include "graph/subpixel.h"

namespace kiln::infer_detail {

namespace {

constexpr size_t kSpatial = 2;  // Kiln supports 2-D windows only (NCHW inputs)

// Input 0 must be NCHW: rank < 3 is not a valid windowed op at all, 3-D/5-D are valid ONNX
// Kiln does not implement.
void expect_2d_input(const Graph& g, const Node& n, const char* what) {
  const Shape& s = input(g, n, 0).shape;
  if (s.size() < 3)
    n.fail(Code::invalid_model, input_desc(g, n, 0) +
                                    " should have rank >= 3 (N, C, spatial...) "
                                    "but has shape " +
                                    shape_str(s));
  if (s.size() != 2 + kSpatial)
    n.fail(Code::unsupported, std::string("only 2-D ") + what +
                                  " (4-D NCHW input) is supported, input has shape " +
                                  shape_str(s));
}

// A per-spatial-dim attribute: `def` when absent, else exactly kSpatial values in [lo, kMaxAttr).
std::vector<int64_t> spatial_attr(const Node& n, const char* name, size_t count, int64_t def,
                                  int64_t lo) {
  if (!n.has(name)) return std::vector<int64_t>(count, def);
  std::vector<int64_t> v = n.attr_ints(name);
  if (v.size() != count)
    n.fail(Code::invalid_model, std::string("attribute '") + name + "' should have " +
                                    std::to_string(count) + " values but is " + ints_str(v));
  for (int64_t x : v)
    if (x < lo || x >= kMaxAttr)
      n.fail(Code::invalid_model,
             std::string("attribute '") + name + "' = " + ints_str(v) +
                 " has a value out of range (expected >= " + std::to_string(lo) + ")");
  return v;
}

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begin..., end...
  Shape out;                                              // spatial output dims
};

// Resolves strides/dilations/pads/auto_pad for `kernel` over `in` (spatial dims) and computes
// the output size per the ONNX spec (and PyTorch for ceil_mode).
Window resolve_window(const Node& n, const Shape& in, std::vector<int64_t> kernel, bool ceil_mode,
                      bool allow_dilations) {
  Window w;
  size_t k = in.size();
  w.kernel = std::move(kernel);
  w.strides = spatial_attr(n, "strides", k, 1, 1);
  w.dilations = spatial_attr(n, "dilations", k, 1, 1);
  if (!allow_dilations)
    for (int64_t d : w.dilations)
      if (d != 1)
        n.fail(Code::unsupported,
               "dilations " + ints_str(w.dilations) + " are not supported for this op");
  std::vector<int64_t> eff(k);
  for (size_t i = 0; i < k; ++i) eff[i] = (w.kernel[i] - 1) * w.dilations[i] + 1;

  std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    w.pads = spatial_attr(n, "pads", 2 * k, 0, 0);
  } else if (auto_pad == "VALID") {
    // Explicit pads alongside auto_pad are invalid ONNX, but exporters emit zeros; the
    // auto_pad rule wins, as in ONNX Runtime.
    w.pads.assign(2 * k, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    w.pads.assign(2 * k, 0);
    for (size_t i = 0; i < k; ++i) {
      int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + eff[i] - in[i]);
      int64_t small = total / 2, big = total - small;
      // SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning.
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : big;
      w.pads[i + k] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else {
    n.fail(Code::invalid_model, "unknown auto_pad '" + auto_pad + "'");
  }

  w.out.resize(k);
  for (size_t i = 0; i < k; ++i) {
    int64_t padded = in[i] + w.pads[i] + w.pads[i + k];
    int64_t span = padded - eff[i];
    if (span < 0)
      n.fail(Code::invalid_model,
             "kernel of effective size " + std::to_string(eff[i]) + " along spatial dim " +
                 std::to_string(i) + " is larger than the padded input (" + std::to_string(in[i]) +
                 " + pads " + std::to_string(w.pads[i]) + "+" + std::to_string(w.pads[i + k]) +
                 " = " + std::to_string(padded) + ")");
    int64_t s = w.strides[i];
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // ceil_mode: a last window starting inside the end padding is dropped (PyTorch, ONNX).
    if (ceil_mode && (o - 1) * s >= in[i] + w.pads[i]) --o;
    w.out[i] = o;
  }
  return w;
}

void write_window(Node& n, const Window& w) {
  set_attr_ints(n, "kernel_shape", w.kernel);
  set_attr_ints(n, "strides", w.strides);
  set_attr_ints(n, "dilations", w.dilations);
  set_attr_ints(n, "pads", w.pads);
  n.attrs.erase("auto_pad");
}

// (A 3-D pool, [N, C, D, H, W], is only inferred here: rewrite_conv3d lowers it.)
void infer_pool(Graph& g, Node& n, bool is_max) {
  expect_dtype(g, n, 0, DType::f32);
  const Shape& x = input(g, n, 0).shape;
  if (x.size() != 5) expect_2d_input(g, n, "pooling");
  const size_t k = x.size() - 2;
  if (!n.has("kernel_shape")) n.fail(Code::invalid_model, "attribute 'kernel_shape' is required");
  std::vector<int64_t> kernel = spatial_attr(n, "kernel_shape", k, 1, 1);
  bool ceil_mode = attr_flag(n, "ceil_mode", false);
  if (is_max) {
    if (n.attr_i("storage_order", 0) != 0)
      n.fail(Code::unsupported, "storage_order=" + std::to_string(n.attr_i("storage_order", 0)) +
                                    " (column-major indices) is not supported");
    if (has_output(n, 1)) n.fail(Code::unsupported, "the Indices output is not supported");
  } else {
    attr_flag(n, "count_include_pad", false);  // validated; kept for the kernels
  }
  Window w = resolve_window(n, Shape(x.begin() + 2, x.end()), kernel, ceil_mode, is_max);
  for (size_t i = 0; i < k; ++i) {
    int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
    // A window lying entirely in the padding has no input element (ONNX Runtime rejects it).
    if (w.pads[i] >= eff || w.pads[i + k] >= eff)
      n.fail(Code::invalid_model, "pads " + ints_str(w.pads) +
                                      " must be smaller than the (effective) kernel " +
                                      ints_str(w.kernel));
  }
  write_window(n, w);
  Shape out{x[0], x[1]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  set_output(g, n, 0, DType::f32, out);
}

}  // namespace

namespace {

// Kernel dims of a Conv/ConvTranspose weight [*, *, kH, kW], checked against kernel_shape.
std::vector<int64_t> weight_kernel(const Graph& g, const Node& n) {
  const Shape& wt = input(g, n, 1).shape;
  std::vector<int64_t> kernel(wt.begin() + 2, wt.end());
  for (int64_t d : kernel)
    if (d < 1 || d >= kMaxAttr)
      n.fail(Code::invalid_model,
             "weight shape " + shape_str(wt) + " has an empty or absurdly large kernel");
  if (n.has("kernel_shape") && n.attr_ints("kernel_shape") != kernel)
    n.fail(Code::invalid_model, "attribute kernel_shape " + ints_str(n.attr_ints("kernel_shape")) +
                                    " does not match the weight shape " + shape_str(wt));
  return kernel;
}

void expect_bias(const Graph& g, const Node& n, int64_t m) {
  if (!has_input(n, 2)) return;
  expect_dtype(g, n, 2, DType::f32);
  const Shape& b = input(g, n, 2).shape;
  if (b != Shape{m})
    n.fail(Code::invalid_model, "bias " + input_desc(g, n, 2) + " has shape " + shape_str(b) +
                                    ", expected [" + std::to_string(m) + "]");
}

// Conv and ConvTranspose: f32 NCHW input, weight of the same rank, group dividing both
// channel counts (c: input channels, m: output channels, wt[1] per group as the op lays out).
int64_t expect_grouped_weight(const Graph& g, const Node& n, int64_t c, int64_t m,
                              int64_t per_group) {
  const Shape& x = input(g, n, 0).shape;
  const Shape& wt = input(g, n, 1).shape;
  int64_t group = n.attr_i("group", 1);
  if (group < 1) n.fail(Code::invalid_model, "group " + std::to_string(group) + " must be >= 1");
  if (c % group != 0 || m % group != 0)
    n.fail(Code::invalid_model, "group " + std::to_string(group) +
                                    " does not divide the input channels (" + std::to_string(c) +
                                    ") and output channels (" + std::to_string(m) + ")");
  if (wt[1] != per_group / group)
    n.fail(Code::invalid_model, "weight shape " + shape_str(wt) + " has " + std::to_string(wt[1]) +
                                    " channels per group, expected " +
                                    std::to_string(per_group / group) + " (input shape " +
                                    shape_str(x) + ", group " + std::to_string(group) + ")");
  return group;
}

// Conv and ConvTranspose operands: f32 4-D input (5-D too when `three_d`) and a weight of the
// same rank.
void expect_conv_operands(const Graph& g, const Node& n, const char* what, const char* layout,
                          bool three_d = false) {
  expect_dtype(g, n, 0, DType::f32);
  expect_dtype(g, n, 1, DType::f32);
  const Shape& x = input(g, n, 0).shape;
  if (!three_d || x.size() != 5) expect_2d_input(g, n, what);
  const Shape& wt = input(g, n, 1).shape;
  if (wt.size() != x.size())
    n.fail(Code::invalid_model, "weight " + input_desc(g, n, 1) + " has shape " + shape_str(wt) +
                                    ", expected rank " + std::to_string(x.size()) + " " + layout +
                                    " for input shape " + shape_str(x));
}

}  // namespace

// A 3-D Conv ([N, C, D, H, W]) is only inferred here: rewrite_conv3d lowers it to 2-D Convs
// over the frames before anything else sees it.
void infer_conv(Graph& g, Node& n) {
  const bool three_d = input(g, n, 0).shape.size() == 5;
  expect_conv_operands(g, n, "convolution",
                       three_d ? "[M, C/group, kD, kH, kW]" : "[M, C/group, kH, kW]", true);
  const Shape& x = input(g, n, 0).shape;
  const int64_t m = input(g, n, 1).shape[0];
  expect_grouped_weight(g, n, x[1], m, x[1]);
  std::vector<int64_t> kernel = weight_kernel(g, n);
  expect_bias(g, n, m);
  Window w = resolve_window(n, Shape(x.begin() + 2, x.end()), kernel, false, true);
  write_window(n, w);
  Shape out{x[0], m};
  out.insert(out.end(), w.out.begin(), w.out.end());
  set_output(g, n, 0, DType::f32, out);
}

// ConvTranspose: out = s * (in - 1) + output_padding + (k - 1) * d + 1 - pads (ONNX spec).
// 2-D or 3-D (rewrite_conv3d lowers a 3-D one to a 2-D ConvTranspose over the frames).
// output_shape (spatial dims, or all four) and auto_pad SAME_* give pads from the total
// padding; output_padding is then folded into the end pads, which may become negative (the
// output grows past the last input's reach: bias only there). Canonical form: kernel_shape,
// strides, dilations, pads, group; no auto_pad / output_padding / output_shape.
void infer_conv_transpose(Graph& g, Node& n) {
  const bool three_d = input(g, n, 0).shape.size() == 5;
  expect_conv_operands(g, n, "ConvTranspose",
                       three_d ? "[C, M/group, kD, kH, kW]" : "[C, M/group, kH, kW]", true);
  const Shape& x = input(g, n, 0).shape;
  const size_t nsp = x.size() - 2;  // spatial dims
  const Shape& wt = input(g, n, 1).shape;
  if (wt[0] != x[1])
    n.fail(Code::invalid_model, "weight shape " + shape_str(wt) + " should start with the " +
                                    std::to_string(x[1]) + " input channels of input shape " +
                                    shape_str(x));
  const int64_t group = n.attr_i("group", 1);
  if (group >= 1 && group < kMaxAttr && wt[1] >= 1 && wt[1] < kMaxAttr / group)
    expect_grouped_weight(g, n, x[1], wt[1] * group, wt[1] * group);
  else
    n.fail(Code::invalid_model, "group " + std::to_string(group) + " with weight shape " +
                                    shape_str(wt) + " is out of range");
  const int64_t m = wt[1] * group;
  const std::vector<int64_t> kernel = weight_kernel(g, n);
  expect_bias(g, n, m);
  const std::vector<int64_t> strides = spatial_attr(n, "strides", nsp, 1, 1);
  const std::vector<int64_t> dil = spatial_attr(n, "dilations", nsp, 1, 1);
  const std::vector<int64_t> outpad = spatial_attr(n, "output_padding", nsp, 0, 0);
  std::vector<int64_t> full(nsp);  // s * (in - 1) + output_padding + effective kernel
  for (size_t i = 0; i < nsp; ++i) {
    full[i] = strides[i] * (x[2 + i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1;
    if (full[i] >= kMaxAttr)
      n.fail(Code::unsupported, "output of " + std::to_string(full[i]) + " along spatial dim " +
                                    std::to_string(i) + " is too large");
  }
  const std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * nsp, 0);
  std::vector<int64_t> want;  // requested output size (output_shape or SAME_*)
  if (n.has("output_shape")) {
    want = n.attr_ints("output_shape");
    if (want.size() == 2 + nsp) want.erase(want.begin(), want.begin() + 2);
    if (want.size() != nsp)
      n.fail(Code::invalid_model, "attribute 'output_shape' = " + ints_str(want) +
                                      " should hold the " + std::to_string(nsp) +
                                      " spatial output dims");
    for (int64_t v : want)
      if (v < 1 || v >= kMaxAttr)
        n.fail(Code::invalid_model,
               "attribute 'output_shape' = " + ints_str(want) + " has a value out of range");
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < nsp; ++i) want.push_back(x[2 + i] * strides[i]);
  } else if (auto_pad == "NOTSET") {
    // End pads may be negative in the canonical form (output_padding folded in), which a
    // second inference (graph/dynamic.h's split, then the passes) reads back.
    pads = spatial_attr(n, "pads", 2 * nsp, 0, -kMaxAttr + 1);
    for (size_t i = 0; i < nsp; ++i)
      if (pads[i] < 0)
        n.fail(Code::invalid_model, "attribute 'pads' = " + ints_str(pads) +
                                        " has a negative begin pad (expected >= 0)");
  } else if (auto_pad != "VALID") {
    n.fail(Code::invalid_model, "unknown auto_pad '" + auto_pad + "'");
  }
  if (!want.empty()) {
    for (size_t i = 0; i < nsp; ++i) {
      // SAME_UPPER puts the odd pixel at the end, anything else at the beginning (ONNX spec);
      // half rounds down, so a negative total (output past the full size) grows the end.
      const int64_t total = full[i] - want[i];
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[i + nsp] = total - pads[i];
    }
  }
  std::vector<int64_t> out(nsp);
  for (size_t i = 0; i < nsp; ++i) {
    pads[i + nsp] -= outpad[i];
    out[i] = full[i] - outpad[i] - pads[i] - pads[i + nsp];
    if (out[i] < 1)
      n.fail(Code::invalid_model,
             "pads " + ints_str(pads) + " leave no output along spatial dim " + std::to_string(i));
  }
  set_attr_ints(n, "kernel_shape", kernel);
  set_attr_ints(n, "strides", strides);
  set_attr_ints(n, "dilations", dil);
  set_attr_ints(n, "pads", pads);
  n.attrs.erase("auto_pad");
  n.attrs.erase("output_padding");
  n.attrs.erase("output_shape");
  Shape y{x[0], m};
  y.insert(y.end(), out.begin(), out.end());
  set_output(g, n, 0, DType::f32, y);
}

// SubpixelInterleave (graph/subpixel.h): attrs strides, offsets, out_hw, optional phase_major and
// origins_h / origins_w (one per phase).
void infer_subpixel_interleave(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32);
  expect_2d_input(g, n, "SubpixelInterleave");
  const Shape& z = input(g, n, 0).shape;
  const std::vector<int64_t> s = spatial_attr(n, "strides", kSpatial, 1, 1);
  const std::vector<int64_t> off = spatial_attr(n, "offsets", kSpatial, 0, 0);
  const std::vector<int64_t> hw = spatial_attr(n, "out_hw", kSpatial, 1, 1);
  const std::vector<int64_t> org[2] = {n.attr_ints("origins_h", {}), n.attr_ints("origins_w", {})};
  if (z[1] % (s[0] * s[1]) != 0)
    n.fail(Code::invalid_model,
           "channels of " + shape_str(z) + " are not a multiple of " + std::to_string(s[0] * s[1]));
  for (size_t i = 0; i < kSpatial; ++i)
    if (!subpixel_reads_inside(hw[i], s[i], off[i], org[i], z[2 + i]))
      n.fail(Code::invalid_model,
             "output size " + ints_str(hw) + " reads past input " + shape_str(z));
  set_output(g, n, 0, DType::f32, {z[0], z[1] / (s[0] * s[1]), hw[0], hw[1]});
}

void infer_max_pool(Graph& g, Node& n) {
  infer_pool(g, n, true);
}
void infer_average_pool(Graph& g, Node& n) {
  infer_pool(g, n, false);
}

void infer_global_pool(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32);
  expect_min_rank(g, n, 0, 3);
  Shape out = input(g, n, 0).shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  set_output(g, n, 0, DType::f32, out);
}

void infer_batch_norm(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32);
  expect_min_rank(g, n, 0, 2);
  const Shape& x = input(g, n, 0).shape;
  static const char* names[] = {"X", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) {
    expect_dtype(g, n, i, DType::f32);
    const Shape& s = input(g, n, i).shape;
    if (s != Shape{x[1]})
      n.fail(Code::invalid_model, std::string(names[i]) + " " + input_desc(g, n, i) +
                                      " has shape " + shape_str(s) + ", expected [" +
                                      std::to_string(x[1]) + "] (channels of input shape " +
                                      shape_str(x) + ")");
  }
  if (n.attr_i("spatial", 1) != 1)
    n.fail(Code::unsupported, "spatial=0 (per-activation statistics) is not supported");
  float eps = n.attr_f("epsilon", 1e-5f);
  if (!(eps >= 0)) n.fail(Code::invalid_model, "epsilon " + std::to_string(eps) + " is negative");
  const float momentum = n.attr_f("momentum", 0.9f);
  if (!std::isfinite(momentum))
    n.fail(Code::invalid_model, "momentum " + std::to_string(momentum) + " is not finite");
  // Training mode (graph/function_ops.h batch_norm_training): the statistics outputs, [C] each;
  // opsets 14+ have two (running mean / var), older ones also the saved mean / var.
  const size_t outputs = g.opset >= 14 ? 3 : 5;
  const bool training = batch_norm_training(g, n);
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (!has_output(n, i)) continue;
    if (i >= outputs)
      n.fail(Code::invalid_model, "has " + std::to_string(n.outputs.size()) + " outputs; opset " +
                                      std::to_string(g.opset) + " defines at most " +
                                      std::to_string(outputs));
    if (!training)
      n.fail(Code::invalid_model, "output " + std::to_string(i) +
                                      " (a training statistic) is produced only with "
                                      "training_mode=1");
    set_output(g, n, i, DType::f32, {x[1]});
  }
  set_output(g, n, 0, DType::f32, x);
}

}  // namespace kiln::infer_detail
