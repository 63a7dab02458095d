// The operator table and the common, table-driven part of shape inference.
#include "graph/ops.h"

#include <algorithm>

#include "graph/function_ops.h"
#include "graph/infer.h"
#include "graph/infer_util.h"
#include "graph/onnx_import.h"
#include "graph/recurrent.h"
#include "graph/spectral.h"

namespace kiln {

using namespace infer_detail;

namespace {

// Bound for the variadic Concat/Sum inputs and Split outputs: the importer's per-node limit
// (kMaxNodeInputs / kMaxNodeOutputs in graph/onnx_import.h).
constexpr int kMany = 1024;

const std::vector<OpInfo>& table() {
  // name, infer, min/max inputs, min/max outputs (optional ones counted), limits (README).
  static const std::vector<OpInfo> ops = {
      {"Conv", infer_conv, 2, 3, 1, 1,
       "1-D (constant weights; run as 2-D), 2-D and 3-D (group 1, constant weights; lowered to "
       "2-D); any group count, stride, dilation, padding, auto_pad"},
      {"ConvTranspose", infer_conv_transpose, 2, 3, 1, 1,
       "1-D (constant weights) and 2-D; any group, stride, dilation, pads, output_padding, "
       "output_shape, auto_pad"},
      {"MaxPool", infer_max_pool, 1, 1, 1, 2,
       "1-D, 2-D and 3-D; no Indices output; storage_order 0"},  // Indices output: rejected by
                                                                 // infer
      {"AveragePool", infer_average_pool, 1, 1, 1, 1, "1-D, 2-D and 3-D; no dilations"},
      {"GlobalAveragePool", infer_global_pool, 1, 1, 1, 1, "rank >= 3"},
      {"GlobalMaxPool", infer_global_pool, 1, 1, 1, 1, "rank >= 3"},
      {"BatchNormalization", infer_batch_norm, 5, 5, 1, 5,
       "training mode (the batch's statistics, the running / saved statistics outputs) as "
       "ReduceMeans and broadcast ops; opset < 9 spatial 0 with constant per-activation "
       "statistics becomes a Mul and an Add"},
      {"LayerNormalization", infer_layer_norm, 2, 3, 1, 3,
       "stash_type 1; Mean / InvStdDev outputs as ReduceMeans beside it"},
      {"Relu", infer_unary_f32, 1, 1, 1, 1},
      {"LeakyRelu", infer_unary_f32, 1, 1, 1, 1},
      {"Sigmoid", infer_unary_f32, 1, 1, 1, 1},
      {"HardSigmoid", infer_unary_f32, 1, 1, 1, 1},
      {"HardSwish", infer_unary_f32, 1, 1, 1, 1},
      {"Tanh", infer_unary_f32, 1, 1, 1, 1},
      {"Sqrt", infer_unary_f32, 1, 1, 1, 1},
      {"Erf", infer_unary_f32, 1, 1, 1, 1},
      {"Exp", infer_unary_f32, 1, 1, 1, 1},
      {"Log", infer_unary_f32, 1, 1, 1, 1},
      {"Neg", infer_sign, 1, 1, 1, 1, "float32 or int64"},
      {"Abs", infer_sign, 1, 1, 1, 1, "float32 or int64"},
      {"Reciprocal", infer_unary_f32, 1, 1, 1, 1},
      {"Floor", infer_unary_f32, 1, 1, 1, 1},
      {"Ceil", infer_unary_f32, 1, 1, 1, 1},
      {"Round", infer_unary_f32, 1, 1, 1, 1},
      {"Sin", infer_unary_f32, 1, 1, 1, 1, "vectorised (jit/glue/asm_math.h)"},
      {"Cos", infer_unary_f32, 1, 1, 1, 1, "vectorised (jit/glue/asm_math.h)"},
      {"Tan", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Asin", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Acos", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Atan", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Sinh", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Cosh", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Asinh", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Acosh", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Atanh", infer_unary_f32, 1, 1, 1, 1, "multi-threaded libm loops"},
      {"Elu", infer_unary_f32, 1, 1, 1, 1},
      {"Selu", infer_unary_f32, 1, 1, 1, 1},
      {"Celu", infer_unary_f32, 1, 1, 1, 1, "alpha nonzero"},
      {"Softplus", infer_unary_f32, 1, 1, 1, 1},
      {"Softsign", infer_unary_f32, 1, 1, 1, 1},
      {"Mish", infer_unary_f32, 1, 1, 1, 1},
      {"ThresholdedRelu", infer_unary_f32, 1, 1, 1, 1},
      {"Gelu", infer_unary_f32, 1, 1, 1, 1, "approximate none or tanh"},
      {"Clip", infer_clip, 1, 3, 1, 1, "min/max scalars or absent"},
      {"Identity", infer_identity, 1, 1, 1, 1},
      {"Dropout", infer_dropout, 1, 3, 1, 2,
       "inference only (identity): no mask output, training_mode a constant false"},  // mask
                                                                                      // output:
                                                                                      // rejected by
                                                                                      // infer
      {"Add", infer_binary_arith, 2, 2, 1, 1, "numpy broadcasting; float32 or int64"},
      {"Sub", infer_binary_arith, 2, 2, 1, 1, "numpy broadcasting; float32 or int64"},
      {"Mul", infer_binary_arith, 2, 2, 1, 1, "numpy broadcasting; float32 or int64"},
      {"Div", infer_binary_arith, 2, 2, 1, 1, "numpy broadcasting; float32 or int64"},
      {"PRelu", infer_prelu, 2, 2, 1, 1, "slope broadcasts to X (unidirectional)"},
      {"Pow", infer_pow, 2, 2, 1, 1, "float32 base and exponent"},
      {"Sum", infer_sum, 1, kMany, 1, 1},
      {"Max", infer_sum, 1, kMany, 1, 1, "float32; NaN propagates"},
      {"Min", infer_sum, 1, kMany, 1, 1, "float32; NaN propagates"},
      {"Mean", infer_sum, 1, kMany, 1, 1},
      {"Gemm", infer_gemm, 2, 3, 1, 1, "2-D A and B"},
      {"MatMul", infer_matmul, 2, 2, 1, 1, "numpy batch broadcasting"},
      {"Einsum", infer_einsum, 1, kMany, 1, 1,
       "float32; runs as MatMul / Transpose / ReduceSum (any number of operands, left to right; "
       "a repeated label as a Mul by the identity), a summed label broadcast from size 1 on the "
       "reference kernel"},
      {"Softmax", infer_softmax, 1, 1, 1, 1, "any axis"},
      {"ReduceMean", infer_reduce, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"ReduceSum", infer_reduce, 1, 2, 1, 1, "axes constant; float32 or int64", false, false, 2},
      {"ReduceMax", infer_reduce, 1, 2, 1, 1, "axes constant; float32 or int64", false, false, 2},
      {"ReduceMin", infer_reduce, 1, 2, 1, 1, "axes constant; float32 or int64", false, false, 2},
      {"ReduceProd", infer_reduce, 1, 2, 1, 1, "axes constant; float32 or int64", false, false, 2},
      {"ReduceL1", infer_reduce, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"ReduceL2", infer_reduce, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"ReduceLogSum", infer_reduce, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"ReduceLogSumExp", infer_reduce, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"ReduceSumSquare", infer_reduce, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"ArgMax", infer_arg_reduce, 1, 1, 1, 1, "float32 input"},
      {"ArgMin", infer_arg_reduce, 1, 1, 1, 1, "float32 input"},
      {"LogSoftmax", infer_softmax, 1, 1, 1, 1, "any axis"},
      {"TopK", infer_topk, 2, 2, 1, 2, "float32; K constant", false, false, 2},
      {"CumSum", infer_cumsum, 2, 2, 1, 1, "float32 or int64; axis constant"},
      {"Hardmax", infer_softmax, 1, 1, 1, 1, "any axis"},
      {"InstanceNormalization", infer_group_norm, 3, 3, 1, 1},
      {"GroupNormalization", infer_group_norm, 3, 3, 1, 1,
       "opset < 21: scale / bias (per group) constant"},
      {"LRN", infer_lrn, 1, 1, 1, 1, "rank >= 3"},
      {"Flatten", infer_flatten, 1, 1, 1, 1},
      {"Reshape", infer_reshape, 2, 2, 1, 1, "shape constant", false, false, 2},
      {"Squeeze", infer_squeeze, 1, 2, 1, 1, "axes constant", false, false, 2},
      {"Unsqueeze", infer_unsqueeze, 2, 2, 1, 1, "axes constant", false, false, 2},
      {"Transpose", infer_transpose, 1, 1, 1, 1, "any permutation"},
      {"Shape", infer_shape, 1, 1, 1, 1, "folded to a constant at load"},
      {"Constant", infer_constant, 0, 0, 1, 1, "folded at load; no sparse_value"},
      {"If", infer_if, 1, kMany, 1, kMany,
       "condition known at load (from constants and shapes): the branch taken is inlined; "
       "a computed condition: run per run with what follows (graph/dynamic.h)"},
      {"Loop", infer_loop, 0, kMany, 1, kMany,
       "unrolled: at load when its trip count and conditions are known there (from constants, "
       "shapes and the iteration number), else per run with what follows (graph/dynamic.h); "
       "no sequence values"},
      {"Concat", infer_concat, 1, kMany, 1, 1, "float32 or int64"},
      {"Split", infer_split, 1, 2, 1, kMany, "split sizes constant", false, false, 2},
      {"Slice", infer_slice, 3, 5, 1, 1, "starts/ends/axes/steps constant", false, false, 30},
      {"Gather", infer_gather, 2, 2, 1, 1, "int64 indices"},
      {"NonZero", infer_nonzero, 1, 1, 1, 1,
       "float32, int64 or bool; output size decided per run (graph/dynamic.h)", false, true},
      {"NonMaxSuppression", infer_nms, 2, 5, 1, 1, "output size decided per run (graph/dynamic.h)",
       false, true},
      {"GatherElements", infer_gather_elements, 2, 2, 1, 1, "float32 or int64; int64 indices"},
      {"GatherND", infer_gather_nd, 2, 2, 1, 1, "int64 indices"},
      {"RoiAlign", infer_roi_align, 3, 3, 1, 1, "mode avg; reference kernel"},
      {"ScatterElements", infer_scatter_elements, 3, 3, 1, 1, "float32 or int64"},
      {"Trilu", infer_trilu, 1, 2, 1, 1,
       "a Where with a constant mask, or with k computed of constant diagonal offsets compared "
       "with k (graph/function_ops.h)"},
      {"Unique", infer_unique, 1, 1, 1, 4,
       "float32 or int64; output size decided per run (graph/dynamic.h)", false, true},
      {"ScatterND", infer_scatter_nd, 3, 3, 1, 1,
       "int64 indices; float32 or int64 data on the glue kernel (other dtypes: reference "
       "kernel); folds at load when its inputs are constant"},
      {"Pad", infer_pad, 2, 4, 1, 1,
       "modes constant, reflect, edge, wrap; pads constant and non-negative"},
      {"Equal", infer_compare, 2, 2, 1, 1, "float32, int64 or bool"},
      {"Less", infer_compare, 2, 2, 1, 1, "float32 or int64"},
      {"Greater", infer_compare, 2, 2, 1, 1, "float32 or int64"},
      {"LessOrEqual", infer_compare, 2, 2, 1, 1, "float32 or int64"},
      {"GreaterOrEqual", infer_compare, 2, 2, 1, 1, "float32 or int64"},
      {"Not", infer_logic, 1, 1, 1, 1},
      {"And", infer_logic, 2, 2, 1, 1},
      {"Or", infer_logic, 2, 2, 1, 1},
      {"Xor", infer_logic, 2, 2, 1, 1},
      {"Where", infer_where, 3, 3, 1, 1, "X/Y float32, int64 or bool"},
      {"IsNaN", infer_float_test, 1, 1, 1, 1, "float32"},
      {"IsInf", infer_float_test, 1, 1, 1, 1, "float32"},
      {"Sign", infer_sign, 1, 1, 1, 1, "float32 or int64"},
      {"Mod", infer_mod, 2, 2, 1, 1, "float32 (fmod=1) or int64"},
      {"Cast", infer_cast, 1, 1, 1, 1,
       "to float(16), double (as float), int32/64 (as int64), bool"},
      {"CastLike", infer_cast, 2, 2, 1, 1, "to float32, int64 or bool"},
      {"QuantizeLinear", infer_quantize, 2, 3, 1, 1,
       "to uint8 / int8 (kept as float32): read by DequantizeLinear or a graph output; per-tensor "
       "or "
       "per-axis, no block_size"},
      {"DequantizeLinear", infer_dequantize, 2, 3, 1, 1,
       "of uint8 / int8 / int32 constants, uint8 / int8 graph inputs or QuantizeLinear outputs; "
       "per-tensor or per-axis"},
      {"Expand", infer_expand, 2, 2, 1, 1, "shape constant", false, false, 2},
      {"Tile", infer_tile, 2, 2, 1, 1, "repeats constant", false, false, 2},
      {"ConstantOfShape", infer_constant_of_shape, 1, 1, 1, 1, "folded at load", false, false, 1},
      {"Range", infer_range, 3, 3, 1, 1, "folded at load", false, false, 7},
      {"Size", infer_size, 1, 1, 1, 1, "folded at load"},
      {"Resize", infer_resize, 1, 4, 1, 1,
       "scales/sizes constant; tf_crop_and_resize roi "
       "constant",
       false, false, 12},
      {"Upsample", infer_resize, 1, 2, 1, 1, "scales constant; imported as Resize", false, false,
       2},
      {"GridSample", infer_grid_sample, 2, 2, 1, 1,
       "4-D input (2-D images); every mode and padding_mode"},
      {"DFT", infer_dft, 1, 3, 1, 1,
       "float32; a product with the DFT matrix (graph/spectral.h): its size, signal length x "
       "bins, at most 2^24; no inverse onesided",
       false, false, 6},
      {"STFT", infer_stft, 2, 4, 1, 1,
       "float32; a strided Conv with the windowed DFT matrix (graph/spectral.h): frame length x "
       "bins at most 2^24",
       false, false, 10},
      {"OneHot", infer_one_hot, 3, 3, 1, 1,
       "float32 or int64 indices and depth; expanded into Equal and Where (graph/function_ops.h)",
       false, false, 2},
      {"MelWeightMatrix", infer_mel_weight_matrix, 5, 5, 1, 1,
       "float32 output; folded at load (computed inputs: per run, graph/dynamic.h)", false, true},
      {"DepthToSpace", infer_space_depth, 1, 1, 1, 1, "4-D"},
      {"SpaceToDepth", infer_space_depth, 1, 1, 1, 1, "4-D"},
      // Internal (graph/channel_shuffle.h): made by the rewrites, refused by the importer.
      {"ChannelShuffle", infer_channel_shuffle, 1, kMany, 1, kMany, {}, true},
      {"SubpixelInterleave", infer_subpixel_interleave, 1, 1, 1, 1, {}, true},
      // MatMul -> [scalar Mul / Div] -> [Add(bias)] -> Softmax -> MatMul in one op
      // (graph/rewrites.cpp).
      {"SoftmaxAttention", infer_softmax_attention, 3, 4, 1, 1, {}, true},
      // QuantizeLinear -> DequantizeLinear in one op (graph/fuse_qdq.h).
      {"QuantizeDequantize", infer_quantize_dequantize, 1, 1, 1, 1, {}, true},
      // A QuantizeLinear left unpaired, per tensor (graph/fuse_qdq.cpp).
      {"Quantize", infer_quantize_dequantize, 1, 1, 1, 1, {}, true},
      // The time loop of an LSTM / GRU / RNN (graph/recurrent.h).
      {"Recurrence", infer_recurrence, 2, 7, 1, 3, {}, true},
  };
  return ops;
}

std::string count_range(int lo, int hi) {
  if (lo == hi) return std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace

const OpInfo* find_op(std::string_view op) {
  for (const OpInfo& info : table())
    if (info.name == op) return &info;
  return nullptr;
}

const std::vector<OpInfo>& all_ops() {
  return table();
}

std::string supported_ops_markdown() {
  std::string md =
      "ONNX opsets " + std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
      " (default domain), float32 tensors (int64 for shape arithmetic; int32 tensors are "
      "widened to int64; bool for masks; uint8 / int8 quantized tensors are kept as float32 "
      "(QDQ models: they are read only by DequantizeLinear and the ops that only move values); "
      "float16 and bfloat16 initializers, inputs and outputs are widened to float32 at load: the "
      "caller passes and receives float32; graph inputs and outputs declared uint8, int8 or "
      "int32 are passed and returned in that type, `KILN_DTYPE_U8` / `I8` / `I32`, numpy "
      "uint8 / int8 / int32, and converted at each run), at most " +
      std::to_string(kMaxRank) +
      " dims, static shapes (a symbolic batch dim is fixed at load: `--batch`, "
      "`kiln_options.batch_size`). Older opsets' forms are rewritten into one form per op at "
      "import. Any other op is refused at load with an error naming the node.\n\n"
      "| Operator | Inputs | Outputs | Limits |\n|---|---|---|---|\n";
  for (const OpInfo& op : table()) {
    if (op.internal) continue;
    auto range = [](int lo, int hi) {
      return hi >= kMany ? std::to_string(lo) + "+" : count_range(lo, hi);
    };
    md += "| " + std::string(op.name) + " | " + range(op.min_inputs, op.max_inputs) + " | " +
          range(op.min_outputs, op.max_outputs) + " | " + std::string(op.limits) +
          (op.shape_inputs ? " (size inputs computed at run time: per run, graph/dynamic.h)" : "") +
          " |\n";
  }
  return md;
}

ValueId emit_node(Graph& g, std::vector<Node>& nodes, Node node, const std::string& base,
                  ValueId out) {
  node.outputs = {out != kNoValue ? out : g.add_value(unique_value_name(g, base))};
  infer_node(g, node);
  nodes.push_back(std::move(node));
  return nodes.back().outputs[0];
}

int rewrite_nodes(Graph& g, const std::function<bool(std::vector<Node>&, const Node&)>& rewrite) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  int rewritten = 0;
  for (Node& n : g.nodes) {
    if (rewrite(nodes, n)) {
      ++rewritten;
      continue;
    }
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

void infer_node(Graph& g, Node& node) {
  const OpInfo* info = find_op(node.op);
  if (!info) node.fail(Code::unsupported, "operator " + node.op + " is not supported");

  int nin = int(node.inputs.size()), nout = int(node.outputs.size());
  if (nin < info->min_inputs || nin > info->max_inputs)
    node.fail(Code::invalid_model, "expects " + count_range(info->min_inputs, info->max_inputs) +
                                       " input(s) but has " + std::to_string(nin));
  if (nout < info->min_outputs || nout > info->max_outputs)
    node.fail(Code::invalid_model, "expects " + count_range(info->min_outputs, info->max_outputs) +
                                       " output(s) but has " + std::to_string(nout));

  auto valid_id = [&](ValueId v) { return v >= 0 && size_t(v) < g.values.size(); };
  for (int i = 0; i < nin; ++i) {
    ValueId v = node.inputs[size_t(i)];
    if (v == kNoValue) {
      if (i < info->min_inputs)
        node.fail(Code::invalid_model, "required input " + std::to_string(i) + " is missing");
      continue;
    }
    if (!valid_id(v))
      node.fail(Code::internal, "input " + std::to_string(i) + " refers to an unknown value");
    const Value& val = g.value(v);
    if (!val.shape_known)
      node.fail(Code::invalid_model, "input " + std::to_string(i) + " '" + val.name +
                                         "' has no known shape (was its producer inferred?)");
  }
  for (int i = 0; i < nout; ++i) {
    ValueId v = node.outputs[size_t(i)];
    if (v == kNoValue) {
      if (i == 0) node.fail(Code::invalid_model, "its first output is missing");
      continue;
    }
    if (!valid_id(v))
      node.fail(Code::internal, "output " + std::to_string(i) + " refers to an unknown value");
  }
  info->infer(g, node);
}

}  // namespace kiln
