#include "runtime/plan.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "jit/glue/glue.h"
#include "runtime/glue_kernels.h"
#include "runtime/int8_conv.h"
#include "runtime/labels.h"
#include "runtime/log.h"
#include "runtime/memory_plan.h"
#include "runtime/selection.h"
#include "runtime/separable.h"

namespace kiln {
namespace {

class Lowering {
 public:
  Lowering(const Graph& g, const PlanOptions& o, Selection& sel)
      : g_(g), o_(o), sel_(sel), producer_(g.producers()) {
    jit_ = !o.reference && o.isa != Isa::scalar;
  }

  Plan run() {
    for (size_t i = 0; i < g_.values.size(); ++i)
      if (g_.values[i].is_const()) add_tensor(ValueId(i), Layout::nchw, true);
    for (ValueId v : g_.inputs) plan_.inputs.push_back(add_tensor(v, Layout::nchw, true));
    if (jit_) plan_inplace_concats();
    for (size_t i = 0; i < g_.nodes.size(); ++i) lower(int(i));
    if (jit_ && !sel_.separable.empty()) fuse_separable();
    for (ValueId v : g_.outputs) {
      int t = get(v, Layout::nchw);
      plan_.outputs.push_back(t);
      plan_.tensors[size_t(t)].offset = -1;  // the caller's buffer
    }
    plan_memory(&plan_);
    return std::move(plan_);
  }

 private:
  bool is4d(ValueId v) const { return g_.value(v).shape.size() == 4; }

  // In-place concat: a channel Concat at batch 1 whose every input is produced by a node
  // writing the concat's layout, is no graph output, appears once among the concat's inputs
  // and starts at a channel that is a multiple of the layout's block. At batch 1 each input's
  // slice of the output is then one contiguous byte range, so the producer writes straight
  // into it (its output tensor is a view of the concat's) and the concat step disappears.
  // Other readers of an input (GhostNet's 1x1 output also feeds the cheap depthwise conv) read
  // the slice: liveness is per root (memory_plan.cpp), so the concat's bytes outlive them.
  void plan_inplace_concats() {
    std::vector<int> producer(g_.values.size(), -1), slot(g_.values.size(), -1);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      for (size_t k = 0; k < g_.nodes[i].outputs.size(); ++k)
        if (g_.nodes[i].outputs[k] != kNoValue)
          producer[size_t(g_.nodes[i].outputs[k])] = int(i),
          slot[size_t(g_.nodes[i].outputs[k])] = int(k);
    }
    for (size_t c = 0; c < g_.nodes.size(); ++c) {
      const Node& n = g_.nodes[c];
      const Label& l = sel_.nodes[c].label;
      // (A Concat carrying a fused BatchNormalization, graph/fuse.cpp, computes: it must run.)
      if (l.kind != LabelKind::concat || l.in == Layout::nhwc || n.outputs.size() != 1 ||
          n.has("affine_scale"))
        continue;
      const Shape& ys = g_.value(n.outputs[0]).shape;
      if (ys.size() != 4 || ys[0] != 1) continue;
      std::vector<std::pair<ValueId, int64_t>> views;
      int64_t ch = 0;
      bool ok = true;
      for (ValueId v : n.inputs) {
        const int p = producer[size_t(v)];
        const bool again =
            std::any_of(views.begin(), views.end(), [&](const auto& w) { return w.first == v; });
        // (A view node's output already aliases its input: it cannot also be a slice.)
        ok = ok && p >= 0 && !g_.is_output(v) && !again && ch % layout_block(l.in) == 0 &&
             !view_.count(v) && sel_.nodes[size_t(p)].label.kind != LabelKind::view &&
             output_layouts(g_, p, sel_.nodes[size_t(p)].label)[size_t(slot[size_t(v)])] == l.in;
        if (!ok) break;
        views.push_back({v, layout_offset(l.in, ys, 0, ch, 0, 0) * layout_esize(l.in)});
        ch += g_.value(v).shape[1];
      }
      if (!ok) continue;
      for (const auto& [v, off] : views) view_[v] = {n.outputs[0], l.in, off};
      inplace_.insert(int(c));
    }
  }

  // external: constants and graph inputs live outside the arena.
  int add_tensor(ValueId v, Layout l, bool external = false) {
    const Value& val = g_.value(v);
    PlanTensor t;
    t.value = v;
    t.layout = val.shape.size() == 4 ? l : Layout::nchw;
    t.bytes = value_bytes(val, t.layout);
    t.offset = external ? -1 : -2;  // -2: to be placed in the arena
    auto view = view_.find(v);
    if (view != view_.end() && view->second.layout == t.layout) {
      // Written in place into its slice of a concat output (created here on first need).
      auto parent = have_.find({view->second.whole, view->second.layout});
      t.parent = parent != have_.end() ? parent->second
                                       : add_tensor(view->second.whole, view->second.layout);
      t.parent_offset = view->second.offset;
    }
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
    // (A bf16 / u8 target from nChw16c first, a bf16 / u8 source last: the pairs converted in
    // one step.)
    const bool narrow = layout_bf16(l) || layout_u8(l);
    for (Layout from : {narrow ? Layout::nChw16c : Layout::nchw, Layout::nchw, Layout::nChw16c,
                        Layout::nChw8c, Layout::nhwc, Layout::nChw16c_bf16, Layout::nChw16c_u8}) {
      auto f = have_.find({v, from});
      if (f == have_.end()) continue;
      int src = f->second;
      if (layout_via_nChw16c(from, l)) {  // two steps (the solver priced both)
        src = get(v, Layout::nChw16c);
        from = Layout::nChw16c;
      }
      // (A uint8 side: the value's grid; the solver offers u8 only for values that have one.)
      std::optional<U8Quant> q;
      if (layout_u8(from) || layout_u8(l)) {
        q = u8_value(g_, producer_, v);
        if (!q)
          fail(Code::internal, "value '" + g_.value(v).name + "' has no uint8 grid to convert on");
      }
      const U8Quant* qp = q ? &*q : nullptr;
      int dst = add_tensor(v, l);
      Step s;
      std::string why;
      if (jit_) s.kernel = create_reorder_kernel(g_.value(v).shape, from, l, o_.isa, &why, qp);
      if (!s.kernel) s.kernel = make_reorder_kernel(g_.value(v).shape, from, l, qp);
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
    if (inplace_.count(i)) {
      ++plan_.inplace_concats;  // its producers already wrote every slice
      return;
    }
    const Node& n = g_.nodes[size_t(i)];
    const Label& l = sel_.nodes[size_t(i)].label;
    std::unique_ptr<Kernel> k = std::move(sel_.kernels[size_t(i)]);
    bool jit = l.kind != LabelKind::ref;
    if (!k) {
      std::string why;
      Instance inst = instantiate(g_, i, l, o_.isa, &why);
      if (!inst.kernel)
        n.fail(Code::internal, "chosen kernel " + l.key() + " does not apply: " + why);
      k = std::move(inst.kernel);
    }
    const std::vector<Layout> in = input_layouts(g_, i, l), out = output_layouts(g_, i, l);
    if (l.kind == LabelKind::view) {
      // The output is input 0's bytes (a contiguous Slice: some of them): a view of its plan
      // tensor (converted first if it is in another layout). The step has no tiles; plan_memory
      // keeps the input alive while the view is used.
      const int src = get(n.inputs[0], in[0]);
      const int dst = add_tensor(n.outputs[0], out[0]);
      plan_.tensors[size_t(dst)].parent = src;
      plan_.tensors[size_t(dst)].parent_offset = view_offset_bytes(g_, n);
      ++plan_.views;
      push(i, std::move(k), {src}, {dst}, false);
      return;
    }
    // Conv and FC kernels own their packed weights and bias (slots 1, 2); every other
    // operand is a plan tensor in the label's layout for that slot.
    const bool packs = packs_weights(g_, i, l);
    std::vector<int> src(n.inputs.size(), -1), dst;
    for (size_t s = 0; s < n.inputs.size(); ++s)
      if (!(packs && (s == 1 || s == 2))) src[s] = get(n.inputs[s], in[s]);
    // Weights computed every run: packed by a step of their own into an arena buffer (a plan
    // tensor standing for the weights value in the kernel's packed form), read as slot 1.
    if (Kernel::RuntimePacking rp = k->runtime_packing(); rp.packer) {
      PlanTensor t;
      t.value = n.inputs[1];
      t.bytes = rp.bytes;
      t.offset = -2;
      plan_.tensors.push_back(t);
      const int packed = int(plan_.tensors.size()) - 1;
      push(i, std::move(rp.packer), {src[1], n.inputs.size() > 2 ? src[2] : -1}, {packed}, jit);
      src[1] = packed;
      if (src.size() > 2) src[2] = -1;
    }
    for (size_t s = 0; s < n.outputs.size(); ++s)
      dst.push_back(n.outputs[s] == kNoValue ? -1 : add_tensor(n.outputs[s], out[s]));
    log_debug("{}: {} ({})", n.where(), k->name(), l.key());
    push(i, std::move(k), src, dst, jit);
  }

  // The selection's pairs (a depthwise conv and a 1x1 next to it, both on NHWC labels, constant
  // weights: runtime/separable.h) become one step of the chain kernel where their middle tensor
  // is read by nothing else in the plan; it then has no bytes. A depthwise conv in two pairs
  // runs with both 1x1s as one step. The step takes the chain's last conv's place (every
  // operand of the chain exists by then); the kernels it replaces go back to the selection (a
  // probe's plan hands kernels back).
  void fuse_separable() {
    std::vector<Step>& steps = plan_.steps;
    const size_t nt = plan_.tensors.size();
    std::vector<int> readers(nt, 0), step_of(g_.nodes.size(), -1);
    std::vector<char> viewed(nt, 0);
    for (size_t i = 0; i < steps.size(); ++i) {
      for (int t : steps[i].src)
        if (t >= 0) ++readers[size_t(t)];
      if (steps[i].node >= 0) step_of[size_t(steps[i].node)] = int(i);
    }
    for (const PlanTensor& t : plan_.tensors)
      if (t.parent >= 0) viewed[size_t(t.parent)] = 1;
    // Whether step b's input 0 is step a's only output and read by nothing else.
    auto fusible = [&](int a, int b) {
      const Step &x = steps[size_t(a)], &y = steps[size_t(b)];
      const int mid = y.src.empty() ? -1 : y.src[0];
      return mid >= 0 && x.dst == std::vector<int>{mid} && readers[size_t(mid)] == 1 &&
             !viewed[size_t(mid)] && plan_.tensors[size_t(mid)].parent < 0 &&
             !g_.is_output(plan_.tensors[size_t(mid)].value);
    };
    std::map<int, std::pair<int, int>> chains;  // depthwise node -> (expand, project) nodes
    std::set<int> in_chain;  // the 1x1s taken (the selection lists each in one pair at most)
    for (const SeparablePair& q : sel_.separable) {
      const int a = step_of[size_t(q.first())], b = step_of[size_t(q.second())];
      if (a < 0 || b < 0 || !fusible(a, b) || !in_chain.insert(q.pw).second) continue;
      auto& c = chains.try_emplace(q.dw, -1, -1).first->second;
      (q.expand ? c.first : c.second) = q.pw;
    }
    std::vector<char> drop(steps.size(), 0);
    for (const auto& [d, c] : chains) {
      const auto [e, p] = c;
      Step* es = e >= 0 ? &steps[size_t(step_of[size_t(e)])] : nullptr;
      Step* ps = p >= 0 ? &steps[size_t(step_of[size_t(p)])] : nullptr;
      Step& ds = steps[size_t(step_of[size_t(d)])];
      std::string why;
      auto k = chain_kernel(g_, e, d, p, es ? int(es->src.size()) : 0, int(ds.src.size()),
                            ps ? int(ps->src.size()) : 0, o_.isa, &why);
      if (!k)  // (the selection measured it: it applies)
        fail(Code::internal, g_.nodes[size_t(d)].where() + ": no chain kernel: " + why);
      std::vector<int> src;
      std::vector<int> fused;
      for (Step* st : {es, &ds, ps}) {
        if (!st) continue;
        const size_t at = src.size();
        src.insert(src.end(), st->src.begin(), st->src.end());
        if (at > 0) src[at] = -1;  // the middle tensor: never written
        sel_.kernels[size_t(st->node)] = std::move(st->kernel);
        fused.push_back(st->node);
      }
      Step& last = ps ? *ps : ds;
      fused.pop_back();  // (last.node)
      log_debug("{}: fused as {}", g_.nodes[size_t(d)].where(), k->name());
      for (int n : fused) drop[size_t(step_of[size_t(n)])] = 1;
      last.kernel = std::move(k);
      last.src = std::move(src);
      last.fused_nodes = std::move(fused);
    }
    std::vector<Step> kept;
    for (size_t i = 0; i < steps.size(); ++i)
      if (!drop[i]) kept.push_back(std::move(steps[i]));
    plan_.jit_steps -= int(steps.size() - kept.size());
    steps = std::move(kept);
  }

  const Graph& g_;
  PlanOptions o_;
  Selection& sel_;
  std::vector<int> producer_;  // by value: its node, -1 for inputs and constants
  bool jit_;
  Plan plan_;
  std::map<std::pair<ValueId, Layout>, int> have_;
  struct View {
    ValueId whole;  // the concat output it is a slice of
    Layout layout;
    int64_t offset;  // bytes
  };
  std::map<ValueId, View> view_;
  std::set<int> inplace_;  // concat nodes that need no step
};

}  // namespace

Plan build_plan(const Graph& g, const PlanOptions& o, Selection& sel) {
  if (sel.nodes.size() != g.nodes.size() || sel.kernels.size() != g.nodes.size())
    fail(Code::internal, "the selection does not match the graph");
  return Lowering(g, o, sel).run();
}

std::vector<char> tensors_read(const Plan& p) {
  std::vector<char> read(p.tensors.size(), 0);
  for (const Step& s : p.steps)
    for (int t : s.src)
      if (t >= 0) read[size_t(t)] = 1;
  for (int t : p.outputs) read[size_t(t)] = 1;
  return read;
}

int64_t release_unread_constants(Graph& g, const Plan& p) {
  const std::vector<char> by_tensor = tensors_read(p);
  std::vector<char> read(g.values.size(), 0);
  for (size_t t = 0; t < by_tensor.size(); ++t)
    if (by_tensor[t]) read[size_t(p.tensors[t].value)] = 1;
  int64_t bytes = 0;
  for (size_t v = 0; v < g.values.size(); ++v) {
    Value& val = g.values[v];
    if (!val.is_const() || read[v] || !val.constant->stored_bytes()) continue;
    bytes += int64_t(val.constant->nbytes());
    val.constant = Tensor::alias(val.dtype, val.shape, nullptr, nullptr);
  }
  return bytes;
}

}  // namespace kiln
