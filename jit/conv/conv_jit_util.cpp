#include "jit/conv/conv_jit_util.h"

#include "graph/error.h"

namespace kiln::convjit {

using namespace Xbyak::util;

GprPool::GprPool() : free_{rsi, rdx, rcx, r8, r9, r10, r11, rax, rbx, rbp, r12, r13, r14, r15} {}

Xbyak::Reg64 GprPool::take(const std::string& role) {
  if (free_.empty()) fail(Code::internal, "conv generator ran out of registers at " + role);
  Xbyak::Reg64 r = free_.front();
  free_.erase(free_.begin());
  return r;
}

EpilogueEmitter::Operands EpilogueAddressing::operands() const {
  // Each lambda loads its pointer right before the address is used: the emitter asks for an
  // operand immediately before the instruction that reads it.
  const EpilogueAddressing a = *this;
  EpilogueEmitter::Operands o;
  o.bias = [a]() {
    a.g->mov(a.tmp_a, a.g->ptr[a.param + offsetof(ConvCallArgs, bias)]);
    return a.g->ptr[a.tmp_a + a.oc_disp];
  };
  o.residual = [a](int i) {
    a.g->mov(a.tmp_a,
             a.g->ptr[a.param + offsetof(ConvCallArgs, post) + PostOpArgs::res_delta_at(i)]);
    return a.g->ptr[a.dst_base + a.tmp_a + a.dst_disp];
  };
  o.scale = [a](int i) {
    a.g->mov(a.tmp_a, a.g->ptr[a.param + offsetof(ConvCallArgs, post) + PostOpArgs::scale_at(i)]);
    return a.g->ptr[a.tmp_a + a.oc_disp];
  };
  o.shift = [a](int i) {
    a.g->mov(a.tmp_b, a.g->ptr[a.param + offsetof(ConvCallArgs, post) + PostOpArgs::shift_at(i)]);
    return a.g->ptr[a.tmp_b + a.oc_disp];
  };
  return o;
}

}  // namespace kiln::convjit
