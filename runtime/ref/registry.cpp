// Maps ONNX op names to reference kernels.
#include <array>
#include <utility>

#include "runtime/ref/ref_common.h"

namespace kiln {

namespace {
using Entry = std::pair<std::string_view, RefKernel>;
constexpr std::array kTable{
    Entry{"Conv", ref::conv},
    Entry{"BatchNormalization", ref::batch_norm},
    Entry{"LayerNormalization", ref::layer_norm},
    Entry{"Relu", ref::relu},
    Entry{"LeakyRelu", ref::leaky_relu},
    Entry{"Clip", ref::clip},
    Entry{"Sigmoid", ref::sigmoid},
    Entry{"HardSigmoid", ref::hard_sigmoid},
    Entry{"HardSwish", ref::hard_swish},
    Entry{"Tanh", ref::tanh_op},
    Entry{"Sqrt", ref::sqrt_op},
    Entry{"Erf", ref::erf_op},
    Entry{"Exp", ref::glue_unary},
    Entry{"Log", ref::glue_unary},
    Entry{"Neg", ref::glue_unary},
    Entry{"Abs", ref::glue_unary},
    Entry{"Reciprocal", ref::glue_unary},
    Entry{"Floor", ref::glue_unary},
    Entry{"Ceil", ref::glue_unary},
    Entry{"Elu", ref::glue_unary},
    Entry{"Selu", ref::glue_unary},
    Entry{"Celu", ref::glue_unary},
    Entry{"Softplus", ref::glue_unary},
    Entry{"Softsign", ref::glue_unary},
    Entry{"Mish", ref::glue_unary},
    Entry{"ThresholdedRelu", ref::glue_unary},
    Entry{"Gelu", ref::gelu},
    Entry{"PRelu", ref::prelu},
    Entry{"Add", ref::add},
    Entry{"Sub", ref::sub},
    Entry{"Mul", ref::mul},
    Entry{"Div", ref::div},
    Entry{"Pow", ref::pow_op},
    Entry{"Sum", ref::sum},
    Entry{"MaxPool", ref::max_pool},
    Entry{"AveragePool", ref::average_pool},
    Entry{"GlobalAveragePool", ref::global_average_pool},
    Entry{"GlobalMaxPool", ref::global_max_pool},
    Entry{"ReduceMean", ref::reduce_mean},
    Entry{"Softmax", ref::softmax},
    Entry{"Gemm", ref::gemm},
    Entry{"MatMul", ref::matmul},
    Entry{"Flatten", ref::copy_data},
    Entry{"Reshape", ref::copy_data},
    Entry{"Squeeze", ref::copy_data},
    Entry{"Unsqueeze", ref::copy_data},
    Entry{"Identity", ref::copy_data},
    Entry{"Dropout", ref::copy_data},
    Entry{"Transpose", ref::transpose},
    Entry{"Concat", ref::concat},
    Entry{"Split", ref::split},
    Entry{"Slice", ref::slice},
    Entry{"Gather", ref::gather},
    Entry{"Shape", ref::shape_op},
    Entry{"Pad", ref::pad},
    Entry{"ChannelShuffle", ref::channel_shuffle},
    Entry{"Constant", ref::constant},
    Entry{"Resize", ref::resize},
    Entry{"DepthToSpace", ref::space_depth},
    Entry{"SpaceToDepth", ref::space_depth},
};
}  // namespace

RefKernel find_ref_kernel(std::string_view op) {
  for (const Entry& e : kTable)
    if (e.first == op) return e.second;
  return nullptr;
}

}  // namespace kiln
