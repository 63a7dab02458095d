// Slice (any steps), Gather (constant indices on one axis) and Concat (any axis) of f32 tensors
// of any rank, as one kernel shape: for every index o of the leading dims, segments of floats
// copied from an input to the output (row-major order: Kiln's nchw). Contiguous runs are libc's
// vectorised memcpy, strided or reversed ones (a Slice's steps, torch.flip) plain loops; the
// work is split into tiles of ~64 KiB over (o, segment piece).
#include <algorithm>
#include <cstring>

#include "jit/glue/glue.h"

namespace kiln {
namespace {

constexpr int64_t kPieceFloats = 16384;  // 64 KiB: segments longer than this are split

class BlockCopyKernel final : public Kernel {
 public:
  BlockCopyKernel(const BlockCopyProblem& p, std::string name) : p_(p), name_(std::move(name)) {
    for (size_t s = 0; s < p_.segments.size(); ++s) {
      const BlockCopyProblem::Segment& g = p_.segments[s];
      for (int64_t at = 0; at < g.len; at += kPieceFloats)
        pieces_.push_back({int(s), at, std::min(kPieceFloats, g.len - at)});
    }
    int64_t floats = 0;
    for (const Piece& q : pieces_) floats += q.len;
    const int64_t per_outer = std::max<int64_t>(1, floats);
    // Tiles of (outer index, piece) pairs, ~kPieceFloats floats each.
    group_ = std::max<int64_t>(1, kPieceFloats / per_outer);  // outer indices per tile
    tiles_ = group_ > 1 ? (p_.outer + group_ - 1) / group_ : p_.outer * int64_t(pieces_.size());
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_; }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const int64_t np = int64_t(pieces_.size());
    for (int64_t t = begin; t < end; ++t) {
      if (group_ > 1) {
        const int64_t o1 = std::min(p_.outer, (t + 1) * group_);
        for (int64_t o = t * group_; o < o1; ++o)
          for (const Piece& q : pieces_) copy(a, o, q);
      } else {
        copy(a, t / np, pieces_[size_t(t % np)]);
      }
    }
  }

 private:
  struct Piece {
    int segment;
    int64_t at, len;
  };
  void copy(const KernelArgs& a, int64_t o, const Piece& q) const {
    const BlockCopyProblem::Segment& g = p_.segments[size_t(q.segment)];
    float* d = a.dst[0] + o * p_.dst_outer + g.dst_off + q.at;
    const float* s = a.src[g.input] + o * p_.src_outer[size_t(g.input)] + g.src_off;
    if (g.stride == 1) {
      std::memcpy(d, s + q.at, size_t(q.len) * sizeof(float));
    } else if (g.stride == -1) {  // a reversed run (torch.flip)
      const float* e = s - q.at;
      for (int64_t i = 0; i < q.len; ++i) d[i] = e[-i];
    } else {
      const float* e = s + q.at * g.stride;
      for (int64_t i = 0; i < q.len; ++i) d[i] = e[i * g.stride];
    }
  }

  BlockCopyProblem p_;
  std::string name_;
  std::vector<Piece> pieces_;
  int64_t group_ = 1, tiles_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> create_block_copy_kernel(const BlockCopyProblem& p, const std::string& op,
                                                 std::string* why_not) {
  if (p.outer < 1 || p.segments.empty()) return decline(why_not, "nothing to copy");
  for (const BlockCopyProblem::Segment& g : p.segments) {
    if (g.input < 0 || size_t(g.input) >= p.src_outer.size() || g.len < 1 || g.stride == 0 ||
        g.dst_off < 0 || g.dst_off + g.len > p.dst_outer)
      return decline(why_not, "a segment outside its tensors");
    // The run's first and last source element (|stride| < src_outer when len > 1).
    const int64_t n = p.src_outer[size_t(g.input)];
    if (g.len > 1 && (g.stride >= n || g.stride <= -n))
      return decline(why_not, "a segment outside its tensors");
    const int64_t last = g.src_off + (g.len - 1) * g.stride;
    if (std::min(g.src_off, last) < 0 || std::max(g.src_off, last) >= n)
      return decline(why_not, "a segment outside its tensors");
  }
  return std::make_unique<BlockCopyKernel>(p, op + "_f32_blocks");
}

}  // namespace kiln
