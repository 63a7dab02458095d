// The pieces of the batched MatMul glue kernel (jit/glue/matmul.cpp) that the fused attention
// kernel (jit/glue/attention.cpp) runs too: the row-block product and numpy batch broadcasting.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/asmjit_util.h"

namespace kiln::glue {

// Register blocking of build_matmul_rows: MR x NR accumulators, NR vectors of B and one
// broadcast of A must fit the vector registers (AVX-512 32: 24 + 4 + 1; AVX2 16: 12 + 2 + 1).
struct MatMulBlocking {
  int mr, nr;
};
MatMulBlocking matmul_blocking(Isa isa);
// Vector registers of the ISA (AVX-512 32, AVX2 16), for other blockings.
int vector_registers(Isa isa);

// Emits fn(a, b, c) (signature void(const float*, const float*, float*)): `rows` rows of
// C = A x B, all n columns; B is k x n row-major, A's rows lda floats apart (0: k) and C's
// ldc (0: n). Column blocks of nr vectors, rows x nr accumulators. Returns its entry index.
int build_matmul_rows(AsmBuilder& b, int rows, int nr, int64_t k, int64_t n, int64_t lda = 0,
                      int64_t ldc = 0);

// numpy matmul batch dims of a [..., M, K] x b [..., K, N] (both rank >= 2): the broadcast
// batch shape and, per batch entry (row-major), the float offsets of its A and B matrices;
// nullopt when the batch dims do not broadcast or exceed kMaxMatMulBatches entries.
constexpr int64_t kMaxMatMulBatches = int64_t(1) << 24;
struct BatchOffsets {
  Shape batch;
  std::vector<int64_t> a, b;
};
std::optional<BatchOffsets> matmul_batch_offsets(const Shape& a, const Shape& b);

}  // namespace kiln::glue
