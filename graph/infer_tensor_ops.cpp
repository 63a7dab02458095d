// Shape inference for the ops that move data between tensors: Concat, Split, Slice, Gather,
// Pad.
#include <algorithm>
#include <limits>
#include <string>

#include "graph/infer_util.h"

namespace kiln::infer_detail {

namespace {

// Output length of one sliced axis of size d, per the ONNX Slice clamping rules.
int64_t slice_length(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (d == 0) return 0;
  if (start < 0) start += d;  // cannot overflow: start < 0 <= d
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp(start, int64_t(0), d);
    end = std::clamp(end, int64_t(0), d);
    return end > start ? 1 + (end - start - 1) / step : 0;
  }
  // Negative step: start in [0, d-1], end in [-1, d-1] (-1 means "through index 0").
  start = std::clamp(start, int64_t(0), d - 1);
  end = std::clamp(end, int64_t(-1), d - 1);
  int64_t mag =
      step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
  return start > end ? 1 + (start - end - 1) / mag : 0;
}

// Gather / GatherElements: constant indices must lie in [-dim, dim) of data x's axis (computed
// ones are checked by the kernels).
void check_const_indices(const Node& n, const Value& idx, int64_t axis, const Shape& x) {
  if (!idx.is_const()) return;
  const int64_t dim = x[size_t(axis)];
  const int64_t* p = idx.constant->data<int64_t>();
  for (int64_t i = 0; i < idx.constant->numel(); ++i)
    if (p[i] < -dim || p[i] >= dim)
      n.fail(Code::invalid_model, "index " + std::to_string(p[i]) + " is out of range for axis " +
                                      std::to_string(axis) + " of size " + std::to_string(dim) +
                                      " (data shape " + shape_str(x) + ")");
}

// GatherElements / ScatterElements: indices of data x's rank, no larger than x on the axes
// other than `axis`, constant ones within it.
void check_element_indices(const Node& n, const Value& idx, int64_t axis, const Shape& x) {
  if (idx.shape.size() != x.size())
    n.fail(Code::invalid_model, "indices have shape " + shape_str(idx.shape) + ", data " +
                                    shape_str(x) + ": the ranks must match");
  for (size_t a = 0; a < x.size(); ++a)
    if (int64_t(a) != axis && idx.shape[a] > x[a])
      n.fail(Code::invalid_model, "indices have shape " + shape_str(idx.shape) +
                                      ", larger than data " + shape_str(x) + " on axis " +
                                      std::to_string(a));
  check_const_indices(n, idx, axis, x);
}

}  // namespace

void infer_concat(Graph& g, Node& n) {
  if (!n.has("axis")) n.fail(Code::invalid_model, "attribute 'axis' is required");
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!has_input(n, i)) n.fail(Code::invalid_model, "input " + std::to_string(i) + " is missing");
  DType d = expect_f32_or_i64(g, n, 0);
  expect_min_rank(g, n, 0, 1);
  Shape out = input(g, n, 0).shape;
  int64_t axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(out.size()));
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    expect_same_dtype(g, n, 0, i);
    const Shape& s = input(g, n, i).shape;
    bool ok = s.size() == out.size();
    for (size_t k = 0; ok && k < s.size(); ++k) ok = int64_t(k) == axis || s[k] == out[k];
    if (!ok)
      n.fail(Code::invalid_model, input_desc(g, n, i) + " has shape " + shape_str(s) +
                                      ", incompatible with " + input_desc(g, n, 0) + " shape " +
                                      shape_str(input(g, n, 0).shape) +
                                      " for concatenation on axis " + std::to_string(axis));
    out[size_t(axis)] += s[size_t(axis)];
  }
  set_output(g, n, 0, d, out);
}

void infer_split(Graph& g, Node& n) {
  const DType dtype = expect_f32_or_i64(g, n, 0);
  reject_attr(n, "split");
  const Shape& x = input(g, n, 0).shape;
  expect_min_rank(g, n, 0, 1);
  int64_t axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(x.size()));
  int64_t dim = x[size_t(axis)];
  int64_t nout = int64_t(n.outputs.size());
  std::vector<int64_t> sizes;
  if (auto split = const_ints(g, n, 1)) {
    if (n.has("num_outputs"))
      n.fail(Code::invalid_model, "has both the 'split' input and the 'num_outputs' attribute");
    if (int64_t(split->size()) != nout)
      n.fail(Code::invalid_model, "split " + ints_str(*split) + " has " +
                                      std::to_string(split->size()) + " entries but the node has " +
                                      std::to_string(nout) + " outputs");
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0 || s > dim)
        n.fail(Code::invalid_model, "split " + ints_str(*split) + " has an invalid size " +
                                        std::to_string(s) + " for dim " + std::to_string(dim));
      sum += s;  // each <= dim, count <= outputs: no overflow
    }
    if (sum != dim)
      n.fail(Code::invalid_model, "split " + ints_str(*split) + " sums to " + std::to_string(sum) +
                                      " but axis " + std::to_string(axis) + " of shape " +
                                      shape_str(x) + " has size " + std::to_string(dim));
    sizes = *split;
  } else if (n.has("num_outputs")) {
    // Opset 18: chunks of ceil(dim / n), the last one smaller.
    int64_t k = n.attr_i("num_outputs", 0);
    if (k != nout)
      n.fail(Code::invalid_model, "num_outputs " + std::to_string(k) + " but the node has " +
                                      std::to_string(nout) + " outputs");
    int64_t chunk = (dim + k - 1) / k;
    int64_t last = dim - chunk * (k - 1);
    if (last <= 0)
      n.fail(Code::invalid_model, "cannot split size " + std::to_string(dim) + " into " +
                                      std::to_string(k) + " chunks of " + std::to_string(chunk));
    sizes.assign(size_t(k), chunk);
    sizes.back() = last;
  } else {
    // Older opsets: equal parts, which must divide the dim exactly.
    if (dim % nout != 0)
      n.fail(Code::invalid_model, "axis " + std::to_string(axis) + " of shape " + shape_str(x) +
                                      " cannot be split evenly into " + std::to_string(nout) +
                                      " outputs");
    sizes.assign(size_t(nout), dim / nout);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape out = x;
    out[size_t(axis)] = sizes[i];
    set_output(g, n, i, dtype, out);
  }
}

void infer_slice(Graph& g, Node& n) {
  DType d = expect_f32_or_i64(g, n, 0);
  for (const char* a : {"starts", "ends", "axes"}) reject_attr(n, a);
  const Shape& x = input(g, n, 0).shape;
  int64_t r = int64_t(x.size());
  std::vector<int64_t> starts = *const_ints(g, n, 1);
  std::vector<int64_t> ends = *const_ints(g, n, 2);
  size_t k = starts.size();
  std::vector<int64_t> axes;
  if (auto a = const_ints(g, n, 3)) {
    axes = *a;
  } else {
    if (int64_t(k) > r)
      n.fail(Code::invalid_model,
             "has " + std::to_string(k) + " starts for an input of rank " + std::to_string(r));
    for (size_t i = 0; i < k; ++i) axes.push_back(int64_t(i));
  }
  std::vector<int64_t> steps = const_ints(g, n, 4).value_or(std::vector<int64_t>(k, 1));
  if (ends.size() != k || axes.size() != k || steps.size() != k)
    n.fail(Code::invalid_model, "starts " + ints_str(starts) + ", ends " + ints_str(ends) +
                                    ", axes " + ints_str(axes) + " and steps " + ints_str(steps) +
                                    " must have the same length");
  axes = normalize_axes(n, axes, r);
  Shape out = x;
  for (size_t i = 0; i < k; ++i) {
    if (steps[i] == 0) n.fail(Code::invalid_model, "steps " + ints_str(steps) + " contain 0");
    size_t a = size_t(axes[i]);
    out[a] = slice_length(x[a], starts[i], ends[i], steps[i]);
  }
  set_output(g, n, 0, d, out);
}

void infer_gather(Graph& g, Node& n) {
  DType d = expect_f32_or_i64(g, n, 0);
  expect_dtype(g, n, 1, DType::i64);
  expect_min_rank(g, n, 0, 1);
  const Shape& x = input(g, n, 0).shape;
  const Value& idx = input(g, n, 1);
  int64_t axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(x.size()));
  check_const_indices(n, idx, axis, x);
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  set_output(g, n, 0, d, out);
}

// GatherElements (torch.gather): indices of data's rank, no larger than data on the other axes;
// the output has the indices' shape.
void infer_gather_elements(Graph& g, Node& n) {
  const DType d = expect_f32_or_i64(g, n, 0);
  expect_dtype(g, n, 1, DType::i64);
  const Shape& x = input(g, n, 0).shape;
  const Value& idx = input(g, n, 1);
  expect_min_rank(g, n, 0, 1);
  const int64_t axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(x.size()));
  n.attrs["axis"] = attr_i(axis);
  check_element_indices(n, idx, axis, x);
  set_output(g, n, 0, d, idx.shape);
}

// ScatterElements: data with updates written (or reduced) at indices along axis; indices and
// updates share a shape of data's rank, no larger than data on the other axes.
void infer_scatter_elements(Graph& g, Node& n) {
  const DType d = expect_f32_or_i64(g, n, 0);
  expect_dtype(g, n, 1, DType::i64);
  expect_same_dtype(g, n, 0, 2);
  const Shape& x = input(g, n, 0).shape;
  const Value& idx = input(g, n, 1);
  expect_min_rank(g, n, 0, 1);
  const int64_t axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(x.size()));
  n.attrs["axis"] = attr_i(axis);
  const std::string red = n.attr_s("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    n.fail(Code::invalid_model, "unknown reduction '" + red + "'");
  if (input(g, n, 2).shape != idx.shape)
    n.fail(Code::invalid_model, "indices " + shape_str(idx.shape) + " and updates " +
                                    shape_str(input(g, n, 2).shape) + " must have one shape");
  check_element_indices(n, idx, axis, x);
  set_output(g, n, 0, d, x);
}

// Trilu: the lower (upper = 0) or upper triangle of the last two dims, from diagonal k.
void infer_trilu(Graph& g, Node& n) {
  const DType d = input(g, n, 0).dtype;
  expect_min_rank(g, n, 0, 2);
  if (has_input(n, 1)) {
    expect_dtype(g, n, 1, DType::i64);
    expect_scalar(g, n, 1);
  }
  attr_flag(n, "upper", true);
  set_output(g, n, 0, d, input(g, n, 0).shape);
}

void infer_scatter_nd(Graph& g, Node& n) {
  const DType d = input(g, n, 0).dtype;
  expect_dtype(g, n, 1, DType::i64);
  expect_same_dtype(g, n, 0, 2);
  const std::string red = n.attr_s("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    n.fail(Code::invalid_model, "unknown reduction '" + red + "'");
  const Shape& x = input(g, n, 0).shape;
  const Shape& idx = input(g, n, 1).shape;
  if (idx.empty() || idx.back() < 1 || idx.back() > int64_t(x.size()))
    n.fail(Code::invalid_model,
           "indices shape " + shape_str(idx) + " does not index data of shape " + shape_str(x));
  Shape want(idx.begin(), idx.end() - 1);
  want.insert(want.end(), x.begin() + idx.back(), x.end());
  if (input(g, n, 2).shape != want)
    n.fail(Code::invalid_model, "updates have shape " + shape_str(input(g, n, 2).shape) +
                                    ", expected " + shape_str(want) + " for data " + shape_str(x) +
                                    " and indices " + shape_str(idx));
  set_output(g, n, 0, d, x);
}

void infer_gather_nd(Graph& g, Node& n) {
  const DType d = input(g, n, 0).dtype;
  expect_dtype(g, n, 1, DType::i64);
  const Shape& x = input(g, n, 0).shape;
  const Shape& idx = input(g, n, 1).shape;
  const int64_t b = n.attr_i("batch_dims", 0);
  if (b < 0 || b >= int64_t(idx.size()) || b >= int64_t(x.size()) ||
      !std::equal(x.begin(), x.begin() + b, idx.begin()))
    n.fail(Code::invalid_model, "batch_dims " + std::to_string(b) + " does not fit data " +
                                    shape_str(x) + " and indices " + shape_str(idx));
  if (idx.back() < 1 || b + idx.back() > int64_t(x.size()))
    n.fail(Code::invalid_model,
           "indices shape " + shape_str(idx) + " does not index data of shape " + shape_str(x));
  Shape y(idx.begin(), idx.end() - 1);
  y.insert(y.end(), x.begin() + b + idx.back(), x.end());
  set_output(g, n, 0, d, y);
}

void infer_pad(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  for (const char* a : {"pads", "value"}) reject_attr(n, a);
  std::string mode = n.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    n.fail(Code::invalid_model, "unknown mode '" + mode + "'");
  const Shape& x = input(g, n, 0).shape;
  int64_t r = int64_t(x.size());
  std::vector<int64_t> pads = *const_ints(g, n, 1);
  if (has_input(n, 2)) {
    expect_same_dtype(g, n, 0, 2);
    expect_scalar(g, n, 2);
  }
  // Opset 18 `axes`: pads then cover only these axes.
  std::vector<int64_t> axes;
  if (auto a = const_ints(g, n, 3))
    axes = normalize_axes(n, *a, r);
  else
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  size_t k = axes.size();
  if (pads.size() != 2 * k)
    n.fail(Code::invalid_model, "pads " + ints_str(pads) + " should have " + std::to_string(2 * k) +
                                    " values for input shape " + shape_str(x) +
                                    (has_input(n, 3) ? " and the given axes" : ""));
  Shape out = x;
  for (size_t i = 0; i < k; ++i) {
    int64_t b = pads[i], e = pads[i + k];
    if (b < 0 || e < 0)
      n.fail(Code::unsupported,
             "negative pads " + ints_str(pads) + " (cropping) are not supported");
    if (b >= kMaxAttr || e >= kMaxAttr)
      n.fail(Code::unsupported, "pads " + ints_str(pads) + " are too large");
    if (mode != "constant" && (b || e) && x[size_t(axes[i])] == 0)
      n.fail(Code::invalid_model, "mode '" + mode + "' cannot pad dim " + std::to_string(axes[i]) +
                                      " of input shape " + shape_str(x) + ": it is empty");
    // numpy.pad (ONNX's reference) wraps pads wider than the dim in rounds that are not
    // periodic; the definitions agree up to the dim's size.
    if (mode == "wrap" && (b > x[size_t(axes[i])] || e > x[size_t(axes[i])]))
      n.fail(Code::unsupported, "wrap pads " + ints_str(pads) + " wider than dim " +
                                    std::to_string(axes[i]) + " of input shape " + shape_str(x) +
                                    " are not supported");
    out[size_t(axes[i])] += b + e;
  }
  set_output(g, n, 0, DType::f32, out);
}

}  // namespace kiln::infer_detail

namespace kiln::infer_detail {

void infer_channel_shuffle(Graph& g, Node& n) {
  int64_t total = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!has_input(n, i)) n.fail(Code::invalid_model, "input " + std::to_string(i) + " is missing");
    expect_dtype(g, n, i, DType::f32);
    expect_rank(g, n, i, 4);
    const Shape& x = input(g, n, i).shape;
    const Shape& x0 = input(g, n, 0).shape;
    if (x[0] != x0[0] || x[2] != x0[2] || x[3] != x0[3])
      n.fail(Code::invalid_model, input_desc(g, n, i) + " has shape " + shape_str(x) +
                                      ", unlike input 0's " + shape_str(x0) + " outside channels");
    total += x[1];  // each < kMaxElements: no overflow
  }
  const int64_t groups = n.attr_i("groups", 1), offset = n.attr_i("offset", 0);
  if (groups < 1 || total % groups != 0)
    n.fail(Code::invalid_model, "groups " + std::to_string(groups) + " does not divide " +
                                    std::to_string(total) + " channels");
  const std::vector<int64_t> split = n.attr_ints("split");
  if (split.size() != n.outputs.size())
    n.fail(Code::invalid_model, "split " + ints_str(split) + " does not have one entry per output");
  if (offset < 0 || offset > total)
    n.fail(Code::invalid_model, "offset " + std::to_string(offset) + " is out of range");
  int64_t end = offset;
  for (int64_t s : split) {
    if (s < 1 || s > total - end)
      n.fail(Code::invalid_model, "split " + ints_str(split) + " from offset " +
                                      std::to_string(offset) + " exceeds " + std::to_string(total) +
                                      " channels");
    end += s;
  }
  Shape out = input(g, n, 0).shape;
  for (size_t i = 0; i < split.size(); ++i) {
    out[1] = split[i];
    set_output(g, n, i, DType::f32, out);
  }
}

}  // namespace kiln::infer_detail
