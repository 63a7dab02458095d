#include "graph/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "graph/canonicalize.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct Ctx {
  const ImportOptions& opts;
  uint64_t file_bytes = 0;
  uint64_t external_bytes = 0;
  uint64_t const_bytes = 0;  // constants and attribute lists built so far (memory)

  // Accounts `bytes` of memory about to be allocated for `what` against the budget derived
  // from the file's size (see kConstBytesPerFileByte).
  void charge(uint64_t bytes, const std::string& what) {
    const_bytes += bytes;
    uint64_t budget = kConstBytesPerFileByte * file_bytes + external_bytes + kConstSlackBytes;
    if (const_bytes > budget)
      fail(Code::invalid_model, what + ": the model's constants and attributes would take " +
                                    std::to_string(const_bytes) +
                                    " bytes of memory, more than Kiln allows for a " +
                                    std::to_string(file_bytes) + "-byte file (" +
                                    std::to_string(kConstBytesPerFileByte) +
                                    " bytes per file byte, plus external data, plus " +
                                    std::to_string(kConstSlackBytes >> 20) + " MiB)");
  }
};

// A tensor's rank and every dim within Kiln's limits (a zero dim must not let the others be
// astronomically large: later shape arithmetic adds and multiplies them).
void check_dims(const Shape& s, const std::string& what) {
  if (int64_t(s.size()) > kMaxRank)
    fail(Code::unsupported, what + " has rank " + std::to_string(s.size()) +
                                "; Kiln supports at most " + std::to_string(kMaxRank) + " dims");
  for (int64_t d : s)
    if (d > kMaxTensorElements)
      fail(Code::invalid_model, what + " has a dimension of " + std::to_string(d) + " (shape " +
                                    shape_str(s) + "), more than Kiln accepts (" +
                                    std::to_string(kMaxTensorElements) + ")");
}

std::string tensor_what(const onnx::TensorProto& t) { return "initializer '" + t.name() + "'"; }

Shape dims_of(const onnx::TensorProto& t, const std::string& what) {
  Shape s;
  for (int64_t d : t.dims()) {
    if (d < 0) fail(Code::invalid_model, what + " has a negative dimension");
    s.push_back(d);
  }
  check_dims(s, what);
  int64_t n = shape_numel(s);
  if (n > kMaxTensorElements)
    fail(Code::invalid_model, what + " has " + std::to_string(n) + " elements (shape " +
                                  shape_str(s) + "), more than Kiln accepts");
  return s;
}

// Reads `length` bytes at `offset` of an external-data file that must stay inside the model's
// folder (no absolute paths, no "..", no symlink leading out).
std::string read_external(Ctx& cx, const onnx::TensorProto& t, const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length") length = std::atoll(kv.value().c_str());
  }
  if (cx.opts.model_dir.empty())
    fail(Code::unsupported, what + " uses external data, which needs the model loaded from a " +
                                "file (its folder holds the data)");
  if (location.empty()) fail(Code::invalid_model, what + " has external data without a location");
  fs::path rel(location);
  if (rel.is_absolute())
    fail(Code::invalid_model, what + ": external data path '" + location + "' is absolute");
  for (const auto& part : rel)
    if (part == "..")
      fail(Code::invalid_model,
           what + ": external data path '" + location + "' leaves the model's folder");
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::path(cx.opts.model_dir), ec);
  fs::path file = fs::weakly_canonical(dir / rel, ec);
  if (ec) fail(Code::io_error, what + ": cannot resolve external data '" + location + "'");
  auto [end, _] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  if (end != dir.end())
    fail(Code::invalid_model,
         what + ": external data path '" + location + "' leaves the model's folder");
  std::ifstream f(file, std::ios::binary);
  if (!f) fail(Code::io_error, what + ": cannot open external data file '" + file.string() + "'");
  f.seekg(0, std::ios::end);
  int64_t fsize = int64_t(f.tellg());
  if (offset < 0 || offset > fsize)
    fail(Code::invalid_model, what + ": external data offset beyond the end of '" + location + "'");
  if (length < 0) length = fsize - offset;
  if (length > fsize - offset)
    fail(Code::invalid_model, what + ": external data length runs past the end of '" + location + "'");
  cx.external_bytes += uint64_t(length);
  if (cx.external_bytes > cx.opts.max_external_bytes)
    fail(Code::invalid_model, what + ": external data exceeds the size limit");
  std::string buf(size_t(length), '\0');
  f.seekg(offset);
  f.read(buf.data(), length);
  if (!f) fail(Code::io_error, what + ": reading external data '" + location + "' failed");
  return buf;
}

// Checks that the tensor's stored element count equals its dims before allocating anything.
void check_count(int64_t have, int64_t want, const std::string& what, const Shape& s) {
  if (have != want)
    fail(Code::invalid_model, what + " has " + std::to_string(have) + " elements of data but " +
                                  "its shape " + shape_str(s) + " needs " + std::to_string(want));
}

Tensor convert_tensor(Ctx& cx, const onnx::TensorProto& t, const std::string& what) {
  Shape shape = dims_of(t, what);
  int64_t n = shape_numel(shape);
  // In-memory size: float32 stays 4 bytes, everything else becomes int64.
  cx.charge(uint64_t(n) * (t.data_type() == onnx::TensorProto::FLOAT ? 4 : 8), what);
  const std::string* raw = t.has_raw_data() ? &t.raw_data() : nullptr;
  std::string external;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    external = read_external(cx, t, what);
    raw = &external;
  }
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: {
      if (raw) check_count(int64_t(raw->size() / 4), n, what, shape);
      if (raw && raw->size() % 4) fail(Code::invalid_model, what + " raw data is not whole floats");
      if (!raw) check_count(t.float_data_size(), n, what, shape);
      Tensor out(DType::f32, shape);
      if (raw) std::memcpy(out.raw(), raw->data(), size_t(n) * 4);
      else std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>());
      return out;
    }
    case onnx::TensorProto::INT64: {
      if (raw) check_count(int64_t(raw->size() / 8), n, what, shape);
      if (raw && raw->size() % 8) fail(Code::invalid_model, what + " raw data is not whole int64s");
      if (!raw) check_count(t.int64_data_size(), n, what, shape);
      Tensor out(DType::i64, shape);
      if (raw) std::memcpy(out.raw(), raw->data(), size_t(n) * 8);
      else std::copy(t.int64_data().begin(), t.int64_data().end(), out.data<int64_t>());
      return out;
    }
    case onnx::TensorProto::BOOL:     // e.g. Dropout's training_mode: stored as 0/1 int64
    case onnx::TensorProto::INT32: {  // widened: Kiln's integer type is int64
      const bool is_bool = t.data_type() == onnx::TensorProto::BOOL;
      const size_t esz = is_bool ? 1 : 4;
      if (raw) check_count(int64_t(raw->size() / esz), n, what, shape);
      if (raw && raw->size() % esz) fail(Code::invalid_model, what + " raw data is not whole elements");
      if (!raw) check_count(t.int32_data_size(), n, what, shape);
      Tensor out(DType::i64, shape);
      int64_t* o = out.data<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = 0;
        if (raw && is_bool) v = raw->data()[i] != 0;
        else if (raw) std::memcpy(&v, raw->data() + i * 4, 4);
        else v = t.int32_data(int(i));
        o[i] = v;
      }
      return out;
    }
    default:
      fail(Code::unsupported, what + " has data type " +
                                  onnx::TensorProto_DataType_Name(t.data_type()) +
                                  "; Kiln supports float32, int64, int32 and bool tensors");
  }
}

DType elem_type(int32_t t, const std::string& what) {
  if (t == onnx::TensorProto::FLOAT) return DType::f32;
  if (t == onnx::TensorProto::INT64) return DType::i64;
  fail(Code::unsupported, what + " has element type " +
                              onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t)) +
                              "; Kiln supports float32 and int64 inputs and outputs");
}

void import_input(Graph& g, const onnx::ValueInfoProto& vi, const ImportOptions& opts) {
  std::string what = "graph input '" + vi.name() + "'";
  if (vi.name().empty()) fail(Code::invalid_model, "a graph input has no name");
  if (!vi.type().has_tensor_type()) fail(Code::unsupported, what + " is not a tensor");
  const auto& tt = vi.type().tensor_type();
  ValueId id = g.add_value(vi.name(), elem_type(tt.elem_type(), what));
  Value& v = g.value(id);
  if (!tt.has_shape()) fail(Code::unsupported, what + " has no shape; Kiln needs static shapes");
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (i == 0 && opts.batch > 0) {
      v.shape.push_back(opts.batch);
    } else if (d.has_dim_value() && d.dim_value() > 0) {
      v.shape.push_back(d.dim_value());
    } else if (i == 0) {
      v.shape.push_back(1);  // symbolic batch: default batch size 1
    } else {
      fail(Code::unsupported, what + " has a non-static dimension " + std::to_string(i) +
                                  (d.has_dim_param() ? " ('" + d.dim_param() + "')" : "") +
                                  "; only the batch dimension (0) may be symbolic");
    }
  }
  check_dims(v.shape, what);
  if (shape_numel(v.shape) > kMaxTensorElements)
    fail(Code::invalid_model, what + " shape " + shape_str(v.shape) + " is too large");
  v.shape_known = true;
  g.inputs.push_back(id);
}

Attribute convert_attr(Ctx& cx, const onnx::AttributeProto& a, const std::string& what) {
  Attribute r;
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: r.kind = Attribute::Kind::f; r.f = a.f(); break;
    case onnx::AttributeProto::INT: r.kind = Attribute::Kind::i; r.i = a.i(); break;
    case onnx::AttributeProto::STRING: r.kind = Attribute::Kind::s; r.s = a.s(); break;
    case onnx::AttributeProto::FLOATS:
      cx.charge(uint64_t(a.floats_size()) * 4, what + " attribute '" + a.name() + "'");
      r.kind = Attribute::Kind::floats;
      r.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      cx.charge(uint64_t(a.ints_size()) * 8, what + " attribute '" + a.name() + "'");
      r.kind = Attribute::Kind::ints;
      r.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      cx.charge(uint64_t(a.strings_size()) * sizeof(std::string),
                what + " attribute '" + a.name() + "'");
      r.kind = Attribute::Kind::strings;
      r.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSOR:
      r.kind = Attribute::Kind::tensor;
      r.t = convert_tensor(cx, a.t(), what + " attribute '" + a.name() + "'");
      break;
    default:
      fail(Code::unsupported, what + ": attribute '" + a.name() + "' has type " +
                                  onnx::AttributeProto_AttributeType_Name(a.type()) +
                                  ", which Kiln does not support");
  }
  return r;
}

// Node and value counts, before anything is built: every later pass is at least linear in
// them, and some steps of planning are quadratic.
void check_graph_size(const onnx::GraphProto& gp) {
  if (gp.node_size() > kMaxNodes)
    fail(Code::unsupported, "the graph has " + std::to_string(gp.node_size()) +
                                " nodes; Kiln accepts at most " + std::to_string(kMaxNodes));
  int64_t values = int64_t(gp.initializer_size()) + gp.input_size();
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    if (np.input_size() > kMaxNodeInputs || np.output_size() > kMaxNodeOutputs)
      fail(Code::unsupported,
           "node '" + (np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name()) +
               "' (" + np.op_type() + ") has " + std::to_string(np.input_size()) + " inputs and " +
               std::to_string(np.output_size()) + " outputs; Kiln accepts at most " +
               std::to_string(kMaxNodeInputs) + " and " + std::to_string(kMaxNodeOutputs));
    values += np.output_size();
  }
  if (values > kMaxValues)
    fail(Code::unsupported, "the graph defines " + std::to_string(values) +
                                " values (initializers, inputs and node outputs); Kiln accepts "
                                "at most " +
                                std::to_string(kMaxValues));
}

int64_t default_opset(const onnx::ModelProto& m) {
  int64_t opset = -1;
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < 0) fail(Code::invalid_model, "the model imports no version of the default ONNX opset");
  if (opset < kMinOpset || opset > kMaxOpset)
    fail(Code::unsupported, "the model uses ONNX opset " + std::to_string(opset) +
                                "; Kiln supports opsets " + std::to_string(kMinOpset) + " to " +
                                std::to_string(kMaxOpset));
  return opset;
}

}  // namespace

Graph import_onnx(const void* data, size_t size, const ImportOptions& opts) {
  if (!data || size == 0) fail(Code::invalid_model, "the model is empty (0 bytes)");
  if (size > size_t(INT_MAX))
    fail(Code::unsupported, "the model file is larger than 2 GiB; store weights as external data");
  onnx::ModelProto m;
  if (!m.ParseFromArray(data, int(size)))
    fail(Code::invalid_model, "the model is not a valid ONNX protobuf (truncated or corrupt file)");
  if (!m.has_graph()) fail(Code::invalid_model, "the model has no graph");
  Ctx cx{opts, uint64_t(size)};
  Graph g;
  g.opset = default_opset(m);
  const onnx::GraphProto& gp = m.graph();
  g.name = gp.name();
  check_graph_size(gp);

  // Initializers first: older exporters also list them as graph inputs, which are skipped.
  for (const auto& t : gp.initializer()) {
    if (t.name().empty()) fail(Code::invalid_model, "an initializer has no name");
    g.add_const(t.name(), convert_tensor(cx, t, tensor_what(t)));
  }
  if (gp.sparse_initializer_size())
    fail(Code::unsupported, "sparse initializers are not supported");
  for (const auto& vi : gp.input())
    if (g.find(vi.name()) == kNoValue) import_input(g, vi, opts);

  // Create every node output first so node inputs can refer to later nodes (the file need not
  // be topologically sorted); then resolve inputs.
  g.nodes.reserve(size_t(gp.node_size()));
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node n;
    n.op = np.op_type();
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      n.fail(Code::unsupported, "operator domain '" + np.domain() + "' is not supported");
    for (const auto& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(kNoValue);
        continue;
      }
      if (g.find(out) != kNoValue)
        n.fail(Code::invalid_model, "output '" + out + "' is already defined");
      n.outputs.push_back(g.add_value(out));
    }
    for (const auto& a : np.attribute()) {
      if (a.name().empty()) n.fail(Code::invalid_model, "an attribute has no name");
      n.attrs[a.name()] = convert_attr(cx, a, n.where());
    }
    g.nodes.push_back(std::move(n));
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    Node& n = g.nodes[size_t(i)];
    for (const auto& in : gp.node(i).input()) {
      if (in.empty()) {
        n.inputs.push_back(kNoValue);
        continue;
      }
      ValueId v = g.find(in);
      if (v == kNoValue)
        n.fail(Code::invalid_model, "input '" + in +
                                        "' is not a graph input, an initializer or the output "
                                        "of any node");
      n.inputs.push_back(v);
    }
  }
  for (const auto& vi : gp.output()) {
    ValueId v = g.find(vi.name());
    if (v == kNoValue)
      fail(Code::invalid_model, "graph output '" + vi.name() + "' is produced by no node");
    g.outputs.push_back(v);
  }
  if (g.outputs.empty()) fail(Code::invalid_model, "the graph has no outputs");
  g.topo_sort();
  canonicalize(g);
  return g;
}

Graph import_onnx_file(const std::string& path, ImportOptions opts) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(Code::io_error, "'" + path + "' is a directory");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) fail(Code::io_error, "cannot open model file '" + path + "'");
  const std::streamoff size = f.tellg();
  if (size < 0) fail(Code::io_error, "cannot size model file '" + path + "'");
  // One read of the whole file (a per-character stream iterator costs ~10 ns a byte).
  std::string bytes(size_t(size), '\0');
  f.seekg(0);
  f.read(bytes.data(), size);
  if (!f) fail(Code::io_error, "reading model file '" + path + "' failed");
  if (opts.model_dir.empty()) {
    fs::path dir = fs::path(path).parent_path();
    opts.model_dir = dir.empty() ? "." : dir.string();
  }
  try {
    return import_onnx(bytes.data(), bytes.size(), opts);
  } catch (const Error& e) {
    fail(e.code(), "'" + path + "': " + e.what());
  }
}

}  // namespace kiln
