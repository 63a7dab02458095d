// Gemm (2-D, transposes, alpha/beta, broadcast C), MatMul (numpy matmul semantics) and
// SoftmaxAttention (the ops it fuses, one after the other).
#include "runtime/ref/ref_common.h"
#include "runtime/ref/ref_epilogue.h"

namespace kiln::ref {

namespace {

// y[j] += a * b[j] for j in [0, n).
void axpy(float* __restrict y, const float* __restrict b, float a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += a * b[j];
}

// y[M, N] = a[M, K] * b[K, N], all row-major and contiguous; i-k-j order so the inner loop
// streams rows of b and y.
void matmul_2d(const float* a, const float* b, float* y, int64_t M, int64_t K, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    float* yrow = y + i * N;
    for (int64_t j = 0; j < N; ++j) yrow[j] = 0.f;
    for (int64_t k = 0; k < K; ++k) axpy(yrow, b + k * N, a[i * K + k], N);
  }
}

}  // namespace

void gemm(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& A = req_input(node, in, 0);
  const Tensor& B = req_input(node, in, 1);
  const Tensor* C = opt_input(in, 2);
  Tensor& Y = req_output(node, out, 0);
  expect_dtype(node, A, DType::f32, "input A");
  expect_dtype(node, B, DType::f32, "input B");
  expect_dtype(node, Y, DType::f32, "output");
  expect_rank(node, A, 2, "input A");
  expect_rank(node, B, 2, "input B");
  const bool ta = node.attr_i("transA", 0) != 0, tb = node.attr_i("transB", 0) != 0;
  const float alpha = node.attr_f("alpha", 1.f), beta = node.attr_f("beta", 1.f);
  const int64_t M = A.shape()[ta ? 1 : 0], K = A.shape()[ta ? 0 : 1];
  const int64_t N = B.shape()[tb ? 0 : 1];
  if (B.shape()[tb ? 1 : 0] != K)
    node.fail(Code::invalid_model, "inner dimensions of A " + shape_str(A.shape()) + " and B " +
                                       shape_str(B.shape()) + " differ");
  expect_shape(node, Y, {M, N}, "output");
  std::vector<int64_t> cs;
  if (C) {
    expect_dtype(node, *C, DType::f32, "input C");
    cs = broadcast_strides(node, C->shape(), {M, N});  // unidirectional broadcast to [M, N]
  }

  const Epilogue epilogue(node, in, 3, Y);  // fused post-ops (graph/post_ops.h)

  // Materialise A' row-major so every loop below reads contiguous rows.
  const float* ap = A.data<float>();
  std::vector<float> at;
  if (ta) {
    at.resize(size_t(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) at[size_t(i * K + k)] = ap[k * M + i];
    ap = at.data();
  }
  const float* bp = B.data<float>();
  const float* cp = C ? C->data<float>() : nullptr;
  float* yp = Y.data<float>();
  std::vector<float> acc(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    const float* arow = ap + i * K;
    if (!tb) {
      for (int64_t j = 0; j < N; ++j) acc[size_t(j)] = 0.f;
      for (int64_t k = 0; k < K; ++k) axpy(acc.data(), bp + k * N, arow[k], N);
    } else {
      // B is [N, K]: row j of B is column j of B', so a dot product reads both contiguously.
      for (int64_t j = 0; j < N; ++j) {
        const float* brow = bp + j * K;
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += arow[k] * brow[k];
        acc[size_t(j)] = s;
      }
    }
    for (int64_t j = 0; j < N; ++j) {
      float v = alpha * acc[size_t(j)];
      if (cp) v += beta * cp[i * cs[0] + j * cs[1]];
      yp[i * N + j] = v;
    }
    if (!epilogue.empty()) epilogue.apply_row(yp + i * N, N, i * N, 0, 1);
  }
}

void matmul(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& A = req_input(node, in, 0);
  const Tensor& B = req_input(node, in, 1);
  Tensor& Y = req_output(node, out, 0);
  expect_dtype(node, A, DType::f32, "input A");
  expect_dtype(node, B, DType::f32, "input B");
  expect_dtype(node, Y, DType::f32, "output");
  if (A.shape().empty() || B.shape().empty())
    node.fail(Code::invalid_model, "inputs must have rank >= 1");
  // 1-D operands are promoted to [1, K] / [K, 1]; the added dim is dropped from the output.
  Shape as = A.shape(), bs = B.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    node.fail(Code::invalid_model, "inner dimensions of A " + shape_str(A.shape()) + " and B " +
                                       shape_str(B.shape()) + " differ");
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_shapes(node, ab, bb);
  Shape expect = batch;
  if (!a1) expect.push_back(M);
  if (!b1) expect.push_back(N);
  expect_shape(node, Y, expect, "output");

  // Batch strides in units of whole matrices, 0 along broadcast batch dims.
  std::vector<std::vector<int64_t>> st = {broadcast_strides(node, ab, batch),
                                          broadcast_strides(node, bb, batch), strides_of(batch)};
  const int64_t mat[3] = {M * K, K * N, M * N};
  for (size_t t = 0; t < 3; ++t)
    for (int64_t& v : st[t]) v *= mat[t];
  const float* ap = A.data<float>();
  const float* bp = B.data<float>();
  float* yp = Y.data<float>();
  for_each_row(batch, st, [&](const int64_t* o, int64_t len, const int64_t* s) {
    for (int64_t t = 0; t < len; ++t)
      matmul_2d(ap + o[0] + t * s[0], bp + o[1] + t * s[1], yp + o[2] + t * s[2], M, K, N);
  });
  // Fused post-ops (a linear MatMul's: graph/fuse.cpp), per row of N channels.
  const Epilogue epilogue(node, in, 3, Y, Y.shape().empty() ? 0 : Y.shape().size() - 1);
  if (!epilogue.empty())
    for (int64_t r = 0, rows = Y.numel() / std::max<int64_t>(N, 1); r < rows; ++r)
      epilogue.apply_row(yp + r * N, N, r * N, 0, 1);
}

// The unfused ops' kernels in order on whole tensors: the scores, the elementwise scale (as
// the Mul / Div it replaced computes it), the bias's Add, Softmax over the last axis, the
// product with V.
void softmax_attention(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& A = req_input(node, in, 0);
  const Tensor& B = req_input(node, in, 1);
  const Tensor& V = req_input(node, in, 2);
  if (A.shape().size() < 2 || B.shape().size() < 2 || V.shape().size() < 2)
    node.fail(Code::invalid_model, "inputs must have rank >= 2");
  const Shape& as = A.shape();
  const Shape& bs = B.shape();
  Shape ss =
      broadcast_shapes(node, Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2));
  ss.push_back(as[as.size() - 2]);
  ss.push_back(bs.back());
  Tensor s(DType::f32, ss), p(DType::f32, ss);
  Node mm;
  mm.name = node.name;
  mm.op = "MatMul";
  matmul(mm, {&A, &B}, {&s});
  const float scale = node.attr_f("scale", 1.f);
  const bool divide = node.attr_i("divide", 0) != 0;
  if (scale != 1.f || divide) {
    float* sp = s.data<float>();
    for (int64_t i = 0; i < s.numel(); ++i) sp[i] = divide ? sp[i] / scale : sp[i] * scale;
  }
  if (in.size() > 3 && in[3]) {  // (the bias does not widen the scores: infer_softmax_attention)
    Node add_node;
    add_node.name = node.name;
    add_node.op = "Add";
    Tensor biased(DType::f32, ss);
    add(add_node, {&s, in[3]}, {&biased});
    s = std::move(biased);
  }
  Node sm;
  sm.name = node.name;
  sm.op = "Softmax";
  softmax(sm, {&s}, {&p});
  matmul(mm, {&p, &V}, out);
}

}  // namespace kiln::ref
