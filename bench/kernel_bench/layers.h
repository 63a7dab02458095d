// The conv layers kiln_kernel_bench times: the shape lists of tests/shapes/ (shape_list.h; the
// same files the kernel tests read), e.g. every distinct conv of ResNet-50, VGG-16 and the
// depthwise convs of MobileNetV2, each with its number of occurrences in the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/conv/conv_problem.h"

namespace kiln::bench {

struct Layer {
  std::string set;   // the list it came from ("resnet50", "vgg16", ...) or "custom"
  std::string name;  // e.g. "1x1_64to256@56"
  ConvProblem p;     // as listed (bias, no post-op)
  int count = 1;     // occurrences in the network
  bool depthwise() const { return p.groups > 1 && p.groups == p.ic && p.groups == p.oc; }
};

// A shape list of tests/shapes/ by name (or a path with a '/'), or "all": the network sets of
// set_names(), in that order.
std::vector<Layer> layer_set(const std::string& set);
std::vector<std::string> set_names();  // resnet50, vgg16, mobilenetv2

// --shape IC,IH,OC,K,S[,G] (square input, pad K/2, bias) or a ConvProblem string.
Layer custom_layer(const std::string& spec);

// The layer's problem; `post` "relu" adds a ReLU (ReLU6 on depthwise layers, as MobileNetV2
// has), "" nothing.
ConvProblem make_problem(const Layer& l, const std::string& post);

// Bytes a conv must move at least once: input + output + weights (+ bias), f32, unpadded.
double min_bytes(const ConvProblem& p);

}  // namespace kiln::bench
