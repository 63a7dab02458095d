// The conv shape sets of kiln_kernel_bench (batch 1): every distinct conv of ResNet-50
// (torchvision v1.5: the stride sits on the 3x3), VGG-16 (224x224 input) and the depthwise
// convs of MobileNetV2 (torchvision), each with its number of occurrences in the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/conv/conv_problem.h"

namespace kiln::bench {

struct Layer {
  std::string set;   // "resnet50", "vgg16", "mobilenetv2", "custom"
  std::string name;  // e.g. "1x1_64to256@56"
  int64_t ic = 0, ih = 0, oc = 0, k = 1, s = 1;
  int64_t groups = 1;  // == ic == oc for depthwise
  int count = 1;       // occurrences in the network
  bool depthwise() const { return groups > 1 && groups == ic && groups == oc; }
};

// "resnet50", "vgg16", "mobilenetv2" or "all" (all three, in that order).
std::vector<Layer> layer_set(const std::string& set);
std::vector<std::string> set_names();

// Square input, pad k / 2, oh = (ih + 2 * pad - k) / s + 1, bias; `post` "relu" adds a ReLU
// (ReLU6 on depthwise layers, as MobileNetV2 has), "" nothing.
ConvProblem make_problem(const Layer& l, const std::string& post);

// Bytes a conv must move at least once: input + output + weights (+ bias), f32, unpadded.
double min_bytes(const ConvProblem& p);

}  // namespace kiln::bench
