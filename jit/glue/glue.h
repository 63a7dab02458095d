// Glue kernels generated with asmjit's x86::Compiler (virtual registers: register allocation
// buys nothing here, clarity does): layout conversions, pooling, standalone elementwise
// chains, concat, LayerNorm, Softmax, Transpose, Pad. Each returns nullptr with *why_not when it
// does not apply.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/channel_shuffle.h"
#include "graph/grid_sample.h"
#include "graph/ir.h"
#include "graph/post_ops.h"
#include "graph/recurrent.h"
#include "graph/resize.h"
#include "graph/scatter_reduce.h"
#include "graph/unary_math.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

// Converts a 4-D f32 tensor of logical shape `nchw` between any two of nchw, nhwc, nChw8c,
// nChw16c, between nChw16c and nChw16c_bf16 (create_bf16_convert_kernel) and between nChw16c
// and nChw16c_u8 on the value's grid `q` (create_u8_convert_kernel; refused without q). Other
// pairs with a bf16 / u8 layout are refused: the plan chains them through nChw16c. Blocked
// destinations get zeroed pad lanes. src[0] -> dst[0].
std::unique_ptr<Kernel> create_reorder_kernel(const Shape& nchw, Layout from, Layout to, Isa isa,
                                              std::string* why_not, const U8Quant* q = nullptr);
// nChw16c <-> nChw16c_bf16 (jit/glue/narrow_convert.cpp); needs AVX512-BF16.
std::unique_ptr<Kernel> create_bf16_convert_kernel(const Shape& nchw, Layout from, Layout to,
                                                   std::string* why_not);
// nChw16c <-> nChw16c_u8 (jit/glue/narrow_convert.cpp), quantizing / dequantizing with q.
std::unique_ptr<Kernel> create_u8_convert_kernel(const Shape& nchw, Layout from, Layout to,
                                                 const U8Quant& q, std::string* why_not);
// n contiguous floats to their uint8 q on grid q (QuantizeLinear's rounding; AVX-512 only):
// what those conversions do, for kernels that quantize an f32 operand themselves.
void quantize_u8(const float* s, int64_t n, uint8_t* d, const U8Quant& q);

struct PoolProblem {
  bool max = true;      // MaxPool / GlobalMaxPool, else average
  bool global = false;  // Global*Pool: kernel = the whole plane
  Shape src, dst;       // logical NCHW shapes (dst already has the ceil_mode-aware size)
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  bool count_include_pad = false;  // average: divisor = window clipped to the padded extent
  std::string str() const;
};
// src and dst in layout `l` (blocked or nhwc; nchw may be refused with a reason); also
// nChw16c_bf16 and (max only) nChw16c_u8 on AVX-512.
std::unique_ptr<Kernel> create_pool_kernel(const PoolProblem& p, Layout l, Isa isa,
                                           std::string* why_not);

// A standalone elementwise chain y = ops(x) over `elems` floats (layout-agnostic: runs on
// the flat buffer). `binary` ops read src[1] of the same size (add: residual). Post-op
// kinds from graph/post_ops.h; bias/scale_shift are not used here.
std::unique_ptr<Kernel> create_eltwise_kernel(int64_t elems, const std::vector<PostOp>& ops,
                                              Isa isa, std::string* why_not);

// Concat along channels. Inputs src[0..k) with channel counts `channels[i]` of a [N, C_i, H,
// W] tensor in layout l; output dst[0] in l. Blocked layouts need every C_i but the last a
// multiple of the block (else a reason).
// With `affine`, y = post(concat * scale[c] + shift[c]) in the same pass (a BatchNormalization
// and its unary post-ops fused into the Concat, graph/fuse.cpp); nhwc and blocked layouts only.
struct ConcatAffine {
  std::vector<float> scale, shift;  // one per output channel
  std::vector<PostOp> post;         // unary only
};
std::unique_ptr<Kernel> create_concat_kernel(const Shape& nchw_out,
                                             const std::vector<int64_t>& channels, Layout l,
                                             Isa isa, std::string* why_not,
                                             const ConcatAffine* affine = nullptr);

// ChannelShuffle (graph/channel_shuffle.h): inputs src[0..k) [N, C_k, H, W] (nchw_in0: input
// 0's shape), outputs dst[0..) in layout l (nchw, nhwc or the ISA's blocked layouts).
std::unique_ptr<Kernel> create_channel_shuffle_kernel(const Shape& nchw_in0,
                                                      const ChannelShuffleSpec& s, Layout l,
                                                      Isa isa, std::string* why_not);

// How the nhwc / blocked shuffle assembles each output vector of `lanes` channels (plain C++,
// tested on its own): the source windows (`lanes` consecutive channels of one input, starting
// at a block in blocked layouts, anywhere in nhwc) and, per output lane, the window lane it
// takes (-1: another window's, or past the output's channels).
struct ShuffleWindow {
  int input = 0;
  int64_t chan = 0;  // first channel of the window
  int valid = 0;     // lanes inside the input (the rest are read masked)
  std::vector<int> lane;
};
struct ShuffleVector {
  int output = 0;
  int64_t chan = 0;  // first output channel
  int valid = 0;     // output channels in this vector
  std::vector<ShuffleWindow> windows;
};
struct ShufflePlan {
  std::vector<ShuffleVector> vectors;
};
ShufflePlan plan_channel_shuffle(const ChannelShuffleSpec& s, Layout l, int lanes);

// LayerNormalization of a tensor viewed as [outer, c, inner], normalised over c:
// y = (x - mean) / sqrt(var + eps) * gamma + beta (var = mean((x - mean)^2)). Layout l:
// nchw = the plain row-major buffer, which needs inner == 1 (rows of c contiguous floats);
// nhwc (a 4-D tensor's channels, inner = H*W); nChw8c/16c of the ISA's block (pad lanes written
// as 0). gamma holds c floats, beta c floats or null (0). `post`: one-input post-ops applied
// to y (a fused activation, graph/fuse.cpp). src[0] -> dst[0].
std::unique_ptr<Kernel> create_layernorm_kernel(int64_t outer, int64_t c, int64_t inner, Layout l,
                                                float eps, const float* gamma, const float* beta,
                                                Isa isa, std::string* why_not,
                                                const std::vector<PostOp>& post = {});

// GroupNormalization (InstanceNormalization: groups = c) of an nchw [n, c, pixels] tensor: each
// group of c / groups channels normalised over all its pixels, then y = v * gamma[ch] +
// beta[ch] (c floats each), then `post` as create_layernorm_kernel's. src[0] -> dst[0].
std::unique_ptr<Kernel> create_groupnorm_kernel(int64_t n, int64_t c, int64_t groups,
                                                int64_t pixels, float eps, const float* gamma,
                                                const float* beta, Isa isa, std::string* why_not,
                                                const std::vector<PostOp>& post = {});
// The same on the ISA's blocked layout (nChw16c / nChw8c, [n, c, pixels] as a 4-D tensor's
// blocks): a group's channels must be whole aligned runs inside a block (c / groups dividing
// the block) or whole blocks; pad lanes are written as 0. src[0] -> dst[0].
std::unique_ptr<Kernel> create_groupnorm_blocked_kernel(int64_t n, int64_t c, int64_t groups,
                                                        int64_t pixels, float eps,
                                                        const float* gamma, const float* beta,
                                                        Isa isa, std::string* why_not,
                                                        const std::vector<PostOp>& post = {});

// GridSample of x [N, C, H, W] (src[0], layout l: nhwc or the ISA's blocked layout) at grid
// [N, Ho, Wo, 2] (src[1], row-major) into dst[0] [N, C, Ho, Wo] in l (blocked pad lanes 0).
std::unique_ptr<Kernel> create_grid_sample_kernel(const Shape& x, const Shape& grid,
                                                  const GridSampleSpec& s, Layout l, Isa isa,
                                                  std::string* why_not);

// LRN over the channels of n images of c channels by `pixels` pixels, channel c's window the
// `size` channels from c - lo (ONNX's lo: floor((size - 1) / 2)): nchw on AVX2 / AVX-512; nhwc
// and nChw16c on AVX-512 with lo and size - 1 - lo <= 16 (nChw16c pad lanes written as 0).
// src[0] -> dst[0].
struct LrnProblem {
  int64_t n = 1, c = 1, pixels = 1, size = 1, lo = 0;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.f;
};
std::unique_ptr<Kernel> create_lrn_kernel(const LrnProblem& p, Layout l, Isa isa,
                                          std::string* why_not);
// Whether the nhwc / nChw16c kernel's lane shifts reach p's window: at most 16 channels on either
// side of c (the neighbouring vector's).
inline bool lrn_lanes_reach(const LrnProblem& p) {
  return p.lo <= 16 && p.size - 1 - p.lo <= 16;
}

// Softmax of a tensor viewed as [outer, c, inner] over c (numerically stable: exp(x - max) /
// sum; `log`: LogSoftmax, x - max - log(sum)), layouts as create_layernorm_kernel's (nchw needs
// inner == 1). src[0] -> dst[0].
std::unique_ptr<Kernel> create_softmax_kernel(int64_t outer, int64_t c, int64_t inner, Layout l,
                                              Isa isa, std::string* why_not, bool log = false);

// Transpose of a row-major f32 tensor of shape `in` (rank <= 6; nchw for 4-D) by `perm`
// (output dim i = input dim perm[i]). src[0] -> dst[0].
std::unique_ptr<Kernel> create_transpose_kernel(const Shape& in, const std::vector<int64_t>& perm,
                                                Isa isa, std::string* why_not);

// Whether the blocked layout of `block` takes these channel pads of c channels (no pads: yes).
bool blocked_channel_pads_ok(int64_t c, int64_t c_begin, int64_t c_end, float value, int64_t block);

// Pad of a 4-D f32 tensor of logical shape x (nchw dims) by begin[d] / end[d] >= 0 elements
// per dim. Mode constant fills with `value`: nchw and nhwc any dims; the ISA's blocked layout
// channel pads only of whole blocks before whole input blocks (and value 0 unless input and
// output channels are whole blocks: pad lanes stay 0). Modes reflect / edge / wrap
// (graph/pad.h): H and W pads only, every layout, <= 256 pad pixels a row.
std::unique_ptr<Kernel> create_pad_kernel(const Shape& x, const std::vector<int64_t>& begin,
                                          const std::vector<int64_t>& end, float value, Layout l,
                                          Isa isa, std::string* why_not,
                                          const std::string& mode = "constant");

// Softmax attention (graph op SoftmaxAttention): dst[0] = Softmax(scale * src[0] x src[1]
// [+ src[3]]) x src[2] over the last axis, f32, row-major, numpy-broadcast batch dims as
// MatMul's (V's and the bias's may not widen them); the scores stay in per-thread scratch
// (jit/glue/attention.cpp). bias (optional): src[3]'s shape, [.., M or 1, N] (rank 1: [N]).
std::unique_ptr<Kernel> create_attention_kernel(const Shape& a, const Shape& b, const Shape& v,
                                                float scale, Isa isa, std::string* why_not,
                                                const Shape* bias = nullptr);

// MatMul of two f32 tensors of rank >= 2 (either may be a constant) with numpy-broadcast
// batch dims: dst[0] = src[0] x src[1], row-major, output [batch..., M, N].
std::unique_ptr<Kernel> create_matmul_kernel(const Shape& a, const Shape& b, Isa isa,
                                             std::string* why_not);

// SubpixelInterleave (graph/rewrite_convt.cpp), nchw: y[n, c, oh, ow] = z[n, (c * sh + rh) * sw +
// rw, qh - org_h[rh], qw - org_w[rw]] with oh + off_h = qh * sh + rh (likewise w); phase_major:
// channel (rh * sw + rw) * c + c' instead (the phases' planes concatenated, one Conv each). z is
// [n, c * sh * sw, uh, uw], y [n, c, oh, ow]; org_h / org_w empty means zeros. src[0] -> dst[0].
struct SubpixelProblem {
  int64_t n = 1, c = 1, uh = 1, uw = 1, oh = 1, ow = 1;
  int64_t sh = 1, sw = 1, off_h = 0, off_w = 0;
  bool phase_major = false;
  std::vector<int64_t> org_h, org_w;
  // Phase r's plane origin along h / w.
  int64_t origin_h(int64_t r) const { return org_h.empty() ? 0 : org_h[size_t(r)]; }
  int64_t origin_w(int64_t r) const { return org_w.empty() ? 0 : org_w[size_t(r)]; }
};
std::unique_ptr<Kernel> create_subpixel_kernel(const SubpixelProblem& p, Isa isa,
                                               std::string* why_not);

// Slice / Gather / Concat of row-major f32 tensors of any rank (block_copy.cpp): for o in
// [0, outer) (the leading dims), every segment copies `len` floats from
// src[input] + o * src_outer[input] + src_off + i * stride (i < len) to dst[0] + o * dst_outer +
// dst_off + i. Plain C++: libc's memcpy for contiguous runs (stride 1), a loop for strided or
// reversed ones (a Slice's steps); `op` names the kernel.
struct BlockCopyProblem {
  struct Segment {
    int input = 0;
    int64_t src_off = 0, dst_off = 0, len = 0, stride = 1;
  };
  int64_t outer = 1, dst_outer = 0;
  std::vector<int64_t> src_outer;  // per input
  std::vector<Segment> segments;
};
std::unique_ptr<Kernel> create_block_copy_kernel(const BlockCopyProblem& p, const std::string& op,
                                                 std::string* why_not);

// Gather with computed int64 indices (src[1], any shape, n of them) of a row-major tensor viewed
// as [outer, dim, inner]: y [outer, n, inner]; or, with `elements`, GatherElements of data
// shaped `data` by indices shaped `index` (the output's shape) along `axis`. Elements of esize
// bytes (f32: 4, int64: 8); src[0] -> dst[0]. An index outside [-dim, dim) throws (gather.cpp).
struct GatherProblem {
  bool elements = false;
  int64_t esize = 4;
  int64_t outer = 1, dim = 1, inner = 1, n = 1;  // Gather
  Shape data, index;                             // GatherElements
  int64_t axis = 0;
};
std::unique_ptr<Kernel> create_gather_kernel(const GatherProblem& p, std::string* why_not);

// ScatterND / ScatterElements of f32 or int64 data shaped `data` (src[0]) with int64 indices
// shaped `index` (src[1]) and updates (src[2]) -> dst[0]: the data, then every update applied in
// index order with `reduction`. ScatterND: index's last dim q <= rank coordinates per update, each
// update a slice of data's trailing dims; ScatterElements (`elements`): one update per index
// element along `axis`. An index outside its dim throws (scatter.cpp).
struct ScatterProblem {
  bool elements = false;
  int64_t esize = 4;  // f32: 4, int64: 8
  Shape data, index;
  int64_t axis = 0;
  Reduction reduction = Reduction::none;
};
std::unique_ptr<Kernel> create_scatter_kernel(const ScatterProblem& p, std::string* why_not);

// Elementwise ops on f32 / int64 / bool (one byte, 0 or 1) tensors with numpy broadcasting
// (typed_eltwise.cpp): comparisons, And / Or / Xor / Not, Where, IsNaN / IsInf, Sign, Cast,
// int64 arithmetic, Expand, float Mod and Pow, Sin .. Atanh.
// Row-major operands; y and every x have kTypedRank dims (runtime/labels.cpp's collapse_bcast
// view), an operand's dim either y's or 1. Plain C++ loops compiled per ISA (target attributes) and
// vectorised by the compiler; x[k] is src[k], y is dst[0].
enum class TypedOp : int {
  equal,
  less,
  greater,
  less_equal,
  greater_equal,
  logical_and,
  logical_or,
  logical_xor,
  logical_not,
  where,  // x0 (bool) ? x1 : x2
  is_nan,
  is_inf,
  sign,
  cast,
  // Arithmetic of int64 tensors (float32 ones run on the eltwise / bcast kernels unless their
  // broadcast needs more dims): wrapping, division truncating, Mod as fmod says; a zero divisor
  // is an error. Mod of float32 (fmod = 1) and Pow with a computed exponent too.
  add,
  sub,
  mul,
  div,
  mod,
  pow,     // float32 Pow with a computed exponent (x^2 as x * x, as the reference)
  expand,  // Expand: x0 broadcast to y
  math,    // Sin .. Atanh of float32 (TypedEltwiseProblem::math; libm, graph/unary_math.h)
};
constexpr size_t kTypedRank = 8;
struct TypedEltwiseProblem {
  TypedOp op = TypedOp::equal;
  Shape y;
  std::vector<Shape> x;
  std::vector<DType> x_type;
  DType y_type = DType::f32;
  bool detect_positive = true, detect_negative = true;  // IsInf
  bool fmod = false;                                    // Mod: the dividend's sign
  MathOp math = MathOp::sin;                            // TypedOp::math
  // Cast to float16 (rounded to nearest even, kept as f32) / int32 (truncated or wrapped to 32
  // bits, kept as int64): the dtypes Kiln stores them in.
  enum class Narrow { none, half, int32 } narrow = Narrow::none;
};
std::unique_ptr<Kernel> create_typed_eltwise_kernel(const TypedEltwiseProblem& p, Isa isa,
                                                    std::string* why_not);

// ArgMax / ArgMin (int64 indices [outer, inner]) or Hardmax (f32 one-hot [outer, n, inner]) of a
// row-major f32 tensor viewed as [outer, n, inner], over n (argreduce.cpp). As numpy: the first
// extreme (last: the last one), a NaN counts as the extreme. src[0] -> dst[0].
struct ArgReduceProblem {
  int64_t outer = 1, n = 1, inner = 1;
  bool max = true, last = false, hardmax = false;
};
std::unique_ptr<Kernel> create_arg_reduce_kernel(const ArgReduceProblem& p, Isa isa,
                                                 std::string* why_not);

// TopK of a row-major f32 tensor viewed as [outer, n, inner], over n (topk.cpp): values
// [outer, k, inner] to dst[0] (skipped when null) and, with `indices`, their int64 indices to
// dst[1]. Sorted best first, ties to the lower index, a NaN counts as the extreme.
struct TopKProblem {
  int64_t outer = 1, n = 1, inner = 1, k = 1;
  bool largest = true, indices = true;
};
std::unique_ptr<Kernel> create_topk_kernel(const TopKProblem& p, Isa isa, std::string* why_not);

// CumSum of a row-major f32 (or, with int64, int64) tensor viewed as [outer, n, inner], over n
// (cumsum.cpp), summed in its own type. src[0] -> dst[0].
struct CumSumProblem {
  int64_t outer = 1, n = 1, inner = 1;
  bool exclusive = false, reverse = false, int64 = false;
};
std::unique_ptr<Kernel> create_cumsum_kernel(const CumSumProblem& p, Isa isa, std::string* why_not);

// The time loop of an LSTM / GRU / RNN (graph/recurrent.h; recurrent.cpp), its R^T, Rb and P
// constant (packed at construction; the tensors need not outlive the call): src[0] XW
// [T, N, D * G * H], src[3] sequence_lens (int64, when `lens`), src[4] / src[5] initial h / c
// (when `h0` / `c0`) -> dst[0] Y [T, D, N, H] (may be null), dst[1] Y_h and dst[2] Y_c
// [D, N, H] (when `y_h` / `y_c`). invalid_argument for a sequence length outside [0, T].
struct RecurrenceProblem {
  RecurrenceSpec spec;
  int64_t steps = 0, batch = 0;  // T, N
  const Tensor *rt = nullptr, *rb = nullptr, *p = nullptr;
  bool lens = false, h0 = false, c0 = false, y_h = false, y_c = false;
};
std::unique_ptr<Kernel> create_recurrence_kernel(const RecurrenceProblem& p, Isa isa,
                                                 std::string* why_not);

// Resize of a 4-D f32 tensor x's H and W (N, C unchanged) by the taps of each axis
// (graph/resize.h; at most kMaxResizeTaps per axis, no extrapolated outputs). `mode` names the
// kernel. nchw vectorises over output columns (gathers), nhwc and the ISA's blocked layout over
// channels. src[0] -> dst[0].
constexpr int kMaxResizeTaps = 8;
std::unique_ptr<Kernel> create_resize_kernel(const Shape& x, const ResizeTaps& h,
                                             const ResizeTaps& w, const std::string& mode, Layout l,
                                             Isa isa, std::string* why_not);

// Binary arithmetic of two f32 operands numpy-broadcasting to a 4-D output, or a per-channel
// affine map (inference BatchNormalization), then a chain of unary post-ops (relu ... swish;
// not add / scale_shift). y[0] is written in `l`; each operand says which KernelArgs::src slot
// holds it and in which layout (below). Blocked outputs get zeroed pad lanes.
// prelu: a < 0 ? a * b : a; max / min: NaN when either is (numpy.maximum); mean: (a + b) / 2
enum class BinaryOp { add, sub, mul, div, prelu, max, min, mean };
struct BcastOperand {
  Shape shape;                   // its own shape, rank <= 4 (aligned to the output's last dims)
  Layout layout = Layout::nchw;  // its buffer's layout (rank < 4: nchw)
  int src = 0;                   // KernelArgs::src index
};
// y = post(a op b). Operand layouts the kernel reads, by the output's layout `l`:
//   blocked  a full operand or a per-channel one ([.., C, 1, 1]) in `l`; a per-channel one in
//            nchw/nhwc; one with a single channel ([.., 1, H, W] or [.., 1, 1, 1]) in any layout
//   nhwc     full or per-channel in nhwc, per-channel or single-channel in nchw
//   nchw     anything in nchw (every broadcast, including [.., H, 1] or [.., 1, W])
// Other combinations (e.g. [1, C, H, 1] on a blocked output) get a reason.
std::unique_ptr<Kernel> create_binary_kernel(BinaryOp op, const Shape& y, Layout l,
                                             const BcastOperand& a, const BcastOperand& b,
                                             const std::vector<PostOp>& post, Isa isa,
                                             std::string* why_not);
// y = x broadcast to y's shape (ONNX Expand of an f32 tensor), operand layouts as above.
std::unique_ptr<Kernel> create_expand_kernel(const Shape& y, Layout l, const BcastOperand& x,
                                             Isa isa, std::string* why_not);
// y = post(x * scale[c] + shift[c]) (one FMA) with x = src[0] of shape y in layout l; the
// per-channel vectors (y[1] entries each) are copied into the kernel.
std::unique_ptr<Kernel> create_affine_kernel(const Shape& y, Layout l,
                                             const std::vector<float>& scale,
                                             const std::vector<float>& shift,
                                             const std::vector<PostOp>& post, Isa isa,
                                             std::string* why_not);

// Reduce* of a row-major f32 tensor viewed as [outer, c, inner] over c: y[o, i] = op over k of
// x[o, k, i] (graph/post_ops.h ReduceOp; NaN propagates through max / min). src[0] -> dst[0]
// ([outer, inner]).
std::unique_ptr<Kernel> create_reduce_kernel(ReduceOp op, int64_t outer, int64_t c, int64_t inner,
                                             Isa isa, std::string* why_not);

}  // namespace kiln
