#include "runtime/node_problems.h"

#include <algorithm>

#include "graph/post_ops.h"
#include "graph/recurrent.h"
#include "graph/resize.h"

namespace kiln {
namespace {

// Shape s viewed as [outer, n, inner]: the dims before `axis`, [axis, end), from `end` on.
void axis_split(const Shape& s, int64_t axis, int64_t end, int64_t* outer, int64_t* n,
                int64_t* inner) {
  *outer = *n = *inner = 1;
  for (int64_t d = 0; d < int64_t(s.size()); ++d)
    *(d < axis ? outer : d < end ? n : inner) *= s[size_t(d)];
}

}  // namespace

std::optional<PadSpec> pad_spec(const Graph& g, const Node& n) {
  if (n.op != "Pad" || n.outputs.size() != 1 || n.in(0) == kNoValue ||
      g.value(n.inputs[0]).dtype != DType::f32)
    return std::nullopt;
  const Shape& x = g.value(n.inputs[0]).shape;
  const int64_t r = int64_t(x.size());
  if (r == 0 || g.value(n.outputs[0]).shape.size() != x.size()) return std::nullopt;
  const auto pads = ints_of(g, n, 1);
  std::vector<int64_t> axes(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) axes[size_t(d)] = d;
  if (n.in(3) != kNoValue) {
    const auto a = ints_of(g, n, 3);
    if (!a) return std::nullopt;
    axes = *a;
  }
  if (!pads || pads->size() != 2 * axes.size()) return std::nullopt;
  std::vector<int64_t> begin(size_t(r), 0), end(size_t(r), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (a < 0 || a >= r) return std::nullopt;
    begin[size_t(a)] = (*pads)[i];
    end[size_t(a)] = (*pads)[i + axes.size()];
  }
  PadSpec p{x, begin, end, 0.f, n.attr_s("mode", "constant")};
  if (r < 4) {
    p.shape.insert(p.shape.begin(), size_t(4 - r), 1);
    p.begin.insert(p.begin.begin(), size_t(4 - r), 0);
    p.end.insert(p.end.begin(), size_t(4 - r), 0);
  } else if (r > 4) {
    const size_t lead = size_t(r - 3);  // merged into one
    for (size_t d = 0; d < lead; ++d)
      if (begin[d] != 0 || end[d] != 0) return std::nullopt;
    p.shape = {shape_numel(Shape(x.begin(), x.begin() + long(lead)))};
    p.shape.insert(p.shape.end(), x.begin() + long(lead), x.end());
    p.begin = {0};
    p.begin.insert(p.begin.end(), begin.begin() + long(lead), begin.end());
    p.end = {0};
    p.end.insert(p.end.end(), end.begin() + long(lead), end.end());
  }
  if (const ValueId c = n.in(2); c != kNoValue) {
    const Value& cv = g.value(c);
    if (!cv.is_const() || cv.dtype != DType::f32 || cv.constant->numel() != 1) return std::nullopt;
    p.value = cv.constant->data<float>()[0];
  }
  return p;
}

// A Slice (constant starts / ends / axes / steps), Gather (constant indices) or Concat
// of f32 tensors in row-major order as block copies (jit/glue/glue.h BlockCopyProblem): along
// the one axis a step-1 Slice cuts, else one segment per output row.
std::optional<BlockCopyProblem> block_copy_problem(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.in(0) == kNoValue) return std::nullopt;
  const Value& y = g.value(n.outputs[0]);
  if (y.dtype != DType::f32 || shape_numel(y.shape) == 0) return std::nullopt;
  const Shape& ys = y.shape;
  const int64_t r = int64_t(ys.size());
  auto norm = [](int64_t a, int64_t rank) { return a < 0 ? a + rank : a; };
  BlockCopyProblem p;
  auto set_axis = [&](int64_t a, const Shape& x) {  // outer / inner around axis a of x
    p.outer = shape_numel(Shape(x.begin(), x.begin() + a));
    return shape_numel(Shape(x.begin() + a + 1, x.end()));
  };
  if (n.op == "Slice" || n.op == "Gather") {
    const Shape& x = g.value(n.inputs[0]).shape;
    if (g.value(n.inputs[0]).dtype != DType::f32) return std::nullopt;
    if (n.op == "Gather") {
      const auto idx = ints_of(g, n, 1);
      const int64_t a = norm(n.attr_i("axis", 0), int64_t(x.size()));
      if (!idx || idx->size() > 65536 || a < 0 || a >= int64_t(x.size())) return std::nullopt;
      const int64_t inner = set_axis(a, x);
      p.src_outer = {x[size_t(a)] * inner};
      p.dst_outer = int64_t(idx->size()) * inner;
      for (size_t j = 0; j < idx->size(); ++j)
        p.segments.push_back({0, norm((*idx)[j], x[size_t(a)]) * inner, int64_t(j) * inner, inner});
      return p;
    }
    const auto starts = ints_of(g, n, 1), ends = ints_of(g, n, 2);
    std::vector<int64_t> axes;
    if (n.in(3) != kNoValue) {
      const auto a = ints_of(g, n, 3);
      if (!a) return std::nullopt;
      axes = *a;
    } else if (starts) {
      for (size_t i = 0; i < starts->size(); ++i) axes.push_back(int64_t(i));
    }
    std::vector<int64_t> steps(axes.size(), 1);
    if (n.in(4) != kNoValue) {
      const auto s = ints_of(g, n, 4);
      if (!s || s->size() != axes.size()) return std::nullopt;
      steps = *s;
    }
    if (!starts || !ends || x.size() != ys.size() || starts->size() != axes.size())
      return std::nullopt;
    // Per dim: first index and step (as ONNX clamps them; a dim yielding at most one element
    // takes step 1, so that no stride * step can overflow).
    std::vector<int64_t> first(size_t(r), 0), step(size_t(r), 1);
    int64_t cut = -1, cuts = 0;  // an axis whose extent changes, and how many do
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = norm(axes[i], r);
      if (a < 0 || a >= r || steps[i] == 0) return std::nullopt;
      const int64_t d = x[size_t(a)], st = (*starts)[i] < 0 ? (*starts)[i] + d : (*starts)[i];
      first[size_t(a)] = std::clamp<int64_t>(st, 0, steps[i] > 0 ? d : std::max<int64_t>(d - 1, 0));
      step[size_t(a)] = ys[size_t(a)] > 1 ? steps[i] : 1;
    }
    for (int64_t a = 0; a < r; ++a)
      if (ys[size_t(a)] != x[size_t(a)] || step[size_t(a)] != 1) cut = a, ++cuts;
    if (cuts > 1 || (cut >= 0 && step[size_t(cut)] != 1)) {
      // Strided, reversed or several axes: dims [k0, k) enumerate rows, each a run of the
      // trailing dims [k, r) the slice keeps whole plus dim k - 1 when that is contiguous or
      // the only one (read with its step); the leading dims [0, k0) kept whole are `outer`.
      int64_t k = r;  // dims [k, r) are whole
      while (k > 0 && ys[size_t(k - 1)] == x[size_t(k - 1)] && step[size_t(k - 1)] == 1) --k;
      int64_t run = shape_numel(Shape(x.begin() + k, x.end())), run_step = 1;
      if (k > 0 && (step[size_t(k - 1)] == 1 || run == 1)) {
        run_step = step[size_t(k - 1)];
        run *= ys[size_t(--k)];
      }
      int64_t k0 = 0;
      while (k0 < k && ys[size_t(k0)] == x[size_t(k0)] && step[size_t(k0)] == 1) ++k0;
      const Shape rows(ys.begin() + k0, ys.begin() + k);
      const int64_t nrows = shape_numel(rows);
      if (nrows > 65536 || run < 1) return std::nullopt;
      std::vector<int64_t> stride(size_t(r), 1);
      for (int64_t a = r - 2; a >= 0; --a)
        stride[size_t(a)] = stride[size_t(a + 1)] * x[size_t(a + 1)];
      p.outer = shape_numel(Shape(ys.begin(), ys.begin() + k0));
      p.src_outer = {shape_numel(Shape(x.begin() + k0, x.end()))};
      p.dst_outer = shape_numel(Shape(ys.begin() + k0, ys.end()));
      std::vector<int64_t> at(size_t(k - k0), 0);
      for (int64_t j = 0; j < nrows; ++j) {
        int64_t src = 0;
        for (int64_t a = k0; a < r; ++a)
          src += (first[size_t(a)] + (a < k ? at[size_t(a - k0)] * step[size_t(a)] : 0)) *
                 stride[size_t(a)];
        p.segments.push_back({0, src, j * run, run, run_step});
        for (int64_t a = k - k0 - 1; a >= 0 && ++at[size_t(a)] == rows[size_t(a)]; --a)
          at[size_t(a)] = 0;
      }
      return p;
    }
    if (cut < 0) cut = 0;
    const int64_t begin = first[size_t(cut)];
    const int64_t inner = set_axis(cut, x);
    p.src_outer = {x[size_t(cut)] * inner};
    p.dst_outer = ys[size_t(cut)] * inner;
    p.segments.push_back({0, begin * inner, 0, ys[size_t(cut)] * inner});
    return p;
  }
  if (n.op == "Concat") {
    const int64_t a = norm(n.attr_i("axis", 0), r);
    if (a < 0 || a >= r) return std::nullopt;
    const int64_t inner = set_axis(a, ys);
    p.dst_outer = ys[size_t(a)] * inner;
    int64_t at = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Value& x = g.value(n.inputs[k]);
      if (x.dtype != DType::f32 || x.shape.size() != ys.size()) return std::nullopt;
      p.src_outer.push_back(x.shape[size_t(a)] * inner);
      if (x.shape[size_t(a)] > 0)
        p.segments.push_back({int(k), 0, at * inner, x.shape[size_t(a)] * inner});
      at += x.shape[size_t(a)];
    }
    return p;
  }
  return std::nullopt;
}

// A SubpixelInterleave (graph/rewrite_convt.cpp) as the glue kernel's problem.
std::optional<SubpixelProblem> subpixel_problem(const Graph& g, const Node& n) {
  if (n.op != "SubpixelInterleave" || n.outputs.size() != 1 || !is4d(g, n.in(0)) ||
      !is4d(g, n.outputs[0]))
    return std::nullopt;
  const Shape &z = g.value(n.inputs[0]).shape, &y = g.value(n.outputs[0]).shape;
  const std::vector<int64_t> s = n.attr_ints("strides"), off = n.attr_ints("offsets");
  if (s.size() != 2 || off.size() != 2) return std::nullopt;
  SubpixelProblem p{y[0], y[1], z[2], z[3], y[2], y[3], s[0], s[1], off[0], off[1]};
  p.phase_major = n.attr_i("phase_major", 0) != 0;
  p.org_h = n.attr_ints("origins_h", {});
  p.org_w = n.attr_ints("origins_w", {});
  return p;
}

std::optional<TransposeView> transpose_view(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.in(0) == kNoValue) return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  if (x.dtype != DType::f32 || x.shape.size() > 6) return std::nullopt;
  if ((n.op == "DepthToSpace" || n.op == "SpaceToDepth") && x.shape.size() == 4) {
    SpaceDepthView v = space_depth_view(n, x.shape);
    return TransposeView{std::move(v.in6), std::move(v.perm)};
  }
  if (n.op != "Transpose") return std::nullopt;
  std::vector<int64_t> perm(x.shape.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(perm.size() - 1 - i);
  return TransposeView{x.shape, n.attr_ints("perm", perm)};
}

// A 4-D Transpose between NCHW and NHWC order moves no byte when one side is stored in the
// other's order: perm (0, 3, 1, 2) of a row-major [N, H, W, C] (a TensorFlow-exported model's
// input) is that tensor stored nhwc; perm (0, 2, 3, 1) of an nhwc-stored tensor is its
// row-major [N, H, W, C] (the same models' outputs). The (input, output) layouts of that view.
std::optional<std::pair<Layout, Layout>> transpose_layout_view(const Graph& g, const Node& n) {
  if (n.op != "Transpose" || n.outputs.size() != 1 || n.in(0) == kNoValue ||
      n.outputs[0] == kNoValue || !is4d(g, n.in(0)) || !is4d(g, n.outputs[0]))
    return std::nullopt;
  const Value& x = g.value(n.in(0));
  if (x.is_const() || x.dtype != DType::f32) return std::nullopt;
  const std::vector<int64_t> perm = n.attr_ints("perm", {3, 2, 1, 0});
  if (perm == std::vector<int64_t>{0, 3, 1, 2}) return std::pair{Layout::nchw, Layout::nhwc};
  if (perm == std::vector<int64_t>{0, 2, 3, 1}) return std::pair{Layout::nhwc, Layout::nchw};
  return std::nullopt;
}

std::optional<ResizeJit> resize_jit(const Graph& g, const Node& n) {
  if (n.op != "Resize" || n.outputs.size() != 1 || !is4d(g, n.in(0)) ||
      g.value(n.inputs[0]).dtype != DType::f32)
    return std::nullopt;
  auto c = [&](size_t i) { return const_tensor(g, n.in(i)); };
  ResizeSpec s = resize_spec(n, g.value(n.inputs[0]).shape, c(1), c(2), c(3));
  if (!resize_taps(s, 0).identity() || !resize_taps(s, 1).identity()) return std::nullopt;
  return ResizeJit{resize_taps(s, 2), resize_taps(s, 3), s.mode};
}

std::optional<PoolProblem> pool_problem(const Node& n, const Shape& xs, const Shape& ys) {
  PoolProblem p;
  p.src = xs;
  p.dst = ys;
  if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") {
    p.global = true;
    p.max = n.op == "GlobalMaxPool";
    p.kh = xs[2];
    p.kw = xs[3];
    return p;
  }
  if (n.op != "MaxPool" && n.op != "AveragePool") return std::nullopt;
  p.max = n.op == "MaxPool";
  auto k = n.attr_ints("kernel_shape"), st = n.attr_ints("strides"), pads = n.attr_ints("pads");
  auto d = n.attr_ints("dilations", {1, 1});
  if (k.size() != 2 || st.size() != 2 || pads.size() != 4 || d.size() != 2) return std::nullopt;
  p.kh = k[0], p.kw = k[1], p.sh = st[0], p.sw = st[1], p.dh = d[0], p.dw = d[1];
  p.pt = pads[0], p.pl = pads[1], p.pb = pads[2], p.pr = pads[3];
  p.count_include_pad = n.attr_i("count_include_pad", 0) != 0;
  return p;
}

std::optional<NormView> norm_view(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.in(0) == kNoValue) return std::nullopt;
  const Shape& s = g.value(n.inputs[0]).shape;
  const int64_t rank = int64_t(s.size());
  // (axis and norm_dims are the model's: range-checked before any arithmetic on them.)
  int64_t axis = n.attr_i("axis", n.op == "Softmax" ? -1 : 0), end = 0;
  if (n.op == "InstanceNormalization" || n.op == "GroupNormalization") {
    // Rows of a group's channels x pixels (nchw only); constant per-channel scale / B.
    if (rank < 3 || g.value(n.inputs[0]).dtype != DType::f32 || n.inputs.size() != 3 ||
        !g.value(n.inputs[1]).is_const() || !g.value(n.inputs[2]).is_const())
      return std::nullopt;
    const int64_t groups = n.op == "GroupNormalization" ? n.attr_i("num_groups", 1) : s[1];
    if (groups < 1 || s[1] % groups) return std::nullopt;
    return NormView{s[0] * groups, shape_numel(s) / std::max<int64_t>(s[0] * groups, 1), 1, false};
  }
  if (n.op == "LayerNormalization") {
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k] != kNoValue && !g.value(n.inputs[k]).is_const()) return std::nullopt;
    const int64_t dims = n.attr_i("norm_dims", 1);
    if (axis < 0 || axis >= rank || dims < 1 || dims > rank - axis) return std::nullopt;
    end = axis + dims;
  } else if ((n.op == "Softmax" || n.op == "LogSoftmax") &&
             g.value(n.inputs[0]).dtype == DType::f32 && rank > 0) {
    if (axis < -rank || axis >= rank) return std::nullopt;
    if (axis < 0) axis += rank;
    end = n.attr_i("coerce_2d", 0) ? rank : axis + 1;
  } else {
    return std::nullopt;
  }
  if (axis < 0 || end > rank || axis >= end) return std::nullopt;
  NormView v;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? v.outer : d < end ? v.c : v.inner) *= s[size_t(d)];
  v.channels = rank == 4 && v.outer == s[0] && v.c == s[1];
  return v;
}

// An LRN of an f32 tensor of rank >= 3 as the kernel's images x channels x pixels.
std::optional<LrnProblem> lrn_problem(const Graph& g, const Node& n) {
  if (n.op != "LRN" || n.outputs.size() != 1 || n.in(0) == kNoValue) return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  if (x.dtype != DType::f32 || x.shape.size() < 3) return std::nullopt;
  LrnProblem p;
  p.n = x.shape[0];
  p.c = x.shape[1];
  p.pixels = shape_numel(x.shape) / std::max<int64_t>(p.n * p.c, 1);
  p.size = n.attr_i("size", 0);
  p.lo = n.attr_i("window_lo", (p.size - 1) / 2);
  p.alpha = n.attr_f("alpha", 1e-4f);
  p.beta = n.attr_f("beta", 0.75f);
  p.bias = n.attr_f("bias", 1.f);
  return p;
}

std::optional<ReduceView> reduce_view(const Graph& g, const Node& n, Layout l) {
  const std::optional<ReduceOp> op = reduce_op(n.op);
  if (!op || n.outputs.size() != 1 || n.in(0) == kNoValue) return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  const size_t r = x.shape.size();
  const bool blocked = layout_block(l) > 1;
  if (blocked && (layout_bf16(l) || layout_u8(l) || g.value(n.outputs[0]).shape.size() != 4))
    return std::nullopt;
  if (x.dtype != DType::f32 || r == 0 || (l != Layout::nchw && r != 4)) return std::nullopt;
  std::vector<int64_t> axes;
  if (const ValueId a = n.in(1); a != kNoValue) {
    const Value& av = g.value(a);
    if (!av.is_const() || av.dtype != DType::i64) return std::nullopt;
    axes.assign(av.constant->data<int64_t>(), av.constant->data<int64_t>() + av.constant->numel());
  }
  std::vector<bool> red(r, axes.empty());
  if (axes.empty() && n.attr_i("noop_with_empty_axes", 0) != 0) return std::nullopt;
  for (int64_t a : axes) red[size_t(a < 0 ? a + int64_t(r) : a)] = true;
  if (blocked && red[1]) return std::nullopt;
  std::vector<size_t> order(r);
  for (size_t d = 0; d < r; ++d) order[d] = d;
  if (l == Layout::nhwc) order = {0, 2, 3, 1};
  if (blocked) order.push_back(r);  // (the lanes: after W, always kept)
  ReduceView v{*op};
  int seen = 0;  // 0: before the reduced dims, 1: inside, 2: after
  std::vector<size_t> kept;
  for (size_t d : order) {
    const int64_t b = layout_block(l);
    const int64_t dim = d == r ? b : blocked && d == 1 ? (x.shape[1] + b - 1) / b : x.shape[d];
    if (dim == 1) continue;  // (moves no bytes: reduced or kept alike)
    if (d < r && red[d]) {
      if (seen == 2) return std::nullopt;  // reduced dims not contiguous
      seen = 1;
      v.c *= dim;
    } else {
      if (seen == 1) seen = 2;
      (seen == 0 ? v.outer : v.inner) *= dim;
      kept.push_back(d);
    }
  }
  if (g.value(n.outputs[0]).shape.size() != 4 && !std::is_sorted(kept.begin(), kept.end()))
    return std::nullopt;
  return v;
}

// A Slice of a tensor of rank other than 4 whose output is one contiguous run of its input's
// row-major elements (e.g. frames [t0, t1) of [1, D, C, H, W]): the run's first element, so the
// output is a view at that offset. (4-D tensors have layouts in which such a run is not one:
// their slices stay copies, which the solver weighs against conversions.)
std::optional<int64_t> slice_view_floats(const Graph& g, const Node& n) {
  if (n.op != "Slice" || g.value(n.outputs[0]).shape.size() == 4 ||
      g.value(n.in(0)).shape.size() == 4)
    return std::nullopt;
  const auto p = block_copy_problem(g, n);
  if (!p || p->outer != 1 || p->segments.size() != 1 || p->segments[0].len != p->dst_outer ||
      p->segments[0].stride != 1)
    return std::nullopt;
  return p->segments[0].src_off;
}

// TopK (f32; axis set by inference, K the output's extent) viewed as [outer, n, inner].
std::optional<TopKProblem> topk_problem(const Graph& g, const Node& n) {
  if (n.op != "TopK" || n.outputs.empty() || n.in(0) == kNoValue ||
      g.value(n.in(0)).dtype != DType::f32)
    return std::nullopt;
  const bool values = n.outputs[0] != kNoValue;
  const bool indices = n.outputs.size() > 1 && n.outputs[1] != kNoValue;
  if (!values && !indices) return std::nullopt;
  const Shape& s = g.value(n.in(0)).shape;
  const int64_t axis = n.attr_i("axis", -1);
  if (axis < 0 || axis >= int64_t(s.size())) return std::nullopt;
  TopKProblem p;
  axis_split(s, axis, axis + 1, &p.outer, &p.n, &p.inner);
  p.k = g.value(values ? n.outputs[0] : n.outputs[1]).shape[size_t(axis)];
  p.largest = n.attr_i("largest", 1) != 0;
  p.indices = indices;
  if (p.k < 1 || p.k > p.n || p.outer < 1 || p.inner < 1) return std::nullopt;
  return p;
}

// CumSum (f32 or int64; axis set by inference) viewed as [outer, n, inner].
std::optional<CumSumProblem> cumsum_problem(const Graph& g, const Node& n) {
  if (n.op != "CumSum" || n.outputs.size() != 1 || n.in(0) == kNoValue) return std::nullopt;
  const Value& x = g.value(n.in(0));
  if (x.dtype != DType::f32 && x.dtype != DType::i64) return std::nullopt;
  const int64_t axis = n.attr_i("axis", 0);
  if (axis < 0 || axis >= int64_t(x.shape.size())) return std::nullopt;
  CumSumProblem p;
  axis_split(x.shape, axis, axis + 1, &p.outer, &p.n, &p.inner);
  p.exclusive = n.attr_i("exclusive", 0) != 0;
  p.reverse = n.attr_i("reverse", 0) != 0;
  p.int64 = x.dtype == DType::i64;
  if (p.outer < 1 || p.n < 1 || p.inner < 1) return std::nullopt;
  return p;
}

// A Recurrence (graph/recurrent.h) whose R^T, Rb and P are constants.
std::optional<RecurrenceProblem> recurrence_problem(const Graph& g, const Node& n) {
  if (n.op != "Recurrence" || n.in(0) == kNoValue || n.in(1) == kNoValue) return std::nullopt;
  auto constant = [&](size_t i) { return const_tensor(g, n.in(i)); };
  RecurrenceProblem p;
  p.spec = recurrence_spec(n);
  const Shape& xw = g.value(n.in(0)).shape;
  p.steps = xw[0];
  p.batch = xw[1];
  p.rt = constant(1);
  p.rb = constant(2);
  p.p = constant(6);
  if (!p.rt || (n.in(2) != kNoValue && !p.rb) || (n.in(6) != kNoValue && !p.p)) return std::nullopt;
  p.lens = n.in(3) != kNoValue;
  p.h0 = n.in(4) != kNoValue;
  p.c0 = n.in(5) != kNoValue;
  auto out = [&](size_t i) { return i < n.outputs.size() && n.outputs[i] != kNoValue; };
  p.y_h = out(1);
  p.y_c = out(2);
  return p;
}

// Gather whose indices are computed (constant ones are block copies) or GatherElements, of f32
// or int64 data.
std::optional<GatherProblem> gather_problem(const Graph& g, const Node& n) {
  if ((n.op != "Gather" && n.op != "GatherElements") || n.outputs.size() != 1 ||
      n.outputs[0] == kNoValue || n.in(0) == kNoValue || n.in(1) == kNoValue)
    return std::nullopt;
  const Value &x = g.value(n.in(0)), &idx = g.value(n.in(1));
  if ((x.dtype != DType::f32 && x.dtype != DType::i64) || idx.dtype != DType::i64 ||
      x.shape.empty() || shape_numel(g.value(n.outputs[0]).shape) == 0)
    return std::nullopt;
  if (n.op == "Gather" && idx.is_const()) return std::nullopt;  // block copies
  GatherProblem p;
  p.esize = int64_t(dtype_size(x.dtype));
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += int64_t(x.shape.size());
  if (axis < 0 || axis >= int64_t(x.shape.size())) return std::nullopt;
  p.axis = axis;
  if (n.op == "GatherElements") {
    p.elements = true;
    p.data = x.shape;
    p.index = idx.shape;
  } else {
    axis_split(x.shape, axis, axis + 1, &p.outer, &p.dim, &p.inner);
    p.n = shape_numel(idx.shape);
  }
  return p;
}

// ScatterND / ScatterElements of f32 or int64 data (a computed one: constants fold at load).
std::optional<ScatterProblem> scatter_problem(const Graph& g, const Node& n) {
  if ((n.op != "ScatterND" && n.op != "ScatterElements") || n.inputs.size() != 3 ||
      n.outputs.size() != 1 || n.outputs[0] == kNoValue)
    return std::nullopt;
  for (ValueId v : n.inputs)
    if (v == kNoValue) return std::nullopt;
  const Value &x = g.value(n.in(0)), &idx = g.value(n.in(1)), &upd = g.value(n.in(2));
  if ((x.dtype != DType::f32 && x.dtype != DType::i64) || idx.dtype != DType::i64 ||
      upd.dtype != x.dtype || x.shape.empty() || idx.shape.empty())
    return std::nullopt;
  ScatterProblem p;
  p.esize = int64_t(dtype_size(x.dtype));
  p.data = x.shape;
  p.index = idx.shape;
  const std::optional<Reduction> red = parse_reduction(n.attr_s("reduction", "none"));
  if (!red) return std::nullopt;
  p.reduction = *red;
  if (n.op == "ScatterElements") {
    p.elements = true;
    const int64_t rank = int64_t(x.shape.size());
    int64_t axis = n.attr_i("axis", 0);
    if (axis < -rank || axis >= rank) return std::nullopt;
    p.axis = axis < 0 ? axis + rank : axis;
    if (upd.shape != idx.shape) return std::nullopt;
  }
  if (!create_scatter_kernel(p, nullptr)) return std::nullopt;  // (its shape checks)
  return p;
}

// ArgMax / ArgMin / Hardmax of an f32 tensor of any rank, viewed as [outer, n, inner].
std::optional<ArgReduceProblem> arg_problem(const Graph& g, const Node& n) {
  const bool hardmax = n.op == "Hardmax";
  if ((n.op != "ArgMax" && n.op != "ArgMin" && !hardmax) || n.outputs.size() != 1 ||
      n.in(0) == kNoValue || g.value(n.in(0)).dtype != DType::f32)
    return std::nullopt;
  const Shape& s = g.value(n.in(0)).shape;
  const int64_t rank = int64_t(s.size());
  int64_t axis = n.attr_i("axis", hardmax ? -1 : 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const int64_t end = hardmax && n.attr_i("coerce_2d", 0) ? rank : axis + 1;  // opset < 13
  ArgReduceProblem p;
  axis_split(s, axis, end, &p.outer, &p.n, &p.inner);
  p.max = n.op != "ArgMin";
  p.last = !hardmax && n.attr_i("select_last_index", 0) != 0;
  p.hardmax = hardmax;
  if (p.n < 1) return std::nullopt;
  return p;
}

}  // namespace kiln
