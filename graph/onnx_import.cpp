#include "graph/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "graph/canonicalize.h"
#include "graph/half.h"
#include "graph/import_qdq.h"
#include "graph/onnx_mmap.h"
#include "graph/onnx_wire.h"
#include "graph/ops.h"
#include "graph/qlinear.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Tensor payloads of at least this many bytes are cut out of the bytes protobuf parses (and
// aliased or copied once); smaller ones (shapes, scalars, small biases) are left to protobuf.
constexpr uint64_t kCutMinBytes = 4096;

// Where the model's bytes live. `keep` is set when Kiln owns them (a file it mapped): large
// payloads are then aliased instead of copied. A caller's buffer (import_onnx) is never
// retained: its payloads are copied once, straight into their tensors.
struct Source {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<void> keep;
};

// A tensor payload: bytes in the model, in an external-data file or in a parsed protobuf
// string. `keep` non-null: the bytes may be aliased for as long as `keep` lives.
struct Bytes {
  const uint8_t* p = nullptr;
  size_t n = 0;
  std::shared_ptr<void> keep;
};

struct Ctx {
  const ImportOptions& opts;
  const Source& src;
  const onnx_wire::Stripped& cuts;
  uint64_t file_bytes = 0;
  uint64_t external_bytes = 0;
  uint64_t const_bytes = 0;  // constants and attribute lists built so far (memory)
  std::map<std::string, MappedFile> external_files;  // by canonical path, mapped once each

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

  Bytes payload(const onnx_wire::Range& r) const {
    return {src.data + r.offset, size_t(r.size), src.keep};
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

std::string tensor_what(const onnx::TensorProto& t) {
  return "initializer '" + t.name() + "'";
}

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
// folder (no absolute paths, no "..", no symlink leading out). The file is mapped (once per
// model), so its bytes can be aliased like the model's own.
Bytes read_external(Ctx& cx, const onnx::TensorProto& t, const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
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
  auto it = cx.external_files.find(file.string());
  if (it == cx.external_files.end()) {
    try {
      it = cx.external_files.emplace(file.string(), map_file(file.string())).first;
    } catch (const Error& e) {
      fail(e.code(), what + ": cannot open external data file: " + e.what());
    }
  }
  const MappedFile& m = it->second;
  const int64_t fsize = int64_t(m.size);
  if (offset < 0 || offset > fsize)
    fail(Code::invalid_model, what + ": external data offset beyond the end of '" + location + "'");
  if (length < 0) length = fsize - offset;
  if (length > fsize - offset)
    fail(Code::invalid_model,
         what + ": external data length runs past the end of '" + location + "'");
  cx.external_bytes += uint64_t(length);
  if (cx.external_bytes > cx.opts.max_external_bytes)
    fail(Code::invalid_model, what + ": external data exceeds the size limit");
  return {m.data ? m.data + offset : nullptr, size_t(length), m.keep};
}

// Checks that the tensor's stored element count equals its dims before allocating anything.
void check_count(int64_t have, int64_t want, const std::string& what, const Shape& s) {
  if (have != want)
    fail(Code::invalid_model, what + " has " + std::to_string(have) + " elements of data but " +
                                  "its shape " + shape_str(s) + " needs " + std::to_string(want));
}

// The tensor of `b`'s bytes (little-endian host assumed: x86). Aliased when Kiln owns the
// bytes (the mapped file) or borrows them (ImportOptions::borrow); copied otherwise (into
// Tensor's own buffer: from 256 KiB mapped and populated in one call; aligned_alloc'd copies
// were served from the loading thread's malloc arena and kept by glibc when freed).
//
// Why element alignment and not more: Tensor's own buffers are 64-byte aligned, but nothing
// relies on that for constants — the JIT kernels pack weights into their own buffers and load
// everything else with unaligned-tolerant instructions (the C API already hands them caller
// buffers aligned only to the element size), and the C++ readers (reference kernels, passes)
// read through float*/int64_t*, which needs element alignment. A misaligned payload (most of
// them: protobuf puts raw_data at arbitrary offsets) is therefore aliased "unaligned": those
// readers get an aligned copy made on first use, while weight packing reads the mapped bytes
// themselves (jit/pack.h, ModelFloats), so the conv and FC weights (ResNet-50: 76 of its 98 MB) are
// never copied at load.
Tensor tensor_from(DType dtype, Shape shape, const Bytes& b) {
  if (b.keep && reinterpret_cast<uintptr_t>(b.p) % dtype_size(dtype) == 0)
    return Tensor::alias(dtype, std::move(shape), b.keep, const_cast<uint8_t*>(b.p));
  if (b.keep) return Tensor::alias_unaligned(dtype, std::move(shape), b.keep, b.p);
  Tensor out(dtype, std::move(shape));
  if (out.nbytes()) std::memcpy(out.raw(), b.p, out.nbytes());
  return out;
}

// A graph input's or output's dtype as the caller passes / receives it: float16 / bfloat16
// ones are float32 (the caller passes float32); uint8, int8, int32 and float64 stay (the graph
// holds them as held_dtype, Session converts).
std::optional<DType> io_dtype(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return DType::f32;
    case onnx::TensorProto::UINT8:
      return DType::u8;
    case onnx::TensorProto::INT8:
      return DType::i8;
    case onnx::TensorProto::INT32:
      return DType::i32;
    case onnx::TensorProto::DOUBLE:
      return DType::f64;
    case onnx::TensorProto::INT64:
      return DType::i64;
    case onnx::TensorProto::BOOL:
      return DType::boolean;
    default:
      return std::nullopt;
  }
}

// The dtype Kiln keeps an ONNX element type in: 16-bit floats widen to float32, 8-bit integers
// to float32 (quantized data, exactly: graph/import_qdq.h), int32 to int64, float64 narrows to
// float32; nullopt for the types Kiln does not run.
std::optional<DType> widened_dtype(int32_t t) {
  const std::optional<DType> io = io_dtype(t);
  return io ? std::optional<DType>(held_dtype(*io)) : std::nullopt;
}

// A tensor whose elements are stored as `In` (little-endian) in raw data or one per entry of
// int32_data (where ONNX keeps int32, 16-bit floats and bool), each converted by `conv`.
template <typename Out, typename In, typename Conv>
Tensor widen(DType dtype, Shape shape, const std::optional<Bytes>& raw, const onnx::TensorProto& t,
             const std::string& what, Conv conv) {
  const int64_t n = shape_numel(shape);
  if (raw) check_count(int64_t(raw->n / sizeof(In)), n, what, shape);
  if (raw && raw->n % sizeof(In))
    fail(Code::invalid_model, what + " raw data is not whole elements");
  if (!raw) check_count(t.int32_data_size(), n, what, shape);
  Tensor out(dtype, std::move(shape));
  Out* o = out.data<Out>();
  for (int64_t i = 0; i < n; ++i) {
    In v{};
    if (raw)
      std::memcpy(&v, raw->p + i * int64_t(sizeof(In)), sizeof(In));
    else
      v = In(t.int32_data(int(i)));
    o[i] = conv(v);
  }
  return out;
}

Tensor convert_tensor(Ctx& cx, const onnx::TensorProto& t, const std::string& what,
                      const onnx_wire::TensorCut* cut) {
  Shape shape = dims_of(t, what);
  int64_t n = shape_numel(shape);
  // In-memory size: the dtype Kiln keeps it in (16-bit floats widen to float32, int32 to int64).
  const std::optional<DType> kept = widened_dtype(t.data_type());
  cx.charge(uint64_t(n) * (kept ? dtype_size(*kept) : 8), what);
  // The payload, wherever it is: cut out of the protobuf bytes by onnx_wire, in the parsed
  // message, or in an external file.
  std::optional<Bytes> raw;
  if (cut && cut->raw.present)
    raw = cx.payload(cut->raw);
  else if (t.has_raw_data())
    raw = Bytes{reinterpret_cast<const uint8_t*>(t.raw_data().data()), t.raw_data().size(), {}};
  if (t.data_location() == onnx::TensorProto::EXTERNAL) raw = read_external(cx, t, what);
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: {
      // A cut float_data holds packed little-endian floats, the same bytes as raw_data.
      std::optional<Bytes> packed;
      if (!raw && cut && cut->floats.present) packed = cx.payload(cut->floats);
      if (packed && packed->n % 4)
        fail(Code::invalid_model, what + " float_data is not whole floats");
      if (packed) raw = packed;
      if (raw) check_count(int64_t(raw->n / 4), n, what, shape);
      if (raw && raw->n % 4) fail(Code::invalid_model, what + " raw data is not whole floats");
      if (raw) return tensor_from(DType::f32, std::move(shape), *raw);
      check_count(t.float_data_size(), n, what, shape);
      Tensor out(DType::f32, shape);
      std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>());
      return out;
    }
    case onnx::TensorProto::INT64: {
      if (raw) check_count(int64_t(raw->n / 8), n, what, shape);
      if (raw && raw->n % 8) fail(Code::invalid_model, what + " raw data is not whole int64s");
      if (raw) return tensor_from(DType::i64, std::move(shape), *raw);
      check_count(t.int64_data_size(), n, what, shape);
      Tensor out(DType::i64, shape);
      std::copy(t.int64_data().begin(), t.int64_data().end(), out.data<int64_t>());
      return out;
    }
    case onnx::TensorProto::BOOL:  // one byte per element, normalised to 0/1
      return widen<uint8_t, uint8_t>(DType::boolean, std::move(shape), raw, t, what,
                                     [](uint8_t v) { return uint8_t(v != 0); });
    case onnx::TensorProto::INT32:  // widened: Kiln's integer type is int64
      return widen<int64_t, int32_t>(DType::i64, std::move(shape), raw, t, what,
                                     [](int32_t v) { return int64_t(v); });
    case onnx::TensorProto::UINT8:  // quantized data: float32 holds it exactly (import_qdq.h)
      return widen<float, uint8_t>(DType::f32, std::move(shape), raw, t, what,
                                   [](uint8_t v) { return float(v); });
    case onnx::TensorProto::INT8:
      return widen<float, int8_t>(DType::f32, std::move(shape), raw, t, what,
                                  [](int8_t v) { return float(v); });
    case onnx::TensorProto::FLOAT16:  // widened to float32 (exactly)
      return widen<float, uint16_t>(DType::f32, std::move(shape), raw, t, what, half_to_float);
    case onnx::TensorProto::BFLOAT16:
      return widen<float, uint16_t>(DType::f32, std::move(shape), raw, t, what, bf16_to_float);
    case onnx::TensorProto::DOUBLE: {  // narrowed to float32 (rounded to nearest)
      if (raw) {
        if (raw->n % 8) fail(Code::invalid_model, what + " raw data is not whole doubles");
        check_count(int64_t(raw->n / 8), n, what, shape);
      } else {
        check_count(t.double_data_size(), n, what, shape);
      }
      Tensor out(DType::f32, std::move(shape));
      float* o = out.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        double v;
        if (raw)
          std::memcpy(&v, raw->p + i * 8, 8);
        else
          v = t.double_data(int(i));
        o[i] = double_to_float(v);
      }
      return out;
    }
    default:
      fail(Code::unsupported,
           what + " has data type " + onnx::TensorProto_DataType_Name(t.data_type()) +
               "; Kiln supports float32, float16 and bfloat16 (widened to float32), float64 "
               "(narrowed to float32), int64, int32, bool, and uint8 / int8 for "
               "DequantizeLinear");
  }
}

DType elem_type(int32_t t, const std::string& what) {
  if (const std::optional<DType> d = io_dtype(t)) return *d;
  fail(Code::unsupported, what + " has element type " +
                              onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t)) +
                              "; Kiln supports float32 (and float16/bfloat16/float64, run as "
                              "float32), uint8, int8, int32, int64 and bool inputs and outputs");
}

// A graph output's declared element type (as Kiln holds it: int32 as int64, float16 as float32)
// and dims; what the model does not say stays unset.
Graph::Declared declared_type(const onnx::ValueInfoProto& vi) {
  Graph::Declared d;
  if (!vi.type().has_tensor_type()) return d;
  const auto& tt = vi.type().tensor_type();
  if (const std::optional<DType> io = io_dtype(tt.elem_type())) d.dtype = held_dtype(*io);
  if (tt.has_shape() && tt.shape().dim_size() <= kMaxRank) {
    Shape dims;
    for (const auto& dim : tt.shape().dim())
      dims.push_back(dim.has_dim_value() && dim.dim_value() >= 0 ? dim.dim_value() : -1);
    d.dims = std::move(dims);
  }
  return d;
}

void import_input(Graph& g, const onnx::ValueInfoProto& vi, const ImportOptions& opts) {
  std::string what = "graph input '" + vi.name() + "'";
  if (vi.name().empty()) fail(Code::invalid_model, "a graph input has no name");
  if (!vi.type().has_tensor_type()) fail(Code::unsupported, what + " is not a tensor");
  const auto& tt = vi.type().tensor_type();
  const DType io = elem_type(tt.elem_type(), what);
  ValueId id = g.add_value(vi.name(), held_dtype(io));
  if (io != held_dtype(io)) g.io_dtypes[vi.name()] = io;
  Value& v = g.value(id);
  if (!tt.has_shape()) fail(Code::unsupported, what + " has no shape; Kiln needs static shapes");
  const auto given = opts.shapes.find(vi.name());
  const Shape* want = given != opts.shapes.end() ? &given->second : nullptr;
  if (want && int(want->size()) != tt.shape().dim_size())
    fail(Code::shape_mismatch, what + " has " + std::to_string(tt.shape().dim_size()) +
                                   " dims; the shape given for it, " + shape_str(*want) + ", has " +
                                   std::to_string(want->size()));
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    const bool fixed = d.has_dim_value() && d.dim_value() > 0;
    const std::string param = d.has_dim_param() ? " ('" + d.dim_param() + "')" : "";
    int64_t set = 0;  // a size the caller chose
    if (i == 0 && opts.batch > 0)
      set = opts.batch;
    else if (want)
      set = (*want)[size_t(i)];
    if (d.has_dim_value() && d.dim_value() < 0)
      fail(Code::invalid_model, what + " has a negative dimension " + std::to_string(i));
    if (set == 0 && d.has_dim_value() && d.dim_value() == 0)
      fail(Code::unsupported, what + " has dimension " + std::to_string(i) +
                                  " of size 0 (an empty tensor); Kiln runs non-empty tensors "
                                  "(another size can be set at load: --shape, input_shapes)");
    if (set > 0) {
      v.shape.push_back(set);
      if (opts.dims_set && (!fixed || set != d.dim_value()))
        opts.dims_set->push_back(
            "'" + vi.name() + "' dim " + std::to_string(i) + " = " + std::to_string(set) +
            (fixed ? " (the model declares " + std::to_string(d.dim_value()) + ")"
                   : " (symbolic" + param + " in the model)"));
    } else if (fixed) {
      v.shape.push_back(d.dim_value());
    } else if (i == 0) {
      v.shape.push_back(1);  // symbolic batch: default batch size 1
    } else {
      fail(Code::unsupported, what + " has a symbolic dimension " + std::to_string(i) + param +
                                  "; set the input's shape at load (--shape " + vi.name() +
                                  ":AxBx..., the input_shapes option)");
    }
  }
  check_dims(v.shape, what);
  if (shape_numel(v.shape) > kMaxTensorElements)
    fail(Code::invalid_model, what + " shape " + shape_str(v.shape) + " is too large");
  v.shape_known = true;
  g.inputs.push_back(id);
}

Attribute convert_attr(Ctx& cx, const onnx::AttributeProto& a, const std::string& what,
                       const onnx_wire::TensorCut* cut) {
  Attribute r;
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      r.kind = Attribute::Kind::f;
      r.f = a.f();
      break;
    case onnx::AttributeProto::INT:
      r.kind = Attribute::Kind::i;
      r.i = a.i();
      break;
    case onnx::AttributeProto::STRING:
      r.kind = Attribute::Kind::s;
      r.s = a.s();
      break;
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
      r.t = convert_tensor(cx, a.t(), what + " attribute '" + a.name() + "'", cut);
      break;
    default:
      fail(Code::unsupported, what + ": attribute '" + a.name() + "' has type " +
                                  onnx::AttributeProto_AttributeType_Name(a.type()) +
                                  ", which Kiln does not support");
  }
  return r;
}

// A node's op, name (generated as "<op>_<index>" when missing) and attributes checked for what
// Kiln refuses before anything else is read.
Node node_head(const onnx::NodeProto& np, int index) {
  Node n;
  n.op = np.op_type();
  n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
  if (n.op.rfind(contrib_op_name(""), 0) == 0)  // (Kiln's names of contrib ops)
    n.fail(Code::unsupported, "operator " + n.op + " is not supported");
  if (!np.domain().empty() && np.domain() != "ai.onnx") {
    // ONNX Runtime's quantized ops in the operator form (graph/qlinear.h), nothing else.
    if (np.domain() != "com.microsoft" || !find_qlinear(contrib_op_name(n.op)))
      n.fail(Code::unsupported,
             "operator " + n.op + " of domain '" + np.domain() + "' is not supported");
    n.op = contrib_op_name(n.op);
  }
  if (const OpInfo* op = find_op(n.op); op && op->internal)
    n.fail(Code::unsupported, "operator " + n.op + " is internal to Kiln, not an ONNX operator");
  for (const auto& a : np.attribute()) {
    if (a.name().empty()) n.fail(Code::invalid_model, "an attribute has no name");
    // Kiln's fusion pass records fused epilogues in this attribute (graph/post_ops.h); a
    // model must not smuggle in operations ONNX does not define (found by fuzz_session: a
    // MatMul carrying one left no kernel able to run it).
    if (a.name() == "post_ops" || a.name() == kLegacyAxisAttr ||
        (n.op == "LRN" && a.name() == "window_lo"))
      n.fail(Code::invalid_model,
             "attribute '" + a.name() + "' is not an ONNX attribute (Kiln reserves it)");
  }
  return n;
}

// If or Loop inside If or Loop inside ...: deeper nesting is refused (no real model comes near).
constexpr int kMaxBranchDepth = 8;

std::shared_ptr<const Subgraph> import_branch(Ctx& cx, const onnx::GraphProto& gp,
                                              const std::string& what, int depth, bool loop_body);

// Attribute `a` of node n: an If's then_branch / else_branch and a Loop's body become Subgraphs
// (other graph attributes are refused by convert_attr); `depth`: how many subgraphs enclose n.
Attribute node_attr(Ctx& cx, const Node& n, const onnx::AttributeProto& a,
                    const onnx_wire::TensorCut* cut, int depth) {
  const bool loop_body = n.op == "Loop" && a.name() == "body";
  if (a.type() != onnx::AttributeProto::GRAPH || (n.op != "If" && !loop_body))
    return convert_attr(cx, a, n.where(), cut);
  Attribute r;
  r.kind = Attribute::Kind::graph;
  r.g = import_branch(cx, a.g(), n.where() + " " + a.name(), depth + 1, loop_body);
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

std::shared_ptr<const Subgraph> import_branch(Ctx& cx, const onnx::GraphProto& gp,
                                              const std::string& what, int depth, bool loop_body) {
  if (depth > kMaxBranchDepth)
    fail(Code::unsupported, what + ": If / Loop subgraphs nested more than " +
                                std::to_string(kMaxBranchDepth) + " deep");
  check_graph_size(gp);
  if (gp.input_size() > 0 && !loop_body)
    fail(Code::invalid_model, what + " declares inputs; a branch has none");
  if (gp.sparse_initializer_size())
    fail(Code::unsupported, what + ": sparse initializers are not supported");
  auto b = std::make_shared<Subgraph>();
  std::set<std::string> defined, read;
  for (const auto& vi : gp.input()) {
    if (vi.name().empty()) fail(Code::invalid_model, what + ": an input has no name");
    if (!defined.insert(vi.name()).second)
      fail(Code::invalid_model, what + ": input '" + vi.name() + "' is declared twice");
    b->inputs.push_back(vi.name());
  }
  for (const auto& t : gp.initializer()) {
    if (t.name().empty()) fail(Code::invalid_model, what + ": an initializer has no name");
    b->consts.emplace_back(t.name(), convert_tensor(cx, t, what + " " + tensor_what(t), nullptr));
    defined.insert(t.name());
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Subgraph::Op op;
    op.node = node_head(np, i);
    for (const auto& a : np.attribute()) {
      Attribute& at = op.node.attrs[a.name()] = node_attr(cx, op.node, a, nullptr, depth);
      if (at.g) read.insert(at.g->outer.begin(), at.g->outer.end());
    }
    for (const auto& in : np.input()) {
      op.inputs.push_back(in);
      if (!in.empty()) read.insert(in);
    }
    for (const auto& out : np.output()) {
      op.outputs.push_back(out);
      if (!out.empty() && !defined.insert(out).second)
        op.node.fail(Code::invalid_model, "output '" + out + "' is already defined");
    }
    b->ops.push_back(std::move(op));
  }
  for (const auto& vi : gp.output()) {
    if (vi.name().empty()) fail(Code::invalid_model, what + ": an output has no name");
    b->outputs.push_back(vi.name());
    b->declared.push_back(declared_type(vi));
    read.insert(vi.name());
  }
  for (const std::string& name : read)
    if (!defined.count(name)) b->outer.push_back(name);
  return b;
}

int64_t default_opset(const onnx::ModelProto& m) {
  int64_t opset = -1;
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < 0 && m.opset_import_size() > 0)
    fail(Code::unsupported, "the model imports only the opset domain '" +
                                m.opset_import(0).domain() +
                                "'; Kiln runs operators of the default ONNX domain");
  if (opset < 0)
    fail(Code::invalid_model, "the model imports no version of the default ONNX opset");
  if (opset < kMinOpset || opset > kMaxOpset)
    fail(Code::unsupported, "the model uses ONNX opset " + std::to_string(opset) +
                                "; Kiln supports opsets " + std::to_string(kMinOpset) + " to " +
                                std::to_string(kMaxOpset));
  return opset;
}

// Parses the model with protobuf, minus the large tensor payloads (onnx_wire cuts them out
// first: protobuf would copy each into a std::string), then builds the graph.
Graph import_source(const Source& src, const ImportOptions& opts) {
  if (!src.data || src.size == 0) fail(Code::invalid_model, "the model is empty (0 bytes)");
  if (src.size > size_t(INT_MAX))
    fail(Code::unsupported, "the model file is larger than 2 GiB; store weights as external data");
  const onnx_wire::Stripped cuts = onnx_wire::strip_payloads(src.data, src.size, kCutMinBytes);
  onnx::ModelProto m;
  const bool ok = cuts.unchanged ? m.ParseFromArray(src.data, int(src.size))
                                 : m.ParseFromArray(cuts.bytes.data(), int(cuts.bytes.size()));
  if (!ok)
    fail(Code::invalid_model, "the model is not a valid ONNX protobuf (truncated or corrupt file)");
  if (!m.has_graph()) fail(Code::invalid_model, "the model has no graph");
  Ctx cx{opts, src, cuts, uint64_t(src.size), 0, 0, {}};
  Graph g;
  g.opset = default_opset(m);
  const onnx::GraphProto& gp = m.graph();
  g.name = gp.name();
  check_graph_size(gp);
  // onnx_wire counts initializers as protobuf does; a mismatch would pair payloads wrongly.
  if (cuts.initializers.size() != size_t(gp.initializer_size()))
    fail(Code::internal, "the wire scan found " + std::to_string(cuts.initializers.size()) +
                             " initializers, protobuf " + std::to_string(gp.initializer_size()));

  // Initializers first: older exporters also list them as graph inputs, which are skipped.
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const auto& t = gp.initializer(i);
    if (t.name().empty()) fail(Code::invalid_model, "an initializer has no name");
    g.add_const(t.name(), convert_tensor(cx, t, tensor_what(t), &cuts.initializers[size_t(i)]));
  }
  if (gp.sparse_initializer_size())
    fail(Code::unsupported, "sparse initializers are not supported");
  for (const auto& vi : gp.input())
    if (g.find(vi.name()) == kNoValue) import_input(g, vi, opts);
  for (const auto& [name, shape] : opts.shapes) {
    const ValueId v = g.find(name);
    if (v == kNoValue || g.value(v).is_const()) {
      std::string names;
      for (ValueId in : g.inputs) names += (names.empty() ? "'" : ", '") + g.value(in).name + "'";
      fail(Code::invalid_argument,
           "a shape is given for '" + name +
               "', which is not an input of the model (its inputs: " + names + ")");
    }
  }

  // Create every node output first so node inputs can refer to later nodes (the file need not
  // be topologically sorted); then resolve inputs.
  g.nodes.reserve(size_t(gp.node_size()));
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node n = node_head(np, i);
    for (const auto& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(kNoValue);
        continue;
      }
      if (g.find(out) != kNoValue)
        n.fail(Code::invalid_model, "output '" + out + "' is already defined");
      n.outputs.push_back(g.add_value(out));
    }
    for (int j = 0; j < np.attribute_size(); ++j) {
      const auto& a = np.attribute(j);
      auto cut = cuts.attributes.find({i, j});
      n.attrs[a.name()] =
          node_attr(cx, n, a, cut == cuts.attributes.end() ? nullptr : &cut->second, 0);
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
    // An If also depends on what its branches read from this graph: inputs after the
    // condition, so that the nodes are sorted (and kept alive) before it.
    for (const std::string& name : branch_reads(n)) {
      const ValueId v = g.find(name);
      if (v == kNoValue)
        n.fail(Code::invalid_model, "a branch reads '" + name +
                                        "', which is not a graph input, an initializer or the "
                                        "output of any node");
      n.inputs.push_back(v);
    }
  }
  for (const auto& vi : gp.output()) {
    ValueId v = g.find(vi.name());
    if (v == kNoValue)
      fail(Code::invalid_model, "graph output '" + vi.name() + "' is produced by no node");
    g.outputs.push_back(v);
    g.declared_outputs[vi.name()] = declared_type(vi);
    if (!vi.type().has_tensor_type()) continue;
    if (const std::optional<DType> io = io_dtype(vi.type().tensor_type().elem_type());
        io && *io != held_dtype(*io))
      g.io_dtypes[vi.name()] = *io;
  }
  if (g.outputs.empty()) fail(Code::invalid_model, "the graph has no outputs");
  check_quantized_tensors(gp, g);
  g.topo_sort();
  canonicalize(g);
  return g;
}

}  // namespace

Graph import_onnx(const void* data, size_t size, const ImportOptions& opts) {
  // The caller's buffer is not retained: no `keep`, so every payload is copied (once); or it
  // is borrowed (a `keep` that owns nothing) until own_borrowed().
  std::shared_ptr<void> keep;
  if (opts.borrow) keep = std::shared_ptr<void>(const_cast<void*>(data), [](void*) {});
  Graph g = import_source({static_cast<const uint8_t*>(data), size, keep}, opts);
  g.borrowed = std::move(keep);
  return g;
}

Graph import_onnx_file(const std::string& path, ImportOptions opts) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(Code::io_error, "'" + path + "' is a directory");
  // Mapped, not read: the weights stay in the page cache and the graph's constants alias them
  // (see tensor_from); the mapping lives as long as any of them.
  const MappedFile file = map_file(path);  // io_error naming the path
  if (opts.model_dir.empty()) {
    fs::path dir = fs::path(path).parent_path();
    opts.model_dir = dir.empty() ? "." : dir.string();
  }
  try {
    return import_source({file.data, file.size, file.keep}, opts);
  } catch (const Error& e) {
    fail(e.code(), "'" + path + "': " + e.what());
  }
}

}  // namespace kiln
