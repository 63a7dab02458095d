// The tiles of a glue kernel over one axis of a row-major tensor viewed as [outer, n, inner]
// (ArgMax / ArgMin / Hardmax, TopK, CumSum): where inner is 1, groups of whole rows of about 16K
// elements; else one outer index and a strip of up to `strip` inner positions each.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kiln {

class AxisTiles {
 public:
  struct Tile {
    int64_t o0, o1;  // outer indices [o0, o1) (one of them where inner > 1)
    int64_t i0, i1;  // inner positions [i0, i1)
  };
  AxisTiles(int64_t outer, int64_t n, int64_t inner, int64_t strip)
      : outer_(outer), inner_(inner), strip_(strip) {
    if (inner == 1)
      rows_ = std::max<int64_t>(1, kTileElems / std::max<int64_t>(n, 1));
    else
      strips_ = (inner + strip - 1) / strip;
  }
  int64_t count() const { return inner_ == 1 ? (outer_ + rows_ - 1) / rows_ : outer_ * strips_; }
  Tile operator[](int64_t t) const {
    if (inner_ == 1) return {t * rows_, std::min(outer_, (t + 1) * rows_), 0, 1};
    const int64_t i0 = t % strips_ * strip_;
    return {t / strips_, t / strips_ + 1, i0, std::min(inner_, i0 + strip_)};
  }

 private:
  static constexpr int64_t kTileElems = 16384;
  int64_t outer_, inner_, strip_, rows_ = 1, strips_ = 1;
};

}  // namespace kiln
