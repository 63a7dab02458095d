// ScatterND (opsets 11-18): y = data with the slices that `indices` names replaced by (or
// reduced with) `updates`. Reference only: in the models that use it (Swin's shifted-window
// mask, built by slice assignment) every input is constant and it folds at load.
#include <algorithm>
#include <cstring>

#include "runtime/ref/ref_common.h"

namespace kiln::ref {

void scatter_nd(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& idx = req_input(node, in, 1);
  const Tensor& upd = req_input(node, in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, idx, DType::i64, "input indices");
  expect_dtype(node, upd, x.dtype(), "input updates");
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, x.shape(), "output");
  const std::string red = node.attr_s("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    node.fail(Code::invalid_model, "unknown reduction '" + red + "'");
  if (red != "none" && x.dtype() == DType::boolean)
    node.fail(Code::unsupported, "reduction '" + red + "' of bool tensors is not supported");
  const Shape& xs = x.shape();
  const Shape& is = idx.shape();
  if (is.empty() || is.back() < 1 || size_t(is.back()) > xs.size())
    node.fail(Code::invalid_model,
              "indices shape " + shape_str(is) + " does not index data of shape " + shape_str(xs));
  const size_t k = size_t(is.back());
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), xs.begin() + int64_t(k), xs.end());
  if (upd.shape() != want)
    node.fail(Code::invalid_model,
              "updates have shape " + shape_str(upd.shape()) + ", expected " + shape_str(want));
  const int64_t slice = prod(xs, k, xs.size()), n = prod(is, 0, is.size() - 1);
  const std::vector<int64_t> st = strides_of(xs);
  // Every index checked (negative ones count from the end) before anything is written.
  std::vector<int64_t> off(size_t(n), 0);
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t j = 0; j < n; ++j)
    for (size_t d = 0; d < k; ++d) {
      int64_t v = ip[size_t(j) * k + d];
      if (v < 0) v += xs[d];
      if (v < 0 || v >= xs[d])
        node.fail(Code::invalid_argument, "index " + std::to_string(ip[size_t(j) * k + d]) +
                                              " is out of range for dim " + std::to_string(d) +
                                              " of size " + std::to_string(xs[d]));
      off[size_t(j)] += v * st[d];
    }
  if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data<T>();
    const T* up = upd.data<T>();
    for (int64_t j = 0; j < n; ++j)
      for (int64_t e = 0; e < slice; ++e) {
        T& dst = yp[off[size_t(j)] + e];
        const T u = up[j * slice + e];
        if (red == "add")
          dst = T(dst + u);
        else if (red == "mul")
          dst = T(dst * u);
        else if (red == "max")
          dst = std::max(dst, u);
        else if (red == "min")
          dst = std::min(dst, u);
        else
          dst = u;
      }
  });
}

}  // namespace kiln::ref
