// Data-movement ops: copies (Reshape & co), Transpose, Concat, Split, Slice, Gather, Shape,
// Pad, Constant, and the shape builders Expand, Tile, ConstantOfShape, Range, Size. All work
// on f32 and i64 alike (most on bool too).
#include <algorithm>
#include <cstring>

#include "graph/canonicalize.h"
#include "graph/channel_shuffle.h"
#include "graph/pad.h"
#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_epilogue.h"

namespace kiln::ref {

namespace {

// memmove of n elements of dtype t.
void copy_elems(DType t, void* dst, const void* src, int64_t n) {
  if (n > 0 && dst != src) std::memmove(dst, src, size_t(n) * dtype_size(t));
}

void expect_f32_or_i64(const Node& node, const Tensor& t, const char* what) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::i64)
    node.fail(Code::unsupported, std::string(what) + " has unsupported dtype");
}

// Gather / GatherElements: every index checked before anything is written, negative ones
// counted from the end of the axis.
std::vector<int64_t> checked_indices(const Node& node, const Tensor& idx, size_t axis,
                                     int64_t dim) {
  const int64_t* ip = idx.data<int64_t>();
  std::vector<int64_t> pos(size_t(idx.numel()));
  for (int64_t j = 0; j < idx.numel(); ++j) {
    const int64_t k = ip[j] < 0 ? ip[j] + dim : ip[j];
    if (k < 0 || k >= dim)
      node.fail(Code::invalid_argument, "index " + std::to_string(ip[j]) +
                                            " is out of range for axis " + std::to_string(axis) +
                                            " of size " + std::to_string(dim));
    pos[size_t(j)] = k;
  }
  return pos;
}

}  // namespace

// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: the output shape is already inferred
// and the C-order data is unchanged.
void copy_data(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_same_size(node, x, y);
  copy_elems(x.dtype(), y.raw(), x.raw(), x.numel());
  if (node.op == "Dropout" && out.size() > 1 && out[1]) {  // the mask: nothing is dropped
    Tensor& mask = *out[1];
    expect_dtype(node, mask, DType::boolean, "mask");
    expect_shape(node, mask, x.shape(), "mask");
    std::fill(mask.data<uint8_t>(), mask.data<uint8_t>() + mask.numel(), uint8_t(1));
  }
}

void transpose(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, x.dtype(), "output");
  const size_t rank = x.shape().size();
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = int64_t(rank - 1 - i);  // default: reverse
  perm = node.attr_ints("perm", perm);
  if (perm.size() != rank) node.fail(Code::invalid_model, "perm does not match the input rank");
  std::vector<char> seen(rank, 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(rank) || seen[size_t(p)])
      node.fail(Code::invalid_model, "perm is not a permutation");
    seen[size_t(p)] = 1;
  }
  Shape expect(rank);
  const std::vector<int64_t> xs = strides_of(x.shape());
  std::vector<int64_t> src(rank);  // input stride of each output dim
  for (size_t i = 0; i < rank; ++i) {
    expect[i] = x.shape()[size_t(perm[i])];
    src[i] = xs[size_t(perm[i])];
  }
  expect_shape(node, y, expect, "output");
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for_each_row(y.shape(), {src, strides_of(y.shape())},
                 [&](const int64_t* o, int64_t len, const int64_t* s) {
                   for (int64_t i = 0; i < len; ++i) yp[o[1] + i] = xp[o[0] + i * s[0]];
                 });
  });
}

namespace {

// A BatchNormalization fused into a channel Concat (graph/fuse.cpp): y = post(y * scale[c] +
// shift[c]) over the concatenated channels.
void concat_affine(const Node& node, const Inputs& in, Tensor& y, size_t axis) {
  const std::vector<float> scale = node.attr_floats("affine_scale"),
                           shift = node.attr_floats("affine_shift");
  const Shape& s = y.shape();
  if (axis != 1 || y.dtype() != DType::f32 || int64_t(scale.size()) != s[1] ||
      shift.size() != scale.size())
    node.fail(Code::invalid_model, "affine_scale / affine_shift need a float channel concat with " +
                                       std::to_string(s.size() > 1 ? s[1] : 0) + " channels");
  const int64_t inner = prod(s, 2, s.size());
  const Epilogue epilogue(node, in, int(in.size()), y);
  float* yp = y.data<float>();
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c) {
      float* row = yp + (n * s[1] + c) * inner;
      for (int64_t i = 0; i < inner; ++i) row[i] = row[i] * scale[size_t(c)] + shift[size_t(c)];
      epilogue.apply_row(row, inner, (n * s[1] + c) * inner, c, 0);
    }
}

}  // namespace

void concat(const Node& node, const Inputs& in, const Outputs& out) {
  Tensor& y = req_output(node, out, 0);
  if (in.empty()) node.fail(Code::invalid_model, "needs at least one input");
  const Tensor& x0 = req_input(node, in, 0);
  expect_f32_or_i64(node, x0, "input 0");
  expect_dtype(node, y, x0.dtype(), "output");
  const size_t rank = x0.shape().size();
  if (!node.has("axis")) node.fail(Code::invalid_model, "attribute axis is required");
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", 0), int64_t(rank)));
  Shape expect = x0.shape();
  expect[axis] = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const Tensor& x = req_input(node, in, k);
    expect_dtype(node, x, x0.dtype(), "input");
    for (size_t d = 0; d < rank; ++d)
      if (d != axis && (x.shape().size() != rank || x.shape()[d] != x0.shape()[d]))
        node.fail(Code::invalid_model, "input shapes " + shape_str(x0.shape()) + " and " +
                                           shape_str(x.shape()) + " cannot be concatenated");
    expect[axis] += x.shape()[axis];
  }
  expect_shape(node, y, expect, "output");
  const int64_t outer = prod(expect, 0, axis), inner = prod(expect, axis + 1, rank);
  const size_t es = dtype_size(y.dtype());
  char* yp = static_cast<char*>(y.raw());
  int64_t at = 0;  // elements of y's axis already filled
  for (const Tensor* x : in) {
    const int64_t chunk = x->shape()[axis] * inner;
    const char* xp = static_cast<const char*>(x->raw());
    for (int64_t o = 0; o < outer; ++o)
      copy_elems(y.dtype(), yp + size_t((o * expect[axis] + at) * inner) * es,
                 xp + size_t(o * chunk) * es, chunk);
    at += x->shape()[axis];
  }
  if (node.has("affine_scale")) concat_affine(node, in, y, axis);
}

void split(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  expect_f32_or_i64(node, x, "input");
  const size_t rank = x.shape().size();
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", 0), int64_t(rank)));
  // Output shapes were inferred; they must tile x along `axis` (and match `split` if given).
  std::vector<int64_t> sizes;
  if (const Tensor* t = opt_input(in, 1)) sizes = read_i64s(node, *t, "split");
  if (!sizes.empty() && sizes.size() != out.size())
    node.fail(Code::invalid_model, "split has " + std::to_string(sizes.size()) + " values for " +
                                       std::to_string(out.size()) + " outputs");
  int64_t total = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    const Tensor& y = req_output(node, out, k);
    expect_dtype(node, y, x.dtype(), "output");
    Shape expect = x.shape();
    expect[axis] = y.shape().size() == rank ? y.shape()[axis] : -1;
    if (!sizes.empty()) expect[axis] = sizes[k];
    expect_shape(node, y, expect, "output");
    total += y.shape()[axis];
  }
  if (total != x.shape()[axis])
    node.fail(Code::internal, "output sizes along the axis sum to " + std::to_string(total) +
                                  ", input has " + std::to_string(x.shape()[axis]));
  const int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, rank);
  const size_t es = dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw());
  int64_t at = 0;
  for (Tensor* y : out) {
    const int64_t chunk = y->shape()[axis] * inner;
    char* yp = static_cast<char*>(y->raw());
    for (int64_t o = 0; o < outer; ++o)
      copy_elems(x.dtype(), yp + size_t(o * chunk) * es,
                 xp + size_t((o * x.shape()[axis] + at) * inner) * es, chunk);
    at += y->shape()[axis];
  }
}

void slice(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_f32_or_i64(node, x, "input");
  expect_dtype(node, y, x.dtype(), "output");
  const int64_t rank = int64_t(x.shape().size());
  const std::vector<int64_t> starts = read_i64s(node, req_input(node, in, 1), "starts");
  const std::vector<int64_t> ends = read_i64s(node, req_input(node, in, 2), "ends");
  std::vector<int64_t> axes, steps;
  if (const Tensor* t = opt_input(in, 3)) axes = read_i64s(node, *t, "axes");
  if (const Tensor* t = opt_input(in, 4)) steps = read_i64s(node, *t, "steps");
  if (!opt_input(in, 3))
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (!opt_input(in, 4)) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    node.fail(Code::invalid_model, "starts, ends, axes and steps differ in length");

  // Per dim: first input index, step and count (the whole dim by default).
  std::vector<int64_t> first(size_t(rank), 0), step(size_t(rank), 1);
  Shape count = x.shape();
  std::vector<char> seen(size_t(rank), 0);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t d = size_t(norm_axis(node, axes[i], rank));
    if (seen[d]) node.fail(Code::invalid_model, "axes has a repeated axis");
    seen[d] = 1;
    const int64_t dim = x.shape()[d], st = steps[i];
    if (st == 0) node.fail(Code::invalid_model, "steps must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    // Clamp as the ONNX spec says: [0, dim] for positive steps, [0, dim-1] / [-1, dim-1] for
    // negative ones (so a reverse slice can run down to index 0).
    if (st > 0) {
      s = std::max<int64_t>(0, std::min(s, dim));
      e = std::max<int64_t>(0, std::min(e, dim));
      count[d] = e > s ? 1 + (e - s - 1) / st : 0;  // (no e - s + st - 1: st may be INT64_MAX)
    } else {
      s = std::max<int64_t>(0, std::min(s, dim - 1));
      e = std::max<int64_t>(-1, std::min(e, dim - 1));
      // |st| as unsigned: -st overflows for INT64_MIN.
      count[d] = s > e ? int64_t(1 + uint64_t(s - e - 1) / (uint64_t(0) - uint64_t(st))) : 0;
    }
    if (dim == 0) count[d] = 0;
    first[d] = s;
    step[d] = st;
  }
  expect_shape(node, y, count, "output");
  const std::vector<int64_t> xs = strides_of(x.shape());
  std::vector<int64_t> src(static_cast<size_t>(rank));
  int64_t base = 0;
  for (size_t d = 0; d < size_t(rank); ++d) {
    // A dim that yields at most one element never moves along it; its step may be anything up
    // to INT64_MAX, and stride * step would overflow. Otherwise |step| < dim, and it fits.
    src[d] = count[d] > 1 ? xs[d] * step[d] : 0;
    base += first[d] * xs[d];
  }
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>() + base;
    T* yp = y.data<T>();
    for_each_row(y.shape(), {src, strides_of(y.shape())},
                 [&](const int64_t* o, int64_t len, const int64_t* s) {
                   for (int64_t i = 0; i < len; ++i) yp[o[1] + i] = xp[o[0] + i * s[0]];
                 });
  });
}

void gather(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& idx = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_f32_or_i64(node, x, "input data");
  expect_dtype(node, idx, DType::i64, "input indices");
  expect_dtype(node, y, x.dtype(), "output");
  const size_t rank = x.shape().size();
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", 0), int64_t(rank)));
  Shape expect(x.shape().begin(), x.shape().begin() + int64_t(axis));
  expect.insert(expect.end(), idx.shape().begin(), idx.shape().end());
  expect.insert(expect.end(), x.shape().begin() + int64_t(axis) + 1, x.shape().end());
  expect_shape(node, y, expect, "output");
  const int64_t dim = x.shape()[axis];
  const int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, rank);
  const std::vector<int64_t> pos = checked_indices(node, idx, axis, dim);
  const size_t es = dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw());
  char* yp = static_cast<char*>(y.raw());
  const int64_t n = idx.numel();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      copy_elems(x.dtype(), yp + size_t((o * n + j) * inner) * es,
                 xp + size_t((o * dim + pos[size_t(j)]) * inner) * es, inner);
}

namespace {
// GatherElements / ScatterElements: for each element i of idx, the offset in x of i with
// i[axis] replaced by idx[i]. The indices must have x's rank, be no larger than x on the other
// axes and lie in the axis (negative ones counted from its end).
std::vector<int64_t> element_offsets(const Node& node, const Tensor& x, const Tensor& idx) {
  const size_t rank = x.shape().size();
  const size_t axis = size_t(norm_axis(node, node.attr_i("axis", 0), int64_t(rank)));
  if (idx.shape().size() != rank) node.fail(Code::invalid_model, "indices rank differs from data");
  for (size_t a = 0; a < rank; ++a)
    if (a != axis && idx.shape()[a] > x.shape()[a])
      node.fail(Code::invalid_model, "indices larger than data on axis " + std::to_string(a));
  std::vector<int64_t> off = checked_indices(node, idx, axis, x.shape()[axis]);
  const std::vector<int64_t> xs = strides_of(x.shape());
  std::vector<int64_t> at(rank, 0);  // idx's element's coordinates
  for (int64_t& o : off) {
    o *= xs[axis];
    for (size_t a = 0; a < rank; ++a)
      if (a != axis) o += at[a] * xs[a];
    for (size_t a = rank; a-- > 0 && ++at[a] == idx.shape()[a];) at[a] = 0;
  }
  return off;
}
}  // namespace

// GatherElements: y[i] = x[i with i[axis] replaced by idx[i]] (indices no larger than x on the
// other axes).
void gather_elements(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& idx = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_f32_or_i64(node, x, "input data");
  expect_dtype(node, idx, DType::i64, "input indices");
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, idx.shape(), "output");
  const std::vector<int64_t> src = element_offsets(node, x, idx);
  const size_t es = dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw());
  char* yp = static_cast<char*>(y.raw());
  for (size_t j = 0; j < src.size(); ++j) std::memcpy(yp + j * es, xp + size_t(src[j]) * es, es);
}

// ScatterElements: y = x, then y[i with i[axis] replaced by idx[i]] = (or reduced with) upd[i]
// for every i of idx, in order.
void scatter_elements(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& idx = req_input(node, in, 1);
  const Tensor& upd = req_input(node, in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_f32_or_i64(node, x, "input data");
  expect_dtype(node, idx, DType::i64, "input indices");
  expect_dtype(node, upd, x.dtype(), "input updates");
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, x.shape(), "output");
  expect_shape(node, upd, idx.shape(), "input updates");
  const Reduction red = scatter_reduction(node);
  const std::vector<int64_t> dst = element_offsets(node, x, idx);
  if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data<T>();
    const T* up = upd.data<T>();
    for (size_t j = 0; j < dst.size(); ++j) yp[dst[j]] = scatter_reduce(red, yp[dst[j]], up[j]);
  });
}

// Trilu: the last two dims' lower (upper = 0: j <= i + k) or upper (j >= i + k) triangle, the
// rest zero.
void trilu(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, x.shape(), "output");
  const size_t rank = x.shape().size();
  if (rank < 2) node.fail(Code::invalid_model, "input has rank < 2");
  int64_t k = 0;
  if (const Tensor* t = opt_input(in, 1)) {
    expect_dtype(node, *t, DType::i64, "input k");
    if (t->numel() != 1) node.fail(Code::invalid_model, "k is not a single value");
    k = t->data<int64_t>()[0];
  }
  const bool upper = node.attr_i("upper", 1) != 0;
  const int64_t rows = x.shape()[rank - 2], cols = x.shape()[rank - 1];
  const int64_t mats = prod(x.shape(), 0, rank - 2);
  const size_t es = dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw());
  char* yp = static_cast<char*>(y.raw());
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const size_t at = size_t((m * rows + i) * cols + j) * es;
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (keep)
          std::memcpy(yp + at, xp + at, es);
        else
          std::memset(yp + at, 0, es);
      }
}

void shape_op(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, DType::i64, "output");
  const int64_t rank = int64_t(x.shape().size());
  // start/end (opset 15): negative counts from the end, then clamped to [0, rank].
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  const int64_t s = clamp(node.attr_i("start", 0)), e = clamp(node.attr_i("end", rank));
  const int64_t n = std::max<int64_t>(0, e - s);
  expect_shape(node, y, {n}, "output");
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = x.shape()[size_t(s + i)];
}

void pad(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_f32_or_i64(node, x, "input");
  expect_dtype(node, y, x.dtype(), "output");
  const std::string mode = node.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    node.fail(Code::unsupported, "mode '" + mode + "' is not supported");
  const int64_t rank = int64_t(x.shape().size());
  const std::vector<int64_t> pads = read_i64s(node, req_input(node, in, 1), "pads");
  std::vector<int64_t> axes;  // opset 18 optional input 3
  if (const Tensor* t = opt_input(in, 3)) {
    for (int64_t a : read_i64s(node, *t, "axes")) axes.push_back(norm_axis(node, a, rank));
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    node.fail(Code::invalid_model, "pads has " + std::to_string(pads.size()) +
                                       " values, expected " + std::to_string(2 * axes.size()));
  std::vector<int64_t> begin(size_t(rank), 0), end(size_t(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[size_t(axes[i])] = pads[i];
    end[size_t(axes[i])] = pads[i + axes.size()];
  }
  Shape expect(static_cast<size_t>(rank));
  for (size_t d = 0; d < size_t(rank); ++d) {
    expect[d] = x.shape()[d] + begin[d] + end[d];
    if (expect[d] < 0) node.fail(Code::invalid_model, "pads remove more than the whole dim");
  }
  expect_shape(node, y, expect, "output");
  if (mode != "constant") {
    // Every output index reads one input index per dim (pad_source_index); negative pads crop.
    std::vector<std::vector<int64_t>> src(static_cast<size_t>(rank));
    for (size_t d = 0; d < size_t(rank); ++d) {
      const int64_t n = x.shape()[d];
      if (n == 0 && y.shape()[d] > 0)
        node.fail(Code::invalid_model, "mode '" + mode + "' cannot pad an empty dim");
      if (mode == "wrap" && (begin[d] > n || end[d] > n))  // see infer_pad
        node.fail(Code::unsupported, "wrap pads wider than the dim are not supported");
      for (int64_t o = 0; o < y.shape()[d]; ++o)
        src[d].push_back(pad_source_index(mode == "reflect", mode == "wrap", o - begin[d], n));
    }
    const std::vector<int64_t> xs = strides_of(x.shape());
    dispatch_type(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      std::vector<int64_t> idx(size_t(rank), 0);
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t off = 0;
        for (size_t d = 0; d < size_t(rank); ++d) off += src[d][size_t(idx[d])] * xs[d];
        yp[i] = xp[off];
        for (int64_t d = rank - 1; d >= 0 && ++idx[size_t(d)] == y.shape()[size_t(d)]; --d)
          idx[size_t(d)] = 0;
      }
    });
    return;
  }
  // Fill y with the constant, then copy the part of x that survives (negative pads crop).
  const Tensor* cv = opt_input(in, 2);
  if (cv && cv->numel() > 1) node.fail(Code::invalid_model, "constant_value must have one element");
  if (cv) expect_dtype(node, *cv, x.dtype(), "constant_value");
  Shape overlap(static_cast<size_t>(rank));
  const std::vector<int64_t> xs = strides_of(x.shape()), ys = strides_of(y.shape());
  int64_t xbase = 0, ybase = 0;
  for (size_t d = 0; d < size_t(rank); ++d) {
    const int64_t lo = std::max<int64_t>(0, -begin[d]);  // first x index kept
    const int64_t hi = std::min<int64_t>(x.shape()[d], y.shape()[d] - begin[d]);  // end
    overlap[d] = std::max<int64_t>(0, hi - lo);
    xbase += lo * xs[d];
    ybase += (lo + begin[d]) * ys[d];
  }
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T value = cv && cv->numel() == 1 ? cv->data<T>()[0] : T(0);
    T* yp = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] = value;
    const T* xp = x.data<T>() + xbase;
    yp += ybase;
    for_each_row(overlap, {xs, ys}, [&](const int64_t* o, int64_t len, const int64_t* s) {
      for (int64_t i = 0; i < len; ++i) yp[o[1] + i] = xp[o[0] + i];
    });
  });
}

void constant(const Node& node, const Inputs& in, const Outputs& out) {
  Tensor& y = req_output(node, out, 0);
  const std::optional<Tensor> value = constant_value(node);
  if (!value) node.fail(Code::unsupported, "has no supported value attribute");
  expect_dtype(node, y, value->dtype(), "output");
  expect_shape(node, y, value->shape(), "output");
  copy_elems(y.dtype(), y.raw(), value->raw(), y.numel());
}

// Expand: y[i] = x[bcast i] (the inferred output shape already holds the bidirectional
// broadcast of x's shape and the `shape` input).
void expand(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, broadcast_shapes(node, x.shape(), y.shape()), "output");
  const std::vector<std::vector<int64_t>> st = {broadcast_strides(node, x.shape(), y.shape()),
                                                strides_of(y.shape())};
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for_each_row(y.shape(), st, [&](const int64_t* o, int64_t len, const int64_t* s) {
      for (int64_t i = 0; i < len; ++i) yp[o[1] + i * s[1]] = xp[o[0] + i * s[0]];
    });
  });
}

// Tile: y[i_0..i_r] = x[i_0 % d_0, ..., i_r % d_r], walked as x's shape once per repetition
// index (the repeats are y's dims over x's).
void tile(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, x.dtype(), "output");
  const std::vector<int64_t> reps = read_i64s(node, req_input(node, in, 1), "repeats");
  const size_t r = x.shape().size();
  if (reps.size() != r) node.fail(Code::invalid_model, "repeats does not match the input rank");
  Shape expect(r);
  for (size_t d = 0; d < r; ++d) expect[d] = x.shape()[d] * reps[d];
  expect_shape(node, y, expect, "output");
  // View y as [reps_0, d_0, reps_1, d_1, ...]: x's strides on the d dims, 0 on the reps dims.
  Shape view;
  std::vector<int64_t> xs, ys;
  const std::vector<int64_t> xst = strides_of(x.shape()), yst = strides_of(y.shape());
  for (size_t d = 0; d < r; ++d) {
    view.insert(view.end(), {reps[d], x.shape()[d]});
    xs.insert(xs.end(), {0, xst[d]});
    ys.insert(ys.end(), {yst[d] * x.shape()[d], yst[d]});
  }
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for_each_row(view, {xs, ys}, [&](const int64_t* o, int64_t len, const int64_t* s) {
      for (int64_t i = 0; i < len; ++i) yp[o[1] + i * s[1]] = xp[o[0] + i * s[0]];
    });
  });
}

void constant_of_shape(const Node& node, const Inputs& in, const Outputs& out) {
  Tensor& y = req_output(node, out, 0);
  const Tensor* v = node.attr_t("value");
  const DType d = v ? v->dtype() : DType::f32;
  expect_dtype(node, y, d, "output");
  expect_shape(node, y, read_i64s(node, req_input(node, in, 0), "shape"), "output");
  if (v && v->numel() != 1) node.fail(Code::invalid_model, "value must have one element");
  dispatch_type(d, [&](auto tag) {
    using T = decltype(tag);
    const T value = v ? v->data<T>()[0] : T(0);
    std::fill(y.data<T>(), y.data<T>() + y.numel(), value);
  });
}

// Range: y[i] = start + i * delta, computed in the inputs' type (the length was inferred).
void range(const Node& node, const Inputs& in, const Outputs& out) {
  Tensor& y = req_output(node, out, 0);
  const Tensor& start = req_input(node, in, 0);
  const Tensor& delta = req_input(node, in, 2);
  expect_dtype(node, y, start.dtype(), "output");
  expect_dtype(node, delta, start.dtype(), "delta");
  expect_rank(node, y, 1, "output");
  if (start.numel() != 1 || delta.numel() != 1)
    node.fail(Code::invalid_model, "start and delta must be scalars");
  if (y.dtype() == DType::f32) {
    const float s = start.data<float>()[0], d = delta.data<float>()[0];
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = s + float(i) * d;
  } else {
    expect_dtype(node, y, DType::i64, "output");
    const uint64_t s = uint64_t(start.data<int64_t>()[0]), d = uint64_t(delta.data<int64_t>()[0]);
    for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = int64_t(s + uint64_t(i) * d);
  }
}

void size_op(const Node& node, const Inputs& in, const Outputs& out) {
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, DType::i64, "output");
  expect_shape(node, y, {}, "output");
  y.data<int64_t>()[0] = req_input(node, in, 0).numel();
}

}  // namespace kiln::ref

namespace kiln::ref {

// ChannelShuffle (graph/channel_shuffle.h): one plane copy per output channel.
void channel_shuffle(const Node& node, const Inputs& in, const Outputs& out) {
  std::vector<int64_t> channels;
  if (in.empty()) node.fail(Code::invalid_model, "has no inputs");
  for (size_t k = 0; k < in.size(); ++k) {
    const Tensor& x = req_input(node, in, k);
    expect_dtype(node, x, DType::f32, "input");
    expect_rank(node, x, 4, "input");
    expect_shape(node, x, {in[0]->shape()[0], x.shape()[1], in[0]->shape()[2], in[0]->shape()[3]},
                 "input");
    channels.push_back(x.shape()[1]);
  }
  const ChannelShuffleSpec s = ChannelShuffleSpec::from_node(node, channels);
  const Shape& x0 = in[0]->shape();
  const int64_t N = x0[0], HW = x0[2] * x0[3];
  if (s.split.size() != out.size() || s.groups < 1 || s.total() % s.groups != 0)
    node.fail(Code::internal, "attributes do not match its inputs and outputs");
  int64_t end = s.offset;
  for (size_t o = 0; o < out.size(); ++o) {
    expect_shape(node, req_output(node, out, o), {N, s.split[o], x0[2], x0[3]}, "output");
    end += s.split[o];
  }
  if (s.offset < 0 || end > s.total()) node.fail(Code::internal, "split exceeds the channels");
  for (size_t o = 0; o < out.size(); ++o)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < s.split[o]; ++c) {
        const auto [k, ck] = s.locate(s.source(o, c));
        const float* src = in[size_t(k)]->data<float>() + (n * channels[size_t(k)] + ck) * HW;
        std::copy(src, src + HW, out[o]->data<float>() + (n * s.split[o] + c) * HW);
      }
}

}  // namespace kiln::ref
