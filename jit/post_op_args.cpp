#include "jit/post_op_args.h"

namespace kiln {

void PostOpArgs::set(const std::vector<PostOp>& post, const KernelArgs& args) {
  for (size_t i = 0; i < post.size() && i < size_t(kMaxPostOps); ++i) {
    const PostOp& op = post[i];
    if (op.kind == PostOp::Kind::add) {
      res_delta[i] = int64_t(reinterpret_cast<uintptr_t>(args.src[op.input])) -
                     int64_t(reinterpret_cast<uintptr_t>(args.dst[0]));
    } else if (op.kind == PostOp::Kind::scale_shift) {
      scale[i] = args.src[op.input];
      shift[i] = args.src[op.input + 1];
    } else if (op.kind == PostOp::Kind::prelu) {
      scale[i] = args.src[op.input];  // the slope
    }
  }
}

void PostOpArgs::advance_channels(int64_t c) {
  for (int i = 0; i < kMaxPostOps; ++i) {
    if (scale[i]) scale[i] += c;
    if (shift[i]) shift[i] += c;
  }
}

}  // namespace kiln
