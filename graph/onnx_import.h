// ONNX -> kiln::Graph. Validates the file's structure (every error names what is wrong),
// converts initializers (int32 widened to int64), folds Constant nodes, and rewrites every
// opset 7..18 op variant into the canonical form documented in graph/ops.h. Shape inference
// and the optimisation passes run afterwards (graph/passes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/ir.h"

namespace kiln {

struct ImportOptions {
  int64_t batch = 0;        // > 0: overrides dim 0 of every graph input
  std::string model_dir;    // folder for external-data files; empty: external data refused
  // Upper bound on total initializer bytes read from external files (hostile files cannot
  // make Kiln allocate more than this).
  uint64_t max_external_bytes = uint64_t(16) << 30;
};

constexpr int64_t kMinOpset = 7, kMaxOpset = 18;

// Load-time resource limits: a hostile file is rejected (invalid_model or unsupported, naming
// the limit) before it costs much memory or time. Real CNNs stay far below every one of them.
// Nodes in the graph. Planning is quadratic in the node count today (arena offsets and step
// dependencies in runtime/plan.cpp): 16384 Relu nodes take ~22 s to load under ASan.
constexpr int64_t kMaxNodes = int64_t(1) << 14;
constexpr int64_t kMaxValues = int64_t(1) << 17;  // initializers + graph inputs + node outputs
constexpr int64_t kMaxRank = 32;                  // dims of any tensor
// Inputs / outputs of one node (Concat and Sum inputs, Split outputs).
constexpr int kMaxNodeInputs = 1024, kMaxNodeOutputs = 1024;
// Largest initializer or graph input (elements), and largest single dimension of any tensor.
constexpr int64_t kMaxTensorElements = int64_t(1) << 32;
// Constants and attribute lists may take at most this many times the file's bytes in memory
// (+ external data, + kConstSlackBytes): widening int32/bool data to int64 or varint-packed
// attribute lists to 8 bytes is the only way a small file could become large in memory.
constexpr uint64_t kConstBytesPerFileByte = 2;
constexpr uint64_t kConstSlackBytes = uint64_t(64) << 20;

Graph import_onnx(const void* data, size_t size, const ImportOptions& opts);
// Reads the file (io_error when it cannot), sets model_dir to its folder.
Graph import_onnx_file(const std::string& path, ImportOptions opts);

}  // namespace kiln
