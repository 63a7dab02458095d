// ONNX -> kiln::Graph. Validates the file's structure (every error names what is wrong),
// converts initializers (int32 and bool widened to int64), folds Constant nodes, and rewrites every
// opset 1..28 op variant into the canonical form documented in graph/ops.h. Shape inference
// and the optimisation passes run afterwards (graph/passes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln {

struct ImportOptions {
  int64_t batch = 0;  // > 0: overrides dim 0 of every graph input (after `shapes`)
  // Input name -> its whole shape (dims > 0), symbolic or not; a name that is no graph input is
  // an invalid_argument. Symbolic dims other than dim 0 must be given here.
  std::map<std::string, Shape> shapes;
  // When set, receives "'x' dim 2 = 320 (the model declares 224)" for every dim `shapes` or
  // `batch` changed from a concrete value, or set for a symbolic one (names the dim's param).
  std::vector<std::string>* dims_set = nullptr;
  std::string model_dir;  // folder for external-data files; empty: external data refused
  // Upper bound on total initializer bytes read from external files (hostile files cannot
  // make Kiln allocate more than this).
  uint64_t max_external_bytes = uint64_t(16) << 30;
  // From memory: alias the caller's bytes instead of copying the payloads; the caller keeps
  // them alive until own_borrowed(graph) (graph/ir.h) has copied what is still needed. Lets a
  // load pack the weights straight from the caller's buffer: ResNet-50 copies 22 of its 98 MB.
  bool borrow = false;
};

// Opsets 22-28 changed no supported op's semantics for the types Kiln runs (they added bfloat16,
// float4 / float8e8m0 / 2-bit types; QuantizeLinear's `precision`, refused unless float32) and
// added Swish (24), imported as x * Sigmoid(alpha x) (graph/canonicalize.cpp). Checked against
// onnx/defs of ONNX 1.23 (bench/NOTES.md, session 29).
constexpr int64_t kMinOpset = 1, kMaxOpset = 28;

// Load-time resource limits: a hostile file is rejected (invalid_model or unsupported, naming
// the limit) before it costs much memory or time. Real CNNs stay far below every one of them.
// Nodes in the graph. Every load stage must stay near-linear in the node count so that this
// bound keeps a hostile file's load time to seconds (test_limits.cpp times a kMaxNodes-long
// chain). It was 16384 while the memory plan was quadratic.
constexpr int64_t kMaxNodes = 100000;
constexpr int64_t kMaxValues = int64_t(1) << 17;  // initializers + graph inputs + node outputs
constexpr int64_t kMaxRank = 32;                  // dims of any tensor
// Inputs / outputs of one node (Concat and Sum inputs, Split outputs).
constexpr int kMaxNodeInputs = 1024, kMaxNodeOutputs = 1024;
// Largest initializer or graph input (elements), and largest single dimension of any tensor.
constexpr int64_t kMaxTensorElements = int64_t(1) << 32;
// Constants and attribute lists may take at most this many times the file's bytes in memory
// (+ external data, + kConstSlackBytes): widening is the only way a small file could become
// large in memory. The widest widening of raw data sets it: int8 / uint8 (a QDQ model's
// weights) kept as f32, 4 bytes per stored byte (bench/NOTES.md, session 25, "int8"); varint-
// packed int32 / int64 data and attribute lists (1 byte -> 8) stay bounded by it.
constexpr uint64_t kConstBytesPerFileByte = 4;
constexpr uint64_t kConstSlackBytes = uint64_t(64) << 20;

// Weights are not copied twice: large tensor payloads (>= 4 KiB) are cut out of the bytes
// protobuf parses (graph/onnx_wire.h) and taken straight from the model's bytes.
// From memory: the caller's buffer is not retained after return; each payload is copied once,
// into its tensor (or borrowed: ImportOptions::borrow).
Graph import_onnx(const void* data, size_t size, const ImportOptions& opts);
// Maps the file (io_error when it cannot), sets model_dir to its folder. Payloads aligned to
// their element size, in the model or in an external-data file (mapped too, also from
// import_onnx), alias the mapping, which the graph's constants keep alive (graph/onnx_mmap.h:
// the file must not be truncated or rewritten in place meanwhile); the others are copied
// once. Constants are therefore aligned to their element size, not to 64 bytes.
// Little-endian host assumed (x86), as ONNX raw_data is little-endian.
Graph import_onnx_file(const std::string& path, ImportOptions opts);

}  // namespace kiln
