#pragma once
#include <memory>
#include <string>
#include "jit/conv/conv_kernel.h"
namespace kiln {
std::unique_ptr<Kernel> create_winograd_kernel(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                           const Tensor& weights, const Tensor* bias,
                                           std::string* why_not);
}
