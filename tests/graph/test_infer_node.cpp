// The op table (find_op / all_ops) and the common checks infer_node makes before an op's own
// inference: supported op, input/output counts, required inputs, known input shapes, limits.
#include <set>
#include <string>

#include "graph/ops.h"
#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

TEST_CASE("op table lists every supported op once with sane bounds") {
  const char* expected[] = {
      "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization",
      "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Clip", "Identity",
      "Dropout", "Add", "Sub", "Mul", "Div", "Sum", "Gemm", "MatMul", "Einsum", "Flatten",
      "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather",
      "GatherElements", "ScatterND", "Shape", "Constant", "If", "Loop", "Pad", "Softmax",
      "ReduceMean", "Pow", "Sqrt", "Erf", "ChannelShuffle", "Gelu", "LayerNormalization", "Exp",
      "Log", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Asin",
      "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Elu", "Selu", "Celu", "Softplus",
      "Softsign", "Mish", "ThresholdedRelu", "PRelu",
      // the reductions (branch reduce)
      "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
      "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "LogSoftmax", "Hardmax",
      "InstanceNormalization", "GroupNormalization", "LRN", "TopK", "CumSum", "Max", "Min", "Mean",
      // ConvTranspose (branch convt)
      "ConvTranspose", "SubpixelInterleave",
      // attention (graph/rewrites.cpp fuse_attention)
      "SoftmaxAttention",
      // branch dtypes
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor",
      "Where", "IsNaN", "IsInf", "Sign", "Mod", "Cast", "CastLike", "Expand", "Tile",
      "ConstantOfShape", "Range", "Size",
      // branch resize
      "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "GridSample",
      // QDQ models
      "QuantizeLinear", "DequantizeLinear", "QuantizeDequantize", "Quantize",
      // output sizes decided per run (graph/dynamic.h) and what follows them
      "NonZero", "NonMaxSuppression", "Unique", "GatherND", "ScatterElements", "Trilu", "RoiAlign",
      // the time loop of LSTM / GRU / RNN (graph/recurrent.h; the ops themselves are expanded)
      "Recurrence",
      // signal ops (graph/spectral.h; the windows are expanded)
      "DFT", "STFT", "MelWeightMatrix",
      // expanded once its inputs are inferred (graph/function_ops.h)
      "OneHot"};
  for (const char* op : expected) {
    CAPTURE(op);
    const OpInfo* info = find_op(op);
    REQUIRE(info != nullptr);
    CHECK(info->name == op);
    CHECK(bool(info->infer));
  }
  std::set<std::string_view> names;
  for (const OpInfo& info : all_ops()) {
    CAPTURE(info.name);
    CHECK(names.insert(info.name).second);
    CHECK(info.min_inputs <= info.max_inputs);
    CHECK(info.min_outputs >= 1);
    CHECK(info.min_outputs <= info.max_outputs);
  }
  CHECK(names.size() == std::size(expected));
  CHECK(find_op("Scan") == nullptr);
  CHECK(find_op("LSTM") == nullptr);        // (expanded at import, graph/recurrent.h)
  CHECK(find_op("HannWindow") == nullptr);  // (graph/function_ops.h)
  CHECK(find_op("conv") == nullptr);        // op types are case-sensitive
}

TEST_CASE("infer_node: common checks") {
  Builder b;
  SUBCASE("unsupported operator") {
    b.node("Foo", {b.in("x", {1})}, 1, "x");
    check_fails(b, Code::unsupported, "node 'x' (Foo): operator Foo is not supported");
  }
  SUBCASE("too few inputs") {
    b.node("Conv", {b.in("x", {1, 1, 4, 4})});
    check_fails(b, Code::invalid_model, "expects 2 to 3 input(s) but has 1");
  }
  SUBCASE("too many inputs") {
    b.node("Gather", {b.in("x", {4}), b.ints("i", {0}), b.ints("j", {0})});
    check_fails(b, Code::invalid_model, "expects 2 input(s) but has 3");
  }
  SUBCASE("too many outputs") {
    b.node("Relu", {b.in("x", {4})}, 2);
    check_fails(b, Code::invalid_model, "expects 1 output(s) but has 2");
  }
  SUBCASE("no outputs") {
    b.node("Relu", {b.in("x", {4})}, 0);
    check_fails(b, Code::invalid_model, "output(s) but has 0");
  }
  SUBCASE("omitted required input") {
    b.node("Conv", {kNoValue, b.floats("w", {1, 1, 1, 1})});
    check_fails(b, Code::invalid_model, "required input 0 is missing");
  }
  SUBCASE("omitted first output") {
    b.node("Relu", {b.in("x", {4})}, 0);
    b.last().outputs.push_back(kNoValue);
    check_fails(b, Code::invalid_model, "first output is missing");
  }
  SUBCASE("input without a known shape") {
    ValueId x = b.g.add_value("x");
    b.node("Relu", {x});
    check_fails(b, Code::invalid_model, "'x' has no known shape");
  }
  SUBCASE("missing input inside a variadic op") {
    b.node("Concat", {b.in("a", {2}), kNoValue});
    b.set_i("axis", 0);
    check_fails(b, Code::invalid_model, "input 1 is missing");
  }
  SUBCASE("the node name appears even for table errors") {
    b.node("Relu", {b.in("x", {4}), b.in("y", {4})}, 1, "my_relu");
    check_fails(b, Code::invalid_model, "node 'my_relu' (Relu)");
  }
}

TEST_CASE("infer_node: absurd sizes") {
  Builder b;
  SUBCASE("more than 2^31 elements") {
    // 65536 * 32769 = 2^31 + 2^16 elements
    b.node("Reshape", {b.in("x", {65536, 32769}, DType::i64), b.ints("s", {-1})});
    check_fails(b, Code::unsupported, "2^31");
  }
  SUBCASE("exactly 2^31 elements is accepted") {
    b.node("Flatten", {b.in("x", {32768, 65536})});
    b.set_i("axis", 0);
    CHECK(b.shape() == Shape{1, int64_t(1) << 31});
  }
  SUBCASE("broadcast result too large") {
    b.node("Add", {b.in("a", {65536, 1}), b.in("b", {1, 65537})});
    check_fails(b, Code::unsupported, "[65536,65537]");
  }
  SUBCASE("empty float output") {
    b.node("Split", {b.in("x", {4, 3}), b.ints("s", {0, 4})}, 2);
    check_fails(b, Code::unsupported, "empty");
  }
}

TEST_CASE("infer_node: an output value records dtype, shape and shape_known") {
  Builder b;
  b.node("Shape", {b.in("x", {2, 3})});
  REQUIRE(!b.out().shape_known);
  b.infer();
  CHECK(b.out().shape_known);
  CHECK(b.out().dtype == DType::i64);
  CHECK(b.out().shape == Shape{2});
  CHECK(!b.out().is_const());  // folding is the passes' job, not inference's
}
