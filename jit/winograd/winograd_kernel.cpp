#include "jit/winograd/winograd_kernel.h"
namespace kiln {
std::unique_ptr<Kernel> create_winograd_kernel(const ConvProblem&, const ConvImpl&, Isa, const Tensor&,
                                           const Tensor*, std::string* why_not) {
  if (why_not) *why_not = "winograd family not built yet";
  return nullptr;
}
}
