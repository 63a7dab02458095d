// The per-call operands of a kernel's fused post-ops (graph/post_ops.h): one member of every
// family's call struct, filled by the kernel from the node's inputs, read by the generated
// code at the offsets below (the EpilogueEmitter's operand lambdas).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/post_ops.h"
#include "jit/kernel.h"

namespace kiln {

struct PostOpArgs {
  int64_t res_delta[kMaxPostOps] = {};  // `add` post-op i: residual - output, in bytes
  // `scale_shift` post-op i (`prelu`: its slope), at the call's first channel
  const float* scale[kMaxPostOps] = {};
  const float* shift[kMaxPostOps] = {};

  // From the node's inputs in args.src (PostOp::input); the residual as its byte distance from
  // the output args.dst[0] (the code addresses it relative to its own output pointer).
  void set(const std::vector<PostOp>& post, const KernelArgs& args);
  // scale / shift moved to channel `c` (the call's first channel).
  void advance_channels(int64_t c);

  // Byte offsets of entry i, for the generated code.
  static constexpr int res_delta_at(int i) { return int(offsetof(PostOpArgs, res_delta)) + 8 * i; }
  static constexpr int scale_at(int i) { return int(offsetof(PostOpArgs, scale)) + 8 * i; }
  static constexpr int shift_at(int i) { return int(offsetof(PostOpArgs, shift)) + 8 * i; }
};

}  // namespace kiln
