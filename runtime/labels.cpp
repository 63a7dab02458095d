#include "runtime/labels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "graph/enum_name.h"
#include "graph/passes.h"
#include "graph/post_ops.h"
#include "jit/conv/conv_families.h"
#include "jit/gemm/fc_kernel.h"
#include "jit/glue/glue.h"
#include "runtime/glue_kernels.h"
#include "runtime/int8_conv.h"
#include "runtime/node_problems.h"

namespace kiln {
namespace {

const char* kind_name(LabelKind k) {
  static const char* const kNames[] = {"conv",      "fc",      "pool",   "concat",    "eltwise",
                                       "ref",       "shuffle", "norm",   "view",      "bcast",
                                       "transpose", "pad",     "resize", "reduce",    "convt",
                                       "copy",      "typed",   "arg",    "recurrence"};
  return enum_name(k, kNames);
}

std::optional<Layout> layout_from(const std::string& s) {
  for (int l = 0; l < kNumLayouts; ++l)
    if (s == layout_name(Layout(l))) return Layout(l);
  return std::nullopt;
}

// An output of rank <= 4: the elementwise kernels view fewer dimensions as 4-D in nchw.
bool upto4d(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).shape.size() <= 4;
}

// Elementwise over same-shape f32 operands (Pow's constant scalar exponent aside): exact on any
// layout's flat buffer (a rank other than 4 has nchw only).
bool is_flat_elementwise(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue) return false;
  const Shape& ys = g.value(n.outputs[0]).shape;
  const bool binary =
      (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") && n.inputs.size() == 2;
  const bool pow = n.op == "Pow" && elementwise_post_op(g, n);
  if (!binary && !pow && n.op != "Sum" && !is_unary_elementwise_op(n.op)) return false;
  const size_t operands = binary ? 2 : n.op == "Sum" ? n.inputs.size() : 1;
  for (size_t k = 0; k < operands; ++k) {
    ValueId v = n.in(k);
    if (v == kNoValue || g.value(v).shape != ys || g.value(v).dtype != DType::f32) return false;
  }
  return true;
}

bool is_pool(const std::string& op) {
  return op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" ||
         op == "GlobalMaxPool";
}

bool is_channel_concat(const Graph& g, const Node& n) {
  if (n.op != "Concat" || n.outputs.size() != 1 || !is4d(g, n.outputs[0])) return false;
  if (n.attr_i("axis", 0) % 4 != 1) return false;
  for (ValueId v : n.inputs)
    if (!is4d(g, v) || g.value(v).dtype != DType::f32) return false;
  return true;
}

// A Conv whose weights or bias are computed (not constants): its kernel reads them on every
// run (create_conv_kernel_runtime_weights) instead of packing them at load.
bool conv_runtime_weights(const Graph& g, const Node& n) {
  return n.op == "Conv" && n.inputs.size() >= 2 &&
         (!g.value(n.inputs[1]).is_const() ||
          (n.in(2) != kNoValue && !g.value(n.inputs[2]).is_const()));
}

// Whether conv family f may implement p (computed weights: the families reading them at run
// time, whatever the shape: the alternative is the reference kernel).
bool conv_family_ok(const ConvFamilyRow& f, const ConvProblem& p, bool runtime_weights) {
  return runtime_weights ? conv_family_runtime_weights(f.id, p) : f.offered(p);
}

// The conv runs on a JIT family at all: a 2-D conv some family offers itself for; computed
// weights and bias f32 of the conv's shapes.
bool conv_jit_ok(const Graph& g, const Node& n, std::string* why) {
  if (n.op != "Conv") return *why = "not a Conv", false;
  if (n.inputs.size() < 2) return *why = "no weights", false;
  if (!is4d(g, n.in(0)) || n.outputs.empty() || !is4d(g, n.outputs[0]))
    return *why = "not a 2-D convolution (4-D input and output)", false;
  const bool rw = conv_runtime_weights(g, n);
  const ConvProblem p = ConvProblem::from_node(g, n);
  if (rw) {
    const Value& w = g.value(n.inputs[1]);
    const Value* b = p.bias ? &g.value(n.inputs[2]) : nullptr;
    if (w.dtype != DType::f32 || (b && b->dtype != DType::f32))
      return *why = "computed weights or bias are not f32", false;
    if (p.groups < 1 || w.shape != Shape{p.oc, p.ic / p.groups, p.kh, p.kw} ||
        (b && b->shape != Shape{p.oc}))
      return *why = "computed weights or bias do not match the conv's shape", false;
  }
  for (const ConvFamilyRow& f : conv_families())
    if (conv_family_ok(f, p, rw)) return true;
  return *why = "no JIT conv family for groups=" + std::to_string(p.groups) +
                (rw ? " with computed weights" : "") + " (" + p.str() + ")",
         false;
}

std::optional<std::vector<PostOp>> eltwise_ops(const Graph& g, const Node& n) {
  std::vector<PostOp> ops;
  if (std::optional<PostOp> op = elementwise_post_op(g, n)) {
    ops.push_back(*op);
  } else if (n.op == "Add" || n.op == "Sum") {
    ops.resize(n.op == "Add" ? 1 : n.inputs.size() - 1);  // Sum: y = x0 + x1 + ...
    for (size_t k = 0; k < ops.size(); ++k) {
      ops[k].kind = PostOp::Kind::add;
      ops[k].input = int(k) + 1;
    }
  } else {
    return std::nullopt;
  }
  // The unary ops fused after it (graph/fuse.cpp: no extra inputs).
  for (const PostOp& op : parse_post_ops(n, int(n.inputs.size()))) ops.push_back(op);
  return ops;
}

// ---- Broadcast binary ops and per-channel affine maps (LabelKind::bcast) ----

std::optional<BinaryOp> binary_op(const std::string& op) {
  static const char* const kOps[] = {"Add",   "Sub", "Mul", "Div",
                                     "PRelu", "Max", "Min", "Mean"};  // BinaryOp's order
  for (size_t k = 0; k < std::size(kOps); ++k)
    if (op == kOps[k]) return BinaryOp(k);
  return std::nullopt;
}

// A binary op's output and operand shapes of any rank with adjacent dims merged where every
// operand is alike (whole, or broadcast) and the output's size-1 dims dropped: the same bytes in
// row-major order, as 4-D shapes; nullopt when more than 4 dims remain (e.g. Swin's attention
// mask add [1, nW, heads, N, N] + [1, nW, 1, N, N] becomes [1, nW, heads, N*N] + [1, nW, 1, N*N]).
// `rank` is the kernel's: the dims left, padded with leading 1s.
std::optional<std::vector<Shape>> collapse_bcast(const Shape& y, std::vector<Shape> xs,
                                                 size_t rank = 4) {
  for (Shape& x : xs) {
    if (x.size() > y.size()) return std::nullopt;
    x.insert(x.begin(), y.size() - x.size(), 1);
  }
  std::vector<Shape> out(xs.size() + 1);
  std::vector<bool> prev;
  for (size_t d = 0; d < y.size(); ++d) {
    if (y[d] == 1) continue;
    std::vector<bool> whole;
    for (const Shape& x : xs) whole.push_back(x[d] == y[d]);
    const bool merge = !out[0].empty() && whole == prev;
    for (size_t k = 0; k <= xs.size(); ++k) {
      const int64_t s = k == 0 ? y[d] : xs[k - 1][d];
      if (merge)
        out[k].back() *= s;
      else
        out[k].push_back(s);
    }
    prev = whole;
  }
  if (out[0].size() > rank) return std::nullopt;
  for (Shape& s : out) s.insert(s.begin(), rank - s.size(), 1);
  return out;
}

std::vector<Shape> operand_shapes(const Graph& g, const Node& n) {
  std::vector<Shape> s;
  for (ValueId v : n.inputs) s.push_back(g.value(v).shape);
  return s;
}

// Add/Sub/Mul/Div/PRelu (Max/Min/Mean of two) of two f32 operands broadcasting to an output of
// rank <= 4 (the factory checks the broadcast) or of a higher rank that collapse_bcast reduces
// to 4, an f32 Expand to rank <= 4, or an inference BatchNormalization of a rank 2-4 f32 tensor
// whose parameters are constant f32 [C] vectors (what fold_batchnorm could not fold into a conv).
bool is_bcast(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || g.value(n.outputs[0]).dtype != DType::f32) return false;
  auto f32 = [&](ValueId v) { return v != kNoValue && g.value(v).dtype == DType::f32; };
  if (n.op == "BatchNormalization") {
    const size_t rank = n.in(0) == kNoValue ? 0 : g.value(n.in(0)).shape.size();
    if (n.inputs.size() != 5 || rank < 2 || rank > 4 || !f32(n.in(0)) ||
        g.value(n.outputs[0]).shape != g.value(n.in(0)).shape || n.attr_i("training_mode", 0) != 0)
      return false;
    const Shape c{g.value(n.outputs[0]).shape[1]};
    for (size_t k = 1; k < 5; ++k)
      if (!f32(n.in(k)) || !g.value(n.in(k)).is_const() || g.value(n.in(k)).shape != c)
        return false;
    return true;
  }
  if (n.op == "Expand")
    return upto4d(g, n.outputs[0]) && f32(n.in(0)) && g.value(n.in(0)).shape.size() <= 4;
  if (!binary_op(n.op) || n.inputs.size() != 2) return false;
  for (ValueId v : n.inputs)
    if (!f32(v)) return false;
  const Shape& y = g.value(n.outputs[0]).shape;
  return y.size() <= 4 ? std::all_of(n.inputs.begin(), n.inputs.end(),
                                     [&](ValueId v) { return g.value(v).shape.size() <= 4; })
                       : collapse_bcast(y, operand_shapes(g, n)).has_value();
}

// Operand slot k's layout under a bcast label on `l`: full tensors and runtime per-channel
// vectors ([N, C, 1, 1]: a squeeze-and-excitation scale, produced by a 1x1 conv in `l`) in
// `l`; the rest in nchw (a one-channel [N, 1, H, W] would be 16x larger blocked, and
// constants then need no conversion).
Layout bcast_slot_layout(const Graph& g, const Node& n, size_t k, Layout l) {
  const Shape& y = g.value(n.outputs[0]).shape;
  const Value& v = g.value(n.inputs[k]);
  const bool per_channel =
      v.shape.size() == 4 && v.shape[1] == y[1] && v.shape[2] == 1 && v.shape[3] == 1;
  return v.shape == y || (per_channel && !v.is_const()) ? l : Layout::nchw;
}

std::unique_ptr<Kernel> make_bcast(const Graph& g, const Node& n, Layout l, Isa isa,
                                   std::string* why) {
  if (!is_bcast(g, n)) return *why = "not a broadcast binary op or BatchNormalization", nullptr;
  Shape ys = g.value(n.outputs[0]).shape;
  if (n.op == "BatchNormalization") {
    ys.resize(4, 1);  // [N, C] or [N, C, L]: the same bytes as [N, C, 1, 1] / [N, C, L, 1] (nchw)
    std::vector<float> a, b;  // one FMA per element: x * a + b
    if (!batchnorm_affine(g, n, &a, &b)) return *why = "BatchNormalization not affine", nullptr;
    return create_affine_kernel(ys, l, a, b, parse_post_ops(n, 5), isa, why);
  }
  if (ys.size() < 4) ys.insert(ys.begin(), 4 - ys.size(), 1);  // fewer dimensions: a 4-D view
  auto operand = [&](size_t k) {
    return BcastOperand{g.value(n.inputs[k]).shape, bcast_slot_layout(g, n, k, l), int(k)};
  };
  if (n.op == "Expand") return create_expand_kernel(ys, l, operand(0), isa, why);
  if (g.value(n.outputs[0]).shape.size() > 4) {  // rank > 4: the collapsed 4-D view, nchw
    const auto c = collapse_bcast(g.value(n.outputs[0]).shape, operand_shapes(g, n));
    if (!c || l != Layout::nchw)
      return *why = "rank > 4 broadcast runs collapsed, in nchw", nullptr;
    return create_binary_kernel(*binary_op(n.op), (*c)[0], l, BcastOperand{(*c)[1], l, 0},
                                BcastOperand{(*c)[2], l, 1}, parse_post_ops(n, 2), isa, why);
  }
  return create_binary_kernel(*binary_op(n.op), ys, l, operand(0), operand(1), parse_post_ops(n, 2),
                              isa, why);
}

// ---- end of the bcast block ----

// ---- Comparisons, logic, Where, IsNaN / IsInf, Sign, Cast (LabelKind::typed) ----

std::optional<TypedOp> typed_op(const std::string& op) {
  static const std::pair<const char*, TypedOp> kOps[] = {{"Equal", TypedOp::equal},
                                                         {"Less", TypedOp::less},
                                                         {"Greater", TypedOp::greater},
                                                         {"LessOrEqual", TypedOp::less_equal},
                                                         {"GreaterOrEqual", TypedOp::greater_equal},
                                                         {"And", TypedOp::logical_and},
                                                         {"Or", TypedOp::logical_or},
                                                         {"Xor", TypedOp::logical_xor},
                                                         {"Not", TypedOp::logical_not},
                                                         {"Where", TypedOp::where},
                                                         {"IsNaN", TypedOp::is_nan},
                                                         {"IsInf", TypedOp::is_inf},
                                                         {"Sign", TypedOp::sign},
                                                         {"Cast", TypedOp::cast},
                                                         {"CastLike", TypedOp::cast},
                                                         {"Add", TypedOp::add},
                                                         {"Sub", TypedOp::sub},
                                                         {"Mul", TypedOp::mul},
                                                         {"Div", TypedOp::div},
                                                         {"Mod", TypedOp::mod},
                                                         {"Pow", TypedOp::pow},
                                                         {"Expand", TypedOp::expand}};
  for (const auto& [name, t] : kOps)
    if (op == name) return t;
  if (math_op(op)) return TypedOp::math;
  return std::nullopt;
}

// The node as a typed elementwise problem: its operands (CastLike's second input only names
// the dtype) and output collapsed to kTypedRank dims; nullopt for other ops or more dims left.
std::optional<TypedEltwiseProblem> typed_problem(const Graph& g, const Node& n) {
  const auto op = typed_op(n.op);
  if (!op || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return std::nullopt;
  TypedEltwiseProblem p;
  p.op = *op;
  const size_t operands = n.op == "CastLike" || n.op == "Expand" ? 1 : n.inputs.size();
  std::vector<Shape> xs;
  for (size_t k = 0; k < operands; ++k) {
    if (n.in(k) == kNoValue) return std::nullopt;
    xs.push_back(g.value(n.in(k)).shape);
    p.x_type.push_back(g.value(n.in(k)).dtype);
  }
  const Value& y = g.value(n.outputs[0]);
  const auto c = collapse_bcast(y.shape, xs, kTypedRank);
  if (!c) return std::nullopt;
  p.y = (*c)[0];
  p.x.assign(c->begin() + 1, c->end());
  p.y_type = y.dtype;
  p.detect_positive = n.attr_i("detect_positive", 1) != 0;
  p.detect_negative = n.attr_i("detect_negative", 1) != 0;
  p.fmod = n.attr_i("fmod", 0) != 0;
  if (const auto m = math_op(n.op)) p.math = *m;
  const int64_t to = n.op == "Cast" ? n.attr_i("to", 0) : 0;
  p.narrow = to == 10  ? TypedEltwiseProblem::Narrow::half
             : to == 6 ? TypedEltwiseProblem::Narrow::int32
                       : TypedEltwiseProblem::Narrow::none;
  return p;
}

// A MatMul whose B is not a constant 2-D weight matrix (two activations, as in attention, or a
// batched constant): the fc label runs the unpacked batched kernel, which reads B as an operand.
bool batched_matmul(const Graph& g, const Node& n) {
  if (n.op == "SoftmaxAttention") return true;  // (its B and V too are operands)
  if (n.op != "MatMul" || n.inputs.size() < 2 || n.in(1) == kNoValue) return false;
  const Value& b = g.value(n.inputs[1]);
  return !(b.is_const() && b.shape.size() == 2);
}

std::unique_ptr<Kernel> make_fc(const Graph& g, const Node& n, Isa isa, std::string* why, bool bf16,
                                std::shared_ptr<const ConvInt8> int8) {
  const bool gemm = n.op == "Gemm";
  if (n.op == "SoftmaxAttention") {
    if (bf16) return *why = "no bf16 attention", nullptr;
    for (ValueId v : n.inputs)
      if (v == kNoValue || g.value(v).dtype != DType::f32) return *why = "needs f32", nullptr;
    const float s = n.attr_f("scale", 1.f);
    return create_attention_kernel(g.value(n.inputs[0]).shape, g.value(n.inputs[1]).shape,
                                   g.value(n.inputs[2]).shape,
                                   n.attr_i("divide", 0) != 0 ? 1.f / s : s, isa, why,
                                   n.inputs.size() > 3 ? &g.value(n.inputs[3]).shape : nullptr);
  }
  if (n.op != "Gemm" && n.op != "MatMul") return *why = "not Gemm/MatMul", nullptr;
  if (n.inputs.size() < 2) return *why = "no B operand", nullptr;
  if (batched_matmul(g, n)) {
    if (bf16) return *why = "no bf16 batched MatMul", nullptr;
    const Value& a = g.value(n.inputs[0]);
    const Value& b = g.value(n.inputs[1]);
    if (n.has("post_ops")) return *why = "MatMul with post-ops", nullptr;
    if (a.dtype != DType::f32 || b.dtype != DType::f32) return *why = "needs f32", nullptr;
    return create_matmul_kernel(a.shape, b.shape, isa, why);
  }
  if (!g.value(n.inputs[1]).is_const()) return *why = "weights are not constant", nullptr;
  const Value& a = g.value(n.inputs[0]);
  const Value& w = g.value(n.inputs[1]);
  if (a.dtype != DType::f32 || w.shape.size() != 2 || a.shape.empty())
    return *why = "needs f32 input and 2-D weights", nullptr;
  if (gemm && n.attr_i("transA", 0) != 0) return *why = "transA", nullptr;
  const bool trans_b = gemm && n.attr_i("transB", 0) != 0;
  FcProblem p;
  p.k = a.shape.back();
  p.m = shape_numel(a.shape) / std::max<int64_t>(p.k, 1);
  p.n = trans_b ? w.shape[0] : w.shape[1];
  std::optional<Tensor> bias;
  if (gemm) {
    p.post = parse_post_ops(n, 3);
    ValueId c = n.in(2);
    if (c != kNoValue) {
      const Value& cv = g.value(c);
      const bool row = cv.shape == Shape{p.n} || cv.shape == Shape{1, p.n};
      if (!cv.is_const() || !row || cv.dtype != DType::f32)
        return *why = "C is not a constant row vector", nullptr;
      const float beta = n.attr_f("beta", 1.f);
      bias = Tensor(DType::f32, {p.n});
      for (int64_t j = 0; j < p.n; ++j)
        bias->data<float>()[j] = beta * cv.constant->data<float>()[j];
      p.bias = true;
    }
  } else {
    p.post = parse_post_ops(n, 3);  // (fuse_epilogues leaves a MatMul's slot 2 empty)
  }
  return create_fc_kernel(p, isa, *w.constant, trans_b, gemm ? n.attr_f("alpha", 1.f) : 1.f,
                          bias ? &*bias : nullptr, why, bf16, std::move(int8));
}

std::unique_ptr<Kernel> make_norm(const Graph& g, const Node& n, Layout l, Isa isa,
                                  std::string* why) {
  if (const auto p = lrn_problem(g, n)) return create_lrn_kernel(*p, l, isa, why);
  const auto v = norm_view(g, n);
  if (!v)
    return *why =
               "not a Softmax / LogSoftmax, or a Layer / Instance / GroupNormalization with "
               "constant scale and bias",
           nullptr;
  // A fused activation (graph/fuse.cpp: one-input post-ops, no extra inputs).
  const std::vector<PostOp> post = parse_post_ops(n, int(n.inputs.size()));
  if (n.op == "InstanceNormalization" || n.op == "GroupNormalization") {
    const Shape& s = g.value(n.inputs[0]).shape;
    const int64_t groups = v->outer / s[0], pixels = shape_numel(s) / (s[0] * s[1]);
    const float eps = n.attr_f("epsilon", 1e-5f);
    const float* gamma = g.value(n.inputs[1]).constant->data<float>();
    const float* beta = g.value(n.inputs[2]).constant->data<float>();
    if (l == Layout::nchw)
      return create_groupnorm_kernel(s[0], s[1], groups, pixels, eps, gamma, beta, isa, why, post);
    if (s.size() != 4 || l != blocked_layout(isa))
      return *why = "Instance / GroupNormalization runs on nchw or a 4-D tensor's blocks", nullptr;
    return create_groupnorm_blocked_kernel(s[0], s[1], groups, pixels, eps, gamma, beta, isa, why,
                                           post);
  }
  if (l != Layout::nchw && !v->channels)
    return *why = "only a reduction over the channels of a 4-D tensor runs on nhwc / blocked",
           nullptr;
  if (n.op != "LayerNormalization")
    return create_softmax_kernel(v->outer, v->c, v->inner, l, isa, why, n.op == "LogSoftmax");
  const ValueId b = n.in(2);
  return create_layernorm_kernel(v->outer, v->c, v->inner, l, n.attr_f("epsilon", 1e-5f),
                                 g.value(n.inputs[1]).constant->data<float>(),
                                 b == kNoValue ? nullptr : g.value(b).constant->data<float>(), isa,
                                 why, post);
}

// Whether node n may be a view under layout l: a contiguous Slice (above) or a reshaping op whose
// output, stored in l where 4-D, is input 0's bytes stored in l. That holds when l puts every
// element of each 4-D operand where NCHW would (blocked: 1x1 spatial and no padding between images;
// NHWC: 1x1 spatial or one channel) and the output needs no bytes beyond the input's (a padded
// blocked output must be exactly the input's bytes, pad lanes included).
bool view_ok(const Graph& g, const Node& n, Layout l) {
  if (n.op == "Slice") return l == Layout::nchw && slice_view_floats(g, n).has_value();
  static const char* ops[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  if (std::none_of(std::begin(ops), std::end(ops), [&](const char* o) { return n.op == o; }))
    return false;
  const ValueId x = n.in(0), y = n.outputs.empty() ? kNoValue : n.outputs[0];
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) return false;  // Dropout's mask
  if (x == kNoValue || y == kNoValue || g.value(x).is_const()) return false;
  const Value &xv = g.value(x), &yv = g.value(y);
  if (xv.dtype != yv.dtype || shape_numel(xv.shape) != shape_numel(yv.shape)) return false;
  auto plain = [&](const Shape& s) {
    if (s.size() != 4 || l == Layout::nchw) return true;
    const bool one_pixel = s[2] * s[3] == 1;
    if (l == Layout::nhwc) return one_pixel || s[1] == 1;
    return one_pixel && (s[0] == 1 || s[1] % layout_block(l) == 0);
  };
  const int64_t xb = value_bytes(xv, l), yb = value_bytes(yv, l);
  const bool padded_out = yv.shape.size() == 4 && layout_block(l) > 1;
  return plain(xv.shape) && plain(yv.shape) && (yb == xb || (yb < xb && !padded_out));
}

// A view's step: no code and no tiles (the plan makes the output an alias of the input); it
// keeps the node visible in the plan's tables.
class ViewKernel final : public Kernel {
 public:
  explicit ViewKernel(Layout l) : name_(std::string("view_") + layout_name(l)) {}
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return 0; }
  void run(const KernelArgs&, int64_t, int64_t) const override {}

 private:
  std::string name_;
};

std::unique_ptr<Kernel> make_ref(const Graph& g, const Node& n, Layout l) {
  std::vector<Shape> is, os;
  std::vector<DType> it, ot;
  // Non-NCHW 4-D operands are viewed flat (pad lanes included): exact for elementwise ops.
  auto view = [&](ValueId v) {
    if (v == kNoValue) return Shape{};
    const Value& val = g.value(v);
    if (l != Layout::nchw && val.shape.size() == 4) return Shape{value_bytes(val, l) / 4};
    return val.shape;
  };
  for (ValueId v : n.inputs) {
    is.push_back(view(v));
    it.push_back(v == kNoValue ? DType::f32 : g.value(v).dtype);
  }
  for (ValueId v : n.outputs) {
    os.push_back(view(v));
    ot.push_back(v == kNoValue ? DType::f32 : g.value(v).dtype);
  }
  return make_ref_kernel(n, is, it, os, ot);
}

std::string attr_str(const Attribute& a) {
  std::string s;
  auto list = [&](const auto& v) {
    for (const auto& x : v) s += fmt::format("{},", x);
  };
  switch (a.kind) {
    case Attribute::Kind::f:
      return fmt::format("{}", a.f);
    case Attribute::Kind::i:
      return std::to_string(a.i);
    case Attribute::Kind::s:
      return a.s;
    case Attribute::Kind::floats:
      list(a.floats);
      return s;
    case Attribute::Kind::ints:
      list(a.ints);
      return s;
    case Attribute::Kind::strings:
      list(a.strings);
      return s;
    case Attribute::Kind::tensor:
      return "tensor" + shape_str(a.t.shape());
    case Attribute::Kind::graph:
      return "graph";
  }
  return s;
}

double peak_gflops(Isa isa, int threads) {
  const double one = isa == Isa::avx512 ? 175.0 : isa == Isa::avx2 ? 90.0 : 4.0;
  return one * (threads > 1 ? 0.9 * threads : 1.0);
}

}  // namespace

std::string Label::key() const {
  std::string k = kind_name(kind);
  if (kind == LabelKind::conv) {
    k += std::string(".") + conv_family_name(conv.family) + "." + layout_name(conv.src) + "." +
         layout_name(conv.dst);
    if (conv.ur_w || conv.oc_blocks)
      k += ".u" + std::to_string(conv.ur_w) + "o" + std::to_string(conv.oc_blocks);
    return k + (precision == Precision::int8 ? ".int8" : "");
  }
  // (An eltwise label writing another layout than it reads: a quantize-dequantize storing
  // its integers, "eltwise.nChw16c.nChw16c_u8"; a Transpose viewed in the other order,
  // "view.nchw.nhwc".)
  if ((kind == LabelKind::eltwise || kind == LabelKind::view) && out != in)
    return k + "." + layout_name(in) + "." + layout_name(out);
  return k + "." + layout_name(in) +
         (precision == Precision::bf16   ? ".bf16"
          : precision == Precision::int8 ? ".int8"
                                         : "");
}

std::optional<Label> Label::parse(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (parts.empty()) return std::nullopt;
  Label l;
  if (parts[0] == "conv") {
    if (parts.size() >= 5 && parts.back() == "int8") {
      l.precision = Precision::int8;
      parts.pop_back();
    }
    if (parts.size() != 4 && parts.size() != 5) return std::nullopt;
    const auto f = parse_conv_family(parts[1]);
    auto s = layout_from(parts[2]), d = layout_from(parts[3]);
    if (!f || !s || !d) return std::nullopt;
    l.conv.family = *f;
    l.kind = LabelKind::conv;
    l.conv.src = l.in = *s;
    l.conv.dst = l.out = *d;
    if (parts.size() == 5) {
      int u = 0, o = 0;
      if (std::sscanf(parts[4].c_str(), "u%do%d", &u, &o) != 2 || u < 0 || o < 0 || u > 64 ||
          o > 64)
        return std::nullopt;
      l.conv.ur_w = u, l.conv.oc_blocks = o;
    }
    return l;
  }
  if (parts.size() == 3 && (parts[2] == "bf16" || parts[2] == "int8") &&
      parts[0] == kind_name(LabelKind::fc)) {
    l.precision = parts[2] == "bf16" ? Precision::bf16 : Precision::int8;
    parts.pop_back();
  }
  if (parts.size() == 3 &&
      (parts[0] == kind_name(LabelKind::eltwise) || parts[0] == kind_name(LabelKind::view))) {
    const auto in = layout_from(parts[1]), out = layout_from(parts[2]);
    if (!in || !out || *in == *out) return std::nullopt;
    l.kind = parts[0] == kind_name(LabelKind::eltwise) ? LabelKind::eltwise : LabelKind::view;
    l.in = *in;
    l.out = *out;
    return l;
  }
  if (parts.size() != 2) return std::nullopt;
  auto lay = layout_from(parts[1]);
  if (!lay) return std::nullopt;
  for (LabelKind k : {LabelKind::fc, LabelKind::pool, LabelKind::concat, LabelKind::eltwise,
                      LabelKind::ref, LabelKind::shuffle, LabelKind::norm, LabelKind::view,
                      LabelKind::bcast, LabelKind::transpose, LabelKind::pad, LabelKind::reduce,
                      LabelKind::convt, LabelKind::resize, LabelKind::copy, LabelKind::typed,
                      LabelKind::arg, LabelKind::recurrence})
    if (parts[0] == kind_name(k)) {
      l.kind = k;
      l.in = l.out = *lay;
      return l;
    }
  return std::nullopt;
}

bool packs_weights(const Graph& g, int i, const Label& l) {
  return (l.kind == LabelKind::conv && !conv_runtime_weights(g, g.nodes[size_t(i)])) ||
         (l.kind == LabelKind::fc && !batched_matmul(g, g.nodes[size_t(i)]));
}

std::string label_family(const Label& l) {
  return l.kind == LabelKind::conv ? conv_family_name(l.conv.family) : kind_name(l.kind);
}

int64_t view_offset_bytes(const Graph& g, const Node& n) {
  const auto floats = slice_view_floats(g, n);  // (block copies are f32)
  return floats ? *floats * 4 : 0;
}

int64_t value_bytes(const Value& v, Layout l) {
  // (A bf16 / u8 layout holds an f32 value's 4-D activations in 2 bytes / 1 byte each.)
  if (v.shape.size() == 4)
    return layout_elems(l, v.shape) *
           (layout_bf16(l) || layout_u8(l) ? layout_esize(l) : int64_t(dtype_size(v.dtype)));
  return shape_numel(v.shape) * int64_t(dtype_size(v.dtype));
}

const char* precision_name(Precision p) {
  return p == Precision::bf16 ? "bf16" : p == Precision::int8 ? "int8" : "f32";
}

bool parse_precision(const std::string& s, Precision* out) {
  for (Precision p : {Precision::f32, Precision::bf16})
    if (s == precision_name(p)) return *out = p, true;
  return false;
}

bool bf16_supported(Isa isa) {
  return isa == Isa::avx512 && host_cpu().avx512_bf16;
}

std::vector<Label> candidate_labels(const Graph& g, int i, Isa isa, bool reference,
                                    Precision precision) {
  const Node& n = g.nodes[size_t(i)];
  std::vector<Label> out;
  auto simple = [&](LabelKind k, Layout l) {
    Label lb;
    lb.kind = k;
    lb.in = lb.out = l;
    out.push_back(lb);
  };
  const bool jit = !reference && isa != Isa::scalar;
  const Layout b = blocked_layout(isa);
  std::string why;
  if (jit && n.op == "Conv" && conv_jit_ok(g, n, &why)) {
    const ConvProblem p = ConvProblem::from_node(g, n);
    const bool rw = conv_runtime_weights(g, n);
    // (Computed weights: f32 only; bf16 and int8 weights are converted at load.)
    const bool bf16 = precision == Precision::bf16 && bf16_supported(isa) && !rw;
    for (const ConvFamilyRow& f : conv_families()) {
      if (!conv_family_ok(f, p, rw)) continue;
      auto pairs = f.layouts(p, b);
      if (bf16 && f.bf16_layouts) {
        auto more = f.bf16_layouts(p);
        pairs.insert(pairs.end(), more.begin(), more.end());
      }
      for (const auto& [s, d] : pairs) {
        Label lb;
        lb.kind = LabelKind::conv;
        lb.conv.family = f.id;
        lb.conv.src = lb.in = s;
        lb.conv.dst = lb.out = d;
        out.push_back(lb);
      }
      // A QDQ model's conv in int8 (its operands are on int8 grids: the same function): 1x1
      // as gemm1x1, others as im2col (jit/conv/conv_gemm1x1_conf.h).
      // Grouped convs whose groups fill whole 16-channel blocks (alone or merged) as the
      // grouped family's; depthwise ones as the depthwise family's (exact integer sums in f32:
      // dw_conf.h).
      const bool int8_family =
          f.id == ConvFamily::gemm1x1 || f.id == ConvFamily::depthwise ||
          (f.id == ConvFamily::im2col && (p.kh != 1 || p.kw != 1) && p.groups == 1) ||
          (f.id == ConvFamily::grouped && (p.kh != 1 || p.kw != 1) &&
           convjit::int8_group_merge(p) > 0);
      const auto q8 = int8_family && !rw && isa == Isa::avx512 && host_cpu().avx512_vnni
                          ? conv_int8_params(n)
                          : nullptr;
      if (q8) {
        // Either side also in uint8 (nChw16c_u8): the input always is on a uint8 grid; the
        // output when it is a quantize-dequantize's and its residual, if any, is one too.
        // (A conv of at most 4 input channels also from NCHW, its K packed densely.)
        const bool adds = std::any_of(p.post.begin(), p.post.end(),
                                      [](const PostOp& o) { return o.kind == PostOp::Kind::add; });
        // (Depthwise reads only uint8: its input is never quantized on the way.)
        std::vector<Layout> srcs{Layout::nChw16c_u8}, dsts{Layout::nChw16c};
        if (f.id != ConvFamily::depthwise) srcs.insert(srcs.begin(), Layout::nChw16c);
        if (f.id == ConvFamily::im2col && p.ic <= 4) srcs.push_back(Layout::nchw);
        if (u8_output(n) && (!adds || q8->residual)) dsts.push_back(Layout::nChw16c_u8);
        const Label base = out.back();
        for (Layout s : srcs)
          for (Layout d : dsts) {
            out.push_back(base);
            out.back().conv.src = out.back().in = s;
            out.back().conv.dst = out.back().out = d;
            out.back().precision = Precision::int8;
          }
      }
    }
  } else if (jit && (n.op == "Gemm" || n.op == "MatMul" || n.op == "SoftmaxAttention")) {
    simple(LabelKind::fc, Layout::nchw);
    if (precision == Precision::bf16 && bf16_supported(isa) && !batched_matmul(g, n)) {
      simple(LabelKind::fc, Layout::nchw);
      out.back().precision = Precision::bf16;
    }
    // A QDQ model's Gemm / MatMul in int8 (marked: its input on a uint8 grid, its weights on
    // int8 grids; the same function).
    if (isa == Isa::avx512 && host_cpu().avx512_vnni && !batched_matmul(g, n) &&
        conv_int8_params(n)) {
      simple(LabelKind::fc, Layout::nchw);
      out.back().precision = Precision::int8;
    }
  } else if (jit && is_pool(n.op) && n.outputs.size() == 1 && is4d(g, n.in(0)) &&
             is4d(g, n.outputs[0]) && g.value(n.inputs[0]).dtype == DType::f32) {
    simple(LabelKind::pool, b);
    simple(LabelKind::pool, Layout::nhwc);
    // (bf16: each element widened to f32, f32 sums.)
    if (precision == Precision::bf16 && bf16_supported(isa))
      simple(LabelKind::pool, Layout::nChw16c_bf16);
    // (A MaxPool on a uint8 grid, of a QDQ model's int8 convs: the max of the bytes; the max
    // of grid values is one.)
    if (n.op == "MaxPool" && u8_output(n) && isa == Isa::avx512 && host_cpu().avx512_vnni)
      simple(LabelKind::pool, Layout::nChw16c_u8);
  } else if (jit && is_channel_concat(g, n)) {
    std::vector<Shape> shapes;
    for (ValueId v : n.inputs) shapes.push_back(g.value(v).shape);
    if (precision == Precision::bf16 && bf16_supported(isa) && !n.has("affine_scale") &&
        concat_blocked_ok(shapes, Layout::nChw16c_bf16))
      simple(LabelKind::concat, Layout::nChw16c_bf16);
    // (Inputs on one uint8 grid, of a QDQ model's int8 convs: whole blocks of bytes.)
    if (u8_output(n) && !n.has("affine_scale") && isa == Isa::avx512 && host_cpu().avx512_vnni &&
        concat_blocked_ok(shapes, Layout::nChw16c_u8))
      simple(LabelKind::concat, Layout::nChw16c_u8);
    simple(LabelKind::concat, b);
    simple(LabelKind::concat, Layout::nhwc);
    simple(LabelKind::concat, Layout::nchw);
  } else if (jit && n.op == "ChannelShuffle") {
    for (Layout l : {b, Layout::nhwc, Layout::nchw}) simple(LabelKind::shuffle, l);
  } else if (const auto lrn = jit ? lrn_problem(g, n) : std::nullopt) {
    // Across channels within a vector of them: AVX-512's lane shifts only.
    if (is4d(g, n.outputs[0]) && isa == Isa::avx512 && lrn_lanes_reach(*lrn)) {
      simple(LabelKind::norm, b);
      simple(LabelKind::norm, Layout::nhwc);
    }
    simple(LabelKind::norm, Layout::nchw);
  } else if (jit && norm_view(g, n)) {
    if (norm_view(g, n)->channels) {
      simple(LabelKind::norm, b);
      simple(LabelKind::norm, Layout::nhwc);
    }
    // Instance / GroupNorm of a 4-D tensor also on its blocks (make_norm declines groups
    // that straddle them).
    if ((n.op == "InstanceNormalization" || n.op == "GroupNormalization") && is4d(g, n.outputs[0]))
      simple(LabelKind::norm, b);
    if (norm_view(g, n)->inner == 1) simple(LabelKind::norm, Layout::nchw);
  } else if (jit && reduce_op(n.op)) {
    for (Layout l : {b, Layout::nhwc, Layout::nchw})
      if (reduce_view(g, n, l)) simple(LabelKind::reduce, l);
  } else if (jit && (is_flat_elementwise(g, n) || is_bcast(g, n))) {
    // Fewer than 4 dimensions have no layout but nchw.
    std::vector<Layout> ls{Layout::nchw};
    if (is4d(g, n.outputs[0])) ls = {b, Layout::nhwc, Layout::nchw};
    const LabelKind k = is_flat_elementwise(g, n) && eltwise_ops(g, n) ? LabelKind::eltwise
                        : is_bcast(g, n)                               ? LabelKind::bcast
                                                                       : LabelKind::ref;
    for (Layout l : ls)
      if (k != LabelKind::ref || l != Layout::nchw) simple(k, l);  // ref.nchw comes last
    // A QDQ model's quantize-dequantize may store its integers for int8 convs (nChw16c_u8).
    if (k == LabelKind::eltwise && n.op == "QuantizeDequantize" && is4d(g, n.outputs[0]) &&
        u8_output(n) && isa == Isa::avx512 && host_cpu().avx512_vnni) {
      simple(k, Layout::nChw16c);
      out.back().out = Layout::nChw16c_u8;
    }
  } else if (jit && transpose_view(g, n)) {
    if (const auto v = transpose_layout_view(g, n)) {
      simple(LabelKind::view, v->first);
      out.back().out = v->second;
    }
    simple(LabelKind::transpose, Layout::nchw);
  } else if (jit && subpixel_problem(g, n)) {
    simple(LabelKind::convt, Layout::nchw);
  } else if (jit && n.op == "GridSample" && is4d(g, n.in(0)) && is4d(g, n.in(1)) &&
             g.value(n.in(1)).dtype == DType::f32) {
    // Each input pixel's channels as whole vectors (the grid itself stays row-major).
    simple(LabelKind::resize, b);
    simple(LabelKind::resize, Layout::nhwc);
  } else if (jit && resize_jit(g, n)) {
    for (Layout l : {b, Layout::nhwc, Layout::nchw}) simple(LabelKind::resize, l);
  } else if (jit && pad_spec(g, n)) {
    const PadSpec p = *pad_spec(g, n);
    const bool hw_only = p.begin[0] == 0 && p.end[0] == 0 && p.begin[1] == 0 && p.end[1] == 0;
    if (is4d(g, n.in(0)) && (p.mode == "constant" || hw_only)) {
      if (blocked_channel_pads_ok(p.shape[1], p.begin[1], p.end[1], p.value, layout_block(b)))
        simple(LabelKind::pad, b);
      simple(LabelKind::pad, Layout::nhwc);
    }
    if (p.mode == "constant" || hw_only) simple(LabelKind::pad, Layout::nchw);
  } else if (jit && block_copy_problem(g, n)) {
    if (view_ok(g, n, Layout::nchw)) simple(LabelKind::view, Layout::nchw);
    simple(LabelKind::copy, Layout::nchw);
  } else if (jit && (gather_problem(g, n) || scatter_problem(g, n))) {
    simple(LabelKind::copy, Layout::nchw);
  } else if (jit && typed_problem(g, n)) {
    simple(LabelKind::typed, Layout::nchw);
  } else if (jit && (arg_problem(g, n) || topk_problem(g, n) || cumsum_problem(g, n))) {
    simple(LabelKind::arg, Layout::nchw);
  } else if (jit && recurrence_problem(g, n)) {
    simple(LabelKind::recurrence, Layout::nchw);
  } else if (jit && view_ok(g, n, Layout::nchw)) {
    for (Layout l : {b, Layout::nhwc, Layout::nchw})
      if (view_ok(g, n, l)) simple(LabelKind::view, l);
  }
  simple(LabelKind::ref, Layout::nchw);
  return out;
}

std::vector<Layout> input_layouts(const Graph& g, int i, const Label& l) {
  const Node& n = g.nodes[size_t(i)];
  std::vector<Layout> out(n.inputs.size(), Layout::nchw);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (!is4d(g, n.inputs[k]) || (n.op == "GridSample" && k == 1)) continue;  // (the grid)
    if (l.kind == LabelKind::conv) {
      // Slot 0 is the activation, 1/2 weights and bias (read by the kernel as constants),
      // later 4-D slots are fused residuals in the output's layout.
      out[k] = k == 0 ? l.conv.src : k >= 3 ? l.conv.dst : Layout::nchw;
    } else {
      out[k] = l.kind == LabelKind::bcast ? bcast_slot_layout(g, n, k, l.in) : l.in;
    }
  }
  return out;
}

std::vector<Layout> output_layouts(const Graph& g, int i, const Label& l) {
  const Node& n = g.nodes[size_t(i)];
  std::vector<Layout> out(n.outputs.size(), Layout::nchw);
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (is4d(g, n.outputs[k])) out[k] = l.kind == LabelKind::conv ? l.conv.dst : l.out;
  return out;
}

Instance instantiate(const Graph& g, int i, const Label& l, Isa isa, std::string* why_not) {
  const Node& n = g.nodes[size_t(i)];
  std::string why;
  Instance r;
  auto no = [&](const std::string& w) {
    if (why_not) *why_not = w;
    return Instance{};
  };
  const bool jit_isa = isa != Isa::scalar;
  switch (l.kind) {
    case LabelKind::conv: {
      if (!jit_isa) return no("no JIT on the scalar ISA");
      if (!conv_jit_ok(g, n, &why)) return no(why);
      ConvProblem p = ConvProblem::from_node(g, n);
      if (conv_runtime_weights(g, n)) {
        if (l.precision != Precision::f32) return no("computed weights: f32 only");
        r.kernel = create_conv_kernel_runtime_weights(p, l.conv, isa, &why);
        break;
      }
      const Value& w = g.value(n.inputs[1]);
      const Tensor* bias = p.bias ? &*g.value(n.inputs[2]).constant : nullptr;
      ConvImpl impl = l.conv;
      if (l.precision == Precision::int8 && !(impl.int8 = conv_int8_params(n)))
        return no("the conv's operands are not on int8 grids");
      r.kernel = create_conv_kernel(p, impl, isa, *w.constant, bias, &why);
      break;
    }
    case LabelKind::fc: {
      if (!jit_isa) return no("no JIT on the scalar ISA");
      const auto q8 = l.precision == Precision::int8 ? conv_int8_params(n) : nullptr;
      if (l.precision == Precision::int8 && !q8)
        return no("the node's operands are not on int8 grids");
      r.kernel = make_fc(g, n, isa, &why, l.precision == Precision::bf16, q8);
      break;
    }
    case LabelKind::pool: {
      if (!jit_isa) return no("no JIT on the scalar ISA");
      if (!is_pool(n.op) || !is4d(g, n.in(0)) || n.outputs.size() != 1 || !is4d(g, n.outputs[0]))
        return no("not a 4-D pooling node");
      const Shape& xs = g.value(n.inputs[0]).shape;
      const Shape& ys = g.value(n.outputs[0]).shape;
      if (auto pp = pool_problem(n, xs, ys)) r.kernel = create_pool_kernel(*pp, l.in, isa, &why);
      // (The C++ blocked pooling where the JIT refuses: e.g. 32-bit displacement limits.)
      if (!r.kernel && layout_block(l.in) > 1) r.kernel = make_blocked_pool_kernel(n, xs, ys, l.in);
      break;
    }
    case LabelKind::concat: {
      if (!jit_isa) return no("no JIT on the scalar ISA");
      if (!is_channel_concat(g, n)) return no("not a channel concat of 4-D tensors");
      std::vector<Shape> shapes;
      std::vector<int64_t> channels;
      for (ValueId v : n.inputs) {
        shapes.push_back(g.value(v).shape);
        channels.push_back(g.value(v).shape[1]);
      }
      std::optional<ConcatAffine> affine;
      if (n.has("affine_scale"))
        affine = ConcatAffine{n.attr_floats("affine_scale"), n.attr_floats("affine_shift"),
                              parse_post_ops(n, int(n.inputs.size()))};
      // (bf16 / u8: whole channel blocks copied; producers usually write their slices in
      // place.)
      if (!layout_bf16(l.in) && !layout_u8(l.in))
        r.kernel = create_concat_kernel(g.value(n.outputs[0]).shape, channels, l.in, isa, &why,
                                        affine ? &*affine : nullptr);
      if (!r.kernel && !affine && layout_block(l.in) > 1 && concat_blocked_ok(shapes, l.in))
        r.kernel = make_blocked_concat_kernel(shapes, l.in);
      break;
    }
    case LabelKind::eltwise: {
      if (!jit_isa) return no("no JIT on the scalar ISA");
      auto ops = is_flat_elementwise(g, n) ? eltwise_ops(g, n) : std::nullopt;
      if (!ops) return no("not a JIT elementwise op");
      if (l.out != l.in) {  // a quantize-dequantize storing its integers: the u8 conversion
        const auto q = u8_output(n);
        if (n.op != "QuantizeDequantize" || !q || !layout_u8(l.out) || l.in != Layout::nChw16c ||
            !is4d(g, n.outputs[0]))
          return no("only a quantize-dequantize writes nChw16c_u8 from nChw16c");
        r.kernel = create_u8_convert_kernel(g.value(n.outputs[0]).shape, l.in, l.out, *q, &why);
        break;
      }
      r.kernel =
          create_eltwise_kernel(value_bytes(g.value(n.outputs[0]), l.in) / 4, *ops, isa, &why);
      break;
    }
    case LabelKind::shuffle:
      if (!jit_isa || n.op != "ChannelShuffle") return no("not a ChannelShuffle on a JIT ISA");
      r.kernel = create_channel_shuffle_kernel(
          g.value(n.inputs[0]).shape, ChannelShuffleSpec::from_node(g, n), l.in, isa, &why);
      break;
    case LabelKind::norm:
      if (!jit_isa) return no("no JIT on the scalar ISA");
      r.kernel = make_norm(g, n, l.in, isa, &why);
      break;
    case LabelKind::view:
      if (l.in == l.out ? !view_ok(g, n, l.in)
                        : transpose_layout_view(g, n) != std::pair{l.in, l.out})
        return no("not a view in layout " + l.key());
      r.kernel = std::make_unique<ViewKernel>(l.in);
      return r;
    case LabelKind::bcast:
      if (!jit_isa) return no("no JIT on the scalar ISA");
      r.kernel = make_bcast(g, n, l.in, isa, &why);
      break;
    case LabelKind::transpose: {
      const auto t = transpose_view(g, n);
      if (!jit_isa || !t || l.in != Layout::nchw) return no("not a Transpose in nchw on a JIT ISA");
      r.kernel = create_transpose_kernel(t->in, t->perm, isa, &why);
      break;
    }
    case LabelKind::resize: {
      if (n.op == "GridSample") {
        if (!jit_isa) return no("no JIT on the scalar ISA");
        r.kernel = create_grid_sample_kernel(g.value(n.inputs[0]).shape, g.value(n.inputs[1]).shape,
                                             grid_sample_spec(n), l.in, isa, &why);
        break;
      }
      const auto rz = jit_isa ? resize_jit(g, n) : std::nullopt;
      if (!rz) return no("not a 4-D H/W Resize on a JIT ISA");
      r.kernel =
          create_resize_kernel(g.value(n.inputs[0]).shape, rz->h, rz->w, rz->mode, l.in, isa, &why);
      break;
    }
    case LabelKind::pad: {
      const auto p = pad_spec(g, n);
      if (!jit_isa || !p || (l.in != Layout::nchw && !is4d(g, n.in(0))))
        return no("not a Pad of constant pads in " + l.key() + " on a JIT ISA");
      r.kernel = create_pad_kernel(p->shape, p->begin, p->end, p->value, l.in, isa, &why, p->mode);
      break;
    }
    case LabelKind::reduce: {
      const auto v = reduce_view(g, n, l.in);
      if (!jit_isa || !v || l.in != l.out)
        return no("not a Reduce* over contiguous dims of " + l.key() + " on a JIT ISA");
      r.kernel = create_reduce_kernel(v->op, v->outer, v->c, v->inner, isa, &why);
      break;
    }
    case LabelKind::copy: {
      const auto p = block_copy_problem(g, n);
      if (const auto q = p ? std::nullopt : gather_problem(g, n); q && jit_isa) {
        if (l.in != Layout::nchw) return no("a gather runs in nchw");
        r.kernel = create_gather_kernel(*q, &why);
        break;
      }
      if (const auto q = p ? std::nullopt : scatter_problem(g, n); q && jit_isa) {
        if (l.in != Layout::nchw) return no("a scatter runs in nchw");
        r.kernel = create_scatter_kernel(*q, &why);
        break;
      }
      if (!jit_isa || !p || l.in != Layout::nchw)
        return no("not a one-axis Slice / Gather / Concat in nchw on a JIT ISA");
      std::string op = n.op;
      std::transform(op.begin(), op.end(), op.begin(),
                     [](char c) { return char(std::tolower(c)); });
      r.kernel = create_block_copy_kernel(*p, op, &why);
      break;
    }
    case LabelKind::typed: {
      const auto p = jit_isa ? typed_problem(g, n) : std::nullopt;
      if (!p || l.in != Layout::nchw) return no("not a typed elementwise op in nchw on a JIT ISA");
      r.kernel = create_typed_eltwise_kernel(*p, isa, &why);
      break;
    }
    case LabelKind::arg: {
      if (!jit_isa || l.in != Layout::nchw) return no("not in nchw on a JIT ISA");
      if (const auto p = arg_problem(g, n))
        r.kernel = create_arg_reduce_kernel(*p, isa, &why);
      else if (const auto t = topk_problem(g, n))
        r.kernel = create_topk_kernel(*t, isa, &why);
      else if (const auto c = cumsum_problem(g, n))
        r.kernel = create_cumsum_kernel(*c, isa, &why);
      else
        return no("not an ArgMax / ArgMin / Hardmax / TopK / CumSum");
      break;
    }
    case LabelKind::recurrence: {
      const auto p = jit_isa ? recurrence_problem(g, n) : std::nullopt;
      if (!p || l.in != Layout::nchw) return no("not a Recurrence with constant R on a JIT ISA");
      r.kernel = create_recurrence_kernel(*p, isa, &why);
      break;
    }
    case LabelKind::convt: {
      const auto p = subpixel_problem(g, n);
      if (!jit_isa || !p || l.in != Layout::nchw)
        return no("not a SubpixelInterleave in nchw on a JIT ISA");
      r.kernel = create_subpixel_kernel(*p, isa, &why);
      break;
    }
    case LabelKind::ref:
      if (l.in != Layout::nchw && !is_flat_elementwise(g, n))
        return no("only elementwise ops run on a non-NCHW layout with reference kernels");
      if (l.in != l.out) return no("reference labels keep the layout");
      r.kernel = make_ref(g, n, l.in);
      return r;
  }
  if (!r.kernel) return no(why.empty() ? "not applicable" : why);
  return r;
}

std::string node_problem(const Graph& g, int i) {
  const Node& n = g.nodes[size_t(i)];
  if (n.op == "Conv") {
    std::string why;
    if (conv_jit_ok(g, n, &why))
      return "conv:" + ConvProblem::from_node(g, n).str() +
             (conv_runtime_weights(g, n) ? "|runtime_weights" : "");
  }
  std::string s = n.op + ":";
  for (ValueId v : n.inputs) {
    if (v == kNoValue) {
      s += "_;";
      continue;
    }
    const Value& val = g.value(v);
    s += std::string(dtype_name(val.dtype)) + shape_str(val.shape) + (val.is_const() ? "c" : "");
    // A constant scalar changes the code (Pow's exponent picks x * x or exp/log).
    if (val.is_const() && val.dtype == DType::f32 && val.constant->numel() == 1)
      s += fmt::format("={}", val.constant->data<float>()[0]);
    s += ";";
  }
  s += ">";
  for (ValueId v : n.outputs)
    if (v != kNoValue) s += shape_str(g.value(v).shape) + ";";
  // Attributes in the node's (deterministic, canonicalised) order. Long float lists (a fused
  // per-channel affine map) are values that do not change the time: only their length counts.
  for (const auto& [name, a] : n.attrs)
    s += name + "=" +
         (a.kind == Attribute::Kind::floats && a.floats.size() > 8
              ? "floats" + std::to_string(a.floats.size())
              : attr_str(a)) +
         ";";
  return s;
}

double heuristic_ms(const Graph& g, int i, const Label& l, Isa isa, int threads) {
  const Node& n = g.nodes[size_t(i)];
  if (l.kind == LabelKind::view) return 0;  // exact: no step runs
  int64_t bytes = 0;
  for (ValueId v : n.inputs)
    if (v != kNoValue) bytes += value_bytes(g.value(v), l.in);
  for (ValueId v : n.outputs)
    if (v != kNoValue) bytes += value_bytes(g.value(v), l.out);
  const double gbps = 12.0 * (threads > 1 ? 1.6 : 1.0);
  const double mem_ms = double(bytes) / (gbps * 1e6);
  const double peak = peak_gflops(isa, threads);
  if (l.kind == LabelKind::conv) {
    const ConvProblem p = ConvProblem::from_node(g, n);
    const ConvFamilyRow& f = conv_family(l.conv.family);
    const bool int8 = l.precision == Precision::int8 && l.conv.family != ConvFamily::depthwise;
    double efficiency = f.efficiency(p, l.conv.src, l.conv.dst);
    // (An int8 im2col conv is the 1x1 kernel reading its windows in place, im2row without an
    // im2col copy: the 1x1's rate where that is higher than im2col's - not for a first layer's
    // few channels, which it packs densely along K. Priced at im2col's alone, it lost to f32
    // Winograd on wide maps: bench/NOTES.md, session 51.)
    if (int8 && l.conv.family == ConvFamily::im2col)
      efficiency = std::max(efficiency,
                            conv_family(ConvFamily::gemm1x1).efficiency(p, l.conv.src, l.conv.dst));
    double compute_ms = 2 * p.macs() / (peak * efficiency * 1e6);
    // (int8: vpdpbusd does 4x an FMA's multiply-adds; the conversion of the sums takes part
    // of it back, and an f32 input's quantization pass reads it once more. Depthwise int8
    // computes in f32: only its bytes shrink.)
    if (int8) {
      compute_ms /= 2.5;
      if (!layout_u8(l.conv.src))
        compute_ms += double(value_bytes(g.value(n.in(0)), l.in)) / (gbps * 1e6);
    }
    return f.memory_bound ? mem_ms + compute_ms : std::max(mem_ms, compute_ms);
  }
  if (l.kind == LabelKind::fc) {
    double ms = mem_ms + 0.002;
    if (l.precision != Precision::f32)  // half (bf16) or a quarter (int8) of the weight bytes
      for (ValueId v : n.inputs)
        if (v != kNoValue && g.value(v).is_const())
          ms -= (l.precision == Precision::bf16 ? 0.5 : 0.75) *
                double(value_bytes(g.value(v), l.in)) / (gbps * 1e6);
    return ms;
  }
  if (l.kind == LabelKind::ref) {
    double flops = 0;
    if (n.op == "Conv") flops = 2 * ConvProblem::from_node(g, n).macs();
    return 0.005 + mem_ms * 8 + flops / (3.0 * 1e6);
  }
  return 0.002 + mem_ms;
}

double heuristic_reorder_ms(const Shape& s, Layout from, Layout to, int threads) {
  const double bytes = double(std::max(layout_elems(from, s), layout_elems(to, s))) *
                       (layout_esize(from) + layout_esize(to));
  return 0.003 + bytes / (8.0 * (threads > 1 ? 1.6 : 1.0) * 1e6);
}

}  // namespace kiln
