// Bits of the `flags` word in the argument struct of every JIT kernel family (ConvCallArgs,
// im2col's CallArgs, FcCallArgs, DwCallArgs::c). One definition, so a name means one bit in
// every family; a family sets only the bits its generator tests. Plain int64_t constants (not
// an enum) so `cond ? kFlagX : 0` stays one type in the kernels that build the word.
#pragma once

#include <cstdint>

namespace kiln {

// start from the partial sums already in dst (K split, not the first chunk)
inline constexpr int64_t kFlagAccumulate = 1;
// last K chunk: apply bias + post-ops (else store raw partial sums)
inline constexpr int64_t kFlagFinal = 2;
// this call includes the last, partial input-channel block / channel vector
inline constexpr int64_t kFlagIcTail = 4;
// after the full row / pixel blocks, run the JIT-time tail block
inline constexpr int64_t kFlagMTail = 8;

}  // namespace kiln
