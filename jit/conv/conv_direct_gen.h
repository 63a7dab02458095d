// Xbyak generator of the direct conv family (see conv_direct_conf.h for the loop plan).
#pragma once

#include <array>
#include <memory>
#include <string>

#include "jit/conv/conv_direct_conf.h"
#include "jit/epilogue.h"
#include "jit/jit_generator.h"

namespace kiln::convjit {

class DirectGenerator : public JitGenerator {
 public:
  // `ob`: oc vectors this code computes (conf.oc_blocks, or conf.oc_blocks_last for the last
  // group); `last_group`: the last oc vector may have a lane tail; `rows`: output rows per call
  // (1, or conf.ur_h for rows whose kernel window has no top/bottom padding).
  DirectGenerator(const DirectConf& c, int ob, bool last_group, int rows, const std::string& name);

 private:
  void generate() override;
  void emit_block(int ur, int64_t ow0);
  void emit_kh_loop(int ur, int64_t ow0, int nic);
  void emit_store(int ur);
  bool tap_valid(int64_t ow0, int p, int kw) const;
  // Accumulator of pixel px (row px / ur, column px % ur of the block) and oc vector j.
  int acc(int px, int j) const { return px * ob_ + j; }
  int64_t dst_off(int ur, int px, int j) const;  // bytes from dst_blk_

  DirectConf c_;
  int ob_;
  int rows_;
  bool last_;
  bool k_split_;
  std::unique_ptr<EpilogueEmitter> epi_;
  Xbyak::Reg64 src_row_, dst_row_, src_blk_, dst_blk_, src_ic_, wei_ic_, src_k_, wei_k_, kh_cnt_,
      icb_cnt_, ow_cnt_, epi_a_, epi_b_, pf_;
};

// The generators of a kernel of conf c, shared by code_key (jit/shared_code.h):
// [rows - 1][last group], one-row code always, row-pair code when c.ur_h == 2, the last
// group's own code only when c.last_group_own (the direct and grouped families).
using DirectGenerators = std::array<std::array<std::shared_ptr<const DirectGenerator>, 2>, 2>;
DirectGenerators direct_generators(const DirectConf& c, const std::string& code_key,
                                   const std::string& name);

}  // namespace kiln::convjit
