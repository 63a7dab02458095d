// Xbyak generator of the fully-connected family (see fc_conf.h for the loop plan).
#pragma once

#include <memory>
#include <string>

#include "jit/epilogue.h"
#include "jit/gemm/fc_conf.h"
#include "jit/jit_generator.h"

namespace kiln::fcjit {

class FcGenerator : public JitGenerator {
 public:
  // `nb`: vectors per block of this code (c.nb, or c.n_last for the last block); `last_block`:
  // its last vector has c.lane_tail real lanes (masked stores and epilogue loads).
  FcGenerator(const FcConf& c, int nb, bool last_block, const std::string& name);

 private:
  void generate() override;
  void emit_block();
  void emit_tile(int ur);
  void emit_k_steps(int ur, int steps);
  void emit_store(int ur);
  int acc(int set, int m, int j, int ur) const { return (set * ur + m) * nb_ + j; }

  FcConf c_;
  int nb_;
  int lane_tail_;      // real lanes of the last vector of this code (0: full)
  int64_t blk_bytes_;  // one k row of this code's block: nb * simd floats
  std::unique_ptr<EpilogueEmitter> epi_;
  Xbyak::Reg64 x_tile_, x_k_, w_blk_, w_k_, y_blk_, y_tile_, n_off_, blk_cnt_, row_cnt_, k_cnt_,
      epi_a_, epi_b_;
};

}  // namespace kiln::fcjit
