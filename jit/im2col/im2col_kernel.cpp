#include "jit/im2col/im2col_kernel.h"
namespace kiln {
std::unique_ptr<Kernel> create_im2col_kernel(const ConvProblem&, const ConvImpl&, Isa, const Tensor&,
                                           const Tensor*, std::string* why_not) {
  if (why_not) *why_not = "im2col family not built yet";
  return nullptr;
}
}
