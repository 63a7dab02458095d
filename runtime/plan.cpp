#include "runtime/plan.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <map>
#include <optional>

#include "graph/post_ops.h"
#include "jit/conv/conv_kernel.h"
#include "jit/dw/dw_kernel.h"
#include "jit/glue/glue.h"
#include "jit/gemm/fc_kernel.h"
#include "runtime/glue_kernels.h"

namespace kiln {
namespace {

bool is_unary_elementwise(const std::string& op) {
  static const char* ops[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip",
                              "HardSigmoid", "HardSwish"};
  for (const char* o : ops)
    if (op == o) return true;
  return false;
}

bool is_binary_elementwise(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
}

class Lowering {
 public:
  Lowering(const Graph& g, const PlanOptions& o) : g_(g), o_(o) {
    blocked_ = o.isa == Isa::avx512 ? Layout::nChw16c : Layout::nChw8c;
    jit_ = !o.reference && o.isa != Isa::scalar;
  }

  Plan run() {
    for (size_t i = 0; i < g_.values.size(); ++i)
      if (g_.values[i].is_const()) add_tensor(ValueId(i), Layout::nchw, true);
    for (ValueId v : g_.inputs) plan_.inputs.push_back(add_tensor(v, Layout::nchw, true));
    for (size_t i = 0; i < g_.nodes.size(); ++i) lower(int(i));
    for (ValueId v : g_.outputs) {
      int t = get(v, Layout::nchw);
      plan_.outputs.push_back(t);
      plan_.tensors[size_t(t)].offset = -1;  // the caller's buffer
    }
    assign_offsets();
    add_dependencies();
    return std::move(plan_);
  }

 private:
  // Arena offsets from liveness: a tensor lives from the step writing it to the last step
  // reading it; tensors whose lifetimes overlap never share bytes. Greedy by size (largest
  // first, lowest fitting offset), which is near-optimal on CNN chains.
  void assign_offsets() {
    const size_t nt = plan_.tensors.size();
    std::vector<int> first(nt, INT32_MAX), last(nt, -1);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      for (int t : plan_.steps[i].dst)
        if (t >= 0) first[size_t(t)] = std::min(first[size_t(t)], int(i)), last[size_t(t)] = std::max(last[size_t(t)], int(i));
      for (int t : plan_.steps[i].src)
        if (t >= 0) last[size_t(t)] = std::max(last[size_t(t)], int(i));
    }
    std::vector<int> order;
    for (size_t t = 0; t < nt; ++t)
      if (plan_.tensors[t].offset == -2) {
        order.push_back(int(t));
        plan_.naive_bytes += round_up(plan_.tensors[t].bytes, 64);
      }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return plan_.tensors[size_t(a)].bytes > plan_.tensors[size_t(b)].bytes;
    });
    struct Placed {
      int64_t off, end;
      int first, last;
    };
    std::vector<Placed> placed;
    int64_t peak = 0;
    for (int t : order) {
      const int64_t size = round_up(plan_.tensors[size_t(t)].bytes, 64);
      const int f = first[size_t(t)], l = std::max(last[size_t(t)], f);
      // Address ranges taken by tensors alive at the same time, sorted by offset.
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const Placed& p : placed)
        if (p.first <= l && f <= p.last) busy.push_back({p.off, p.end});
      std::sort(busy.begin(), busy.end());
      int64_t off = 0;
      for (const auto& [b, e] : busy) {
        if (off + size <= b) break;
        off = std::max(off, e);
      }
      plan_.tensors[size_t(t)].offset = off;
      placed.push_back({off, off + size, f, l});
      peak = std::max(peak, off + size);
    }
    plan_.arena_bytes = peak;
  }

  void add_dependencies() {
    const size_t nt = plan_.tensors.size();
    std::vector<int> writer(nt, -1);
    std::vector<std::vector<int>> users(nt);  // steps reading or writing each tensor
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      for (int t : plan_.steps[i].dst)
        if (t >= 0) writer[size_t(t)] = int(i), users[size_t(t)].push_back(int(i));
      for (int t : plan_.steps[i].src)
        if (t >= 0) users[size_t(t)].push_back(int(i));
    }
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      Step& s = plan_.steps[i];
      std::vector<int> d;
      for (int t : s.src)
        if (t >= 0 && writer[size_t(t)] >= 0 && writer[size_t(t)] != int(i)) d.push_back(writer[size_t(t)]);
      for (int t : s.dst) {
        if (t < 0 || plan_.tensors[size_t(t)].offset < 0) continue;
        const PlanTensor& b = plan_.tensors[size_t(t)];
        for (size_t a = 0; a < nt; ++a) {
          const PlanTensor& pa = plan_.tensors[a];
          if (int(a) == t || pa.offset < 0) continue;
          if (pa.offset >= b.offset + round_up(b.bytes, 64) || b.offset >= pa.offset + round_up(pa.bytes, 64))
            continue;  // disjoint bytes
          for (int u : users[a])
            if (u < int(i)) d.push_back(u);  // earlier users of the reused bytes
        }
      }
      std::sort(d.begin(), d.end());
      d.erase(std::unique(d.begin(), d.end()), d.end());
      s.deps = std::move(d);
    }
  }

  bool is4d(ValueId v) const { return g_.value(v).shape.size() == 4; }

  // external: constants and graph inputs live outside the arena.
  int add_tensor(ValueId v, Layout l, bool external = false) {
    const Value& val = g_.value(v);
    PlanTensor t;
    t.value = v;
    t.layout = val.shape.size() == 4 ? l : Layout::nchw;
    t.bytes = (val.shape.size() == 4 ? layout_elems(t.layout, val.shape) : shape_numel(val.shape)) *
              int64_t(dtype_size(val.dtype));
    t.offset = external ? -1 : -2;  // -2: to be placed in the arena
    plan_.tensors.push_back(t);
    int id = int(plan_.tensors.size()) - 1;
    have_[{v, t.layout}] = id;
    return id;
  }

  bool available(ValueId v, Layout l) const {
    if (!is4d(v)) l = Layout::nchw;
    return have_.count({v, l}) != 0;
  }

  // The plan tensor holding v in layout l, converting from another layout if needed.
  int get(ValueId v, Layout l) {
    if (v == kNoValue) return -1;
    if (!is4d(v)) l = Layout::nchw;
    auto it = have_.find({v, l});
    if (it != have_.end()) return it->second;
    for (Layout from : {Layout::nchw, Layout::nChw16c, Layout::nChw8c, Layout::nhwc}) {
      auto f = have_.find({v, from});
      if (f == have_.end()) continue;
      int src = f->second;
      int dst = add_tensor(v, l);
      Step s;
      std::string why;
      if (jit_) s.kernel = create_reorder_kernel(g_.value(v).shape, from, l, o_.isa, &why);
      if (!s.kernel) s.kernel = make_reorder_kernel(g_.value(v).shape, from, l);
      s.src = {src};
      s.dst = {dst};
      plan_.steps.push_back(std::move(s));
      ++plan_.reorders;
      return dst;
    }
    fail(Code::internal, "value '" + g_.value(v).name + "' is used before it is computed");
  }

  void push(int node, std::unique_ptr<Kernel> k, std::vector<int> src, std::vector<int> dst,
            bool jit) {
    Step s;
    s.kernel = std::move(k);
    s.src = std::move(src);
    s.dst = std::move(dst);
    s.node = node;
    plan_.steps.push_back(std::move(s));
    plan_.jit_steps += jit;
  }

  void lower(int i) {
    const Node& n = g_.nodes[size_t(i)];
    if (jit_ && n.op == "Conv" && lower_conv(i)) return;
    if (jit_ && (n.op == "Gemm" || n.op == "MatMul") && lower_fc(i)) return;
    if (jit_ && lower_blocked(i)) return;
    lower_ref(i, Layout::nchw, false);
  }

  bool lower_conv(int i) {
    const Node& n = g_.nodes[size_t(i)];
    ConvProblem p = ConvProblem::from_node(g_, n);
    const bool depthwise = p.groups == p.ic && p.groups == p.oc && p.groups > 1;
    if (p.groups != 1 && !depthwise) return false;
    const Value& w = g_.value(n.inputs[1]);
    if (!w.is_const()) return false;
    const Tensor* bias = p.bias ? &*g_.value(n.inputs[2]).constant : nullptr;
    if (p.bias && !g_.value(n.inputs[2]).is_const()) return false;
    // Fixed rule until the solver exists: 1x1 without padding -> GEMM microkernel, else direct;
    // a few-channel input still in NCHW (the first layer) is read as NCHW directly.
    std::vector<ConvImpl> tries;
    if (depthwise) tries.push_back({ConvFamily::depthwise, blocked_, blocked_});
    bool one_by_one = p.kh == 1 && p.kw == 1 && p.pt == 0 && p.pl == 0 && p.pb == 0 && p.pr == 0;
    ValueId x = n.inputs[0];
    bool plain_first = p.ic <= 4 && !available(x, blocked_);
    if (one_by_one && !depthwise) tries.push_back({ConvFamily::gemm1x1, blocked_, blocked_});
    if (plain_first && !depthwise) tries.push_back({ConvFamily::direct, Layout::nchw, blocked_});
    if (!depthwise) tries.push_back({ConvFamily::direct, blocked_, blocked_});
    for (const ConvImpl& impl : tries) {
      std::string why;
      auto k = impl.family == ConvFamily::depthwise
                   ? create_depthwise_kernel(p, impl, o_.isa, *w.constant, bias, &why)
                   : create_conv_kernel(p, impl, o_.isa, *w.constant, bias, &why);
      if (!k) {
        spdlog::debug("{}: {} conv not applicable: {}", n.where(), conv_family_name(impl.family), why);
        continue;
      }
      std::vector<int> src(n.inputs.size(), -1);
      src[0] = get(x, impl.src);
      for (const PostOp& op : p.post) {
        if (op.kind == PostOp::Kind::add) src[size_t(op.input)] = get(n.inputs[size_t(op.input)], impl.dst);
        if (op.kind == PostOp::Kind::scale_shift) {
          src[size_t(op.input)] = get(n.inputs[size_t(op.input)], Layout::nchw);
          src[size_t(op.input) + 1] = get(n.inputs[size_t(op.input) + 1], Layout::nchw);
        }
      }
      int dst = add_tensor(n.outputs[0], impl.dst);
      spdlog::debug("{}: {} [{}]", n.where(), k->name(), p.str());
      push(i, std::move(k), src, {dst}, true);
      return true;
    }
    return false;
  }

  // Gemm (transA = 0, constant B, C absent or a per-column [N] / [1, N] constant) and MatMul
  // with a constant 2-D right operand: the JIT FC kernel (a GEMV at batch 1).
  bool lower_fc(int i) {
    const Node& n = g_.nodes[size_t(i)];
    const bool gemm = n.op == "Gemm";
    if (n.inputs.size() < 2 || !g_.value(n.inputs[1]).is_const()) return false;
    const Value& a = g_.value(n.inputs[0]);
    const Value& w = g_.value(n.inputs[1]);
    if (a.dtype != DType::f32 || w.shape.size() != 2 || a.shape.empty()) return false;
    if (gemm && n.attr_i("transA", 0) != 0) return false;
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
        const Value& cv = g_.value(c);
        const bool row = cv.shape == Shape{p.n} || cv.shape == Shape{1, p.n};
        if (!cv.is_const() || !row || cv.dtype != DType::f32) return false;
        const float beta = n.attr_f("beta", 1.f);
        bias = Tensor(DType::f32, {p.n});
        for (int64_t j = 0; j < p.n; ++j) bias->data<float>()[j] = beta * cv.constant->data<float>()[j];
        p.bias = true;
      }
    } else if (n.has("post_ops")) {
      return false;
    }
    std::string why;
    auto k = create_fc_kernel(p, o_.isa, *w.constant, trans_b, gemm ? n.attr_f("alpha", 1.f) : 1.f,
                              bias ? &*bias : nullptr, &why);
    if (!k) {
      spdlog::debug("{}: fc not applicable: {}", n.where(), why);
      return false;
    }
    std::vector<int> src(n.inputs.size(), -1);
    src[0] = get(n.inputs[0], Layout::nchw);
    for (const PostOp& op : p.post) {
      if (op.input < 0) continue;  // relu, clip, ...: no tensor operand
      src[size_t(op.input)] = get(n.inputs[size_t(op.input)], Layout::nchw);
      if (op.kind == PostOp::Kind::scale_shift)
        src[size_t(op.input) + 1] = get(n.inputs[size_t(op.input) + 1], Layout::nchw);
    }
    push(i, std::move(k), src, {add_tensor(n.outputs[0], Layout::nchw)}, true);
    return true;
  }

  // Ops that run on a blocked layout without conversion when their input already is blocked.
  bool lower_blocked(int i) {
    const Node& n = g_.nodes[size_t(i)];
    if (n.inputs.empty() || n.in(0) == kNoValue || !is4d(n.inputs[0]) ||
        g_.value(n.inputs[0]).dtype != DType::f32 || !available(n.inputs[0], blocked_))
      return false;
    const Shape& xs = g_.value(n.inputs[0]).shape;
    if (n.outputs.size() == 1 && is4d(n.outputs[0])) {
      const Shape& ys = g_.value(n.outputs[0]).shape;
      std::unique_ptr<Kernel> pool;
      if (auto pp = pool_problem(n, xs, ys)) {
        std::string why;
        pool = create_pool_kernel(*pp, blocked_, o_.isa, &why);
        if (!pool) spdlog::debug("{}: JIT pooling not applicable: {}", n.where(), why);
      }
      if (!pool) pool = make_blocked_pool_kernel(n, xs, ys, blocked_);
      if (pool) {
        int src = get(n.inputs[0], blocked_);
        push(i, std::move(pool), {src}, {add_tensor(n.outputs[0], blocked_)}, true);
        return true;
      }
      if (n.op == "Concat" && n.attr_i("axis", 0) % 4 == 1) {
        std::vector<Shape> shapes;
        std::vector<int64_t> channels;
        for (ValueId v : n.inputs) {
          shapes.push_back(g_.value(v).shape);
          channels.push_back(g_.value(v).shape.size() == 4 ? g_.value(v).shape[1] : 0);
        }
        std::string why;
        auto k = create_concat_kernel(ys, channels, blocked_, o_.isa, &why);
        if (!k && concat_blocked_ok(shapes, blocked_)) k = make_blocked_concat_kernel(shapes, blocked_);
        if (!k) return false;
        std::vector<int> src;
        for (ValueId v : n.inputs) src.push_back(get(v, blocked_));
        push(i, std::move(k), src, {add_tensor(n.outputs[0], blocked_)}, true);
        return true;
      }
    }
    bool flat = is_unary_elementwise(n.op);
    if (is_binary_elementwise(n.op) && n.inputs.size() == 2) {
      flat = g_.value(n.inputs[1]).shape == xs;
    }
    if (!flat) return false;
    if (lower_eltwise(i)) return true;
    lower_ref(i, blocked_, true);
    return true;
  }

  // The node as a PostOp chain for the JIT elementwise kernel, if it is one.
  std::optional<std::vector<PostOp>> eltwise_ops(const Node& n) const {
    PostOp op;
    if (n.op == "Relu") {
      op.kind = PostOp::Kind::relu;
    } else if (n.op == "LeakyRelu") {
      op.kind = PostOp::Kind::leaky_relu;
      op.alpha = n.attr_f("alpha", 0.01f);
    } else if (n.op == "Sigmoid") {
      op.kind = PostOp::Kind::sigmoid;
    } else if (n.op == "HardSwish") {
      op.kind = PostOp::Kind::hardswish;
    } else if (n.op == "HardSigmoid") {
      op.kind = PostOp::Kind::hardsigmoid;
      op.alpha = n.attr_f("alpha", 0.2f);
      op.beta = n.attr_f("beta", 0.5f);
    } else if (n.op == "Clip") {
      op.kind = PostOp::Kind::clip;
      const float inf = std::numeric_limits<float>::infinity();
      auto bound = [&](size_t k, float def, float* out) {
        ValueId v = n.in(k);
        if (v == kNoValue) return *out = def, true;
        const Value& val = g_.value(v);
        if (!val.is_const() || val.constant->numel() != 1) return false;
        *out = val.constant->data<float>()[0];
        return true;
      };
      if (!bound(1, -inf, &op.alpha) || !bound(2, inf, &op.beta)) return std::nullopt;
    } else if (n.op == "Add") {
      op.kind = PostOp::Kind::add;
      op.input = 1;
    } else {
      return std::nullopt;
    }
    return std::vector<PostOp>{op};
  }

  // A standalone elementwise op on a blocked buffer through the JIT elementwise kernel.
  bool lower_eltwise(int i) {
    const Node& n = g_.nodes[size_t(i)];
    auto ops = eltwise_ops(n);
    if (!ops) return false;
    const int in0 = get(n.inputs[0], blocked_);
    const int64_t elems = plan_.tensors[size_t(in0)].bytes / 4;
    std::string why;
    auto k = create_eltwise_kernel(elems, *ops, o_.isa, &why);
    if (!k) {
      spdlog::debug("{}: JIT elementwise not applicable: {}", n.where(), why);
      return false;
    }
    std::vector<int> src = {in0};
    if (n.op == "Add") src.push_back(get(n.inputs[1], blocked_));
    push(i, std::move(k), src, {add_tensor(n.outputs[0], blocked_)}, true);
    return true;
  }

  std::optional<PoolProblem> pool_problem(const Node& n, const Shape& xs, const Shape& ys) const {
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

  // Reference kernel. With `flat`, 4-D same-shape operands are viewed as 1-D over the blocked
  // buffer (pad lanes included), which is exact for elementwise ops.
  void lower_ref(int i, Layout l, bool flat) {
    const Node& n = g_.nodes[size_t(i)];
    std::vector<int> src, dst;
    std::vector<Shape> is, os;
    std::vector<DType> it, ot;
    auto view = [&](ValueId v, int t) {
      const Value& val = g_.value(v);
      if (flat && val.shape.size() == 4) return Shape{plan_.tensors[size_t(t)].bytes / 4};
      return val.shape;
    };
    for (ValueId v : n.inputs) {
      int t = v == kNoValue ? -1 : get(v, flat && is4d(v) ? l : Layout::nchw);
      src.push_back(t);
      is.push_back(v == kNoValue ? Shape{} : view(v, t));
      it.push_back(v == kNoValue ? DType::f32 : g_.value(v).dtype);
    }
    for (ValueId v : n.outputs) {
      int t = v == kNoValue ? -1 : add_tensor(v, flat && is4d(v) ? l : Layout::nchw);
      dst.push_back(t);
      os.push_back(v == kNoValue ? Shape{} : view(v, t));
      ot.push_back(v == kNoValue ? DType::f32 : g_.value(v).dtype);
    }
    push(i, make_ref_kernel(n, is, it, os, ot), src, dst, false);
  }

  const Graph& g_;
  PlanOptions o_;
  Layout blocked_;
  bool jit_;
  Plan plan_;
  std::map<std::pair<ValueId, Layout>, int> have_;
};

}  // namespace

Plan build_plan(const Graph& g, const PlanOptions& o) { return Lowering(g, o).run(); }

}  // namespace kiln
