// Xbyak helpers shared by the conv generators: a small named register pool (so no two roles
// silently share a register) and the glue between a family's addressing and the shared
// EpilogueEmitter.
#pragma once

#include <xbyak/xbyak.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "jit/conv/conv_util.h"
#include "jit/epilogue.h"

namespace kiln::convjit {

using xreg::vreg;  // jit/vec_math.h

// Hands out general-purpose registers by role; running out is a generator bug (kiln::Error).
class GprPool {
 public:
  GprPool();  // every GPR except rsp and rdi (the argument pointer)
  Xbyak::Reg64 take(const std::string& role);
  // The next free registers, in order, for the roles `regs` (members named after them).
  template <class... R>
  void take_all(R&... regs) {
    ((regs = take("register " + std::to_string(++taken_))), ...);
  }

 private:
  std::vector<Xbyak::Reg64> free_;
  int taken_ = 0;
};

// Builds the EpilogueEmitter operands of one accumulator. Pointers come from ConvCallArgs
// (rdi): the bias and scale/shift arrays at the group's first channel, the residual as a byte
// delta from dst. `dst_addr` is the accumulator's own output address expression (base
// register + displacement); the residual lives at the same position plus the delta.
struct EpilogueAddressing {
  Xbyak::CodeGenerator* g = nullptr;
  Xbyak::Reg64 param, tmp_a, tmp_b;  // tmp_a: bias/residual/scale, tmp_b: shift
  Xbyak::Reg64 dst_base;
  int64_t dst_disp = 0;  // accumulator's output offset from dst_base, bytes
  int64_t oc_disp = 0;   // accumulator's channel offset within the group, bytes

  EpilogueEmitter::Operands operands() const;
};

}  // namespace kiln::convjit
