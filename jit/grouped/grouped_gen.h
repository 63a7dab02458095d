// Xbyak generator of the grouped family's shuffle mode (GroupedMode::shuffle in
// grouped_conf.h); the sparse mode runs the direct family's generator.
//
// One call computes one output row of one output vector j (channels j*simd ..) of one image:
// the row is cut into register blocks of ur_w pixels (edge blocks emitted with the columns that
// would read padding left out, interior blocks one loop). Per block, valid kernel row (a
// runtime loop, bounds from the caller) and r < c: the kw weight vectors W[kh][kw][r] go to
// registers; each input pixel the block reads is permuted (vpermps from one input block, or
// vpermt2ps from two) into the vector whose lane l holds channel r of l's group, and every
// kernel column that reads the pixel adds it x its weights to its output pixel's accumulator.
// Weights from registers, not memory operands: a 64-byte load per FMA held the kernel at about half
// the FMA rate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jit/epilogue.h"
#include "jit/grouped/grouped_conf.h"
#include "jit/jit_generator.h"

namespace kiln::convjit {

class GroupedShuffleGenerator : public JitGenerator {
 public:
  // The code of the output vectors whose permutes read `src` (GroupedConf::sources); tail: the
  // last vector's real lanes (0: a full vector).
  GroupedShuffleGenerator(const GroupedConf& c, std::vector<ShuffleSource> src, int tail,
                          const std::string& name);

 private:
  void generate() override;
  void emit_block(const OwBlock& b, bool interior);

  GroupedConf c_;
  std::vector<ShuffleSource> src_;
  int tail_;  // real lanes of the last vector (0: all)
  std::unique_ptr<EpilogueEmitter> epi_;
  Xbyak::Label idx_;  // the c permute index vectors (src_[r].lanes)
  Xbyak::Reg64 src_row_, dst_row_, src_blk_, dst_blk_, src_k_, wei_k_, kh_cnt_, ow_cnt_, epi_a_,
      epi_b_;
};

}  // namespace kiln::convjit
