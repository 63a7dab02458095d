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

Graph import_onnx(const void* data, size_t size, const ImportOptions& opts);
// Reads the file (io_error when it cannot), sets model_dir to its folder.
Graph import_onnx_file(const std::string& path, ImportOptions opts);

}  // namespace kiln
