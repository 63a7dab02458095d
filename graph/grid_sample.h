// GridSample (ONNX opset 16+, PyTorch's grid_sample) of a 2-D image: where each output pixel
// reads, as taps (an input pixel and a weight), shared by the reference kernel and the JIT
// kernel's tap tables so that both sample the same points. Semantics (ONNX = PyTorch):
// - a grid value g in [-1, 1] maps to pixel ((g + 1) / 2) (size - 1) with align_corners, else
//   ((g + 1) size - 1) / 2;
// - bilinear / nearest: the coordinate is padded first (border: clipped to [0, size - 1];
//   reflection: reflected about the edges — the pixel centres with align_corners, the image's
//   borders (-0.5, size - 0.5) without — then clipped), then 4 taps (floor and floor + 1) or
//   the nearest pixel (round half to even); a tap outside the image reads 0;
// - bicubic: 4 x 4 taps around floor(coordinate) with A = -0.75, each tap's index padded as
//   above (zeros: a tap outside reads 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "graph/ir.h"

namespace kiln {

struct GridSampleSpec {
  enum class Mode { bilinear, nearest, bicubic } mode = Mode::bilinear;
  enum class Padding { zeros, border, reflection } padding = Padding::zeros;
  bool align_corners = false;
  int taps() const { return mode == Mode::nearest ? 1 : mode == Mode::bilinear ? 4 : 16; }
};

// The node's mode (opset 16's bilinear / nearest / bicubic or opset 20's linear / nearest /
// cubic), padding_mode and align_corners; invalid_model naming the node for unknown values
// (graph/infer_resize.cpp).
GridSampleSpec grid_sample_spec(const Node& n);

// One tap: input pixel index (y * W + x, or -1: reads 0) and its weight.
struct GridTap {
  int64_t pixel;
  float w;
};

namespace grid_detail {

inline double unnormalize(double g, int64_t size, bool align) {
  return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
}

inline double reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  v = std::fabs(v - lo);
  const double extra = std::fmod(v, span);
  const int64_t flips = int64_t(std::floor(v / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

// A coordinate after border / reflection padding (unchanged for zeros).
inline double pad_coord(double v, int64_t size, const GridSampleSpec& s) {
  using P = GridSampleSpec::Padding;
  if (s.padding == P::zeros) return v;
  if (s.padding == P::reflection)
    v = s.align_corners ? reflect(v, 0, 2 * double(size - 1))
                        : reflect(v, -1, 2 * double(size) - 1);
  return std::min(double(size - 1), std::max(v, 0.0));
}

inline double cubic_w(double t, int k) {  // weight of tap k (-1..2 -> 0..3) at fraction t
  const double A = -0.75;
  auto near = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
  auto far = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
  return k == 0 ? far(t + 1) : k == 1 ? near(t) : k == 2 ? near(1 - t) : far(2 - t);
}

}  // namespace grid_detail

// The taps (spec.taps() of them) of the output pixel whose grid value is (gx, gy), on an
// input of h x w pixels.
inline void grid_taps(const GridSampleSpec& s, float gx, float gy, int64_t h, int64_t w,
                      GridTap* out) {
  using namespace grid_detail;
  double x = unnormalize(gx, w, s.align_corners), y = unnormalize(gy, h, s.align_corners);
  auto at = [&](int64_t ix, int64_t iy) {
    return ix >= 0 && ix < w && iy >= 0 && iy < h ? iy * w + ix : int64_t(-1);
  };
  // NaN or huge coordinates read nothing (the int64 conversions below need finite, bounded
  // values).
  auto sane = [](double v) { return std::fabs(v) < 1e15; };
  if (s.mode == GridSampleSpec::Mode::bicubic) {
    const double fx = std::floor(x), fy = std::floor(y), tx = x - fx, ty = y - fy;
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        GridTap& t = out[j * 4 + i];
        t.w = float(cubic_w(tx, i) * cubic_w(ty, j));
        t.pixel = -1;
        if (!sane(x) || !sane(y)) continue;
        const double px = pad_coord(fx - 1 + i, w, s), py = pad_coord(fy - 1 + j, h, s);
        t.pixel = at(int64_t(px), int64_t(py));
      }
    return;
  }
  x = pad_coord(x, w, s);
  y = pad_coord(y, h, s);
  if (s.mode == GridSampleSpec::Mode::nearest) {
    out[0] = {sane(x) && sane(y) ? at(int64_t(std::nearbyint(x)), int64_t(std::nearbyint(y))) : -1,
              1.f};
    return;
  }
  const double fx = std::floor(x), fy = std::floor(y), tx = x - fx, ty = y - fy;
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 2; ++i) {
      GridTap& t = out[j * 2 + i];
      t.w = float((i ? tx : 1 - tx) * (j ? ty : 1 - ty));
      t.pixel = sane(x) && sane(y) ? at(int64_t(fx) + i, int64_t(fy) + j) : -1;
    }
}

}  // namespace kiln
