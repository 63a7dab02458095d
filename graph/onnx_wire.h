// A minimal protobuf wire-format walker for ONNX files: finds every large tensor payload
// (TensorProto.raw_data, packed float_data) of the graph's initializers and Constant-style
// tensor attributes, and produces a copy of the file with those payloads cut out, small
// enough that protobuf's generated parser copies no weights. The importer then takes each
// payload straight from the original bytes (aliasing a file mapping when it can).
//
// Every varint, tag and length is bounds-checked: malformed bytes give a kiln::Error
// (invalid_model), never an out-of-bounds read. The walker follows protobuf's rules where they
// matter for identifying payloads: a field with an unexpected wire type is an unknown field
// (skipped, kept), repeated messages append in wire order (even across two occurrences of
// ModelProto.graph, which protobuf merges), a singular bytes field repeated keeps the last
// occurrence. When a tensor's encoding is unusual (raw_data or float_data given more than
// once, an attribute's tensor given twice and therefore merged), nothing is cut from it and
// protobuf parses it as usual.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::onnx_wire {

// A byte range of the original buffer. `present` distinguishes an empty payload from none.
struct Range {
  uint64_t offset = 0, size = 0;
  bool present = false;
};

// The payloads cut from one TensorProto (at most one of each kind).
struct TensorCut {
  Range raw;     // field 9, raw_data
  Range floats;  // field 4, float_data (packed encoding: little-endian floats, like raw_data)
  bool any() const { return raw.present || floats.present; }
};

struct Stripped {
  // The file with the cut payloads replaced by empty fields; empty (and `unchanged` set) when
  // nothing was cut: parse the original bytes then, no copy needed.
  std::string bytes;
  bool unchanged = false;
  // Cuts per initializer, indexed like GraphProto.initializer once parsed (entries only for
  // initializers that had something cut; the vector may be shorter than the initializer list).
  std::vector<TensorCut> initializers;
  // Cuts of attribute tensors (AttributeProto.t), keyed by (node index, attribute index).
  std::map<std::pair<int64_t, int64_t>, TensorCut> attributes;
  uint64_t cut_bytes = 0;  // payload bytes removed
};

// Payloads of at least `min_payload` bytes are cut. Throws kiln::Error(invalid_model) when the
// bytes are not well-formed protobuf along the path it walks (model -> graph -> initializer /
// node -> attribute -> tensor); other fields are skipped by wire type, also bounds-checked.
Stripped strip_payloads(const uint8_t* data, size_t size, uint64_t min_payload);

}  // namespace kiln::onnx_wire
