// Resize, DepthToSpace, SpaceToDepth, GridSample: shape inference and the arithmetic of
// graph/resize.h.
// Coordinate transforms, nearest rounding and the (antialiased) linear / cubic filters follow
// ONNX's Resize-19 reference (onnx/reference/ops/op_resize.py) in double precision with the
// model's float32 scales, which is what its backend test data was generated with.
#include <algorithm>
#include <cmath>

#include "graph/grid_sample.h"
#include "graph/infer_util.h"
#include "graph/resize.h"

namespace kiln {

using namespace infer_detail;

namespace {

const char* const kModes[] = {"nearest", "linear", "cubic"};
const char* const kCoords[] = {"half_pixel",        "half_pixel_symmetric", "pytorch_half_pixel",
                               "align_corners",     "asymmetric",           "tf_half_pixel_for_nn",
                               "tf_crop_and_resize"};
const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

template <size_t N>
std::string one_of(const Node& n, const char* attr, const char* def, const char* const (&ok)[N]) {
  std::string v = n.attr_s(attr, def);
  for (const char* o : ok)
    if (v == o) return v;
  n.fail(Code::invalid_model, std::string("unknown ") + attr + " '" + v + "'");
}

std::vector<double> tensor_doubles(const Node& n, const Tensor& t, DType want, const char* what) {
  if (t.dtype() != want)
    n.fail(Code::invalid_model, std::string(what) + " must be " + dtype_name(want));
  if (t.shape().size() > 1) n.fail(Code::invalid_model, std::string(what) + " must be 1-D");
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = want == DType::f32 ? double(t.data<float>()[i]) : double(t.data<int64_t>()[i]);
  return v;
}

// The coordinate in the input of output index o along an axis (before rounding / filtering).
double source_coord(const ResizeSpec& s, size_t d, int64_t o) {
  // ONNX's align_corners / pytorch_half_pixel / tf_crop_and_resize use the output length
  // before rounding (in * scale), which is `out` itself when sizes were given.
  const double scale = s.scale[d], in = double(s.in[d]), x = double(o);
  const double out = std::abs(in * scale - double(s.out[d])) < 1e-9 ? double(s.out[d]) : in * scale;
  const std::string& c = s.coord;
  if (c == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (c == "half_pixel_symmetric") {
    const double adjustment = double(s.out[d]) / (scale * in), center = in / 2;
    return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  if (c == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (c == "align_corners") return out == 1 ? 0.0 : x * (in - 1) / (out - 1);
  if (c == "asymmetric") return x / scale;
  if (c == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  const double a = s.roi_start[d], b = s.roi_end[d];  // tf_crop_and_resize
  return out > 1 ? a * (in - 1) + x * (b - a) * (in - 1) / (out - 1) : 0.5 * (a + b) * (in - 1);
}

double cubic_weight(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

}  // namespace

ResizeSpec resize_spec(const Node& n, const Shape& x, const Tensor* roi, const Tensor* scales,
                       const Tensor* sizes) {
  ResizeSpec s;
  s.mode = one_of(n, "mode", "nearest", kModes);
  s.coord = one_of(n, "coordinate_transformation_mode", "half_pixel", kCoords);
  s.nearest = one_of(n, "nearest_mode", "round_prefer_floor", kNearest);
  s.cubic_a = n.attr_f("cubic_coeff_a", -0.75f);
  s.extrapolation = n.attr_f("extrapolation_value", 0.f);
  s.exclude_outside = attr_flag(n, "exclude_outside", false);
  s.antialias = attr_flag(n, "antialias", false) && s.mode != "nearest";
  const std::string policy = n.attr_s("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    n.fail(Code::invalid_model, "unknown keep_aspect_ratio_policy '" + policy + "'");
  const int64_t rank = int64_t(x.size());
  std::vector<int64_t> axes;
  if (n.has("axes")) {
    axes = normalize_axes(n, n.attr_ints("axes"), rank);
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t d : x)
    if (d <= 0) n.fail(Code::unsupported, "an empty input " + shape_str(x) + " is not supported");
  if (scales && scales->numel() == 0) scales = nullptr;  // opset 11-13: "" or empty = absent
  if (sizes && sizes->numel() == 0) sizes = nullptr;
  if (!scales == !sizes)
    n.fail(Code::invalid_model, "needs exactly one of the inputs 'scales' and 'sizes'");
  const size_t k = axes.size();
  s.in = s.out = x;
  s.scale.assign(size_t(rank), 1.0);
  s.roi_start.assign(size_t(rank), 0.f);
  s.roi_end.assign(size_t(rank), 1.f);
  const std::vector<double> v = scales ? tensor_doubles(n, *scales, DType::f32, "scales")
                                       : tensor_doubles(n, *sizes, DType::i64, "sizes");
  if (v.size() != k)
    n.fail(Code::invalid_model, std::string(scales ? "scales" : "sizes") + " has " +
                                    std::to_string(v.size()) + " values for " + std::to_string(k) +
                                    " resized axes");
  auto out_dim = [&](double d) {
    if (!(d >= 1 && d <= double(kMaxElements)))
      n.fail(Code::unsupported, "resized dim " + std::to_string(d) + " is empty or too large");
    return int64_t(d);
  };
  if (scales) {
    if (policy != "stretch")
      n.fail(Code::invalid_model, "keep_aspect_ratio_policy needs 'sizes', not 'scales'");
    for (size_t i = 0; i < k; ++i) {
      const size_t d = size_t(axes[i]);
      if (!(v[i] > 0)) n.fail(Code::invalid_model, "scales must be positive");
      s.scale[d] = v[i];
      s.out[d] = out_dim(std::floor(double(x[d]) * v[i]));
    }
  } else if (policy == "stretch") {
    for (size_t i = 0; i < k; ++i) {
      const size_t d = size_t(axes[i]);
      s.out[d] = out_dim(v[i]);
      s.scale[d] = v[i] / double(x[d]);
    }
  } else {
    double r = policy == "not_larger" ? 1e300 : 0;
    for (size_t i = 0; i < k; ++i) {
      const double q = v[i] / double(x[size_t(axes[i])]);
      r = policy == "not_larger" ? std::min(r, q) : std::max(r, q);
    }
    for (size_t i = 0; i < k; ++i) {
      const size_t d = size_t(axes[i]);
      s.scale[d] = r;
      s.out[d] = out_dim(std::floor(r * double(x[d]) + 0.5));
    }
  }
  if (s.coord == "tf_crop_and_resize") {
    if (!roi) n.fail(Code::invalid_model, "tf_crop_and_resize needs a constant 'roi'");
    const std::vector<double> r = tensor_doubles(n, *roi, DType::f32, "roi");
    if (r.size() != 2 * k)
      n.fail(Code::invalid_model, "roi needs " + std::to_string(2 * k) + " values");
    for (size_t i = 0; i < k; ++i) {
      s.roi_start[size_t(axes[i])] = float(r[i]);
      s.roi_end[size_t(axes[i])] = float(r[i + k]);
    }
  }
  return s;
}

bool ResizeTaps::identity() const {
  if (int64_t(idx.size()) != in * taps) return false;
  for (size_t o = 0; o * size_t(taps) < idx.size(); ++o) {
    if (!outside.empty() && outside[o]) return false;
    // Clamped taps may repeat index o: their weights must add up to 1, the others' be 0.
    float self = 0;
    for (size_t t = 0; t < size_t(taps); ++t) {
      const size_t i = o * size_t(taps) + t;
      if (size_t(idx[i]) == o)
        self += w[i];
      else if (w[i] != 0)
        return false;
    }
    if (self != 1) return false;
  }
  return true;
}

ResizeTaps resize_taps(const ResizeSpec& s, size_t d) {
  const int64_t in = s.in[d], out = s.out[d];
  // Filter footprint: i in [first, first + taps) around floor(x); antialias widens it by
  // 1 / scale when downsampling.
  const double fs = s.antialias ? std::min(s.scale[d], 1.0) : 1.0;
  ResizeTaps t;
  int first = 0;
  if (s.mode == "linear") first = int(std::floor(-1 / fs)) + 1;
  if (s.mode == "cubic") first = int(std::floor(-2 / fs)) + 1;
  t.in = in;
  t.taps = s.mode == "nearest" ? 1 : 2 - 2 * first;
  t.idx.resize(size_t(out * t.taps));
  t.w.resize(t.idx.size());
  t.outside.assign(size_t(out), 0);
  std::vector<double> w(size_t(t.taps));
  for (int64_t o = 0; o < out; ++o) {
    const double x = source_coord(s, d, o);
    t.outside[size_t(o)] = s.coord == "tf_crop_and_resize" && (x < 0 || x > double(in - 1));
    // floor(x) and the ratio in (0, 1]: ONNX prefers the pixel left of an integer x.
    double base = std::floor(x), r = x - base;
    if (r == 0) base -= 1, r = 1;
    const size_t at = size_t(o * t.taps);
    auto clamp = [&](double i) { return std::clamp<int64_t>(int64_t(i), 0, in - 1); };
    if (s.mode == "nearest") {
      const bool up = s.nearest == "round_prefer_floor"  ? r > 0.5
                      : s.nearest == "round_prefer_ceil" ? r >= 0.5
                      : s.nearest == "floor"             ? r == 1
                                                         : true;
      t.idx[at] = clamp(base + (up ? 1 : 0));
      t.w[at] = 1;
      continue;
    }
    double sum = 0;
    for (int i = 0; i < t.taps; ++i) {
      const double a = fs * (first + i - r);
      double c = s.mode == "linear" ? std::max(0.0, 1 - std::abs(a)) : cubic_weight(a, s.cubic_a);
      const double p = base + first + i;
      if (s.exclude_outside && (p < 0 || p > double(in - 1))) c = 0;
      w[size_t(i)] = c;
      sum += c;
    }
    const bool normalize = s.antialias || s.exclude_outside;
    for (int i = 0; i < t.taps; ++i) {
      t.idx[at + size_t(i)] = clamp(base + first + i);
      t.w[at + size_t(i)] = float(normalize && sum != 0 ? w[size_t(i)] / sum : w[size_t(i)]);
    }
  }
  return t;
}

SpaceDepthView space_depth_view(const Node& n, const Shape& x) {
  const int64_t b = n.attr_i("blocksize", 0);
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  if (n.op == "SpaceToDepth") return {{N, C, H / b, b, W / b, b}, {0, 3, 5, 1, 2, 4}};
  if (n.attr_s("mode", "DCR") == "CRD") return {{N, C / (b * b), b, b, H, W}, {0, 1, 4, 2, 5, 3}};
  return {{N, b, b, C / (b * b), H, W}, {0, 3, 4, 1, 5, 2}};
}

namespace infer_detail {

void infer_resize(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  const std::string coord = n.attr_s("coordinate_transformation_mode", "half_pixel");
  auto constant = [&](size_t i) -> const Tensor* {
    if (!has_input(n, i)) return nullptr;
    const Value& v = input(g, n, i);
    if (!v.is_const()) {
      if (i == 1 && coord != "tf_crop_and_resize") return nullptr;  // roi: unused
      n.fail(Code::unsupported, input_desc(g, n, i) +
                                    " is computed at run time: a data-dependent output size "
                                    "is not supported (it must be constant at load)");
    }
    return &*v.constant;
  };
  const ResizeSpec s = resize_spec(n, input(g, n, 0).shape, constant(1), constant(2), constant(3));
  set_output(g, n, 0, DType::f32, s.out);
}

void infer_space_depth(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_rank(g, n, 0, 4);
  const int64_t b = n.attr_i("blocksize", 0);
  if (b < 1 || b > kMaxAttr) n.fail(Code::invalid_model, "blocksize must be positive");
  const Shape& x = input(g, n, 0).shape;
  if (n.op == "DepthToSpace") {
    const std::string mode = n.attr_s("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") n.fail(Code::invalid_model, "unknown mode '" + mode + "'");
    if (x[1] % (b * b))
      n.fail(Code::invalid_model,
             "channels " + std::to_string(x[1]) + " are not a multiple of blocksize^2");
    set_output(g, n, 0, DType::f32, {x[0], x[1] / (b * b), x[2] * b, x[3] * b});
  } else {
    if (x[2] % b || x[3] % b)
      n.fail(Code::invalid_model, "spatial dims of " + shape_str(x) +
                                      " are not multiples of blocksize " + std::to_string(b));
    set_output(g, n, 0, DType::f32, {x[0], x[1] * b * b, x[2] / b, x[3] / b});
  }
}

void infer_grid_sample(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_dtype(g, n, 1, DType::f32, Code::unsupported);
  if (input(g, n, 0).shape.size() != 4)
    n.fail(Code::unsupported, input_desc(g, n, 0) + " has shape " +
                                  shape_str(input(g, n, 0).shape) +
                                  "; Kiln samples 2-D images ([N, C, H, W]) only");
  expect_rank(g, n, 1, 4);
  const Shape& x = input(g, n, 0).shape;
  const Shape& grid = input(g, n, 1).shape;
  if (grid[0] != x[0] || grid[3] != 2)
    n.fail(Code::invalid_model,
           "grid " + shape_str(grid) + " is not [N, H_out, W_out, 2] for X " + shape_str(x));
  grid_sample_spec(n);  // validates the attributes
  set_output(g, n, 0, DType::f32, {x[0], x[1], grid[1], grid[2]});
}

// RoiAlign: each region of interest [x1, y1, x2, y2] of image batch_indices[r], average-pooled
// from bilinear samples into output_height x output_width bins.
void infer_roi_align(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_dtype(g, n, 1, DType::f32, Code::unsupported);
  expect_dtype(g, n, 2, DType::i64);
  expect_rank(g, n, 0, 4);
  expect_rank(g, n, 1, 2);
  expect_rank(g, n, 2, 1);
  const Shape& x = input(g, n, 0).shape;
  const Shape& rois = input(g, n, 1).shape;
  if (rois[1] != 4 || input(g, n, 2).shape[0] != rois[0])
    n.fail(Code::invalid_model, "rois " + shape_str(rois) + " and batch_indices " +
                                    shape_str(input(g, n, 2).shape) + " are not [R, 4] and [R]");
  const std::string mode = n.attr_s("mode", "avg");
  if (mode != "avg") n.fail(Code::unsupported, "mode '" + mode + "' is not supported (only avg)");
  const std::string ct = n.attr_s("coordinate_transformation_mode", "half_pixel");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    n.fail(Code::invalid_model, "unknown coordinate_transformation_mode '" + ct + "'");
  const int64_t oh = n.attr_i("output_height", 1), ow = n.attr_i("output_width", 1);
  const int64_t ratio = n.attr_i("sampling_ratio", 0);
  if (oh < 1 || ow < 1 || oh > 4096 || ow > 4096 || ratio < 0 || ratio > 64)
    n.fail(Code::invalid_model, "output_height / output_width " + std::to_string(oh) + " x " +
                                    std::to_string(ow) + " or sampling_ratio " +
                                    std::to_string(ratio) + " is out of range");
  set_output(g, n, 0, DType::f32, {rois[0], x[1], oh, ow});
}

}  // namespace infer_detail

GridSampleSpec grid_sample_spec(const Node& n) {
  GridSampleSpec s;
  const std::string mode = n.attr_s("mode", "bilinear"), pad = n.attr_s("padding_mode", "zeros");
  if (mode == "bilinear" || mode == "linear")
    s.mode = GridSampleSpec::Mode::bilinear;
  else if (mode == "nearest")
    s.mode = GridSampleSpec::Mode::nearest;
  else if (mode == "bicubic" || mode == "cubic")
    s.mode = GridSampleSpec::Mode::bicubic;
  else
    n.fail(Code::invalid_model, "unknown mode '" + mode + "'");
  if (pad == "zeros")
    s.padding = GridSampleSpec::Padding::zeros;
  else if (pad == "border")
    s.padding = GridSampleSpec::Padding::border;
  else if (pad == "reflection")
    s.padding = GridSampleSpec::Padding::reflection;
  else
    n.fail(Code::invalid_model, "unknown padding_mode '" + pad + "'");
  s.align_corners = n.attr_i("align_corners", 0) != 0;
  return s;
}

}  // namespace kiln
