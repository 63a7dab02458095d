// Xbyak generators of the Winograd family (see winograd_conf.h for the scheme): input
// transform, transformed-domain GEMM, output transform with the fused epilogue. They only
// emit what the conf decided.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "jit/conv/conv_util.h"
#include "jit/epilogue.h"
#include "jit/jit_generator.h"
#include "jit/vec_math.h"
#include "jit/winograd/winograd_conf.h"

namespace kiln::convjit {

// Input transform of one tile, `blocks` consecutive input-channel blocks: reads the alpha x
// alpha patch (column stride fixed by the generator: the dilation's in the image, 1 pixel in
// a zero-padded patch copy; row and block strides given) and writes V[xi][tile][ic] (xi
// stride conf.v_xi()).
struct WinoInArgs {
  const float* src = nullptr;  // top-left pixel of the patch, first channel block
  float* v = nullptr;          // V + tile * v_row() at the first block's channels
  float* tmp = nullptr;        // tmp_floats() of scratch
  int64_t row_bytes = 0;       // patch row stride
  int64_t icb_bytes = 0;       // channel-block stride
  int64_t blocks = 0;          // channel blocks to transform
};

// One GEMM (one xi, one chunk of the group's tiles): M[t][0, vectors*simd) (row stride
// conf.m_row()) for t < blocks*mr + tail.
struct WinoGemmArgs {
  const float* v = nullptr;  // V[xi] of the group
  const float* u = nullptr;  // packed U of (xi, chunk)
  float* m = nullptr;        // M[xi] of the group at the chunk's first channel
  int64_t blocks = 0;        // full register blocks of mr tiles
  // The next call's U: its lines are prefetched into L2 while this call's blocks run.
  const float* pf = nullptr;
};

// Output transform of one tile and one chunk. `c` is read by the shared epilogue addressing:
// c.src = M + tile * m_row(), c.dst = the tile's top-left output pixel at the chunk's first
// channel (its pixels the dilation apart), c.bias and c.post at the chunk's first channel.
struct WinoOutArgs {
  ConvCallArgs c;
  float* tmp = nullptr;  // tmp_floats() of scratch
};

class WinoInputGen : public JitGenerator {
 public:
  // col_pixels: pixels between patch columns.
  WinoInputGen(const WinoConf& c, int64_t col_pixels, const std::string& name);

 private:
  void generate() override;
  void transform_1d(const int* in, const int* out);  // B^T on alpha registers

  WinoConf c_;
  int64_t col_pixels_;
  VecConsts consts_;
};

class WinoGemmGen : public JitGenerator {
 public:
  // vectors: oc vectors of the chunk (nr or nr_last); tail: tiles after the full blocks;
  // k: input channels of the chunk's K (WinoConf::chunk_k).
  WinoGemmGen(const WinoConf& c, int vectors, int tail, int64_t k, const std::string& name);

 private:
  void generate() override;
  // How a register block's accumulators start: zero, from M (partial sums of earlier K
  // chunks), or zero only in the first K chunk of the runtime chunk loop.
  enum class Init { zero, load, first_zero };
  void emit_blocks(int64_t k_blocks, int k_tail, Init init);
  void emit_block(int rows, int64_t k_blocks, int k_tail, Init init);
  void emit_steps(int rows, int ks);

  WinoConf c_;
  int nv_, tail_;
  int64_t k_;  // K (input channels) of the chunk
  Xbyak::Reg64 m_, vc_, uc_, vb_, mb_, vk_, uk_, kc_cnt_, blk_cnt_, k_cnt_, pf_;
};

class WinoOutputGen : public JitGenerator {
 public:
  // vectors: oc vectors of the chunk; last_chunk: its last vector may have a lane tail;
  // vh x vw: valid output rows x columns of the tile.
  WinoOutputGen(const WinoConf& c, int vectors, bool last_chunk, int vh, int vw,
                const std::string& name);

 private:
  void generate() override;
  void transform_1d(const int* in, const int* out);  // A^T: alpha registers -> m registers

  WinoConf c_;
  int nv_;
  bool last_;
  int vh_, vw_;
  VecConsts consts_;
  std::unique_ptr<EpilogueEmitter> epi_;
};

}  // namespace kiln::convjit
