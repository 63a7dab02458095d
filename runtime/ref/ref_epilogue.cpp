#include "runtime/ref/ref_epilogue.h"

namespace kiln::ref {

Epilogue::Epilogue(const Node& node, const Inputs& in, int first_extra_input, const Tensor& out,
                   size_t channel_dim)
    : ops_(parse_post_ops(node, first_extra_input)) {
  const int64_t channels = out.shape().size() > channel_dim ? out.shape()[channel_dim] : 1;
  for (const PostOp& op : ops_) {
    const float* a = nullptr;
    const float* b = nullptr;
    if (op.kind == PostOp::Kind::add) {
      const Tensor& r = req_input(node, in, size_t(op.input));
      expect_dtype(node, r, DType::f32, "post-op residual");
      expect_shape(node, r, out.shape(), "post-op residual");
      a = r.data<float>();
    } else if (op.kind == PostOp::Kind::scale_shift) {
      const Tensor& s = req_input(node, in, size_t(op.input));
      const Tensor& t = req_input(node, in, size_t(op.input) + 1);
      for (const Tensor* v : {&s, &t}) {
        expect_dtype(node, *v, DType::f32, "post-op scale/shift");
        expect_shape(node, *v, {channels}, "post-op scale/shift");
      }
      a = s.data<float>();
      b = t.data<float>();
    } else if (op.kind == PostOp::Kind::prelu) {
      const Tensor& s = req_input(node, in, size_t(op.input));
      expect_dtype(node, s, DType::f32, "post-op slope");
      expect_shape(node, s, {channels}, "post-op slope");
      a = s.data<float>();
    }
    a_.push_back(a);
    b_.push_back(b);
  }
}

void Epilogue::apply_row(float* y, int64_t n, int64_t out_off, int64_t ch, int64_t ch_step) const {
  for (size_t k = 0; k < ops_.size(); ++k) {
    const PostOp& op = ops_[k];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t c = ch + j * ch_step;
      float residual = 0, scale = 1, shift = 0;
      if (op.kind == PostOp::Kind::add) residual = a_[k][out_off + j];
      if (op.kind == PostOp::Kind::scale_shift) scale = a_[k][c], shift = b_[k][c];
      if (op.kind == PostOp::Kind::prelu) scale = a_[k][c];
      y[j] = apply_post_op(op, y[j], residual, scale, shift);
    }
  }
}

}  // namespace kiln::ref
