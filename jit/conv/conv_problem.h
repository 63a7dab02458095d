// One 2-D convolution as kernels see it: exact shapes, explicit padding, fused epilogue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/post_ops.h"

namespace kiln {

struct ConvProblem {
  int64_t n = 1, ic = 0, ih = 0, iw = 0, oc = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;  // dilation 1 = dense
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;                  // top, left, bottom, right
  int64_t groups = 1;
  bool bias = false;
  std::vector<PostOp> post;  // input indices refer to the Conv node's inputs

  // benchdnn-like, stable (a cache key): "ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1_relu";
  // mb, g, dilation and asymmetric pads appear only when not the default.
  std::string str() const;
  // The inverse of str(): parse(p.str()) == p. Accepts only the canonical form str() writes
  // (one spelling per problem), and checks the problem is well formed (sizes >= 1, groups
  // divide the channels, oh / ow follow from the input, window, stride, dilation and pads);
  // otherwise fails with Code::invalid_argument naming what is wrong. Post-op inputs are
  // numbered as from_node numbers them (from input 3, in order).
  static ConvProblem parse(const std::string& s);
  double macs() const { return double(n * oc * oh * ow) * double(ic / groups * kh * kw); }
  // Input rows / columns (padding included) the windows of `out` consecutive output rows /
  // columns span.
  int64_t rows_read(int64_t out) const { return (out - 1) * sh + (kh - 1) * dh + 1; }
  int64_t cols_read(int64_t out) const { return (out - 1) * sw + (kw - 1) * dw + 1; }
  // A 1x1 of stride 1 without padding over all channels (a GEMM over pixels).
  bool dense_1x1() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && groups == 1 && !(pt || pl || pb || pr);
  }
  // One filter per channel (groups == channels > 1).
  bool depthwise() const { return groups > 1 && groups == ic && ic == oc; }

  // From an inferred (explicit attrs) Conv node, including its fused post-ops.
  static ConvProblem from_node(const Graph& g, const Node& node);
};

// Field by field, post-ops included (kind, alpha, beta, input).
bool operator==(const ConvProblem& a, const ConvProblem& b);

}  // namespace kiln
