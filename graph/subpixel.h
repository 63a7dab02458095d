// SubpixelInterleave, Kiln's internal op that puts a ConvTranspose's stride-phase planes back
// together (graph/rewrite_convt.cpp); shared by shape inference, the reference kernel and the
// JIT gather (jit/glue/subpixel.cpp). Along each spatial dim of stride s and offset off, output
// o is phase r = (o + off) % s at plane position q - org[r], q = (o + off) / s (org empty: all
// 0). Channel of (c, rh, rw) in the planes' tensor: (c * sh + rh) * sw + rw (one Conv computes
// every phase), or with phase_major (rh * sw + rw) * C + c (a Conv per phase, concatenated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

inline int64_t subpixel_origin(const std::vector<int64_t>& org, int64_t r) {
  return org.empty() ? 0 : org[size_t(r)];
}

// Along one dim of `out` outputs: does every phase read inside its `planes` positions (and have
// an origin if origins are given)?
inline bool subpixel_reads_inside(int64_t out, int64_t s, int64_t off,
                                  const std::vector<int64_t>& org, int64_t planes) {
  if (s < 1 || off < 0 || out < 1 || (!org.empty() && int64_t(org.size()) != s)) return false;
  for (int64_t r = 0; r < s; ++r) {
    const int64_t o0 = ((r - off) % s + s) % s;  // first output of phase r
    if (o0 >= out) continue;
    const int64_t last = o0 + (out - 1 - o0) / s * s;
    const int64_t q0 = (o0 + off) / s - subpixel_origin(org, r);
    const int64_t q1 = (last + off) / s - subpixel_origin(org, r);
    if (q0 < 0 || q1 >= planes) return false;
  }
  return true;
}

}  // namespace kiln
