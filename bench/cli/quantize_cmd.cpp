// `kiln quantize`: runtime/quantize.h's static QDQ quantization from the command line.
#include <cstdio>

#include "cli.h"
#include "runtime/quantize.h"

namespace kiln::cli {

int cmd_quantize(const Args& a) {
  QuantizeOptions o;
  o.calib_dir = a.calib;
  if (a.random > 0) o.random_samples = a.random;
  o.per_channel = a.per_channel;
  if (!a.method.empty()) parse_calib_method(a.method, &o.method);  // validated by parse()
  o.threads = a.threads;
  const QuantizeReport r = quantize_model(a.model, a.out, o);
  std::printf("calibrated on %d %s input%s (%s)\n", r.samples, a.calib.empty() ? "random" : "file",
              r.samples == 1 ? "" : "s", a.method.empty() ? "minmax" : a.method.c_str());
  std::printf(
      "quantized %d nodes: %d activations (uint8), %d weights (int8%s), %d biases (int32)\n",
      r.nodes, r.activations, r.weights, a.per_channel ? ", per channel" : "", r.biases);
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace kiln::cli
