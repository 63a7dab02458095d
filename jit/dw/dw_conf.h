// Depthwise convolution (group == channels, one filter per channel): the conf (register
// blocking, row segments, tiles) and its init_conf. Plain C++ — dw_gen only emits what this
// decides.
//
// One vector register holds one channel vector: a whole channel block in nChw16c / nChw8c,
// `simd` consecutive channels of a pixel in NHWC (the last vector masked when C % simd != 0).
// One JIT call computes output rows [r0, r1) of channel vectors [cv0, cv1) of one image. The
// rows are walked through `segs`: runs of consecutive output rows with the same valid kernel
// rows, so the top/bottom padding is resolved at JIT time. A row is cut into register blocks
// of `ur_w` output pixels (plan_ow_blocks of the direct family): blocks touching the
// left/right padding are emitted on their own with the taps that would read padding left out,
// the interior blocks form a runtime loop. Within a block and kernel row every input vector is
// loaded once and used by all the taps that read it (with stride 1, a vector feeds up to kw
// accumulators).
// Loop order: blocked layouts run one channel vector's plane at a time (its taps loaded once);
// NHWC runs the tile's channel vectors innermost, per register block, with tiles of as many
// vectors as keep the input rows of an output row in L1 (but at least 256 B per pixel: shorter
// runs walk memory with a large stride); rows too wide for that take all channels per tile.
//
// bf16 (AVX-512 blocked, AVX512-BF16): src and / or dst in nChw16c_bf16, widened to f32 on
// load and rounded to nearest even at the store; weights, bias and arithmetic stay f32 (the
// family is memory-bound: bf16 halves the activation bytes).
//
// int8 (AVX-512 blocked, ConvImpl::int8: a QDQ model's depthwise conv): src nChw16c_u8, each
// byte widened to f32 less the input's zero point (taps reading padding are left out: the
// real zero); the weights are packed as their integers (w / w_scale) in f32. Every product
// and partial sum is then an integer below 2^24 in magnitude (255 x 128 per tap, at most
// kDwInt8MaxTaps taps), so the f32 sums are exact: the int32 sums of an integer kernel,
// without its 4-byte groups (a depthwise conv reduces over taps only) and at the f32 FMA
// rate. The store scales them by x_scale * w_scale[c] and adds the bias in one FMA, then runs
// the chain; dst nChw16c, or nChw16c_u8 holding the last quantize-dequantize's q.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jit/conv/conv_direct_conf.h"  // OwBlock, plan_ow_blocks
#include "jit/conv/conv_kernel.h"
#include "jit/conv/conv_util.h"

namespace kiln::convjit {

// Where the filter taps of the current channel vector live.
enum class DwWeights {
  automatic,  // init_dw_conf's choice (cost model)
  all,        // all kh*kw tap vectors in registers, loaded once per channel vector (blocked)
              // or per register block (NHWC)
  row,        // the kw taps of one kernel row, reloaded per block and kernel row
  stream,     // none: each FMA reads its tap from memory, and the kernel rows are a run-time
              // loop (large kernels: their taps fit no register set, and unrolled rows of
              // every row segment would make megabytes of code)
};

// Consecutive output rows [start, start + count) whose valid kernel rows are [kh_lo, kh_hi)
// (kh_lo == kh_hi: the rows see only padding).
struct DwRowSeg {
  int64_t start = 0, count = 0;
  int kh_lo = 0, kh_hi = 0;
  bool operator==(const DwRowSeg&) const = default;
};

// The rows and channel vectors of one tile.
struct DwTile {
  int64_t n = 0, cv0 = 0, cv1 = 0, r0 = 0, r1 = 0;
};

// The most taps an int8 depthwise conv may have: 255 x 128 x taps < 2^24 keeps its f32 sums
// exact.
constexpr int kDwInt8MaxTaps = 513;

struct DwConf {
  ConvProblem p;  // ic == oc == groups
  Isa isa = Isa::avx512;
  int simd = 16;
  Layout layout = Layout::nChw16c;  // src
  Layout dst_layout = Layout::nChw16c;
  bool nhwc = false;
  bool bf16_src = false, bf16_dst = false;
  // int8: u8 src, integer weights, the sums scaled at the store; u8_dst: nChw16c_u8 dst;
  // sub_zero: the input's zero point is not 0 (subtracted from every widened byte).
  bool int8 = false, u8_dst = false, sub_zero = false;
  std::shared_ptr<const ConvInt8> int8_params;

  int64_t cv = 0;          // channel vectors: ceil(C / simd)
  int tail = 0;            // C % simd (0: none)
  bool tail_code = false;  // the last vector has its own code: masked loads/stores (NHWC)
                           // or masked epilogue operands (plain [C] scale/shift arrays)
  int ur_w = 0;            // output pixels per register block
  DwWeights weights = DwWeights::all;
  int epi_temps = 0;               // vector scratch registers reserved for the epilogue
  std::vector<OwBlock> ow_blocks;  // covers [0, ow)
  std::vector<DwRowSeg> segs;      // covers [0, oh)

  // Tiles: (n, cv chunk, row chunk). Blocked: whole planes, several per tile when small.
  // NHWC: as many vectors as keep a window of input rows in L1 (the JIT runs them innermost).
  int64_t cv_chunks = 1, row_chunks = 1;

  int64_t tiles() const { return p.n * cv_chunks * row_chunks; }
  DwTile tile(int64_t t) const;

  // "conv_dw_f32_nChw16c_k3s1_ow8__avx512" (row weights: "..._ow12wr__avx2", streamed:
  // "..._ow16ws__avx512"; bf16 / int8:
  // "conv_dw_int8_nChw16c_u8_to_nChw16c_k3s1_ow8__avx512").
  std::string name() const;
  std::string blocking_str() const;  // "k3s1_ow8"

  int64_t c_pad() const { return cv * simd; }
  // Byte strides for the generator and the kernel.
  int src_esize() const { return bf16_src ? 2 : int8 ? 1 : 4; }
  int dst_esize() const { return bf16_dst ? 2 : u8_dst ? 1 : 4; }
  int64_t src_pix_bytes() const { return nhwc ? p.ic * 4 : int64_t(simd) * src_esize(); }
  int64_t src_row_bytes() const { return src_pix_bytes() * p.iw; }
  int64_t src_cv_bytes() const {
    return nhwc ? int64_t(simd) * 4 : int64_t(simd) * src_esize() * p.ih * p.iw;
  }
  int64_t src_img_bytes() const {
    return nhwc ? p.ic * p.ih * p.iw * 4 : c_pad() * p.ih * p.iw * src_esize();
  }
  int64_t dst_pix_bytes() const { return nhwc ? p.oc * 4 : int64_t(simd) * dst_esize(); }
  int64_t dst_row_bytes() const { return dst_pix_bytes() * p.ow; }
  int64_t dst_cv_bytes() const {
    return nhwc ? int64_t(simd) * 4 : int64_t(simd) * dst_esize() * p.oh * p.ow;
  }
  int64_t dst_img_bytes() const {
    return nhwc ? p.oc * p.oh * p.ow * 4 : c_pad() * p.oh * p.ow * dst_esize();
  }
  // Packed weights: blocked [cv][kh][kw][simd], NHWC [kh][kw][c_pad].
  int64_t wei_tap_bytes() const { return nhwc ? c_pad() * 4 : int64_t(simd) * 4; }
  int64_t wei_cv_bytes() const { return nhwc ? int64_t(simd) * 4 : p.kh * p.kw * simd * 4; }
  int taps() const { return int(p.kh * p.kw); }
  int weight_regs() const { return dw_weight_regs(weights); }
  int dw_weight_regs(DwWeights w) const {
    return w == DwWeights::all ? taps() : w == DwWeights::row ? int(p.kw) : 0;
  }
  // AVX2 keeps the lane mask of the masked NHWC tail loads/stores in a register.
  bool mask_reg() const { return isa == Isa::avx2 && nhwc && tail_code; }
};

// The conf, or why the depthwise family does not apply. `force` pins the weight mode (tests and
// the benchmark's sweep); impl.ur_w > 0 pins the register block width.
ConfOr<DwConf> init_dw_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                            DwWeights force = DwWeights::automatic);

// Runs of output rows with the same valid kernel rows (exposed for tests).
std::vector<DwRowSeg> plan_dw_rows(const ConvProblem& p);

// Vector registers a blocking needs: accumulators, weights, one input vector, epilogue scratch
// (shared with the registers that are dead at the store) and the AVX2 tail mask.
int dw_vector_regs(const DwConf& c, int ur, DwWeights w);

// Estimated cycles of one interior register block of `ur` pixels (the cost model).
double dw_block_cycles(const DwConf& c, int ur, DwWeights w);

// Distinct input columns one kernel row of a block of `ur` pixels reads.
int dw_block_inputs(const ConvProblem& p, int ur);

// The Kernel for a conf (packs the weights, generates the code or shares it: code_key, see
// jit/shared_code.h).
std::unique_ptr<Kernel> make_dw_kernel(const DwConf& c, const Tensor& weights, const Tensor* bias,
                                       const std::string& code_key = "");
// The same for weights and bias computed every run (f32): its runtime_packing() packer packs
// them into the buffer it reads as src[1] (jit/kernel.h).
std::unique_ptr<Kernel> make_dw_kernel_runtime_weights(const DwConf& c,
                                                       const std::string& code_key = "");
// For the separable kernel (jit/dw/dw_pw_kernel.h): runs image n's output rows [r0, r1) of
// every channel of `k` into `rows` (row r at rows + (r - r0) * dst_row_bytes()). false: k is
// not a kernel of this family with f32 NHWC operands and constant weights.
bool run_dw_rows(const Kernel& k, const KernelArgs& args, int64_t n, int64_t r0, int64_t r1,
                 float* rows);

}  // namespace kiln::convjit
