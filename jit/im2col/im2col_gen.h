// Xbyak generator of the im2col family's GEMM microkernel (see im2col_conf.h for the plan).
//
// One call computes C[rows x vecs*simd] (+)= A[rows x ksteps] x B[ksteps x vecs*simd] for one
// column group: a runtime loop over row blocks of mr rows (plus a JIT-time tail block), each
// accumulating mr x vecs vectors over the call's K steps (runtime count, unrolled), then
// storing them — with bias and the post-op chain on the last K chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "jit/call_flags.h"
#include "jit/epilogue.h"
#include "jit/im2col/im2col_conf.h"
#include "jit/jit_generator.h"
#include "jit/post_op_args.h"

namespace kiln::im2col {

// What one call receives (pointer in rdi); read with offsetof.
struct CallArgs {
  const float* a = nullptr;  // first row, at the chunk's first K step
  const float* b = nullptr;  // the group's B at the chunk's first K step
  float* c = nullptr;        // first row, first column of the group
  // NHWC: bias at the group's first channel; NCHW: [oc][simd] expanded bias, first row.
  const float* bias = nullptr;
  int64_t m_blocks = 0;  // full row blocks
  int64_t ksteps = 0;    // K steps of this call
  int64_t flags = 0;     // CallFlag bits (jit/call_flags.h)
  // NHWC: the next call's B, walked a line per K step across this call's row blocks (into L2).
  const float* pf = nullptr;
  PostOpArgs post;  // fused post-ops' operands (scale / shift like bias)
};

class GemmGenerator : public JitGenerator {
 public:
  // `vecs`: column vectors of this code (nr, or n_last for the last group); `last`: this code
  // runs the last column group (lane tail on its last vector); `ldb`: B row stride in floats.
  GemmGenerator(const Im2colConf& c, int vecs, bool last, int64_t ldb, const std::string& name);

 private:
  void generate() override;
  void emit_block(int rows);
  void emit_kstep(int rows, int u);
  void emit_store(int rows);
  EpilogueEmitter::Operands operands(int i, int j) const;
  int acc(int i, int j) const { return i * vecs_ + j; }

  Im2colConf c_;
  int vecs_;
  int lane_tail_;      // real lanes of the last vector (0: full)
  bool b_masked_;      // the last vector's B loads are masked (NCHW reading the input directly)
  int64_t ldb_;        // bytes
  int64_t lda_, ldc_;  // bytes
  std::unique_ptr<EpilogueEmitter> epi_;
  Xbyak::Reg64 a_m_, c_m_, a_k_, b_k_, k_cnt_, m_cnt_, row_off_, epi_a_, epi_b_, pf_;
};

}  // namespace kiln::im2col
