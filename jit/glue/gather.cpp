// Gather with computed indices and GatherElements (torch.gather) of f32 / int64 tensors
// (glue.h GatherProblem): the index-driven copies of detection decoders (top-K then gather).
// Gather copies whole rows of `inner` elements (memcpy), GatherElements walks the output's
// rows and reads each element at its index. Every index is checked: one outside the axis is an
// error naming it, as the reference kernels (runtime/ref/ref_shape_ops.cpp) report it.
#include <algorithm>
#include <cstring>
#include <string>

#include "jit/glue/glue.h"

namespace kiln {
namespace {

constexpr int64_t kTileElems = 16384;

class GatherKernel final : public Kernel {
 public:
  GatherKernel(const GatherProblem& p, std::string name) : p_(p), name_(std::move(name)) {
    if (p.elements) {
      const size_t r = p.index.size();
      row_ = p.index[r - 1];
      rows_ = shape_numel(p.index) / std::max<int64_t>(row_, 1);
      stride_.assign(r, 1);
      for (size_t d = r - 1; d-- > 0;) stride_[d] = stride_[d + 1] * p.data[d + 1];
      dim_ = p.data[size_t(p.axis)];
    } else {
      row_ = p.inner;
      rows_ = p.outer * p.n;
      dim_ = p.dim;
    }
    per_tile_ = std::max<int64_t>(1, kTileElems / std::max<int64_t>(row_, 1));
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return (rows_ + per_tile_ - 1) / per_tile_; }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const auto* x = reinterpret_cast<const char*>(a.src[0]);
    const auto* idx = reinterpret_cast<const int64_t*>(a.src[1]);
    auto* y = reinterpret_cast<char*>(a.dst[0]);
    const int64_t r0 = begin * per_tile_, r1 = std::min(rows_, end * per_tile_);
    if (p_.esize == 4)
      p_.elements ? elements<uint32_t>(x, idx, y, r0, r1) : rows(x, idx, y, r0, r1);
    else
      p_.elements ? elements<uint64_t>(x, idx, y, r0, r1) : rows(x, idx, y, r0, r1);
  }

 private:
  int64_t checked(int64_t i) const {
    if (i < -dim_ || i >= dim_)
      fail(Code::invalid_argument, name_ + ": index " + std::to_string(i) +
                                       " is out of range for an axis of size " +
                                       std::to_string(dim_));
    return i < 0 ? i + dim_ : i;
  }

  // Gather: output row (o, j) is data row (o, idx[j]) of `inner` elements.
  void rows(const char* x, const int64_t* idx, char* y, int64_t r0, int64_t r1) const {
    const size_t bytes = size_t(p_.inner * p_.esize);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / p_.n, j = r % p_.n;
      std::memcpy(y + size_t(r) * bytes, x + size_t(o * p_.dim + checked(idx[j])) * bytes, bytes);
    }
  }

  // GatherElements: output rows r0..r1 (all dims but the last), each element read at its index.
  template <class T>
  void elements(const char* xb, const int64_t* idx, char* yb, int64_t r0, int64_t r1) const {
    const auto* x = reinterpret_cast<const T*>(xb);
    auto* y = reinterpret_cast<T*>(yb);
    const size_t r = p_.index.size(), axis = size_t(p_.axis);
    const bool last = axis == r - 1;
    const int64_t astride = stride_[axis];
    for (int64_t row = r0; row < r1; ++row) {
      // The row's data offset over dims [0, r - 1) other than the axis.
      int64_t base = 0;
      for (size_t d = r - 1, q = size_t(row); d-- > 0;) {
        const int64_t i = int64_t(q % size_t(p_.index[d]));
        q /= size_t(p_.index[d]);
        if (d != axis) base += i * stride_[d];
      }
      const int64_t* ir = idx + row * row_;
      T* yr = y + row * row_;
      if (last)
        for (int64_t j = 0; j < row_; ++j) yr[j] = x[base + checked(ir[j])];
      else
        for (int64_t j = 0; j < row_; ++j) yr[j] = x[base + j + checked(ir[j]) * astride];
    }
  }

  GatherProblem p_;
  std::string name_;
  std::vector<int64_t> stride_;  // data's row-major strides (GatherElements)
  int64_t row_ = 1, rows_ = 0, dim_ = 1, per_tile_ = 1;
};

}  // namespace

std::unique_ptr<Kernel> create_gather_kernel(const GatherProblem& p, std::string* why_not) {
  if (p.esize != 4 && p.esize != 8) return decline(why_not, "elements of 4 or 8 bytes");
  if (p.elements) {
    const size_t r = p.index.size();
    if (r == 0 || p.data.size() != r || p.axis < 0 || p.axis >= int64_t(r))
      return decline(why_not, "indices and data of one rank, the axis inside it");
    for (size_t d = 0; d < r; ++d)
      if (p.index[d] < 1 || p.data[d] < 1 || (int64_t(d) != p.axis && p.index[d] > p.data[d]))
        return decline(why_not, "empty tensors or indices larger than data");
  } else if (p.outer < 1 || p.dim < 1 || p.inner < 1 || p.n < 1) {
    return decline(why_not, "empty tensors");
  }
  return std::make_unique<GatherKernel>(
      p, std::string(p.elements ? "gather_elements" : "gather_rows") +
             (p.esize == 4 ? "_f32" : "_s64"));
}

}  // namespace kiln
