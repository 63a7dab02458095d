// pack_transposed against the naive formula: edges of every size, strided sources (conv taps),
// alpha, a destination row stride wider than the block (untouched elements stay put), and
// sources at every byte offset (model weights sit wherever protobuf put them).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "jit/pack.h"

TEST_CASE("pack_transposed matches the naive transpose") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t rows : {1, 7, 8, 16, 17, 40})
    for (int64_t cols : {1, 5, 16, 33})
      for (int64_t step : {1, 9})
        for (float alpha : {1.f, -0.5f})
          for (int offset : {0, 1, 2, 3}) {
            const int64_t src_ld = cols * step + 3, dst_ld = rows + 5;
            std::vector<float> src(size_t(rows * src_ld));
            for (float& x : src) x = u(rng);
            std::vector<unsigned char> bytes(src.size() * 4 + 4);
            std::memcpy(bytes.data() + offset, src.data(), src.size() * 4);
            std::vector<float> dst(size_t(cols * dst_ld), 42.f);
            kiln::pack_transposed(kiln::ModelFloats(bytes.data() + offset), src_ld, step, rows,
                                  cols, dst.data(), dst_ld, alpha);
            CAPTURE(offset);
            CAPTURE(rows);
            CAPTURE(cols);
            CAPTURE(step);
            int64_t bad = 0;
            for (int64_t c = 0; c < cols; ++c)
              for (int64_t r = 0; r < dst_ld; ++r) {
                const float want = r < rows ? alpha * src[size_t(r * src_ld + c * step)] : 42.f;
                bad += dst[size_t(c * dst_ld + r)] != want;
              }
            CHECK(bad == 0);
          }
}
