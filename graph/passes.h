// Graph passes. Each keeps the graph topologically sorted and its values' shapes valid, and
// never changes what the graph computes (up to float rounding in fold_batchnorm).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln {

// Computes one node from constant inputs (the runtime supplies its reference kernels; graph/
// itself has no kernels). Same contract as runtime/ref/ref_kernels.h's RefKernel.
using Evaluator = std::function<void(const Node&, const std::vector<const Tensor*>&,
                                     const std::vector<Tensor*>&)>;

// Shape inference over the whole graph in topological order (validating every node). With an
// evaluator it is also constant folding: a node whose inputs are all constant (and Shape,
// whose output depends only on a static shape) is evaluated and replaced by constant values,
// so shape arithmetic such as Shape->Gather->Unsqueeze->Concat->Reshape disappears before
// Reshape's own inference needs the constant. Without an evaluator nothing is folded.
// An If (its condition must be constant by then) is replaced by the nodes of the branch it takes
// (inline_if), which are inferred and folded in turn. Returns the number of nodes folded.
int infer_shapes(Graph& g, const Evaluator* fold = nullptr);

// infer_shapes with the choices graph/dynamic.h needs.
struct InferOptions {
  const Evaluator* fold = nullptr;
  // Fold every node whatever its size or cost (a run-time tail, where every input is known and
  // the nodes must run anyway): the load-time limits on folded bytes and work do not apply.
  bool unlimited = false;
  // When set, a node whose output sizes depend on data known only at run time (NonZero or
  // NonMaxSuppression on a computed input, an If on a computed condition, a computed shape
  // input: OpInfo::shape_inputs) and every node that reads what such a node computes are not
  // inferred but moved here, in order.
  std::vector<Node>* tail = nullptr;
  // Drop each folded value's constant once the last node reading it is folded (a run-time
  // tail, which needs only its outputs at the end).
  bool release = false;
};
int infer_shapes(Graph& g, const InferOptions& o);

// The nodes that replace If node n, whose condition is a constant: the branch taken, its names
// resolved (renamed where g uses them already) and each node canonicalized (graph/canonicalize.h),
// then an Identity per output of n (graph/inline_if.cpp).
std::vector<Node> inline_if(Graph& g, const Node& n);

// Whether an If's or Loop's condition (the first element of a bool, float or int64 constant)
// holds.
bool condition_true(const Tensor& c);

// An Identity node y = x (how an inlined subgraph's results become the node's outputs;
// remove_identities drops them).
Node identity_node(std::string name, ValueId x, ValueId y);

// The values an If or Loop node's subgraphs read from the enclosing graphs, by name: the node's
// last inputs (branch_reads, graph/ir.h), which passes keep pointing at the right values even
// where an inlined subgraph's names were renamed.
std::map<std::string, ValueId> outer_values(const Node& n);

// Appends to `out` the nodes of subgraph b, its names resolved through `local` (outer_values,
// and a Loop body's inputs); the values it defines are new in g, named prefix + name (renamed
// where g uses that already). Returns the values of b's outputs.
std::vector<ValueId> inline_subgraph(Graph& g, const Subgraph& b,
                                     std::map<std::string, ValueId> local,
                                     const std::string& prefix, std::vector<Node>& out);

// Loop node n runs at load (its iterations inlined as they are inferred): its trip count and
// condition are constants (or omitted) and the condition its body computes depends only on
// them, constants and the iteration number. Otherwise it is part of the run-time tail.
bool loop_at_load(const Graph& g, const Node& n);

// Replaces Loop node n (trip count and condition constant) by its iterations: each one's nodes
// (inline_subgraph) go through `step` (infer_shapes: inferred, folded, kept or moved to the
// tail) before the next is made, since the condition its body computes must be a constant after
// each. Then an Identity per loop-carried output and, per scan output, an Unsqueeze per
// iteration and a Concat. `not_folded` counts the nodes step has kept or moved so far: while it
// does not change, each iteration's values are constants nobody else reads, and those of the
// iteration before are released as the loop goes (a loop growing a tensor by concatenation
// would otherwise hold every size at once). graph/inline_loop.cpp.
void unroll_loop(Graph& g, const Node& n, const std::function<void(Node&)>& step,
                 const std::function<size_t()>& not_folded);

// Removes Identity and Dropout (inference mode) by rewiring consumers to their input.
// Returns the number removed.
int remove_identities(Graph& g);

// Folds BatchNormalization into a preceding Conv whose output feeds only that BN and whose
// weights/bias are constant: w' = w * s, b' = (b - mean) * s + B, s = scale / sqrt(var + eps).
// New constants are created (the originals may be shared). Returns the number folded.
int fold_batchnorm(Graph& g);

// Folds a BatchNormalization whose every consumer is a Conv with constant f32 weights and no
// padding (a pre-norm before 1x1 convs, as VAN's) into those convs' inputs: w' = w * a[ic],
// b' = b + sum w * s[ic] over the window, with a, s of batchnorm_affine. Returns the number
// folded.
int fold_batchnorm_into_consumers(Graph& g);

// An inference BatchNormalization (training_mode 0, constant f32 [C] parameters, C = dim 1 of
// its input) as y = x * scale[c] + shift[c]: scale = gamma / sqrt(var + eps), shift = beta -
// mean * scale, computed in double. False (outputs untouched) for any other node.
bool batchnorm_affine(const Graph& g, const Node& bn, std::vector<float>* scale,
                      std::vector<float>* shift);

// Removes nodes none of whose outputs reach a graph output, then drops values no longer
// referenced (so unused weights are freed). Returns the number of nodes removed.
int remove_dead_code(Graph& g);

// Fuses elementwise consumers into the producing Conv/Gemm's epilogue (graph/post_ops.h):
// Relu, LeakyRelu, Clip (constant bounds), Sigmoid, HardSigmoid, HardSwish, x*Sigmoid(x)
// (swish), and Add of a same-shape tensor (the residual); likewise into a MatMul by a constant
// 2-D matrix (extra inputs from slot 3), and into it or a Gemm an Add / Sub / Mul of a constant
// along the output's last dim (a bias, a per-channel scale: a scale_shift post-op). The producer's
// output must have no other consumer and not be a graph output. The fused node takes the consumer's
// place in the order, where all operands are available. Then a BatchNormalization (with its fused
// activations) whose input is a channel Concat read by nothing else becomes part of the Concat:
// attributes affine_scale / affine_shift (floats, one per output channel; batchnorm_affine) and
// the BN's unary post-ops, applied to the concatenated tensor (DenseNet's pre-activation BN+ReLU
// of every layer's input: one pass instead of a copy and a pass). First, a one-input
// elementwise op reading a chain of pure moves (Reshape, Transpose, DepthToSpace, ...) of such a
// producer's output moves before them (YOLOv5's head: Conv -> Reshape -> Transpose -> Sigmoid).
// Returns the number of ops moved and fused.
int fuse_epilogues(Graph& g);

// graph/rewrite_glue.cpp. Channel data movement as ChannelShuffle nodes (graph/
// channel_shuffle.h): Reshape->Transpose(0,2,1,3,4)->Reshape channel shuffles, channel Slices and
// Splits of 4-D f32 activations; then a channel Concat feeding only such a node becomes its
// inputs, and groups-1 nodes (slices) that together take one contiguous channel range of a
// node's only output become that node's outputs. Returns the number of rewrites.
int rewrite_channel_ops(Graph& g);
// ReduceMean over axes {2,3} of a 4-D f32 tensor -> GlobalAveragePool (+ Flatten when
// keepdims=0). Returns the number rewritten.
int rewrite_reduce_means(Graph& g);
// Constant Pads of H/W folded into their consumers' pads where exact: Conv (value 0),
// AveragePool (value 0, no ceil_mode, its own pads absent or counted: count_include_pad=1),
// MaxPool (value -inf, or 0 on a Relu / Clip(min >= 0) output; every window still holds an
// input element; no ceil_mode). All-zero pads are removed. Returns the number of Pads removed.
int fold_pads(Graph& g);
// graph/rewrite_convt.cpp. ConvTranspose with constant weights -> a sub-pixel Conv (one output
// channel per output channel and stride phase) + SubpixelInterleave (or the Conv alone for
// stride 1 without crop). Returns the number rewritten.
int rewrite_conv_transposes(Graph& g);
// graph/rewrite_conv3d.cpp. 3-D Conv -> a 2-D Conv over the frames with the depth taps stacked
// on the channels (grouped: a 2-D conv per tap, summed), between Transpose / Pad / Slice /
// Concat / Reshape; 3-D ConvTranspose -> a 2-D one per frame, its taps interleaved or summed
// per stride phase; 3-D MaxPool / AveragePool -> the 2-D pool per frame, then Max / Add (and
// Mul) of the depth taps; 5-D GlobalAveragePool -> the 4-D one on a view; then the elementwise
// ops and Concats between them move into the frames' order. Run first after inference:
// nothing else handles 5-D convs and pools. Returns the number rewritten.
int rewrite_conv3d(Graph& g);
// graph/rewrite_resize_nd.cpp. Resize of a 3-D or 5-D f32 tensor (N and C kept) -> 4-D Resizes
// of views, one per group of resized axes, each axis with its own scale or size. Returns the
// number rewritten.
int rewrite_resize_ranks(Graph& g);
// graph/einsum.cpp. Einsum nodes of one or two f32 operands whose labels are not repeated within
// an operand (no diagonals) become ReduceSum (labels only one operand has and the output lacks),
// Transpose, Reshape and one batched MatMul (numpy batch broadcast), so they run on those ops'
// kernels. Returns the number rewritten.
int rewrite_einsums(Graph& g);

// graph/rewrite_forms.cpp. Max / Min / Mean / Sum of f32 operands that are not two (a Sum of
// same-shape operands aside) -> Identity or a chain of two-operand ops (Mean: then one Div by
// n); Clip with a computed bound -> Max and / or Min; Gemm with a computed B, transA or a C that
// is not a constant row -> Transpose / MatMul (or Gemm with constant B) / Mul / Add; Softmax /
// LogSoftmax over an axis neither last nor a 4-D tensor's channels -> Transpose, the op over the
// last axis, Transpose back; Tile with constant repeats -> a Concat per repeated axis. First,
// BatchNormalization / unary elementwise ops on a Squeeze of [N, C, 1, L] move before it (a
// lifted 1-D conv's output: then folded / fused) and Unsqueeze(Squeeze(z)) of z's shape becomes
// z. Returns the number rewritten.
int rewrite_forms(Graph& g);
// A Split of an f32 tensor (any axis and rank; run after rewrite_channel_ops, which takes the
// channel splits) -> one Slice per output. Returns the number rewritten.
int rewrite_splits(Graph& g);

// Pattern rewrites (graph/rewrites.cpp), each returning how many it made:
// Transpose(0,2,3,1) -> ops along the last axis -> Transpose(0,3,1,2) becomes the same ops on
// the NCHW tensor (axes mapped, constants re-laid, MatMul by a constant a 1x1 Conv), so the
// solver picks layouts and no transpose runs (ConvNeXt's channels-last MLP and LayerNorms).
int sink_channels_last(Graph& g);
// (x - m) / Sqrt(ReduceMean((x - m)^2) + eps) [* gamma] [+ beta], m = ReduceMean(x) over one
// axis: LayerNormalization over that axis (norm_dims = 1; graph/ops.h).
int fuse_layer_norm(Graph& g);
// Reshape [N, G, L] -> InstanceNormalization (unit scale, zero B) -> Reshape back [-> Mul by a
// per-channel gamma] [-> Add a per-channel beta] (PyTorch's GroupNorm before opset 18):
// GroupNormalization(num_groups G).
int fuse_group_norm(Graph& g);
// x * 0.5 * (1 + Erf(x / sqrt 2)) in any association: Gelu (fused later as a post-op).
int fuse_gelu(Graph& g);
// MatMul -> [scalar Mul / Div] -> [Add(bias)] -> Softmax(last axis) -> MatMul: one
// SoftmaxAttention (graph/ops.h).
int fuse_attention(Graph& g);
// PyTorch's exported F.local_response_norm (x^2, a zero-padded average pool over a unit dim
// before the channels, Mul / Add / Pow / Div): one LRN (window_lo as PyTorch's window). Runs
// before rewrite_conv3d, which would lower the 3-D pool of a 4-D input's form.
int fuse_lrn(Graph& g);
// Conv (constant weights, no post-ops) whose only consumer adds or multiplies a per-channel
// constant: folded into its bias / weights and bias, like fold_batchnorm.
int fold_conv_affine(Graph& g);
// Convs of one input x, x itself and BatchNormalizations of x summed by a tree of Adds
// (RepVGG / ACNet / MobileOne blocks as trained): one Conv with the branches' kernels and biases
// summed (graph/rewrites.cpp, BranchMerger).
int merge_branches(Graph& g);
// QuantizeLinear -> DequantizeLinear with the same per-tensor constant scale and zero point
// (QDQ models' activations): one QuantizeDequantize node, a unary op with attributes scale,
// zero_point and to (graph/quant.h), which the elementwise kernels compute (fuse_qdq.cpp).
// A Concat feeding only a QuantizeDequantize whose inputs feed only the Concat takes the
// QuantizeDequantize on each input instead (exact; the producers can fuse them, and the concat
// copies values on one grid); a MaxPool of a Concat likewise passes it up to the Concat.
// It also drops a QuantizeDequantize whose input is on its grid already (an Identity then,
// removed with the others): the output of a QuantizeDequantize with the same scale, zero point
// and type, of a MaxPool (maxpool_keeps_grid) of one, or of a Concat of such values — QDQ
// models requantize pooled values on their input's grid.
int fuse_qdq(Graph& g);
// Whether MaxPool node n maps values on a quantization grid to values on it: every window
// holds at least one input element (a window wholly in the padding would give -inf; inference
// already refuses pads as wide as the window and trims ceil-mode windows, this checks again),
// dilation 1, one output, a 4-D input. The max of grid values is one of them.
bool maxpool_keeps_grid(const Graph& g, const Node& n);

// The standard pipeline used at load: infer+fold, identities, BN folding, the pattern rewrites
// and the glue rewrites above, dead code.
struct PassStats {
  int folded = 0, identities = 0, batchnorms = 0, rewrites = 0, glue = 0, dead = 0;
};
PassStats optimize(Graph& g, const Evaluator& eval);

}  // namespace kiln
