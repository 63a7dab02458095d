// The evaluator of a run-time tail (graph/dynamic.h): the reference kernels, except for the
// layers with a constant weight, which would take seconds there — Faster R-CNN's box head
// multiplies every proposal's 12,544 pooled features by a 12,544 x 1,024 weight, Mask and
// keypoint R-CNN's heads run 4-8 3x3 convolutions of 256-512 channels on every detection.
// Fully connected layers (Gemm, or MatMul, of a computed [M, K] by a constant 2-D weight) run
// on the FC family's JIT kernels, made on first use for the node and the number of rows rounded
// up to a bucket (the proposals left vary run by run). Convolutions (2-D, one group) run one
// image at a time on a conv family's kernel made for one image (Winograd F(2x2, 3x3) or im2col);
// transposed convolutions as the pixels [H*W, C] times the weight [C, M*KH*KW] on the FC
// kernels, scattered back (col2im). RoiAlign's regions spread over the threads. Kernels are kept;
// the work spreads over the session's threads (images, or one image's tiles).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "runtime/ref/ref_kernels.h"

namespace kiln {

class TailKernels {
 public:
  // jit_nodes: the tail's Gemm / MatMul / Conv / ConvTranspose nodes whose weight (input 1) is
  // a constant (the same every run: kernels are kept by node name).
  TailKernels(Isa isa, int threads, std::set<std::string> jit_nodes);
  // An Evaluator (graph/passes.h). Thread-safe.
  void operator()(const Node& n, const std::vector<const Tensor*>& in,
                  const std::vector<Tensor*>& out) const;

  // Kernels kept at most (beyond it, the least recently used is dropped).
  static constexpr size_t kMaxKernels = 16;

 private:
  // The kernel kept for node `node` at `rows` rows, made by `make` on first use (null: the
  // node's form has none).
  std::shared_ptr<const Kernel> kernel_for(
      const std::string& node, int64_t rows,
      const std::function<std::unique_ptr<Kernel>()>& make) const;
  // All of k's tiles, src [rows, K] -> dst [rows, N]; over the session's threads when `spread`.
  void run_tiles(const Kernel& k, const float* src, float* dst, bool spread) const;
  // body(begin, end, spread) over images [0, n): images over the threads when there are as many,
  // else in turn with each image's tiles spread.
  void for_images(int64_t n, const std::function<void(int64_t, int64_t, bool)>& body) const;
  // The reference kernel k over ranges of output rows in parallel, where output row r depends
  // only on row r of inputs `row_inputs` (and all of the others); false when not worth it.
  bool run_by_rows(const Node& n, const std::vector<const Tensor*>& in,
                   const std::vector<Tensor*>& out, const RefKernel& k,
                   const std::vector<size_t>& row_inputs) const;
  bool run_fc(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const;
  bool run_conv(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const;
  bool run_conv_transpose(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const;

  Isa isa_;
  int threads_;
  std::set<std::string> jit_nodes_;
  struct Entry {
    std::shared_ptr<const Kernel> kernel;  // null: the node's form has no FC kernel
    bool tried = false;
    uint64_t used = 0;
  };
  mutable std::mutex mu_;
  mutable std::map<std::pair<std::string, int64_t>, Entry> kernels_;
  mutable uint64_t clock_ = 0;
};

}  // namespace kiln
