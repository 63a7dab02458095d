// Shared helpers of the conv kernel tests: problem builders, the reference conv (the scalar
// runtime/ref kernel through find_ref_kernel, plus the post-op chain applied with
// apply_post_op in the test), and a runner that feeds a JIT conv kernel in its layouts.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "graph/half.h"
#include "graph/ir.h"
#include "graph/post_ops.h"
#include "isa_coverage.h"
#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_problem.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_rng.h"

namespace kiln::convtest {

struct Rng : test::XorShift {
  explicit Rng(uint64_t seed) : XorShift(seed, 7) {}
};

// One caller's scratch for kernel k: exactly k.scratch_bytes() filled with NaN (a kernel must
// not read scratch it did not write), then a guard zone that must stay untouched (it must not
// use more than it declares: the executor's slices of several threads are adjacent).
class GuardedScratch {
 public:
  static constexpr int64_t kGuard = 256;
  explicit GuardedScratch(const Kernel& k) : bytes_(k.scratch_bytes()), buf_(bytes_ + kGuard) {
    float* f = static_cast<float*>(buf_.slice());
    std::fill(f, f + bytes_ / 4, std::numeric_limits<float>::quiet_NaN());
    std::memset(static_cast<char*>(buf_.slice()) + bytes_, 0x5a, size_t(kGuard));
  }
  void* get() const { return bytes_ ? buf_.slice() : nullptr; }
  bool guard_intact() const {
    const unsigned char* g = static_cast<const unsigned char*>(buf_.slice()) + bytes_;
    return std::all_of(g, g + kGuard, [](unsigned char c) { return c == 0x5a; });
  }

 private:
  int64_t bytes_;
  ScratchBuffer buf_;
};

inline Tensor random_tensor(Shape s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  return test::uniform_tensor(std::move(s), Rng(seed), lo, hi);
}

// A problem from the input size and window; oh/ow follow the ONNX formula.
struct Shp {
  int64_t n = 1, ic = 1, ih = 1, iw = 1, oc = 1, kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1;
  bool bias = true;
};

inline ConvProblem problem(const Shp& s, std::vector<PostOp> post = {}) {
  ConvProblem p;
  p.n = s.n;
  p.ic = s.ic;
  p.ih = s.ih;
  p.iw = s.iw;
  p.oc = s.oc;
  p.kh = s.kh;
  p.kw = s.kw;
  p.sh = s.sh;
  p.sw = s.sw;
  p.dh = s.dh;
  p.dw = s.dw;
  p.pt = s.pt;
  p.pl = s.pl;
  p.pb = s.pb;
  p.pr = s.pr;
  p.oh = (s.ih + s.pt + s.pb - (s.dh * (s.kh - 1) + 1)) / s.sh + 1;
  p.ow = (s.iw + s.pl + s.pr - (s.dw * (s.kw - 1) + 1)) / s.sw + 1;
  p.bias = s.bias;
  p.post = std::move(post);
  return p;
}

// A ConvImpl from its parts (ur / ob: forced ur_w / oc_blocks; 0: the conf's choice).
inline ConvImpl conv_impl(ConvFamily f, Layout src, Layout dst, int ur = 0, int ob = 0) {
  ConvImpl i;
  i.family = f;
  i.src = src;
  i.dst = dst;
  i.ur_w = ur;
  i.oc_blocks = ob;
  return i;
}

// `s` with padding top, left, bottom, right.
inline Shp pad(Shp s, int64_t t, int64_t l, int64_t b, int64_t r) {
  s.pt = t;
  s.pl = l;
  s.pb = b;
  s.pr = r;
  return s;
}

// A problem in ConvProblem::str() form, the language of tests/shapes/ (parse checks that oh
// and ow follow from the rest), with a post-op chain.
inline ConvProblem problem(const std::string& s, std::vector<PostOp> post = {}) {
  ConvProblem p = ConvProblem::parse(s);
  if (!post.empty()) p.post = std::move(post);
  return p;
}

inline PostOp op(PostOp::Kind k, float alpha = 0, float beta = 0, int input = -1) {
  PostOp o;
  o.kind = k;
  o.alpha = alpha;
  o.beta = beta;
  o.input = input;
  return o;
}

// Numbers the extra inputs of a chain as a Conv node would (from input 3, in order).
inline std::vector<PostOp> chain(std::vector<PostOp> ops) {
  int next = 3;
  for (PostOp& o : ops)
    if (extra_inputs(o.kind) > 0) {
      o.input = next;
      next += extra_inputs(o.kind);
    }
  return ops;
}

// The operands of one test case, all in NCHW / plain form.
struct Operands {
  Tensor x, w, b;
  std::vector<Tensor> extra;  // node inputs 3.. (residuals [N,OC,OH,OW], scale/shift/slope [OC])
};

inline Operands make_operands(const ConvProblem& p, uint64_t seed) {
  Operands o;
  o.x = random_tensor({p.n, p.ic, p.ih, p.iw}, seed);
  o.w = random_tensor({p.oc, p.ic / std::max<int64_t>(1, p.groups), p.kh, p.kw}, seed + 1);
  o.b = random_tensor({p.oc}, seed + 2);
  uint64_t s = seed + 3;
  for (const PostOp& op : p.post) {
    if (op.kind == PostOp::Kind::add)
      o.extra.push_back(random_tensor({p.n, p.oc, p.oh, p.ow}, s++));
    if (op.kind == PostOp::Kind::scale_shift) {
      o.extra.push_back(random_tensor({p.oc}, s++, 0.5f, 1.5f));
      o.extra.push_back(random_tensor({p.oc}, s++));
    }
    if (op.kind == PostOp::Kind::prelu) o.extra.push_back(random_tensor({p.oc}, s++, -1.f, 2.f));
  }
  return o;
}

// The reference: runtime/ref's Conv on a hand-built node (group = p.groups, so depthwise too),
// then the chain per element with apply_post_op (independent of the JIT epilogue).
inline Tensor reference(const ConvProblem& p, const Operands& o) {
  Node n;
  n.op = "Conv";
  n.name = "test_conv";
  n.attrs["kernel_shape"] = attr_ints({p.kh, p.kw});
  n.attrs["strides"] = attr_ints({p.sh, p.sw});
  n.attrs["dilations"] = attr_ints({p.dh, p.dw});
  n.attrs["pads"] = attr_ints({p.pt, p.pl, p.pb, p.pr});
  n.attrs["group"] = attr_i(p.groups);
  RefKernel k = find_ref_kernel("Conv");
  const bool found = k != nullptr;
  REQUIRE(found);
  Tensor y(DType::f32, {p.n, p.oc, p.oh, p.ow});
  k(n, {&o.x, &o.w, p.bias ? &o.b : nullptr}, {&y});
  // Node input i >= 3 is o.extra[i - 3].
  float* yp = y.data<float>();
  const int64_t plane = p.oh * p.ow;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t c = i / plane % p.oc;
    for (const PostOp& op : p.post) {
      float res = 0, sc = 0, sh = 0;
      if (op.kind == PostOp::Kind::add) res = o.extra[size_t(op.input - 3)].data<float>()[i];
      if (op.kind == PostOp::Kind::scale_shift) {
        sc = o.extra[size_t(op.input - 3)].data<float>()[c];
        sh = o.extra[size_t(op.input - 2)].data<float>()[c];
      }
      if (op.kind == PostOp::Kind::prelu) sc = o.extra[size_t(op.input - 3)].data<float>()[c];
      yp[i] = apply_post_op(op, yp[i], res, sc, sh);
    }
  }
  return y;
}

// NCHW -> `l` with the pad lanes of blocked layouts set to `pad`: NaN by default, so that any
// read of them by a kernel shows up in its output (in a depthwise conv such a read reaches
// only the output's pad lanes, which nobody reads). A bf16 layout (nChw16c's element order)
// is returned in the vector's first half, each element rounded to nearest even.
inline std::vector<float> to_layout(const Tensor& t, Layout l,
                                    float pad = std::numeric_limits<float>::quiet_NaN()) {
  const Shape& s = t.shape();
  if (layout_bf16(l)) {
    std::vector<float> f = to_layout(t, Layout::nChw16c, pad);
    std::vector<float> out((f.size() + 1) / 2);
    auto* h = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < f.size(); ++i) h[i] = float_to_bf16(f[i]);
    return out;
  }
  std::vector<float> out(size_t(layout_elems(l, s)));
  convert_layout(t.data<float>(), Layout::nchw, out.data(), l, s);
  const int64_t cp = round_up(s[1], layout_block(l));
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = s[1]; c < cp; ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w) out[size_t(layout_offset(l, s, n, c, h, w))] = pad;
  return out;
}

// Runs `k` on the operands (src in `src_l`, dst/residual in `dst_l`); tiles run as two halves,
// the second half first (as two threads might), into a NaN-filled output. Returns NCHW.
// Runs all of k's tiles (the second half first) on fresh guarded scratch; checks the guard.
inline void run_tiles_checked(const Kernel& k, const float* const* ins, float* const* outs) {
  GuardedScratch scratch(k);
  KernelArgs a;
  a.src = ins;
  a.dst = outs;
  a.scratch = scratch.get();
  const int64_t t = k.tiles();
  k.run(a, t / 2, t);
  k.run(a, 0, t / 2);
  CHECK_MESSAGE(scratch.guard_intact(),
                "kernel wrote past the " << k.scratch_bytes() << " bytes of scratch it declares");
}

// packed: the weights as a kernel with a RuntimePacking reads them (input 1), else null.
inline Tensor run_kernel(const Kernel& k, const ConvProblem& p, const Operands& o, Layout src_l,
                         Layout dst_l, const float* packed = nullptr) {
  const Shape ys{p.n, p.oc, p.oh, p.ow};
  std::vector<float> src = to_layout(o.x, src_l);
  std::vector<std::vector<float>> extra;
  std::vector<const float*> ins{src.data(), packed, nullptr};
  for (size_t i = 0; i < o.extra.size(); ++i) {
    const bool residual = o.extra[i].shape().size() == 4;
    extra.push_back(residual ? to_layout(o.extra[i], dst_l)
                             : std::vector<float>(o.extra[i].data<float>(),
                                                  o.extra[i].data<float>() + o.extra[i].numel()));
  }
  for (auto& e : extra) ins.push_back(e.data());
  // NaN-filled output followed by a guard zone that must stay untouched.
  const size_t elems = size_t((layout_bytes(dst_l, ys) + 3) / 4), guard = 64;
  std::vector<float> dst(elems + guard, std::numeric_limits<float>::quiet_NaN());
  std::fill(dst.begin() + int64_t(elems), dst.end(), 12345.f);
  float* outs[] = {dst.data()};
  run_tiles_checked(k, ins.data(), outs);
  CHECK_MESSAGE(std::count(dst.begin() + int64_t(elems), dst.end(), 12345.f) == int64_t(guard),
                "kernel wrote past the end of dst");
  Tensor y(DType::f32, ys);
  convert_layout(dst.data(), dst_l, y.data<float>(), Layout::nchw, ys);
  return y;
}

// fp32 sums of K products in a different order than the reference differ by roughly
// sqrt(K) * eps * (magnitude of the partial sums); with inputs in [-1, 1] the partial sums are
// ~sqrt(K), so 1e-5 * sqrt(K) * max(1, |ref|) is ~100x that noise yet far below the error of
// a missing or extra tap (~0.3 on average).
inline int64_t count_mismatches(const Tensor& got, const Tensor& ref, int64_t k,
                                std::string* first) {
  const double tol = 1e-5 * std::sqrt(double(std::max<int64_t>(k, 1)));
  int64_t bad = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float g = got.data<float>()[i], r = ref.data<float>()[i];
    const bool ok = std::isnan(r)
                        ? std::isnan(g)
                        : std::fabs(double(g) - r) <= tol * std::max(1.0, double(std::fabs(r)));
    if (!ok && bad++ == 0 && first)
      *first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
               std::to_string(r);
  }
  return bad;
}

inline std::vector<Isa> isas() {
  return testing::jit_isas();
}

// Runs a kernel made for (p, impl) on o and compares with the reference; fails the test on
// mismatch.
inline void check_kernel(const Kernel& k, const ConvProblem& p, const Operands& o,
                         const ConvImpl& impl) {
  const Tensor got = run_kernel(k, p, o, impl.src, impl.dst);
  std::string first;
  const int64_t bad = count_mismatches(got, reference(p, o), p.ic * p.kh * p.kw, &first);
  CHECK_MESSAGE(bad == 0, bad << " mismatches, first " << first);
}

// Builds the kernel for (p, impl, isa), runs it and compares with the reference. Returns the
// kernel name (for messages); fails the test on mismatch.
inline std::string check_conv(const ConvProblem& p, const ConvImpl& impl, Isa isa, uint64_t seed) {
  Operands o = make_operands(p, seed);
  std::string why;
  auto k = create_conv_kernel(p, impl, isa, o.w, p.bias ? &o.b : nullptr, &why);
  INFO("problem " << p.str() << " isa " << isa_name(isa) << " " << layout_name(impl.src) << "->"
                  << layout_name(impl.dst));
  REQUIRE_MESSAGE(k != nullptr, "kernel not created: " << why);
  INFO("kernel " << k->name());
  check_kernel(*k, p, o, impl);
  return k->name();
}

// A kernel for computed weights (create_conv_kernel_runtime_weights): nothing packed at
// creation, a name ending "_rw"; its packer packs the weights and bias (its tiles in reverse
// order, as another thread might; into a NaN-filled buffer with a guard after it) into the buffer
// the kernel reads. Kernel and packer run twice with different operands and must follow the
// second set. Uses seeds seed, seed + 1.
inline void check_runtime_weights(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                  uint64_t seed) {
  INFO("problem " << p.str() << " isa " << isa_name(isa) << " " << layout_name(impl.src));
  std::string why;
  auto k = create_conv_kernel_runtime_weights(p, impl, isa, &why);
  REQUIRE_MESSAGE(k != nullptr, why);
  CHECK(k->name().size() > 3);
  CHECK(k->name().substr(k->name().size() - 3) == "_rw");
  CHECK(k->weights().empty());
  Kernel::RuntimePacking rp = k->runtime_packing();
  REQUIRE(rp.packer);
  const size_t floats = size_t(rp.bytes / 4), guard = 16;
  for (int run = 0; run < 2; ++run) {
    const Operands o = make_operands(p, seed + uint64_t(run));
    std::vector<float> packed(floats + guard, std::numeric_limits<float>::quiet_NaN());
    std::fill(packed.begin() + int64_t(floats), packed.end(), 12345.f);
    const float* pins[] = {o.w.data<float>(), p.bias ? o.b.data<float>() : nullptr};
    float* pouts[] = {packed.data()};
    KernelArgs pa;
    pa.src = pins;
    pa.dst = pouts;
    for (int64_t t = rp.packer->tiles(); t-- > 0;) rp.packer->run(pa, t, t + 1);
    CHECK(std::count(packed.begin() + int64_t(floats), packed.end(), 12345.f) == int64_t(guard));
    std::string first;
    CHECK_MESSAGE(count_mismatches(run_kernel(*k, p, o, impl.src, impl.dst, packed.data()),
                                   reference(p, o), p.ic / p.groups * p.kh * p.kw, &first) == 0,
                  "run " << run << ": " << first);
  }
}

}  // namespace kiln::convtest
