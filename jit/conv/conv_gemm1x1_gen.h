// Xbyak generator of the gemm1x1 conv family (see conv_gemm1x1_conf.h for the loop plan).
#pragma once

#include <memory>
#include <string>

#include "jit/conv/conv_gemm1x1_conf.h"
#include "jit/epilogue.h"
#include "jit/jit_generator.h"

namespace kiln::convjit {

class Gemm1x1Generator : public JitGenerator {
 public:
  // `ob`: oc vectors of this code (ur_n, or n_last for the last group); `last_group`: the last
  // vector may have a lane tail (masked stores in NHWC).
  Gemm1x1Generator(const Gemm1x1Conf& c, int ob, bool last_group, const std::string& name);

 private:
  void generate() override;
  void emit_tile(int ur);
  void emit_k_body(int ur, int nic);
  void emit_store(int ur);
  int acc(int m, int j) const { return m * ob_ + j; }

  Gemm1x1Conf c_;
  int ob_;
  int lane_tail_;  // real lanes of the last vector when it is masked (NHWC), else 0
  int epi_tail_;   // real lanes of the last vector for the epilogue's per-channel loads
  bool k_split_;
  std::unique_ptr<EpilogueEmitter> epi_;
  Xbyak::Reg64 src_m_, dst_m_, src_k_, wei_k_, k_cnt_, m_cnt_, epi_a_, epi_b_, pf_, koff_;
};

}  // namespace kiln::convjit
