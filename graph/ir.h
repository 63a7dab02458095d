// Kiln's graph IR: values with static shapes, nodes with typed attributes, constant tensors.
// Shapes are fully static (the batch size is fixed at load), which is what lets the passes fold
// all shape arithmetic into constants and lets later stages specialise kernels per shape. (The
// nodes after an op whose output size depends on the data form a separate graph, inferred anew
// each run: graph/dynamic.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/alloc.h"
#include "graph/error.h"

namespace kiln {

// Numeric values equal ONNX TensorProto.DataType codes. A boolean element is one byte, 0 or 1
// (read through uint8_t: Tensor::data<uint8_t>()). u8, i8 and i32 exist only at the boundary:
// a caller passes or receives graph inputs / outputs of those types, while the graph holds
// them as held_dtype() gives (8-bit integers in float32 exactly, graph/import_qdq.h; int32 as
// int64); Session converts at each run.
enum class DType : int32_t { f32 = 1, u8 = 2, i8 = 3, i32 = 6, i64 = 7, boolean = 9, f64 = 11 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
// The dtype the graph holds a boundary dtype in (u8 / i8 / f64 -> f32, i32 -> i64; others as
// is).
DType held_dtype(DType t);

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar). Throws invalid_model on negative dims or overflow past 2^62.
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[1,3,224,224]"

// A dense, C-ordered tensor. Copies are shallow (they share the buffer): constants are
// immutable once built, so sharing is safe and avoids copying weights.
class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled, 64-byte aligned buffer.
  Tensor(DType dtype, Shape shape);
  // Wraps memory owned by someone else (e.g. a caller's buffer); no copy, no ownership.
  static Tensor wrap(DType dtype, Shape shape, void* data);
  // Shares `owner`'s lifetime (e.g. a buffer holding a whole model file).
  static Tensor alias(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data);

  // Bytes at an address not aligned to the element size (a payload aliased in a mapped model
  // file: protobuf puts raw_data anywhere). raw()/data() copy them, once, into an aligned
  // buffer shared by every copy of the tensor; stored_bytes() reads them where they are, so a
  // reader that only copies bytes (weight packing) never pays for that aligned copy.
  static Tensor alias_unaligned(DType dtype, Shape shape, std::shared_ptr<void> owner,
                                const void* bytes);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr && !lazy_ && numel_ == 0; }

  void* raw() { return lazy_ ? aligned_copy() : data_; }
  const void* raw() const { return lazy_ ? aligned_copy() : data_; }
  // The tensor's bytes as stored, aligned to nothing (read them with memcpy).
  const void* stored_bytes() const;
  bool unaligned() const { return lazy_ != nullptr; }
  // Typed access; throws internal if T does not match dtype().
  template <class T>
  T* data();
  template <class T>
  const T* data() const;

  // Whether this tensor alone holds its buffer: allocated here, neither shared by a copy nor
  // a model file's bytes. Only then may a pass change its elements in place.
  bool exclusive() const { return !lazy_ && owner_ && owner_.use_count() == 1; }
  // Whether the bytes are kept alive by `owner` (the same control block; false for null).
  bool shares_owner(const std::shared_ptr<void>& owner) const;
  Tensor clone() const;  // deep copy

 private:
  struct Unaligned;
  void* aligned_copy() const;

  DType dtype_ = DType::f32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  std::shared_ptr<Unaligned> lazy_;  // set only by alias_unaligned
};

// A model's f32 weights where the model keeps them (Tensor::stored_bytes): packers read them
// in place, also from a mapped file where protobuf put them at any byte offset, so they read
// by copy and never through a float& (which needs 4-byte alignment).
class ModelFloats {
 public:
  explicit ModelFloats(const void* p) : p_(static_cast<const unsigned char*>(p)) {}
  explicit ModelFloats(const Tensor& t) : ModelFloats(t.stored_bytes()) {}
  float operator[](int64_t i) const {
    float v;
    std::memcpy(&v, p_ + 4 * i, 4);
    return v;
  }
  ModelFloats operator+(int64_t i) const { return ModelFloats(p_ + 4 * i); }
  const void* bytes() const { return p_; }

 private:
  const unsigned char* p_;
};

struct Subgraph;

struct Attribute {
  enum class Kind { f, i, s, floats, ints, strings, tensor, graph };
  Kind kind = Kind::i;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  Tensor t;
  std::shared_ptr<const Subgraph> g;  // an If's then_branch / else_branch
};

// Builders of one attribute each, for passes and tests that add attributes to nodes.
inline Attribute attr_i(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  return a;
}
inline Attribute attr_f(float v) {
  Attribute a;
  a.kind = Attribute::Kind::f;
  a.f = v;
  return a;
}
inline Attribute attr_s(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::s;
  a.s = std::move(v);
  return a;
}
inline Attribute attr_ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::ints;
  a.ints = std::move(v);
  return a;
}
inline Attribute attr_floats(std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::floats;
  a.floats = std::move(v);
  return a;
}
inline Attribute attr_strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::strings;
  a.strings = std::move(v);
  return a;
}
inline Attribute attr_t(Tensor t) {
  Attribute a;
  a.kind = Attribute::Kind::tensor;
  a.t = std::move(t);
  return a;
}

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;  // an omitted optional input ("" in ONNX)

struct Value {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  bool shape_known = false;        // set by import (graph inputs, initializers) or inference
  std::optional<Tensor> constant;  // initializers and folded values
  bool is_const() const { return constant.has_value(); }
};

struct Node {
  std::string name;  // never empty after import (generated as "<op>_<index>" when missing)
  std::string op;    // ONNX op_type
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::map<std::string, Attribute> attrs;

  // "node 'conv1' (Conv)": the prefix of every error about this node.
  std::string where() const;
  [[noreturn]] void fail(Code code, const std::string& msg) const;

  bool has(const std::string& attr) const { return attrs.count(attr) != 0; }
  // Typed getters: return `def` when absent, throw invalid_model (naming the node) when the
  // attribute has the wrong kind.
  int64_t attr_i(const std::string& name, int64_t def) const;
  float attr_f(const std::string& name, float def) const;
  std::string attr_s(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> def = {}) const;
  const Tensor* attr_t(const std::string& name) const;  // nullptr when absent

  // Input i if present (not omitted), else kNoValue.
  ValueId in(size_t i) const { return i < inputs.size() ? inputs[i] : kNoValue; }
};

// The element type and dims a model declares for a graph output (dims -1 where symbolic or not
// given; no dims when the model gives no shape); what the model does not say stays unset.
struct DeclaredType {
  std::optional<DType> dtype;
  std::optional<Shape> dims;
};

// A branch of an If (then_branch / else_branch) or a Loop's body as imported. Its nodes refer
// to values by name (the subgraph's own, or the enclosing graphs'); their Node::inputs /
// outputs stay empty until the subgraph is inlined into the graph (graph/passes.cpp,
// infer_shapes: the branch taken, or each iteration of a loop).
struct Subgraph {
  struct Op {
    Node node;
    std::vector<std::string> inputs, outputs;  // "" for an omitted one
  };
  std::vector<Op> ops;
  std::vector<std::pair<std::string, Tensor>> consts;  // the subgraph's initializers
  std::vector<std::string> inputs;                     // a Loop body's (none for a branch)
  std::vector<std::string> outputs;
  std::vector<DeclaredType> declared;  // per output
  std::vector<std::string> outer;      // names read from enclosing graphs (sorted, unique)
};

struct Graph {
  std::string name;
  int64_t opset = 0;  // default-domain opset the model was imported with
  std::vector<Value> values;
  std::vector<Node> nodes;      // topologically ordered after import and after every pass
  std::vector<ValueId> inputs;  // runtime inputs (never initializers)
  std::vector<ValueId> outputs;
  // Set by an import that borrows the caller's model bytes (ImportOptions::borrow): constants
  // alias them until own_borrowed() copies what is still needed.
  std::shared_ptr<void> borrowed;
  // The type each graph output declares in the model, by name. What Kiln reports for an
  // output whose shape each run decides (graph/dynamic.h).
  using Declared = DeclaredType;
  std::map<std::string, Declared> declared_outputs;
  // Graph inputs and outputs the model declares as uint8, int8 or int32, by name: the dtype a
  // caller passes or receives (the graph holds them as held_dtype of it).
  std::map<std::string, DType> io_dtypes;
  // A graph run with every input known (graph/dynamic.h's run-time tail): shapes follow the
  // data, so empty tensors (no detection left) are allowed.
  bool runtime_shapes = false;
  // Nodes the unrolled Loops have made so far (graph/inline_loop.cpp bounds them).
  int64_t unrolled_nodes = 0;

  ValueId add_value(std::string name, DType dtype = DType::f32);
  ValueId add_const(std::string name, Tensor t);
  // kNoValue if absent. Linear scan is avoided by an index kept in sync by add_value.
  ValueId find(std::string_view name) const;
  Value& value(ValueId id) { return values.at(size_t(id)); }
  const Value& value(ValueId id) const { return values.at(size_t(id)); }

  // Index of the node producing each value (-1 for inputs/constants), and consumers per value.
  std::vector<int> producers() const;
  std::vector<std::vector<int>> consumers() const;
  bool is_output(ValueId v) const;

  // Stable topological sort; throws invalid_model naming a node on a cycle or on an input
  // that is produced by nothing and is neither a graph input nor a constant.
  void topo_sort();
  // Rebuilds the name index (after values were renamed or removed).
  void reindex();

 private:
  std::map<std::string, ValueId, std::less<>> index_;
};

// Gives the graph its own copies of the constants (and tensor attributes) that still alias
// borrowed model bytes, and forgets them: after it, nothing refers to the caller's buffer
// (internal error if something else still does). No-op for a graph that borrowed nothing.
void own_borrowed(Graph& g);
// The same for another graph taken from g (graph/dynamic.h's tail): its own copies of whatever
// shares `owner` (g.borrowed), before own_borrowed(g) checks that nothing else refers to it.
void own_tensors_of(Graph& g, const std::shared_ptr<void>& owner);

// The names an If node's branches read from the graphs enclosing it (sorted, unique); empty for
// other nodes.
std::vector<std::string> branch_reads(const Node& n);

// A generated name not yet used in the graph ("<base>", "<base>_1", ...).
std::string unique_value_name(const Graph& g, const std::string& base);
// The constant tensor value v holds, or nullptr (absent or computed).
const Tensor* const_tensor(const Graph& g, ValueId v);
// The constant f32 tensor value v holds, or nullptr (absent, computed, or another dtype).
const Tensor* const_f32(const Graph& g, ValueId v);
// Value v is present and 4-D.
bool is4d(const Graph& g, ValueId v);

// A 1-D int64 tensor holding v.
Tensor ints_tensor(const std::vector<int64_t>& v);
// The contents of node n's input i when it is a constant int64 tensor; nullopt when absent,
// computed at run time or of another dtype.
std::optional<std::vector<int64_t>> ints_of(const Graph& g, const Node& n, size_t i);

}  // namespace kiln
