// create_conv_kernel: validates the constant operands, asks the family's init_conf, builds the
// family's Kernel.
#include "jit/conv/conv_kernel.h"

#include <cstdint>

#include "jit/conv/conv_families.h"
#include "jit/dw/dw_kernel.h"
#include "jit/im2col/im2col_kernel.h"
#include "jit/winograd/winograd_kernel.h"

namespace kiln {

const char* conv_family_name(ConvFamily f) {
  switch (f) {
    case ConvFamily::direct:
      return "direct";
    case ConvFamily::gemm1x1:
      return "gemm1x1";
    case ConvFamily::depthwise:
      return "depthwise";
    case ConvFamily::winograd2:
      return "winograd2";
    case ConvFamily::winograd4:
      return "winograd4";
    case ConvFamily::im2col:
      return "im2col";
  }
  return "?";
}

namespace convjit {

std::string conv_kernel_name(const char* family, Layout src, Layout dst,
                             const std::string& blocking, Isa isa) {
  return std::string("conv_") + family + "_f32_" + layout_name(src) + "_to_" + layout_name(dst) +
         "_" + blocking + "__" + isa_name(isa);
}

}  // namespace convjit

std::unique_ptr<Kernel> create_conv_kernel(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                           const Tensor& weights, const Tensor* bias,
                                           std::string* why_not) {
  auto no = [&](const std::string& why) -> std::unique_ptr<Kernel> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  const int64_t g = p.groups > 0 ? p.groups : 1;
  if (weights.dtype() != DType::f32 || weights.shape() != Shape{p.oc, p.ic / g, p.kh, p.kw})
    return no("weights are not f32 " + shape_str({p.oc, p.ic / g, p.kh, p.kw}));
  if (p.bias != (bias != nullptr)) return no("bias presence does not match the problem");
  if (bias && (bias->dtype() != DType::f32 || bias->shape() != Shape{p.oc}))
    return no("bias is not f32 [" + std::to_string(p.oc) + "]");
  switch (impl.family) {
    case ConvFamily::depthwise:
      return create_depthwise_kernel(p, impl, isa, weights, bias, why_not);
    case ConvFamily::winograd2:
    case ConvFamily::winograd4:
      return create_winograd_kernel(p, impl, isa, weights, bias, why_not);
    case ConvFamily::im2col:
      return create_im2col_kernel(p, impl, isa, weights, bias, why_not);
    case ConvFamily::direct: {
      auto c = convjit::init_direct_conf(p, impl, isa);
      if (!c) return no(c.reason);
      return convjit::make_direct_kernel(*c.conf, weights, bias);
    }
    case ConvFamily::gemm1x1: {
      auto c = convjit::init_gemm1x1_conf(p, impl, isa);
      if (!c) return no(c.reason);
      return convjit::make_gemm1x1_kernel(*c.conf, weights, bias);
    }
  }
  return no("unknown conv family");
}

}  // namespace kiln
