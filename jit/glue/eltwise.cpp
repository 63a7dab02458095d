// Standalone elementwise chains over a flat buffer: y = ops(x[, residuals]). Each op uses
// the scalar reference's own operations in the same order (graph/post_ops.cpp), so relu,
// leaky_relu, clip, hardswish, hardsigmoid and add are bit-exact; sigmoid and swish differ
// only by the vector exp (~1 ulp) feeding the same 1 + e and division.
#include <cmath>
#include <cstddef>
#include <string>

#include "graph/error.h"
#include "jit/glue/asm_math.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
using K = PostOp::Kind;
namespace x86 = asmjit::x86;

constexpr int kMaxAdds = 7;  // a Sum of 8 inputs

struct EltArgs {
  const float* x;
  float* y;
  int64_t n;
  const float* res[kMaxAdds];
};
using EltFn = void (*)(const EltArgs*);

class EltwiseGen {
 public:
  EltwiseGen(AsmBuilder& b, const std::vector<PostOp>& ops) : b_(b), cc_(b.cc()), ops_(ops) {}

  void build() {
    b_.begin_function(asmjit::FuncSignatureT<void, const EltArgs*>());
    x86::Gp args = b_.gp();
    b_.func()->setArg(0, args);
    x86::Gp x = b_.gp(), y = b_.gp(), n = b_.gp();
    cc_.mov(x, x86::ptr(args, offsetof(EltArgs, x)));
    cc_.mov(y, x86::ptr(args, offsetof(EltArgs, y)));
    cc_.mov(n, x86::ptr(args, offsetof(EltArgs, n)));
    int adds = 0;
    for (const auto& op : ops_) adds += op.kind == K::add;
    for (int i = 0; i < adds; ++i) {
      res_.push_back(b_.gp());
      cc_.mov(res_.back(), x86::ptr(args, int32_t(offsetof(EltArgs, res) + 8 * size_t(i))));
    }
    const int V = b_.width();
    asmjit::Label l4 = cc_.newLabel(), l1 = cc_.newLabel(), lt = cc_.newLabel(),
                  done = cc_.newLabel();
    // 4 vectors per iteration (independent chains hide the exp latency), then 1, then a
    // masked tail.
    for (int unroll : {4, 1}) {
      asmjit::Label top = unroll == 4 ? l4 : l1, next = unroll == 4 ? l1 : lt;
      cc_.bind(top);
      cc_.cmp(n, unroll * V);
      cc_.jb(next);
      std::vector<x86::Vec> v(static_cast<size_t>(unroll));
      for (int u = 0; u < unroll; ++u) {
        v[size_t(u)] = b_.vec();
        cc_.vmovups(v[size_t(u)], x86::ptr(x, u * V * 4));
      }
      for (int u = 0; u < unroll; ++u) chain(v[size_t(u)], u * V * 4, nullptr);
      for (int u = 0; u < unroll; ++u) cc_.vmovups(x86::ptr(y, u * V * 4), v[size_t(u)]);
      advance(x, y, unroll * V * 4);
      cc_.sub(n, unroll * V);
      cc_.jmp(top);
    }
    cc_.bind(lt);
    cc_.test(n, n);
    cc_.jz(done);
    {
      Mask m = b_.mask_dyn(n);
      x86::Vec a = b_.vec();
      b_.load(a, x86::ptr(x), &m);
      chain(a, 0, &m);
      b_.store(x86::ptr(y), a, &m);
    }
    cc_.bind(done);
    b_.end_function();
  }

 private:
  void advance(const x86::Gp& x, const x86::Gp& y, int bytes) {
    cc_.add(x, bytes);
    cc_.add(y, bytes);
    for (const auto& r : res_) cc_.add(r, bytes);
  }

  void chain(const x86::Vec& a, int32_t off, const Mask* m) {
    int add_index = 0;
    for (const auto& op : ops_) {
      if (op.kind != K::add) {
        glue::emit_post_op(b_, a, op);
        continue;
      }
      const x86::Mem r = x86::ptr(res_[size_t(add_index++)], off);
      if (m) {
        x86::Vec t = b_.vec();
        b_.load(t, r, m);
        cc_.vaddps(a, a, t);
      } else {
        cc_.vaddps(a, a, r);
      }
    }
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  const std::vector<PostOp>& ops_;
  std::vector<x86::Gp> res_;
};

class EltwiseKernel : public glue::GlueKernel {
 public:
  EltwiseKernel(int64_t elems, std::vector<int> res_inputs, Isa isa, const std::string& name,
                const std::vector<PostOp>& ops)
      : elems_(elems), res_inputs_(std::move(res_inputs)) {
    name_ = name;
    AsmBuilder b(name_, isa);
    EltwiseGen(b, ops).build();
    code_ = b.finish();
    fn_ = b.entry<EltFn>(code_, 0);
    chunk_ = glue::chunk_size(elems, 4 * simd_width(isa), 16, 16384);
    tiles_ = (elems + chunk_ - 1) / chunk_;
  }
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    for (int64_t t = b; t < e; ++t) {
      const int64_t off = t * chunk_;
      EltArgs args{};
      args.x = a.src[0] + off;
      args.y = a.dst[0] + off;
      args.n = std::min(chunk_, elems_ - off);
      for (size_t i = 0; i < res_inputs_.size(); ++i) args.res[i] = a.src[res_inputs_[i]] + off;
      fn_(&args);
    }
  }

 private:
  int64_t elems_, chunk_ = 1;
  std::vector<int> res_inputs_;
  EltFn fn_ = nullptr;
};

}  // namespace

std::unique_ptr<Kernel> create_eltwise_kernel(int64_t elems, const std::vector<PostOp>& ops,
                                              Isa isa, std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (elems <= 0) return decline(why_not, "empty tensor");
  // The residual of the i-th add: its node input when set (>= 1), else src[1 + i].
  std::vector<int> res;
  for (const auto& op : ops) {
    if (per_channel(op.kind))
      return decline(why_not, std::string(post_op_name(op.kind)) +
                                  " needs per-channel operands: not a standalone elementwise op");
    if (op.kind == K::add) res.push_back(op.input >= 1 ? op.input : 1 + int(res.size()));
  }
  if (res.size() > size_t(kMaxAdds))
    return decline(why_not,
                   "more than " + std::to_string(kMaxAdds) + " residual adds in one chain");
  const std::string chain = ops.empty() ? "identity" : post_ops_str(ops);
  const std::string name = "eltwise_" + chain + "_f32__" + isa_name(isa);
  return std::make_unique<EltwiseKernel>(elems, std::move(res), isa, name, ops);
}

}  // namespace kiln
