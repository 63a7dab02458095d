// ScatterND and ScatterElements of computed f32 / int64 tensors (glue.h ScatterProblem): slice
// assignment (`x[:, 0] = v`, `x[idx] = v` in PyTorch exports) and torch.scatter / scatter_add.
// A tile is a contiguous range of the output: it copies the data's range, then walks every
// update in index order and applies those landing in its range. Tiles touch disjoint bytes and
// each applies its updates in the sequential order, so any schedule gives the reference
// kernels' result (repeated indices included). Every tile reads every index; there are at most
// kScatterMaxTiles of them, and an index outside its dim is an error naming it whichever tile meets
// it.
#include <algorithm>
#include <cstring>
#include <string>

#include "jit/glue/glue.h"

namespace kiln {
namespace {

constexpr int64_t kScatterTileElems = 1 << 16;
constexpr int64_t kScatterMaxTiles = 16;

class ScatterKernel final : public Kernel {
 public:
  ScatterKernel(const ScatterProblem& p, std::string name) : p_(p), name_(std::move(name)) {
    total_ = shape_numel(p.data);
    tiles_ = std::clamp<int64_t>((total_ + kScatterTileElems - 1) / kScatterTileElems, 1,
                                 kScatterMaxTiles);
    stride_.assign(p.data.size(), 1);
    for (size_t d = p.data.size() - 1; d-- > 0;) stride_[d] = stride_[d + 1] * p.data[d + 1];
    if (!p.elements) {
      q_ = p.index.back();
      updates_ = shape_numel(p.index) / q_;
      slice_ = q_ < int64_t(p.data.size()) ? stride_[size_t(q_ - 1)] : 1;
    }
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_; }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t lo = total_ * t / tiles_, hi = total_ * (t + 1) / tiles_;
      std::memcpy(reinterpret_cast<char*>(a.dst[0]) + lo * p_.esize,
                  reinterpret_cast<const char*>(a.src[0]) + lo * p_.esize,
                  size_t((hi - lo) * p_.esize));
      const auto* idx = reinterpret_cast<const int64_t*>(a.src[1]);
      if (p_.esize == 4)
        apply(idx, reinterpret_cast<const float*>(a.src[2]), reinterpret_cast<float*>(a.dst[0]), lo,
              hi);
      else
        apply(idx, reinterpret_cast<const int64_t*>(a.src[2]), reinterpret_cast<int64_t*>(a.dst[0]),
              lo, hi);
    }
  }

 private:
  int64_t checked(int64_t i, size_t d) const {
    const int64_t dim = p_.data[d];
    if (i < -dim || i >= dim)
      fail(Code::invalid_argument, name_ + ": index " + std::to_string(i) +
                                       " is out of range for dim " + std::to_string(d) +
                                       " of size " + std::to_string(dim));
    return i < 0 ? i + dim : i;
  }

  template <class T>
  void apply(const int64_t* idx, const T* upd, T* y, int64_t lo, int64_t hi) const {
    const Reduction red = p_.reduction;
    if (!p_.elements) {
      for (int64_t j = 0; j < updates_; ++j) {
        int64_t off = 0;
        for (int64_t d = 0; d < q_; ++d)
          off += checked(idx[j * q_ + d], size_t(d)) * stride_[size_t(d)];
        const int64_t b = std::max(off, lo), e = std::min(off + slice_, hi);
        const T* u = upd + j * slice_ - off;
        for (int64_t i = b; i < e; ++i) y[i] = scatter_reduce(red, y[i], u[i]);
      }
      return;
    }
    // ScatterElements: the index element's coordinates as an odometer over index's shape.
    const size_t rank = p_.index.size(), axis = size_t(p_.axis);
    std::vector<int64_t> at(rank, 0);
    const int64_t n = shape_numel(p_.index);
    for (int64_t j = 0; j < n; ++j) {
      int64_t off = checked(idx[j], axis) * stride_[axis];
      for (size_t d = 0; d < rank; ++d)
        if (d != axis) off += at[d] * stride_[d];
      if (off >= lo && off < hi) y[off] = scatter_reduce(red, y[off], upd[j]);
      for (size_t d = rank; d-- > 0 && ++at[d] == p_.index[d];) at[d] = 0;
    }
  }

  ScatterProblem p_;
  std::string name_;
  std::vector<int64_t> stride_;  // data's row-major strides
  int64_t total_ = 0, tiles_ = 1, q_ = 0, updates_ = 0, slice_ = 1;
};

}  // namespace

std::unique_ptr<Kernel> create_scatter_kernel(const ScatterProblem& p, std::string* why_not) {
  if (p.esize != 4 && p.esize != 8) return decline(why_not, "elements of 4 or 8 bytes");
  const size_t r = p.data.size();
  if (r == 0 || p.index.empty() || shape_numel(p.data) == 0 || shape_numel(p.index) == 0)
    return decline(why_not, "empty tensors");
  if (p.elements) {
    if (p.index.size() != r || p.axis < 0 || p.axis >= int64_t(r))
      return decline(why_not, "indices and data of one rank, the axis inside it");
    for (size_t d = 0; d < r; ++d)
      if (int64_t(d) != p.axis && p.index[d] > p.data[d])
        return decline(why_not, "indices larger than data");
  } else if (p.index.back() < 1 || p.index.back() > int64_t(r)) {
    return decline(why_not, "indices' last dim outside 1 .. data's rank");
  }
  return std::make_unique<ScatterKernel>(
      p, std::string(p.elements ? "scatter_elements" : "scatter_nd") +
             (p.esize == 4 ? "_f32" : "_s64"));
}

}  // namespace kiln
