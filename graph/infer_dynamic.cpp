// Ops whose output size depends on their input values: NonZero and NonMaxSuppression. Their
// inference computes the output itself, so it needs every input constant; at load that holds
// only for constant subgraphs (folded), otherwise graph/dynamic.h moves them, and everything
// after them, to the run-time tail, where every input is known (Graph::runtime_shapes).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "graph/infer_util.h"

namespace kiln::infer_detail {
namespace {

// A box as its corners (lo, hi per axis), whichever corners or centre form the model gives.
struct Box {
  float y0, x0, y1, x1;
};

Box read_box(const float* b, bool center) {
  if (center) return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// ONNX Runtime's rule: boxes that do not overlap, or have no area, never suppress each other.
bool overlaps_over(const Box& a, const Box& b, float threshold) {
  const float iy = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  const float ix = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  if (iy <= 0 || ix <= 0) return false;
  const float inter = iy * ix;
  const float area_a = (a.y1 - a.y0) * (a.x1 - a.x0), area_b = (b.y1 - b.y0) * (b.x1 - b.x0);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// Greedy NMS over boxes in score order: the positions kept (at most max_out). A box is only
// compared with kept boxes whose x range can meet its own: candidates are also ordered by their
// left edge, and only those starting within the widest box's width before this one's left edge
// (and before its right edge) are looked at. With torchvision's batched NMS (every class
// offset to its own region) that is the box's class, not every kept box (figures:
// bench/NOTES.md, session 31).
std::vector<size_t> greedy_nms(const std::vector<Box>& box, int64_t max_out, float iou) {
  std::vector<size_t> kept;
  const size_t n = box.size();
  float widest = 0;
  bool finite = true;
  for (const Box& b : box) {
    finite &=
        std::isfinite(b.x0) && std::isfinite(b.x1) && std::isfinite(b.y0) && std::isfinite(b.y1);
    widest = std::max(widest, b.x1 - b.x0);
  }
  std::vector<size_t> by_x(n);  // positions ordered by left edge
  for (size_t i = 0; i < n; ++i) by_x[i] = i;
  if (finite)
    std::sort(by_x.begin(), by_x.end(), [&](size_t a, size_t z) { return box[a].x0 < box[z].x0; });
  // In left-edge order: the left edges, the boxes, and which are kept (scanned contiguously:
  // most boxes in a window are not kept).
  std::vector<float> left(n);
  std::vector<Box> sorted(n);
  std::vector<size_t> rank(n);
  for (size_t r = 0; r < n; ++r) {
    left[r] = box[by_x[r]].x0;
    sorted[r] = box[by_x[r]];
    rank[by_x[r]] = r;
  }
  // Which are kept, a bit per rank: a window's words are skipped 64 at a time where none is.
  std::vector<uint64_t> kept_at((n + 63) / 64, 0);
  for (size_t i = 0; i < n && int64_t(kept.size()) < max_out; ++i) {
    const Box& b = box[i];
    bool suppressed = false;
    if (finite) {  // kept boxes with x0 in [b.x0 - widest, b.x1]: ranks [lo, hi)
      const size_t lo =
          size_t(std::lower_bound(left.begin(), left.end(), b.x0 - widest) - left.begin());
      const size_t hi = size_t(std::upper_bound(left.begin(), left.end(), b.x1) - left.begin());
      for (size_t w = lo / 64; w * 64 < hi && !suppressed; ++w) {
        uint64_t bits = kept_at[w];
        if (w == lo / 64) bits &= ~uint64_t(0) << (lo % 64);
        if ((w + 1) * 64 > hi) bits &= (uint64_t(1) << (hi % 64)) - 1;
        for (; bits; bits &= bits - 1)
          if (overlaps_over(sorted[w * 64 + size_t(__builtin_ctzll(bits))], b, iou)) {
            suppressed = true;
            break;
          }
      }
    } else {  // a NaN or infinite corner: every kept box (no order to search)
      for (size_t k : kept)
        if ((suppressed = overlaps_over(box[k], b, iou))) break;
    }
    if (suppressed) continue;
    kept_at[rank[i] / 64] |= uint64_t(1) << (rank[i] % 64);
    kept.push_back(i);
  }
  return kept;
}

}  // namespace

void infer_nonzero(Graph& g, Node& n) {
  const Tensor& x = const_input(g, n, 0);
  const int64_t rank = std::max<int64_t>(1, int64_t(x.shape().size()));  // a scalar as [1]
  // Which elements are nonzero, one byte each (-0.f is zero, NaN is not).
  std::vector<unsigned char> nz(size_t(x.numel()));
  if (x.dtype() == DType::f32) {
    const float* p = x.data<float>();
    for (size_t k = 0; k < nz.size(); ++k) nz[k] = p[k] != 0.f;
  } else if (x.dtype() == DType::i64) {
    const int64_t* p = x.data<int64_t>();
    for (size_t k = 0; k < nz.size(); ++k) nz[k] = p[k] != 0;
  } else {
    const auto* p = static_cast<const unsigned char*>(x.raw());
    for (size_t k = 0; k < nz.size(); ++k) nz[k] = p[k] != 0;
  }
  int64_t count = 0;
  for (unsigned char b : nz) count += b;
  Tensor y(DType::i64, {rank, count});
  int64_t* out = y.data<int64_t>();
  const Shape dims = x.shape().empty() ? Shape{1} : x.shape();
  int64_t j = 0;
  for (int64_t k = 0; k < x.numel(); ++k) {
    if (!nz[size_t(k)]) continue;
    for (int64_t d = rank - 1, rest = k; d >= 0; --d) {  // the flat index's coordinates
      out[d * count + j] = rest % dims[size_t(d)];
      rest /= dims[size_t(d)];
    }
    ++j;
  }
  set_const_output(g, n, 0, std::move(y));
}

// Unique: the distinct elements (no axis) or slices along `axis`, sorted ascending
// (lexicographically for slices) or in order of first occurrence; outputs Y, the first
// occurrence of each, each element's (slice's) place in Y, and the counts.
void infer_unique(Graph& g, Node& n) {
  const DType t = input(g, n, 0).dtype;
  if (t != DType::f32 && t != DType::i64)
    n.fail(Code::unsupported,
           input_desc(g, n, 0) + " is " + dtype_name(t) + "; Unique takes float32 or int64");
  const Tensor& x = const_input(g, n, 0);
  const bool sorted = attr_flag(n, "sorted", true);
  Shape xs = x.shape();
  int64_t axis = -1;
  if (n.has("axis")) {
    expect_min_rank(g, n, 0, 1);
    axis = normalize_axis(n, n.attr_i("axis", 0), int64_t(xs.size()));
  } else {
    xs = {x.numel()};
  }
  const size_t a = size_t(std::max<int64_t>(axis, 0));
  const int64_t count = xs[a], outer = shape_numel(Shape(xs.begin(), xs.begin() + int64_t(a)));
  const int64_t inner = shape_numel(Shape(xs.begin() + int64_t(a) + 1, xs.end()));
  const size_t es = dtype_size(t);
  const auto* p = static_cast<const unsigned char*>(x.raw());
  // Slice i's elements in order, compared as the dtype's values.
  auto elem = [&](int64_t i, int64_t e) {  // e over outer x inner
    const int64_t o = e / inner, r = e % inner;
    return p + size_t((o * count + i) * inner + r) * es;
  };
  auto less = [&](int64_t i, int64_t j) {
    for (int64_t e = 0; e < outer * inner; ++e) {
      const unsigned char *u = elem(i, e), *v = elem(j, e);
      if (t == DType::f32) {
        float fu, fv;
        std::memcpy(&fu, u, 4), std::memcpy(&fv, v, 4);
        if (fu != fv) return fu < fv;
      } else {
        int64_t iu, iv;
        std::memcpy(&iu, u, 8), std::memcpy(&iv, v, 8);
        if (iu != iv) return iu < iv;
      }
    }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(), less);  // equal slices keep their order
  // Groups of equal slices in sorted order: each group's first occurrence and size.
  std::vector<int64_t> first, sizes, group_of(static_cast<size_t>(count));
  for (size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || less(order[r - 1], order[r])) first.push_back(order[r]), sizes.push_back(0);
    group_of[size_t(order[r])] = int64_t(first.size()) - 1;
    ++sizes.back();
  }
  std::vector<int64_t> place(first.size());  // group -> its position in Y
  std::vector<int64_t> rank(first.size());
  for (size_t k = 0; k < rank.size(); ++k) rank[k] = int64_t(k);
  if (!sorted)
    std::sort(rank.begin(), rank.end(), [&](int64_t u, int64_t v) { return first[u] < first[v]; });
  for (size_t k = 0; k < rank.size(); ++k) place[size_t(rank[k])] = int64_t(k);
  const int64_t m = int64_t(first.size());
  Shape ys = xs;
  ys[a] = m;
  Tensor y(t, ys), idx(DType::i64, {m}), inv(DType::i64, {count}), cnt(DType::i64, {m});
  auto* yp = static_cast<unsigned char*>(y.raw());
  for (int64_t k = 0; k < m; ++k) {
    const int64_t gk = rank[size_t(k)];  // the group at Y's position k
    idx.data<int64_t>()[k] = first[size_t(gk)];
    cnt.data<int64_t>()[k] = sizes[size_t(gk)];
    for (int64_t e = 0; e < outer * inner; ++e) {
      const int64_t o = e / inner, r = e % inner;
      std::memcpy(yp + size_t((o * m + k) * inner + r) * es, elem(first[size_t(gk)], e), es);
    }
  }
  for (int64_t i = 0; i < count; ++i) inv.data<int64_t>()[i] = place[size_t(group_of[size_t(i)])];
  set_const_output(g, n, 0, std::move(y));
  set_const_output(g, n, 1, std::move(idx));
  set_const_output(g, n, 2, std::move(inv));
  set_const_output(g, n, 3, std::move(cnt));
}

void infer_nms(Graph& g, Node& n) {
  expect_dtype(g, n, 0, DType::f32);
  expect_dtype(g, n, 1, DType::f32);
  expect_rank(g, n, 0, 3);
  expect_rank(g, n, 1, 3);
  const Shape& bs = input(g, n, 0).shape;
  const Shape& ss = input(g, n, 1).shape;
  if (bs[2] != 4 || ss[0] != bs[0] || ss[2] != bs[1])
    n.fail(Code::invalid_model, "boxes " + shape_str(bs) + " and scores " + shape_str(ss) +
                                    " do not fit: expected [B, N, 4] and [B, C, N]");
  const int64_t center = n.attr_i("center_point_box", 0);
  if (center != 0 && center != 1)
    n.fail(Code::invalid_model,
           "center_point_box is " + std::to_string(center) + "; expected 0 or 1");
  const int64_t max_out = scalar_input<int64_t>(g, n, 2, DType::i64, 0);
  const float iou = scalar_input<float>(g, n, 3, DType::f32, 0.f);
  const bool has_score_threshold = has_input(n, 4);
  const float min_score = scalar_input<float>(g, n, 4, DType::f32, 0.f);
  if (!(iou >= 0.f && iou <= 1.f))
    n.fail(Code::invalid_model,
           "iou_threshold is " + std::to_string(iou) + "; expected a value in [0, 1]");
  const float* boxes = const_input(g, n, 0).data<float>();
  const float* scores = const_input(g, n, 1).data<float>();
  const int64_t batches = bs[0], classes = ss[1], count = bs[1];
  std::vector<int64_t> picked;  // (batch, class, box) triples
  std::vector<Box> cand;
  std::vector<int64_t> order;
  for (int64_t b = 0; b < batches && max_out > 0; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!has_score_threshold || s[i] > min_score) order.push_back(i);
      // Highest score first, the lower index first among equal scores (ONNX Runtime's order);
      // a NaN score (kept only without a threshold) last.
      auto key = [&](int64_t i) { return std::isnan(s[i]) ? -INFINITY : s[i]; };
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t z) { return key(a) > key(z); });
      cand.clear();
      for (int64_t i : order) cand.push_back(read_box(boxes + (b * count + i) * 4, center == 1));
      for (size_t k : greedy_nms(cand, max_out, iou)) picked.insert(picked.end(), {b, c, order[k]});
    }
  Tensor y(DType::i64, {int64_t(picked.size() / 3), 3});
  if (!picked.empty()) std::memcpy(y.raw(), picked.data(), picked.size() * sizeof(int64_t));
  set_const_output(g, n, 0, std::move(y));
}

}  // namespace kiln::infer_detail
