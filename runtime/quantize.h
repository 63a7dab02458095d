// Static post-training quantization of an f32 ONNX model into a standard QDQ model (`kiln
// quantize`): the file ONNX Runtime and Kiln both load, with QuantizeLinear / DequantizeLinear
// around every Conv, Gemm and MatMul with constant weights and around residual Adds.
//
// What is quantized, as ONNX Runtime's QDQ quantizer does by default:
//   activations  uint8, asymmetric, per tensor: the non-constant input of each quantized node,
//                its output (after a Relu that alone reads it: the quantized range then starts
//                at 0), both inputs and the output of an Add of two activations. Graph outputs
//                stay float32. A tensor gets one Q -> DQ pair after its producer; every reader
//                reads the DQ.
//   weights      int8, symmetric (range +-127, zero point 0), per tensor or per output channel.
//   biases       int32, scale = input scale x weight scale, zero point 0 (Conv bias, Gemm's 1-D C).
// Ranges come from running the f32 model with Kiln on calibration inputs: min / max (`minmax`)
// or the 0.01th / 99.99th percentile of all values seen (`percentile`, a 4096-bin histogram).
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

enum class CalibMethod { minmax, percentile };

struct QuantizeOptions {
  // Calibration inputs: every .npy file of this folder (sorted by name), one sample each, for a
  // model with one input (float32; dim 0 may be another batch). Empty: random inputs.
  std::string calib_dir;
  int random_samples = 8;  // without calib_dir: this many standard-normal inputs (fixed seeds)
  bool per_channel = false;
  CalibMethod method = CalibMethod::minmax;
  int threads = 0;  // for the calibration runs (0: all cores)
};

struct QuantizeReport {
  int samples = 0;      // calibration inputs run
  int activations = 0;  // tensors given a Q -> DQ pair
  int weights = 0;      // initializers stored as int8
  int biases = 0;       // initializers stored as int32
  int nodes = 0;        // Conv / Gemm / MatMul / Add nodes quantized
};

// Reads `model_path`, calibrates, writes the QDQ model to `out_path` (replaced only once it is
// complete). Throws Error naming what is wrong: unreadable or invalid model, external data,
// opset < 13 with per_channel (per-axis DequantizeLinear) or < 10, calibration files that do
// not fit the input, nothing to quantize.
QuantizeReport quantize_model(const std::string& model_path, const std::string& out_path,
                              const QuantizeOptions& o);

bool parse_calib_method(const std::string& s, CalibMethod* out);

}  // namespace kiln
