// ScatterND (opsets 11-18): y = data with the slices that `indices` names replaced by (or
// reduced with) `updates`; GatherND: the slices `indices` names. Reference only: in the models
// that use them every input is constant and they fold at load (Swin's shifted-window mask,
// built by slice assignment), or they run in a run-time tail (boolean indexing after a
// detector's score threshold: NonZero -> GatherND).
#include <algorithm>
#include <cstring>

#include "runtime/ref/ref_common.h"

namespace kiln::ref {

Reduction scatter_reduction(const Node& node) {
  const std::string r = node.attr_s("reduction", "none");
  if (const std::optional<Reduction> red = parse_reduction(r)) return *red;
  node.fail(Code::invalid_model, "unknown reduction '" + r + "'");
}

void scatter_nd(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& idx = req_input(node, in, 1);
  const Tensor& upd = req_input(node, in, 2);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, idx, DType::i64, "input indices");
  expect_dtype(node, upd, x.dtype(), "input updates");
  expect_dtype(node, y, x.dtype(), "output");
  expect_shape(node, y, x.shape(), "output");
  const Reduction red = scatter_reduction(node);
  if (red != Reduction::none && x.dtype() == DType::boolean)
    node.fail(Code::unsupported, "reduction '" + node.attr_s("reduction", "none") +
                                     "' of bool tensors is not supported");
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
        dst = scatter_reduce(red, dst, up[j * slice + e]);
      }
  });
}

void gather_nd(const Node& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = req_input(node, in, 0);
  const Tensor& idx = req_input(node, in, 1);
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, idx, DType::i64, "input indices");
  expect_dtype(node, y, x.dtype(), "output");
  const Shape& xs = x.shape();
  const Shape& is = idx.shape();
  const int64_t b = node.attr_i("batch_dims", 0);
  if (b < 0 || b >= int64_t(is.size()) || b >= int64_t(xs.size()) || is.back() < 1 ||
      b + is.back() > int64_t(xs.size()))
    node.fail(Code::invalid_model, "indices shape " + shape_str(is) + " (batch_dims " +
                                       std::to_string(b) + ") does not index data of shape " +
                                       shape_str(xs));
  const size_t k = size_t(is.back()), lead = size_t(b);
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), xs.begin() + b + int64_t(k), xs.end());
  expect_shape(node, y, want, "output");
  const int64_t batches = prod(xs, 0, lead);
  const int64_t per_batch = prod(is, lead, is.size() - 1);  // index tuples per batch
  const int64_t slice = prod(xs, lead + k, xs.size());
  const int64_t batch_stride = prod(xs, lead, xs.size());
  const std::vector<int64_t> st = strides_of(xs);
  const size_t esize = dtype_size(x.dtype());
  const int64_t* ip = idx.data<int64_t>();
  const auto* xp = static_cast<const unsigned char*>(x.raw());
  auto* yp = static_cast<unsigned char*>(y.raw());
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t j = 0; j < per_batch; ++j) {
      const int64_t* t = ip + (bi * per_batch + j) * int64_t(k);
      int64_t off = bi * batch_stride;
      for (size_t d = 0; d < k; ++d) {
        const int64_t dim = xs[lead + d];
        const int64_t v = t[d] < 0 ? t[d] + dim : t[d];
        if (v < 0 || v >= dim)
          node.fail(Code::invalid_argument,
                    "index " + std::to_string(t[d]) + " is out of range for dim " +
                        std::to_string(lead + d) + " of size " + std::to_string(dim));
        off += v * st[lead + d];
      }
      std::memcpy(yp + size_t((bi * per_batch + j) * slice) * esize, xp + size_t(off) * esize,
                  size_t(slice) * esize);
    }
}

}  // namespace kiln::ref
