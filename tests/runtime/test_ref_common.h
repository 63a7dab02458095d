// Helpers for the reference-kernel tests: tensor builders, node builders, a runner that goes
// through find_ref_kernel(), a deterministic RNG and closeness checks.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "runtime/ref/ref_kernels.h"
#include "test_rng.h"

namespace kiln::reftest {

inline Tensor f32(Shape s, std::vector<float> v) {
  Tensor t(DType::f32, std::move(s));
  REQUIRE(int64_t(v.size()) == t.numel());
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

inline Tensor i64(Shape s, std::vector<int64_t> v) {
  Tensor t(DType::i64, std::move(s));
  REQUIRE(int64_t(v.size()) == t.numel());
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

struct Rng : test::XorShift {
  explicit Rng(uint64_t seed) : XorShift(seed, 1) {}
};

// A random operand shape that broadcasts to `full`: a suffix of it with some dims set to 1.
inline Shape random_broadcast_operand(Rng& r, const Shape& full) {
  Shape s(full.begin() + r.pick(0, int64_t(full.size())), full.end());
  for (int64_t& d : s)
    if (r.pick(0, 2) == 0) d = 1;
  return s;
}

// The window of a conv or pool sweep case (its fields kh, kw, sh, sw, dh, dw, pt, pl, pb, pr),
// for CAPTURE: "k3x3 s2x2 d1x1 pads 1,0,1,0" (top, left, bottom, right).
template <class Case>
std::string window_str(const Case& p) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "k" + s(p.kh) + "x" + s(p.kw) + " s" + s(p.sh) + "x" + s(p.sw) + " d" + s(p.dh) + "x" +
         s(p.dw) + " pads " + s(p.pt) + "," + s(p.pl) + "," + s(p.pb) + "," + s(p.pr);
}

// The flat index in input `in` of element `flat` of `out` (numpy broadcasting), written with
// per-element division (a structure unlike the kernels' incremental walks).
inline int64_t bcast_index(const Shape& in, const Shape& out, int64_t flat) {
  int64_t idx = 0, mul = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t coord = flat % out[d];
    flat /= out[d];
    if (k < in.size()) {
      const int64_t dim = in[in.size() - 1 - k];
      idx += (dim == 1 ? 0 : coord) * mul;
      mul *= dim;
    }
  }
  return idx;
}

// The shape two broadcast-compatible shapes broadcast to (numpy rules).
inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape full(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < full.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    full[full.size() - 1 - k] = std::max(da, db);
  }
  return full;
}

inline Tensor random_f32(Shape s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  return test::uniform_tensor(std::move(s), Rng(seed), lo, hi);
}

inline Node make_node(std::string op, std::map<std::string, Attribute> attrs = {},
                      std::string name = "test_node") {
  Node n;
  n.op = std::move(op);
  n.name = std::move(name);
  n.attrs = std::move(attrs);
  return n;
}

// Sets a fused post-op chain (graph/post_ops.h) on a Conv/Gemm node.
inline void set_post_ops(Node& n, std::vector<std::string> ops, std::vector<float> alpha,
                         std::vector<float> beta) {
  n.attrs["post_ops"] = attr_strings(std::move(ops));
  n.attrs["post_alpha"] = attr_floats(std::move(alpha));
  n.attrs["post_beta"] = attr_floats(std::move(beta));
}

struct OutSpec {
  DType dtype;
  Shape shape;
};

// Runs node's reference kernel (looked up by op name) on `in`, allocating the outputs.
// When the node lists no input/output value ids, placeholder ids are filled in (kNoValue for an
// omitted input), as a graph node would have them.
inline std::vector<Tensor> run(const Node& node, const std::vector<const Tensor*>& in,
                               const std::vector<OutSpec>& outs) {
  Node n = node;
  if (n.inputs.empty())
    for (size_t i = 0; i < in.size(); ++i) n.inputs.push_back(in[i] ? ValueId(i) : kNoValue);
  if (n.outputs.empty())
    for (size_t i = 0; i < outs.size(); ++i) n.outputs.push_back(ValueId(in.size() + i));
  RefKernel k = find_ref_kernel(n.op);
  const bool found = k != nullptr;
  REQUIRE_MESSAGE(found, "no reference kernel for " << n.op);
  std::vector<Tensor> res;
  for (const OutSpec& o : outs) res.emplace_back(o.dtype, o.shape);
  std::vector<Tensor*> ptrs;
  for (Tensor& t : res) ptrs.push_back(&t);
  k(n, in, ptrs);
  return res;
}

inline Tensor run1(const Node& n, const std::vector<const Tensor*>& in, DType dt, Shape s) {
  return run(n, in, {{dt, std::move(s)}})[0];
}

// Exact or near comparison with a hand-computed f32 expectation.
inline void check_f32(const Tensor& got, const Shape& shape, const std::vector<float>& want,
                      float atol = 1e-6f, float rtol = 1e-6f) {
  REQUIRE(got.dtype() == DType::f32);
  REQUIRE(got.shape() == shape);
  REQUIRE(got.numel() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got.data<float>()[i], w = want[i];
    if (std::isnan(w)) {
      CHECK_MESSAGE(std::isnan(g), "element " << i);
    } else if (std::isinf(w)) {
      CHECK_MESSAGE(g == w, "element " << i << ": got " << g << ", want " << w);
    } else {
      CHECK_MESSAGE(std::fabs(g - w) <= atol + rtol * std::fabs(w),
                    "element " << i << ": got " << g << ", want " << w);
    }
  }
}

inline void check_i64(const Tensor& got, const Shape& shape, const std::vector<int64_t>& want) {
  REQUIRE(got.dtype() == DType::i64);
  REQUIRE(got.shape() == shape);
  REQUIRE(got.numel() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    CHECK_MESSAGE(got.data<int64_t>()[i] == want[i], "element " << i);
}

// Runs fn() and checks it throws kiln::Error with `code` and a message naming the node.
template <class F>
void check_error(F&& fn, Code code, const std::string& node_name = "test_node",
                 const std::string& fragment = "") {
  bool thrown = false;
  try {
    fn();
  } catch (const Error& e) {
    thrown = true;
    const std::string msg = e.what();
    CHECK_MESSAGE(e.code() == code, "code " << int(e.code()) << ": " << msg);
    CHECK_MESSAGE(msg.find("'" + node_name + "'") != std::string::npos, msg);
    if (!fragment.empty()) CHECK_MESSAGE(msg.find(fragment) != std::string::npos, msg);
  }
  CHECK_MESSAGE(thrown, "expected a kiln::Error");
}

}  // namespace kiln::reftest
