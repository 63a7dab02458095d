#include "runtime/int8_conv.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "graph/import_qdq.h"
#include "graph/passes.h"
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

// The grid of node p's output 0 when it is a quantize-dequantize's: p itself, or the last
// post-op fused into it (int8 as uint8: q + 128, exact, the zero point moving with it).
std::optional<U8Quant> qdq_output(const Node& p) {
  auto grid = [](const PostOp& q) -> std::optional<U8Quant> {
    if (!is_quant_dequant(q.kind) || !(q.alpha > 0)) return std::nullopt;
    return U8Quant{q.alpha, quant_dequant_u8_zero(q)};
  };
  if (p.op == "QuantizeDequantize") {
    const std::optional<PostOp> q = glue_unary_post_op(p);
    return q ? grid(*q) : std::nullopt;
  }
  // (Only the last fused post-op's name and parameters: any node may carry a chain, and where
  // its extra inputs start depends on the op.)
  const auto chain = p.attrs.find("post_ops");
  if (chain == p.attrs.end() || chain->second.strings.empty()) return std::nullopt;
  const std::vector<std::string>& names = chain->second.strings;
  const std::vector<float> a = p.attr_floats("post_alpha"), b = p.attr_floats("post_beta");
  if (a.size() != names.size() || b.size() != names.size()) return std::nullopt;
  for (PostOp::Kind k : {PostOp::Kind::quant_dequant_u8, PostOp::Kind::quant_dequant_s8})
    if (names.back() == post_op_name(k)) return grid(PostOp{k, a.back(), b.back(), -1});
  return std::nullopt;
}

// The decision itself (see the header).
std::shared_ptr<const ConvInt8> decide(const Graph& g, const Node& n,
                                       const std::vector<int>& producer) {
  const bool conv = n.op == "Conv", fc = n.op == "Gemm" || n.op == "MatMul";
  if ((!conv && !fc) || n.inputs.size() < 2 || n.in(0) == kNoValue) return nullptr;
  std::optional<U8Quant> x = u8_value(g, producer, n.inputs[0]);
  // Through ops that only move values (a Flatten before the classifier, whose requantization
  // fuse_qdq dropped): the same grid.
  for (ValueId v = n.inputs[0]; !x && v != kNoValue && producer[size_t(v)] >= 0;) {
    const Node& p = g.nodes[size_t(producer[size_t(v)])];
    if (!moves_values(p) || p.op == "MaxPool" || p.op == "Concat") break;
    v = p.in(0);
    x = u8_value(g, producer, v);
  }
  if (!x) return nullptr;
  const Value& wv = g.value(n.inputs[1]);
  if (!wv.is_const() || wv.dtype != DType::f32 || wv.shape.size() != (conv ? 4u : 2u))
    return nullptr;
  auto q = std::make_shared<ConvInt8>();
  q->x_scale = x->scale;
  q->x_zero = x->zero;
  const float* w = wv.constant->data<float>();
  // A Gemm / MatMul's scales are per output column n: rows of B^T ([N, K] as Gemm's transB
  // stores it; else transposed here). Its alpha would scale them: only alpha 1, no transA.
  std::vector<float> rows;
  if (fc) {
    if (n.op == "Gemm" && (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1.f) != 1.f))
      return nullptr;
    if (n.op == "MatMul" || n.attr_i("transB", 0) == 0) {
      const int64_t K = wv.shape[0], N = wv.shape[1];
      rows.resize(size_t(K * N));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) rows[size_t(j * K + k)] = w[k * N + j];
      w = rows.data();
    }
  }
  // (Transposed: [N, K] from [K, N]; else the output channels are the first dimension.)
  const int64_t oc = rows.empty() ? wv.shape[0] : wv.shape[1];
  const int64_t per = wv.constant->numel() / std::max<int64_t>(oc, 1);
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
  const std::vector<int> producer = g.producers();
  // (Nodes in topological order: a MaxPool of a marked value, on its grid, is marked too, and
  // a Concat of values all on one grid.)
  auto input_grid = [&](ValueId v) { return u8_value(g, producer, v); };
  for (Node& n : g.nodes) {
    n.attrs.erase(kU8OutAttr);
    std::optional<U8Quant> u = qdq_output(n);
    // (Not once it computes more: a fused post-op, or a concat's fused affine map.)
    const bool plain = !n.has("post_ops") && !n.has("affine_scale");
    if (!u && plain && maxpool_keeps_grid(g, n)) u = input_grid(n.inputs[0]);
    if (!u && plain && n.op == "Concat" && !n.inputs.empty()) {  // (inputs all on one grid)
      u = input_grid(n.inputs[0]);
      for (ValueId v : n.inputs) {
        const auto x = input_grid(v);
        if (!x || !u || x->scale != u->scale || x->zero != u->zero) u.reset();
      }
    }
    if (u && n.outputs.size() == 1) n.attrs[kU8OutAttr] = attr_floats({u->scale, u->zero});
  }
  int marked = 0;
  for (Node& n : g.nodes) {
    n.attrs.erase(kInt8Attr);
    const std::shared_ptr<const ConvInt8> q = decide(g, n, producer);
    if (!q) continue;
    std::vector<float> v{q->x_scale, q->x_zero};
    v.insert(v.end(), q->w_scale.begin(), q->w_scale.end());
    // (The one fused `add`'s residual on a uint8 grid: its scale and zero point last.)
    const std::vector<PostOp> ops = parse_post_ops(n, 3);
    const auto adds = std::count_if(ops.begin(), ops.end(),
                                    [](const PostOp& o) { return o.kind == PostOp::Kind::add; });
    for (const PostOp& op : ops)
      if (op.kind == PostOp::Kind::add && adds == 1)
        if (const auto r = u8_value(g, producer, n.in(size_t(op.input))))
          v.insert(v.end(), {r->scale, r->zero});
    n.attrs[kInt8Attr] = attr_floats(std::move(v));
    n.attrs[kInt8Attr].ints = {int64_t(q->w_scale.size())};
    ++marked;
  }
  return marked;
}

std::optional<U8Quant> u8_value(const Graph& g, const std::vector<int>& producer, ValueId v) {
  const int p = v == kNoValue ? -1 : producer[size_t(v)];
  return p >= 0 ? u8_output(g.nodes[size_t(p)]) : std::nullopt;
}

std::optional<U8Quant> u8_output(const Node& n) {
  const auto it = n.attrs.find(kU8OutAttr);
  if (it == n.attrs.end() || it->second.floats.size() != 2) return std::nullopt;
  return U8Quant{it->second.floats[0], it->second.floats[1]};
}

std::shared_ptr<const ConvInt8> conv_int8_params(const Node& n) {
  const auto it = n.attrs.find(kInt8Attr);
  if (it == n.attrs.end() || it->second.floats.size() < 2) return nullptr;
  const std::vector<float>& v = it->second.floats;
  const size_t oc = it->second.ints.size() == 1 ? size_t(it->second.ints[0]) : v.size() - 2;
  if (v.size() != 2 + oc && v.size() != 4 + oc) return nullptr;
  auto q = std::make_shared<ConvInt8>();
  q->x_scale = v[0];
  q->x_zero = v[1];
  q->w_scale.assign(v.begin() + 2, v.begin() + 2 + std::ptrdiff_t(oc));
  if (v.size() == 4 + oc) q->residual = U8Quant{v[2 + oc], v[3 + oc]};
  return q;
}

}  // namespace kiln
