// Reference Gemm and MatMul: hand-computed cases and sweeps against per-element dot products.
#include "test_ref_common.h"

using namespace kiln;
using namespace kiln::reftest;

TEST_CASE("ref Gemm: hand-computed") {
  // A = [[1,2,3],[4,5,6]], B = [[1,0],[0,1],[1,1]], A*B = [[4,5],[10,11]].
  Tensor A = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor B = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor At = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor Bt = f32({2, 3}, {1, 0, 1, 0, 1, 1});
  Node n = make_node("Gemm");
  check_f32(run1(n, {&A, &B}, DType::f32, {2, 2}), {2, 2}, {4, 5, 10, 11});
  check_f32(run1(n, {&A, &B, nullptr}, DType::f32, {2, 2}), {2, 2}, {4, 5, 10, 11});
  Node t = make_node("Gemm", {{"transA", attr_i(1)}, {"transB", attr_i(1)}});
  check_f32(run1(t, {&At, &Bt}, DType::f32, {2, 2}), {2, 2}, {4, 5, 10, 11});
  Node ta = make_node("Gemm", {{"transA", attr_i(1)}});
  check_f32(run1(ta, {&At, &B}, DType::f32, {2, 2}), {2, 2}, {4, 5, 10, 11});

  Node ab =
      make_node("Gemm", {{"alpha", attr_f(2)}, {"beta", attr_f(0.5f)}, {"transB", attr_i(1)}});
  Tensor c_row = f32({2}, {10, 20});
  check_f32(run1(ab, {&A, &Bt, &c_row}, DType::f32, {2, 2}), {2, 2}, {13, 20, 25, 32});
  Tensor c_col = f32({2, 1}, {10, 20});
  check_f32(run1(ab, {&A, &Bt, &c_col}, DType::f32, {2, 2}), {2, 2}, {13, 15, 30, 32});
  Tensor c_s = f32({}, {2});
  check_f32(run1(ab, {&A, &Bt, &c_s}, DType::f32, {2, 2}), {2, 2}, {9, 11, 21, 23});
  Tensor c_full = f32({2, 2}, {2, 4, 6, 8});
  check_f32(run1(ab, {&A, &Bt, &c_full}, DType::f32, {2, 2}), {2, 2}, {9, 12, 23, 26});
}

TEST_CASE("ref MatMul: hand-computed") {
  Tensor A = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor B = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  Node n = make_node("MatMul");
  check_f32(run1(n, {&A, &B}, DType::f32, {2, 2}), {2, 2}, {4, 5, 10, 11});
  Tensor v = f32({3}, {1, 2, 3}), ones = f32({3}, {1, 1, 1});
  check_f32(run1(n, {&v, &B}, DType::f32, {2}), {2}, {4, 5});      // [3] x [3,2]
  check_f32(run1(n, {&A, &ones}, DType::f32, {2}), {2}, {6, 15});  // [2,3] x [3]
  check_f32(run1(n, {&v, &v}, DType::f32, {}), {}, {14});          // dot product
  // Batch broadcast: [2,1,2] x [2,2] -> [2,1,2].
  Tensor a3 = f32({2, 1, 2}, {1, 2, 3, 4});
  Tensor b2 = f32({2, 2}, {1, 10, 100, 1000});
  check_f32(run1(n, {&a3, &b2}, DType::f32, {2, 1, 2}), {2, 1, 2}, {201, 2010, 403, 4030});
  // [3] x [2,3,1]: the vector is promoted to [1,3] and broadcast over the batch.
  Tensor b3 = f32({2, 3, 1}, {1, 1, 1, 1, 0, -1});
  check_f32(run1(n, {&v, &b3}, DType::f32, {2, 1}), {2, 1}, {6, -2});
}

TEST_CASE("ref Gemm: swept shapes against per-element dot products") {
  Rng r(11);
  for (int it = 0; it < 60; ++it) {
    const int64_t M = r.pick(1, 9), K = r.pick(1, 17), N = r.pick(1, 9);
    const bool ta = r.pick(0, 1), tb = r.pick(0, 1);
    const float alpha = float(r.pick(-2, 3)) * 0.5f, beta = float(r.pick(-2, 3)) * 0.25f;
    const int cmode = int(r.pick(0, 5));  // none, scalar, [N], [1,N], [M,1], [M,N]
    const Shape cshapes[] = {{}, {}, {N}, {1, N}, {M, 1}, {M, N}};
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    CAPTURE(ta);
    CAPTURE(tb);
    CAPTURE(cmode);
    Tensor A = random_f32(ta ? Shape{K, M} : Shape{M, K}, 1 + uint64_t(it));
    Tensor B = random_f32(tb ? Shape{N, K} : Shape{K, N}, 100 + uint64_t(it));
    Tensor C = random_f32(cshapes[cmode], 200 + uint64_t(it));
    Node n = make_node("Gemm", {{"transA", attr_i(ta)},
                                {"transB", attr_i(tb)},
                                {"alpha", attr_f(alpha)},
                                {"beta", attr_f(beta)}});
    std::vector<const Tensor*> in = {&A, &B};
    if (cmode) in.push_back(&C);
    Tensor Y = run1(n, in, DType::f32, {M, N});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double t = double(A.data<float>()[ta ? k * M + i : i * K + k]) *
                           B.data<float>()[tb ? j * K + k : k * N + j];
          s += t;
          mag += std::fabs(t);
        }
        double want = alpha * s;
        if (cmode) {
          const Shape& cs = cshapes[cmode];
          const int64_t ci = cs.size() == 2   ? (cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j)
                             : cs.size() == 1 ? j
                                              : 0;
          want += beta * double(C.data<float>()[ci]);
        }
        REQUIRE(std::fabs(Y.data<float>()[i * N + j] - want) <= 1e-5 * (mag + 1) + 1e-6);
      }
  }
}

TEST_CASE("ref MatMul: swept batch broadcasting and 1-D promotion") {
  Rng r(12);
  for (int it = 0; it < 60; ++it) {
    const int64_t M = r.pick(1, 6), K = r.pick(1, 9), N = r.pick(1, 6);
    // Batch dims: up to 3, each side keeps a suffix with some dims set to 1.
    Shape batch;
    const int64_t br = r.pick(0, 3);
    for (int64_t d = 0; d < br; ++d) batch.push_back(r.pick(1, 3));
    const Shape ba = random_broadcast_operand(r, batch), bb = random_broadcast_operand(r, batch);
    const bool a1 = r.pick(0, 4) == 0 && ba.empty(), b1 = r.pick(0, 4) == 0 && bb.empty();
    Shape sa = ba, sb = bb;
    if (a1)
      sa = {K};
    else {
      sa.push_back(M);
      sa.push_back(K);
    }
    if (b1)
      sb = {K};
    else {
      sb.push_back(K);
      sb.push_back(N);
    }
    const Shape bo = broadcast_shape(ba, bb);
    Shape so = bo;
    if (!a1) so.push_back(M);
    if (!b1) so.push_back(N);
    CAPTURE(it);
    Tensor A = random_f32(sa, 300 + uint64_t(it)), B = random_f32(sb, 400 + uint64_t(it));
    Tensor Y = run1(make_node("MatMul"), {&A, &B}, DType::f32, so);
    const int64_t nb = kiln::shape_numel(bo);
    for (int64_t b = 0; b < nb; ++b) {
      // Batch b mapped into each input (size-1 dims broadcast).
      const int64_t oa = bcast_index(ba, bo, b), ob = bcast_index(bb, bo, b);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          if ((a1 && i) || (b1 && j)) continue;
          double s = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double t = double(A.data<float>()[oa * M * K + (a1 ? k : i * K + k)]) *
                             B.data<float>()[ob * K * N + (b1 ? k : k * N + j)];
            s += t;
            mag += std::fabs(t);
          }
          const int64_t rows = a1 ? 1 : M, cols = b1 ? 1 : N;
          const float got = Y.data<float>()[(b * rows + (a1 ? 0 : i)) * cols + (b1 ? 0 : j)];
          REQUIRE(std::fabs(got - s) <= 1e-5 * (mag + 1));
        }
    }
  }
}

TEST_CASE("ref Gemm / MatMul: errors name the node") {
  Tensor A = f32({2, 3}, {1, 2, 3, 4, 5, 6}), B = f32({2, 2}, {1, 2, 3, 4});
  check_error(
      [&] {
        run1(make_node("Gemm", {}, "fc"), {&A, &B}, DType::f32, {2, 2});
      },
      Code::invalid_model, "fc", "inner dimensions");
  check_error(
      [&] {
        run1(make_node("MatMul", {}, "mm"), {&A, &B}, DType::f32, {2, 2});
      },
      Code::invalid_model, "mm");
  Tensor Ai = i64({2, 2}, {1, 2, 3, 4});
  check_error(
      [&] {
        run1(make_node("MatMul", {}, "mm"), {&Ai, &B}, DType::f32, {2, 2});
      },
      Code::unsupported, "mm");
  Tensor C = f32({3}, {1, 2, 3});
  check_error(
      [&] {
        run1(make_node("Gemm", {}, "fc"), {&B, &B, &C}, DType::f32, {2, 2});
      },
      Code::internal, "fc");
  Tensor A3 = f32({1, 2, 2}, {1, 2, 3, 4});
  check_error(
      [&] {
        run1(make_node("Gemm", {}, "fc"), {&A3, &B}, DType::f32, {1, 2, 2});
      },
      Code::unsupported, "fc");
}

TEST_CASE("ref Gemm: fused post-ops (graph/post_ops.h)") {
  // A = [1, 0] picks row 0 of B: y = [-3, 0, 1, 3].
  Tensor A = f32({1, 2}, {1, 0});
  Tensor B = f32({2, 4}, {-3, 0, 1, 3, 9, 9, 9, 9});
  auto gemm_with = [&](std::vector<std::string> ops, std::vector<float> al, std::vector<float> be) {
    Node n = make_node("Gemm");
    set_post_ops(n, std::move(ops), std::move(al), std::move(be));
    return n;
  };
  check_f32(run1(gemm_with({"hardswish"}, {0}, {0}), {&A, &B}, DType::f32, {1, 4}), {1, 4},
            {0, 0, 2.f / 3, 3});
  check_f32(run1(gemm_with({"sigmoid"}, {0}, {0}), {&A, &B, nullptr}, DType::f32, {1, 4}), {1, 4},
            {0.04742587317756678f, 0.5f, 0.7310585786300049f, 0.9525741268224334f});
  check_f32(run1(gemm_with({"swish"}, {0}, {0}), {&A, &B}, DType::f32, {1, 4}), {1, 4},
            {-0.14227761953270035f, 0, 0.7310585786300049f, 2.8577223804673f});
  check_f32(run1(gemm_with({"hardsigmoid"}, {0.2f}, {0.5f}), {&A, &B}, DType::f32, {1, 4}), {1, 4},
            {0, 0.5f, 0.7f, 1});
  // Per-column (output channel = dim 1) scale/shift after C.
  Tensor C = f32({4}, {1, 1, 1, 1});
  Tensor scale = f32({4}, {1, 2, 3, 4}), shift = f32({4}, {0, 0, 0, 1});
  check_f32(
      run1(gemm_with({"scale_shift"}, {0}, {0}), {&A, &B, &C, &scale, &shift}, DType::f32, {1, 4}),
      {1, 4}, {-2, 2, 6, 17});
  Tensor res = f32({1, 4}, {10, 20, 30, 40});
  check_f32(
      run1(gemm_with({"add", "relu"}, {0, 0}, {0, 0}), {&A, &B, nullptr, &res}, DType::f32, {1, 4}),
      {1, 4}, {7, 20, 31, 43});
  // A linear MatMul's (graph/fuse.cpp): extra inputs from slot 3, the channel its last dim, per
  // row of a 3-D output.
  Node mm = make_node("MatMul", {}, "mm_pp");
  set_post_ops(mm, {"scale_shift", "relu"}, {0, 0}, {0, 0});
  Tensor A3 = f32({2, 1, 2}, {1, 0, 0, -1});  // rows 0 and -1 x row 1 of B
  check_f32(run1(mm, {&A3, &B, nullptr, &scale, &shift}, DType::f32, {2, 1, 4}), {2, 1, 4},
            {0, 0, 3, 13, 0, 0, 0, 0});
}
