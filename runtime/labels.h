// Labels: the ways one graph node can be implemented (pipeline step 3's candidates). A label
// is a kernel kind (+ conv family and blocking) and the layout it reads its 4-D activations in
// and writes its 4-D outputs in. The solver picks one label per node; the plan instantiates
// exactly the chosen ones. Everything that decides "which layout does slot i use under this
// label" lives here so the solver's cost model and the lowering can never disagree.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_kernel.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/layout.h"

namespace kiln {

enum class LabelKind : int {
  conv = 0,     // a JIT conv family (ConvImpl)
  fc = 1,       // JIT fully connected (Gemm / MatMul with constant weights)
  pool = 2,     // asmjit pooling / global pooling
  concat = 3,   // asmjit channel concat
  eltwise = 4,  // asmjit elementwise chain over the flat buffer (any layout)
  ref = 5,      // the scalar reference kernel (4-D operands in `layout`, viewed flat when
                // that is not NCHW, which only elementwise ops allow)
  shuffle = 6,  // asmjit ChannelShuffle (channel gather: shuffles, slices, splits)
  norm = 7,     // asmjit LayerNormalization, Softmax (channels of a 4-D tensor, or last dims)
  view = 8,     // Flatten/Reshape/Squeeze/Unsqueeze/Identity: the output is input 0's bytes
                // (offered only where the layout puts every element where NCHW would); no
                // work, the plan makes the output an alias of the input
  bcast = 9,    // asmjit broadcast binary op / per-channel affine (BatchNormalization)
  // asmjit Transpose (any permutation, rank <= 6; nchw)
  transpose = 10,
  // asmjit constant Pad of a 4-D tensor
  pad = 11,
  resize = 12,  // asmjit Resize of a 4-D tensor's H and W (any mode, by tap tables)
  // asmjit Reduce* over contiguous dims of the nchw (row-major) or nhwc order
  reduce = 13,
  convt = 14,  // asmjit SubpixelInterleave: a ConvTranspose's phase planes into its output
  // Slice / Gather / Concat along one axis, any rank (nchw: row-major), as memcpy'd blocks;
  // Gather with computed indices, GatherElements, ScatterND and ScatterElements as
  // index-driven copies
  copy = 15,
  // Comparisons, And/Or/Xor/Not, Where, IsNaN/IsInf, Sign, Cast, int64 arithmetic, Expand, float
  // Mod / Pow, Sin .. Atanh over f32 / int64 / bool, any broadcast (nchw: row-major)
  typed = 16,
  arg = 17,  // ArgMax / ArgMin / Hardmax / TopK / CumSum over one axis, any rank (nchw: row-major)
  recurrence = 18,  // the time loop of an LSTM / GRU / RNN (graph/recurrent.h), R constant
};

// What the session may compute in (SessionOptions::precision): f32 only (exact, the default),
// or also bf16 (convolutions and fully connected layers with a bf16 kernel may read bf16
// activations and weights and accumulate in f32; the solver decides where, pricing the
// conversions like layout changes).
// int8 is not a session option: a conv label's arithmetic, offered where the model is a QDQ
// model (runtime/int8_conv.h) and the CPU has AVX512-VNNI.
enum class Precision : int { f32 = 0, bf16 = 1, int8 = 2 };
const char* precision_name(Precision p);  // "f32", "bf16", "int8"
bool parse_precision(const std::string& s, Precision* out);
// Whether bf16 labels can run here: AVX-512 with AVX512-BF16.
bool bf16_supported(Isa isa);

struct Label {
  LabelKind kind = LabelKind::ref;
  ConvImpl conv;              // kind == conv: family, src/dst layouts, blocking
  Layout in = Layout::nchw;   // 4-D activation inputs (conv: slot 0)
  Layout out = Layout::nchw;  // 4-D outputs (conv: also its residual input)
  // The arithmetic's precision where the layouts do not carry it: fc (its operands are f32
  // rows; bf16 rounds x and the weights inside the kernel), conv int8 (f32 operands on int8
  // grids: the kernel quantizes them exactly). Conv labels otherwise: f32 (a bf16 layout says
  // it). Keys of bf16 / int8 labels end in ".bf16" / ".int8".
  Precision precision = Precision::f32;
  // Stable text used as the tuning-cache key and in reports, e.g. "conv.direct.nChw16c.nChw16c",
  // "pool.nhwc", "ref.nchw".
  std::string key() const;
  static std::optional<Label> parse(const std::string& key);
  bool operator==(const Label& o) const { return key() == o.key(); }
};

// Whether node i's kernel under l owns its weights and bias (inputs 1 and 2: packed at load,
// not plan tensors): conv labels, and fc labels except a batched MatMul's.
bool packs_weights(const Graph& g, int i, const Label& l);

// A short name for colouring and tables: the conv family, or the kind ("pool", "ref", ...).
std::string label_family(const Label& l);

// Every label that may implement node `i` on `isa` (reference = only the reference label).
// Applicability is decided by the kernel factories when instantiated; this list only leaves
// out combinations no factory supports. The reference label (NCHW) is always last.
std::vector<Label> candidate_labels(const Graph& g, int i, Isa isa, bool reference,
                                    Precision precision = Precision::f32);

// The layout each input / output slot of node i is read / written in under label l
// (non-4-D or absent operands: nchw). Used identically by the solver and the lowering.
std::vector<Layout> input_layouts(const Graph& g, int i, const Label& l);
std::vector<Layout> output_layouts(const Graph& g, int i, const Label& l);

// A label made concrete: its kernel.
struct Instance {
  std::unique_ptr<Kernel> kernel;
};

// Creates the kernel (JIT code, packed weights) for node i under label l; nullptr with
// *why_not when the label does not apply to this node.
Instance instantiate(const Graph& g, int i, const Label& l, Isa isa, std::string* why_not);

// Bytes of a value stored in layout l (blocked layouts pad channels).
int64_t value_bytes(const Value& v, Layout l);
// Where a view node's output starts in its input's bytes (a contiguous Slice's offset; 0 for the
// reshaping views).
int64_t view_offset_bytes(const Graph& g, const Node& n);

// A stable description of node i's problem (op, operand shapes, attributes, fused post-ops):
// identical problems are measured once and share tuning-cache entries.
std::string node_problem(const Graph& g, int i);

// No-profiling cost model, milliseconds at `threads` threads: roofline-style estimates per
// family (FMA peak x a per-family efficiency, or bytes / bandwidth) — the `none` tuning mode
// and the pruning of the `fast` mode use it.
double heuristic_ms(const Graph& g, int i, const Label& l, Isa isa, int threads);
double heuristic_reorder_ms(const Shape& s, Layout from, Layout to, int threads);

}  // namespace kiln
