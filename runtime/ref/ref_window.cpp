#include "runtime/ref/ref_window.h"

namespace kiln::ref {

Window2d read_window2d(const Node& node, const std::vector<int64_t>& kernel) {
  // auto_pad must have been turned into explicit pads by shape inference: re-deriving it here
  // would be a second, possibly different, implementation.
  if (node.has("auto_pad")) {
    std::string ap = node.attr_s("auto_pad", "NOTSET");
    if (ap != "NOTSET")
      node.fail(Code::internal, "auto_pad=" + ap + " was not made explicit by shape inference");
  }
  std::vector<int64_t> k = node.attr_ints("kernel_shape", kernel);
  if (k.empty()) node.fail(Code::invalid_model, "attribute kernel_shape is required");
  if (k.size() != 2)
    node.fail(Code::unsupported, "only 2-D windows are supported (kernel_shape has " +
                                     std::to_string(k.size()) + " values)");
  if (!kernel.empty() && k != kernel)
    node.fail(Code::invalid_model, "kernel_shape does not match the weights");
  std::vector<int64_t> s = node.attr_ints("strides", {1, 1});
  std::vector<int64_t> d = node.attr_ints("dilations", {1, 1});
  std::vector<int64_t> p = node.attr_ints("pads", {0, 0, 0, 0});
  if (s.size() != 2 || d.size() != 2 || p.size() != 4)
    node.fail(Code::invalid_model, "strides/dilations need 2 values and pads 4");
  for (int i = 0; i < 2; ++i)
    if (k[i] < 1 || s[i] < 1 || d[i] < 1)
      node.fail(Code::invalid_model, "kernel_shape, strides and dilations must be >= 1");
  for (int64_t v : p)
    if (v < 0) node.fail(Code::invalid_model, "pads must be >= 0");
  return {k[0], k[1], s[0], s[1], d[0], d[1], p[0], p[1], p[2], p[3]};
}

}  // namespace kiln::ref
