// Xbyak generator of the depthwise family (see dw_conf.h for the loop plan) and the argument
// struct of its JIT function.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jit/dw/dw_conf.h"
#include "jit/epilogue.h"
#include "jit/jit_generator.h"

namespace kiln::convjit {

// What the depthwise JIT function receives (one pointer in rdi): the shared ConvCallArgs (its
// post-ops' operands included) and the row range. int8: c.bias points at the bias and, c_pad()
// floats further, the sums' scales x_scale * w_scale[c].
struct DwCallArgs {
  // c.src: input row r0 * sh, column 0 (before the padding shift) of the first channel
  // vector; c.dst: output row r0 of that vector; c.wei, c.bias: its packed weights and bias;
  // c.scale / c.shift: at its first channel; c.flags: kFlagIcTail when the call ends with the
  // partial channel vector (run by the tail code).
  ConvCallArgs c;
  int64_t r0 = 0, r1 = 0;  // output rows [r0, r1)
  int64_t cv_full = 0;     // channel vectors run by the main code
  float x_zero = 0;        // int8: the input's zero point (subtracted when DwConf::sub_zero)
};

class DwGenerator : public JitGenerator {
 public:
  DwGenerator(const DwConf& c, const std::string& name);

 private:
  void generate() override;
  void emit_plane(bool tail);
  void emit_segment(const DwRowSeg& s, bool tail);
  void emit_row(const DwRowSeg& s, bool tail);
  // The call's full channel vectors in a runtime loop (vector(false)), then the partial one
  // when the call has it (vector(true), kFlagIcTail).
  void each_vector(const std::function<void(bool tail)>& vector);
  void emit_vectors(int ur, int64_t ow0, const DwRowSeg& s, const Xbyak::Reg64& src, int64_t sdisp,
                    const Xbyak::Reg64& dst, int64_t ddisp);
  void emit_block(int ur, int64_t ow0, const DwRowSeg& s, bool tail, const Xbyak::Reg64& src,
                  int64_t sdisp, const Xbyak::Reg64& dst, int64_t ddisp);
  void load_weights(int kh_lo, int kh_hi, const std::vector<bool>& cols);
  // base + disp, plus the channel offset c_off in NHWC (channel vectors innermost).
  Xbyak::Address at(const Xbyak::Reg64& base, int64_t disp) const;
  EpilogueEmitter::Operands operands(const Xbyak::Reg64& dst, int64_t ddisp);
  bool tap_valid(int64_t ow0, int px, int kw) const;
  int wreg(int kh, int kw) const;

  DwConf c_;
  std::unique_ptr<EpilogueEmitter> epi_;
  int w0_ = 0, in_ = 0, mask_ = -1;  // first weight register, input register, AVX2 lane mask
  std::vector<int> temps_;           // epilogue scratch
  Xbyak::Reg64 src_cv_, dst_cv_, wei_, bias_, c_off_, cv_cnt_, src_row_, dst_row_, row_cnt_,
      src_blk_, dst_blk_, ow_cnt_, epi_a_, epi_b_;
};

}  // namespace kiln::convjit
