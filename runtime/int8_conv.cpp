#include "runtime/int8_conv.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "graph/post_ops.h"
#include "graph/quant.h"

namespace kiln {
namespace {

constexpr double kIntTolerance = 1e-3;  // |w / scale - integer|: exact weights give ~1e-5

// Whether every w[i] / scale (i in [begin, end)) is an integer in [-128, 127] to within
// kIntTolerance.
bool on_grid(const float* w, int64_t begin, int64_t end, double scale) {
  for (int64_t i = begin; i < end; ++i) {
    const double q = double(w[i]) / scale, r = std::nearbyint(q);
    if (!(std::fabs(q - r) <= kIntTolerance) || r < -128 || r > 127) return false;
  }
  return true;
}

// The scale of w[begin, end) whose largest |value| is `m`: m / k for the largest k <= 128
// (the integer m stands for: 127 symmetric, 128 full range, less where a channel's weights do
// not reach the tensor's range) that puts every weight on the grid; 1 for all zeros; 0 when
// none does. Any scale found is exact by construction, whatever produced the weights.
double grid_scale(const float* w, int64_t begin, int64_t end, double m) {
  if (m == 0) return 1;
  for (int k = 128; k >= 1; --k)
    if (on_grid(w, begin, end, m / k)) return m / k;
  return 0;
}

// The decision itself (see the header).
std::shared_ptr<const ConvInt8> decide(const Graph& g, const Node& n) {
  if (n.op != "Conv" || n.inputs.size() < 2 || n.in(0) == kNoValue) return nullptr;
  const Node* prod = nullptr;
  for (const Node& m : g.nodes)
    for (ValueId v : m.outputs)
      if (v == n.inputs[0]) prod = &m;
  if (!prod) return nullptr;
  // The input's quantize-dequantize: the producer itself, or the last post-op fused into it.
  std::optional<PostOp> qdq =
      prod->op == "QuantizeDequantize" ? glue_unary_post_op(*prod) : std::nullopt;
  if (!qdq && prod->has("post_ops")) {  // (extra inputs start after MatMul's 2, else 3)
    const std::vector<PostOp> ops = parse_post_ops(*prod, prod->op == "MatMul" ? 2 : 3);
    if (!ops.empty()) qdq = ops.back();
  }
  if (!qdq ||
      (qdq->kind != PostOp::Kind::quant_dequant_u8 && qdq->kind != PostOp::Kind::quant_dequant_s8))
    return nullptr;
  const Value& wv = g.value(n.inputs[1]);
  if (!wv.is_const() || wv.dtype != DType::f32 || wv.shape.size() != 4) return nullptr;
  auto q = std::make_shared<ConvInt8>();
  q->x_scale = qdq->alpha;
  // int8 activations as uint8: q + 128 (exact), the zero point moving with them.
  q->x_zero = qdq->beta + (qdq->kind == PostOp::Kind::quant_dequant_s8 ? 128.f : 0.f);
  if (!(q->x_scale > 0)) return nullptr;
  const float* w = wv.constant->data<float>();
  const int64_t oc = wv.shape[0], per = wv.constant->numel() / std::max<int64_t>(oc, 1);
  q->w_scale.resize(size_t(oc));
  double all = 0;
  for (int64_t i = 0; i < wv.constant->numel(); ++i) all = std::max(all, std::fabs(double(w[i])));
  bool per_channel = true;
  for (int64_t c = 0; c < oc && per_channel; ++c) {
    double m = 0;
    for (int64_t i = c * per; i < (c + 1) * per; ++i) m = std::max(m, std::fabs(double(w[i])));
    const double s = grid_scale(w, c * per, (c + 1) * per, m);
    per_channel = s > 0;
    q->w_scale[size_t(c)] = float(s);
  }
  if (!per_channel) {  // one scale for the tensor (a per-tensor quantized weight)
    const double s = grid_scale(w, 0, wv.constant->numel(), all);
    if (s == 0) return nullptr;
    std::fill(q->w_scale.begin(), q->w_scale.end(), float(s));
  }
  return q;
}

}  // namespace

int mark_int8_convs(Graph& g) {
  int marked = 0;
  for (Node& n : g.nodes) {
    n.attrs.erase(kInt8Attr);
    const std::shared_ptr<const ConvInt8> q = decide(g, n);
    if (!q) continue;
    std::vector<float> v{q->x_scale, q->x_zero};
    v.insert(v.end(), q->w_scale.begin(), q->w_scale.end());
    n.attrs[kInt8Attr] = attr_floats(std::move(v));
    ++marked;
  }
  return marked;
}

std::shared_ptr<const ConvInt8> conv_int8_params(const Node& n) {
  const auto it = n.attrs.find(kInt8Attr);
  if (it == n.attrs.end() || it->second.floats.size() < 2) return nullptr;
  const std::vector<float>& v = it->second.floats;
  auto q = std::make_shared<ConvInt8>();
  q->x_scale = v[0];
  q->x_zero = v[1];
  q->w_scale.assign(v.begin() + 2, v.end());
  return q;
}

}  // namespace kiln
