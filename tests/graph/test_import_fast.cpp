// Zero-copy ONNX import (graph/onnx_wire.*, graph/onnx_mmap.*, graph/onnx_import.cpp): large
// tensor payloads are cut out of the bytes protobuf parses and aliased from the file mapping
// (or copied once from a caller's buffer). The oracle is protobuf's own parse of the unmodified
// bytes, decoded here independently of the importer.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "graph/onnx_mmap.h"
#include "graph/onnx_wire.h"

using kiln::Code;
using kiln::DType;
using kiln::Error;
using kiln::Graph;
using kiln::ImportOptions;
using kiln::Tensor;
using kiln::ValueId;
using kiln::test::OnnxBuilder;
namespace fs = std::filesystem;
namespace wire = kiln::onnx_wire;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_all(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

fs::path tmp_dir() {
  fs::path d = fs::path(KILN_TEST_TMP) / "import_fast";
  fs::create_directories(d);
  return d;
}

using kiln::test::import;

// Kiln's in-memory bytes for a TensorProto as protobuf parsed it: float32 as is, int64 as
// is, int32 widened to int64 (little-endian host), bool one byte 0/1. nullopt: not comparable here
// (external data or a type Kiln rejects).
std::optional<std::string> expected_bytes(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  std::string out;
  auto put64 = [&](int64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (t.has_raw_data()) return t.raw_data();
      for (float f : t.float_data()) out.append(reinterpret_cast<const char*>(&f), 4);
      return out;
    case onnx::TensorProto::INT64:
      if (t.has_raw_data()) return t.raw_data();
      for (int64_t v : t.int64_data()) put64(v);
      return out;
    case onnx::TensorProto::INT32:
      if (!t.has_raw_data()) {
        for (int32_t v : t.int32_data()) put64(v);
        return out;
      }
      for (size_t i = 0; i + 4 <= t.raw_data().size(); i += 4) {
        int32_t v;
        std::memcpy(&v, t.raw_data().data() + i, 4);
        put64(v);
      }
      return out;
    case onnx::TensorProto::BOOL:
      if (!t.has_raw_data()) {
        for (int32_t v : t.int32_data()) out += char(v != 0);
        return out;
      }
      for (char c : t.raw_data()) out += char(c != 0);
      return out;
    default:
      return std::nullopt;
  }
}

// Every initializer and Constant-node tensor of `g` equals, bit for bit, what protobuf's
// regular parse of `bytes` holds. Returns how many tensors were compared.
int check_against_protobuf(const Graph& g, const std::string& bytes) {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromArray(bytes.data(), int(bytes.size())));
  int compared = 0;
  auto check = [&](const std::string& name, const onnx::TensorProto& t) {
    auto want = expected_bytes(t);
    if (!want) return;
    ValueId v = g.find(name);
    REQUIRE_MESSAGE(v != kiln::kNoValue, name);
    REQUIRE(g.value(v).constant.has_value());
    const Tensor& c = *g.value(v).constant;
    CHECK_MESSAGE(c.shape() == kiln::Shape(t.dims().begin(), t.dims().end()), name);
    REQUIRE_MESSAGE(c.nbytes() == want->size(), name);
    CHECK_MESSAGE(std::memcmp(c.raw(), want->data(), want->size()) == 0, name);
    // Whatever the file's layout, a constant is aligned to its element size.
    CHECK(reinterpret_cast<uintptr_t>(c.raw()) % kiln::dtype_size(c.dtype()) == 0);
    ++compared;
  };
  for (const auto& t : m.graph().initializer()) check(t.name(), t);
  for (const auto& n : m.graph().node())
    if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).name() == "value" &&
        n.output_size() == 1)
      check(n.output(0), n.attribute(0).t());
  return compared;
}

// Address ranges of the current process's mappings of `path`.
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const fs::path& path) {
  std::vector<std::pair<uintptr_t, uintptr_t>> r;
  std::ifstream maps("/proc/self/maps");
  const std::string want = fs::canonical(path).string();
  for (std::string line; std::getline(maps, line);) {
    auto slash = line.find('/');
    if (slash == std::string::npos || line.substr(slash) != want) continue;
    uintptr_t lo = 0, hi = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi);
    r.push_back({lo, hi});
  }
  return r;
}

bool inside(const void* p, const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges) {
  auto a = reinterpret_cast<uintptr_t>(p);
  for (auto [lo, hi] : ranges)
    if (a >= lo && a < hi) return true;
  return false;
}

// Deterministic pseudo-random floats and ints (values are arbitrary bit patterns of finite
// numbers, so a byte off anywhere shows).
struct Lcg {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 33);
  }
  float f() { return float(int32_t(next())) / 65536.f; }
};

std::string raw_of(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

// A Constant node const_big -> cval whose value is an `n`-element float tensor for the caller
// to fill.
onnx::TensorProto* big_constant(OnnxBuilder& b, int64_t n) {
  auto& c = b.node("Constant", {}, {"cval"}, "const_big");
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(n);
  return t;
}

// A model with `count` initializers of every supported kind and encoding, sizes around the
// cut threshold (4 KiB) and names of varying lengths (so payload offsets vary mod 4 and 8),
// plus a Constant node with a large tensor. Each initializer is unused (the importer does not
// care); y = Relu(x).
// pad_floats > 0 adds one more float initializer of that many elements (a file big enough to
// be mapped rather than read: graph/onnx_mmap.h).
std::string many_initializers(int count, uint64_t seed, int64_t pad_floats = 0) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y").node("Relu", {"x"}, {"y"}, "r");
  Lcg rng{seed};
  auto* gp = b.model().mutable_graph();
  for (int k = 0; k < count; ++k) {
    auto* t = gp->add_initializer();
    t->set_name("w" + std::string(size_t(k % 7), '_') + std::to_string(k));
    const int64_t n = 900 + (k * 397) % 2500;  // 3.6 KB .. 13.6 KB as float32
    t->add_dims(n);
    switch (k % 6) {
      case 0:
      case 1: {  // float32 raw_data: the common case
        t->set_data_type(onnx::TensorProto::FLOAT);
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) x = rng.f();
        t->set_raw_data(raw_of(v.data(), v.size() * 4));
        break;
      }
      case 2: {  // float32 float_data (packed)
        t->set_data_type(onnx::TensorProto::FLOAT);
        for (int64_t i = 0; i < n; ++i) t->add_float_data(rng.f());
        break;
      }
      case 3: {  // int64 raw_data
        t->set_data_type(onnx::TensorProto::INT64);
        std::vector<int64_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = (int64_t(rng.next()) << 31) - int64_t(rng.next());
        t->set_raw_data(raw_of(v.data(), v.size() * 8));
        break;
      }
      case 4: {  // int32 raw_data (widened)
        t->set_data_type(onnx::TensorProto::INT32);
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = int32_t(rng.next());
        t->set_raw_data(raw_of(v.data(), v.size() * 4));
        break;
      }
      case 5: {  // bool raw_data (normalised to 0/1); 4x the elements so it crosses the threshold
        t->set_data_type(onnx::TensorProto::BOOL);
        t->set_dims(0, n * 4);
        std::string v(size_t(n * 4), '\0');
        for (auto& c : v) c = char(rng.next() % 3);  // 2 must read as true
        t->set_raw_data(v);
        break;
      }
    }
  }
  // Small ones too, left to protobuf.
  b.init_f("small_f", {3}, {1.5f, -2.f, 3.25f});
  b.init_i("small_i", {2}, {7, -9});
  onnx::TensorProto* t = big_constant(b, 3000);
  std::vector<float> v(3000);
  for (auto& x : v) x = rng.f();
  t->set_raw_data(raw_of(v.data(), v.size() * 4));
  if (pad_floats > 0) {
    onnx::TensorProto* pad = gp->add_initializer();
    pad->set_name("pad");
    pad->set_data_type(onnx::TensorProto::FLOAT);
    pad->add_dims(pad_floats);
    pad->set_raw_data(std::string(size_t(pad_floats) * 4, '\x01'));
  }
  return b.bytes();
}

// A small model with three cut payloads (two initializers, one Constant) and small fields.
std::string small_cut_model() {
  OnnxBuilder b;
  b.input("x", {1100}).output("y").node("Add", {"x", "w"}, {"y"}, "add");
  b.node("Mul", {"x", "cval"}, {"z"}, "mul");
  b.output("z");
  Lcg rng{7};
  auto add = [&](const std::string& name, int n) {
    auto* t = b.init(name, onnx::TensorProto::FLOAT, {n});
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng.f();
    t->set_raw_data(raw_of(v.data(), v.size() * 4));
  };
  add("w", 1100);
  add("unused", 1030);
  b.init_i("shape", {2}, {1, 1100});
  onnx::TensorProto* t = big_constant(b, 1100);
  for (int i = 0; i < 1100; ++i) t->add_float_data(rng.f());
  return b.bytes();
}

// Imports `bytes` (already damaged): either a clean kiln::Error or a graph whose constants
// match protobuf's parse. When protobuf itself rejects the bytes, Kiln must too; when protobuf
// accepts them, the wire scan must not be what rejects them. Returns true if it imported.
bool import_damaged(const std::string& bytes) {
  onnx::ModelProto ref;
  const bool pb_ok = ref.ParseFromArray(bytes.data(), int(bytes.size()));
  if (pb_ok && !bytes.empty()) {
    try {
      wire::strip_payloads(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 4096);
    } catch (const Error& e) {
      FAIL_CHECK("protobuf parses it but the wire scan rejects it: " << e.what());
    }
  }
  try {
    Graph g = import(bytes);
    CHECK(pb_ok);
    check_against_protobuf(g, bytes);
    return true;
  } catch (const Error& e) {
    CHECK((e.code() == Code::invalid_model || e.code() == Code::unsupported));
  }
  return false;
}

}  // namespace

TEST_CASE("import_fast: generated models match protobuf's parse, from memory and from a file") {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const std::string bytes = many_initializers(300, seed);
    Graph gm = import(bytes);
    CHECK(check_against_protobuf(gm, bytes) == 300 + 3);
    const fs::path file = tmp_dir() / ("many_" + std::to_string(seed) + ".onnx");
    write_all(file, bytes);
    Graph gf = kiln::import_onnx_file(file.string(), {});
    CHECK(check_against_protobuf(gf, bytes) == 300 + 3);
  }
}

TEST_CASE("import_fast: every payload aliases the file mapping; misaligned ones copy on read") {
  // Above kReadBelow the file is mapped, not read.
  const std::string bytes = many_initializers(300, 11, int64_t(kiln::kReadBelow / 4));
  REQUIRE(bytes.size() > kiln::kReadBelow);
  const fs::path file = tmp_dir() / "alias.onnx";
  write_all(file, bytes);
  std::optional<Graph> g = kiln::import_onnx_file(file.string(), {});
  const auto maps = mappings_of(file);
  REQUIRE(!maps.empty());  // the import keeps the file mapped
  int aligned = 0, unaligned = 0, converted = 0;
  for (const auto& v : g->values) {
    if (!v.is_const() || v.constant->nbytes() < 4096) continue;
    const Tensor& c = *v.constant;
    const size_t align = kiln::dtype_size(c.dtype());
    // Payloads stored as the tensor's own bytes (raw_data, packed float_data) stay in the
    // file, wherever they sit; other encodings (varints) are converted into a fresh buffer.
    if (!inside(c.stored_bytes(), maps)) {
      CHECK(!c.unaligned());
      ++converted;
      continue;
    }
    const bool misaligned = reinterpret_cast<uintptr_t>(c.stored_bytes()) % align != 0;
    CHECK(c.unaligned() == misaligned);
    // Typed readers always get element-aligned data with the same bytes: the mapping itself
    // when it is aligned, otherwise one copy made on first read and then reused.
    CHECK(reinterpret_cast<uintptr_t>(c.raw()) % align == 0);
    CHECK(std::memcmp(c.raw(), c.stored_bytes(), c.nbytes()) == 0);
    CHECK(inside(c.raw(), maps) == !misaligned);
    CHECK(c.raw() == c.raw());
    Tensor shared = c;  // copies share the one aligned copy
    CHECK(shared.raw() == c.raw());
    ++(misaligned ? unaligned : aligned);
  }
  // Names of varying lengths put payloads at every offset mod 8: both happen.
  CHECK(aligned > 20);
  CHECK(unaligned > 20);
  CHECK(converted > 20);

  // The mapping lives exactly as long as some constant aliases it (a mapping nobody uses is
  // released at the end of the import).
  const fs::path other = tmp_dir() / "alias_other.onnx";
  write_all(other, bytes);
  {
    Graph tmp = kiln::import_onnx_file(other.string(), {});
    CHECK(!mappings_of(other).empty());
  }
  CHECK(mappings_of(other).empty());
  write_all(other, small_cut_model());
  {
    Graph tmp = kiln::import_onnx_file(other.string(), {});
    CHECK(mappings_of(other).empty());  // a small file is read, not mapped
  }

  // The constants keep the mapping alive: the file can go, the graph be copied and the
  // original destroyed, and the values stay readable.
  fs::remove(file);
  Graph copy = *g;
  g.reset();
  CHECK(check_against_protobuf(copy, bytes) == 304);
}

TEST_CASE("import_fast: a small file is read once; payloads alias that copy") {
  const std::string bytes = many_initializers(300, 12);
  REQUIRE(bytes.size() <= kiln::kReadBelow);
  const fs::path file = tmp_dir() / "read.onnx";
  write_all(file, bytes);
  std::optional<Graph> g = kiln::import_onnx_file(file.string(), {});
  CHECK(mappings_of(file).empty());
  // Payloads stored as their own bytes point into one copy of the whole file: find where
  // the first one sits in the file, and every other lies at its own offset from there.
  const uint8_t* base = nullptr;
  int in_place = 0;
  for (const auto& v : g->values) {
    if (!v.is_const() || v.constant->nbytes() < 4096) continue;
    const auto* p = static_cast<const uint8_t*>(v.constant->stored_bytes());
    const size_t at = bytes.find(std::string(reinterpret_cast<const char*>(p), 64));
    if (at == std::string::npos) continue;  // converted (varints) into a buffer of its own
    if (!base) {
      base = p - at;
      REQUIRE(std::memcmp(base, bytes.data(), bytes.size()) == 0);
    }
    CHECK(p == base + at);
    ++in_place;
  }
  CHECK(in_place > 40);
  // The copy lives as long as the constants: the file can go.
  fs::remove(file);
  Graph copy = *g;
  g.reset();
  CHECK(check_against_protobuf(copy, bytes) == 303);
}

TEST_CASE("import_fast: a caller's buffer is not retained") {
  std::string bytes = many_initializers(60, 5);
  Graph g = import(bytes);
  const auto* lo = bytes.data();
  const auto* hi = bytes.data() + bytes.size();
  for (const auto& v : g.values)
    if (v.is_const()) {
      const char* p = static_cast<const char*>(v.constant->raw());
      CHECK(!(p >= lo && p < hi));
    }
  // Overwriting (and freeing) the buffer changes nothing.
  const std::string saved = bytes;
  std::fill(bytes.begin(), bytes.end(), '\x5a');
  bytes = std::string();
  CHECK(check_against_protobuf(g, saved) == 63);
}

TEST_CASE("import_fast: every fixture model imports to protobuf's values, from file and memory") {
  int models = 0, tensors = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(KILN_FIXTURE_DIR) / "models")) {
    if (e.path().extension() != ".onnx") continue;
    CAPTURE(e.path().string());
    const std::string bytes = read_all(e.path());
    ImportOptions o;
    o.model_dir = e.path().parent_path().string();  // external data, if any
    tensors += check_against_protobuf(import(bytes, o), bytes);
    tensors += check_against_protobuf(kiln::import_onnx_file(e.path().string(), {}), bytes);
    ++models;
  }
  CHECK(models >= 150);
  CHECK(tensors > 500);
}

// The stripped bytes are the original message with the cut payloads emptied: protobuf
// parses both to the same message once those fields are cleared in the original.
void check_strip(const std::string& bytes, uint64_t min_payload) {
  const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
  wire::Stripped s = wire::strip_payloads(d, bytes.size(), min_payload);
  onnx::ModelProto ref, got;
  REQUIRE(ref.ParseFromArray(bytes.data(), int(bytes.size())));
  const std::string& stripped = s.unchanged ? bytes : s.bytes;
  REQUIRE(got.ParseFromArray(stripped.data(), int(stripped.size())));
  auto* gp = ref.mutable_graph();
  REQUIRE(s.initializers.size() == size_t(gp->initializer_size()));
  uint64_t cut = 0;
  auto clear = [&](onnx::TensorProto* t, const wire::TensorCut& c) {
    if (c.raw.present) {
      CHECK(c.raw.size >= min_payload);
      CHECK(bytes.substr(c.raw.offset, c.raw.size) == t->raw_data());
      t->set_raw_data("");
      cut += c.raw.size;
    }
    if (c.floats.present) {
      CHECK(c.floats.size == uint64_t(t->float_data_size()) * 4);
      CHECK(std::memcmp(bytes.data() + c.floats.offset, t->float_data().data(), c.floats.size) ==
            0);
      t->clear_float_data();
      cut += c.floats.size;
    }
  };
  for (int i = 0; i < gp->initializer_size(); ++i)
    clear(gp->mutable_initializer(i), s.initializers[size_t(i)]);
  for (const auto& [key, c] : s.attributes)
    clear(gp->mutable_node(int(key.first))->mutable_attribute(int(key.second))->mutable_t(), c);
  CHECK(cut == s.cut_bytes);
  CHECK(stripped.size() + s.cut_bytes <= bytes.size());
  CHECK(ref.SerializeAsString() == got.SerializeAsString());
}

TEST_CASE("import_fast: the stripped bytes parse to the same message minus the payloads") {
  for (uint64_t min : {1u, 16u, 4096u}) {
    CAPTURE(min);
    check_strip(many_initializers(100, 21), min);
    check_strip(small_cut_model(), min);
    for (const auto& e : fs::recursive_directory_iterator(fs::path(KILN_FIXTURE_DIR) / "models"))
      if (e.path().extension() == ".onnx") check_strip(read_all(e.path()), min);
  }
  // Something is cut from a model with large tensors, nothing below the threshold.
  const std::string b = many_initializers(30, 3);
  const auto* d = reinterpret_cast<const uint8_t*>(b.data());
  CHECK(wire::strip_payloads(d, b.size(), 4096).cut_bytes > 100000);
  CHECK(wire::strip_payloads(d, b.size(), 1 << 20).cut_bytes == 0);
  CHECK(wire::strip_payloads(d, b.size(), 1 << 20).unchanged);
  CHECK(!wire::strip_payloads(d, b.size(), 4096).unchanged);
}

TEST_CASE("import_fast: unusual encodings are parsed as protobuf parses them") {
  // Each variant appends serialized fragments: protobuf merges a repeated singular message
  // (ModelProto.graph, AttributeProto.t), keeps the last of a repeated singular bytes field
  // (raw_data) and appends repeated fields (float_data, initializers).
  auto tensor_bytes = [](const std::string& name, std::vector<float> v, bool raw) {
    onnx::TensorProto t;
    if (!name.empty()) t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    if (!name.empty()) t.add_dims(int64_t(v.size()));
    if (raw)
      t.set_raw_data(raw_of(v.data(), v.size() * 4));
    else
      for (float f : v) t.add_float_data(f);
    return t.SerializeAsString();
  };
  auto field = [](int number, const std::string& body) {
    std::string s;
    uint64_t tag = uint64_t(number) << 3 | 2, len = body.size();
    for (uint64_t v : {tag, len}) {
      while (v >= 0x80) s.push_back(char(v | 0x80)), v >>= 7;
      s.push_back(char(v));
    }
    return s + body;
  };
  std::vector<float> a(2000), bvals(2000), half(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i), bvals[i] = -float(i);
  for (size_t i = 0; i < half.size(); ++i) half[i] = 0.5f * float(i);
  OnnxBuilder base;
  base.input("x", {1}).output("y").node("Relu", {"x"}, {"y"}, "r");
  const std::string model = base.bytes();

  SUBCASE("raw_data given twice: the last wins, nothing is cut") {
    std::string t = tensor_bytes("w", a, true) + tensor_bytes("", bvals, true);
    std::string bytes = model + field(7, field(5, t));  // a second graph field: merged
    Graph g = import(bytes);
    CHECK(check_against_protobuf(g, bytes) == 1);
    CHECK(g.value(g.find("w")).constant->data<float>()[5] == -5.f);
  }
  SUBCASE("float_data in two packed runs: appended") {
    onnx::TensorProto head;
    head.set_name("w");
    head.set_data_type(onnx::TensorProto::FLOAT);
    head.add_dims(2000);
    std::string t = head.SerializeAsString() +
                    tensor_bytes("", std::vector<float>(a.begin(), a.begin() + 1500), false) +
                    tensor_bytes("", std::vector<float>(a.begin() + 1500, a.end()), false);
    std::string bytes = model + field(7, field(5, t));
    Graph g = import(bytes);
    CHECK(check_against_protobuf(g, bytes) == 1);
    CHECK(g.value(g.find("w")).constant->data<float>()[1999] == 1999.f);
  }
  SUBCASE("two graph fields: initializers of both, in order") {
    std::string bytes = model + field(7, field(5, tensor_bytes("p", a, true))) +
                        field(7, field(5, tensor_bytes("q", bvals, false)));
    const fs::path file = tmp_dir() / "two_graphs.onnx";
    write_all(file, bytes);
    for (const Graph& g : {import(bytes), kiln::import_onnx_file(file.string(), {})}) {
      CHECK(check_against_protobuf(g, bytes) == 2);
      CHECK(g.value(g.find("q")).constant->data<float>()[7] == -7.f);
    }
  }
  SUBCASE("an attribute tensor given twice is merged") {
    OnnxBuilder b;
    b.input("x", {1}).output("y").node("Relu", {"x"}, {"y"}, "r");
    b.output("c");
    auto& n = b.node("Constant", {}, {"c"}, "k");
    // attribute bytes: name, type, t (dims + data_type), then a second t with the payload.
    onnx::AttributeProto at;
    at.set_name("value");
    at.set_type(onnx::AttributeProto::TENSOR);
    at.mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    at.mutable_t()->add_dims(1000);
    std::string attr = at.SerializeAsString() + field(5, tensor_bytes("", half, true));
    onnx::AttributeProto merged;
    REQUIRE(merged.ParseFromString(attr));
    *n.add_attribute() = merged;  // reference; the file gets the unmerged bytes
    onnx::NodeProto bare = n;
    bare.clear_attribute();
    std::string node_bytes = bare.SerializeAsString() + field(5, attr);
    b.model().mutable_graph()->mutable_node()->RemoveLast();
    std::string bytes = b.bytes() + field(7, field(1, node_bytes));
    Graph g = import(bytes);
    CHECK(check_against_protobuf(g, bytes) == 1);
    CHECK(g.value(g.find("c")).constant->data<float>()[999] == 499.5f);
  }
}

TEST_CASE("import_fast: a cut payload of the wrong size is a clear error naming the tensor") {
  std::vector<float> v(1500, 1.f);
  for (bool from_file : {false, true}) {
    for (int variant = 0; variant < 3; ++variant) {
      OnnxBuilder b;
      b.input("x", {4}).output("y").node("Relu", {"x"}, {"y"}, "r");
      auto* t = b.model().mutable_graph()->add_initializer();
      t->set_name("weights_0");
      t->set_data_type(onnx::TensorProto::FLOAT);
      if (variant == 0) t->add_dims(1400), t->set_raw_data(raw_of(v.data(), 6000));  // longer
      if (variant == 1) t->add_dims(1600), t->set_raw_data(raw_of(v.data(), 6000));  // shorter
      if (variant == 2) t->add_dims(1500), t->set_raw_data(raw_of(v.data(), 5999));  // partial
      std::string bytes = b.bytes();
      const fs::path file = tmp_dir() / "wrong_size.onnx";
      write_all(file, bytes);
      try {
        if (from_file)
          kiln::import_onnx_file(file.string(), {});
        else
          import(bytes);
        FAIL("expected an error");
      } catch (const Error& e) {
        CHECK(e.code() == Code::invalid_model);
        CHECK(std::string(e.what()).find("initializer 'weights_0'") != std::string::npos);
      }
    }
  }
}

TEST_CASE("import_fast: malformed wire bytes are clean errors") {
  auto strip = [](const std::string& s) {
    return wire::strip_payloads(reinterpret_cast<const uint8_t*>(s.data()), s.size(), 1);
  };
  auto rejects = [&](const std::string& s, const std::string& why) {
    CAPTURE(why);
    try {
      strip(s);
      FAIL_CHECK("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == Code::invalid_model);
      CHECK(std::string(e.what()).find("not a valid ONNX protobuf") != std::string::npos);
    }
  };
  rejects("\x08", "varint value missing");
  rejects("\x08\xff\xff", "varint runs off the end");
  rejects(std::string("\x08") + std::string(10, '\xff') + "\x01", "11-byte varint");
  rejects("\x3a\x05\x00", "graph length past the end");
  rejects("\x3a\x02\x2a\x05", "initializer length past its graph");
  rejects("\x3a\x04\x2a\x02\x4a\x05", "raw_data length past its tensor");
  rejects("\x0b\x08\x01", "unterminated group");
  rejects("\x0c", "group end outside a group");
  rejects("\x0b\x14", "mismatched group end");
  rejects("\x0e", "wire type 6");
  rejects(std::string(1, '\0'), "field number 0");
  rejects("\x09\x01\x02", "truncated fixed64");
  rejects(std::string(200, '\x0b'), "groups nested too deeply");
  // Well-formed unknown fields, groups included, are skipped and kept.
  const std::string ok("\x0b\x08\x01\x0c\x10\x05\x3a\x00", 8);
  CHECK(strip(ok).unchanged);
}

TEST_CASE("import_fast: a model truncated at every offset fails cleanly or imports") {
  const std::string bytes = small_cut_model();
  REQUIRE(bytes.size() > 12000);
  {
    const std::string b = bytes;
    auto s = wire::strip_payloads(reinterpret_cast<const uint8_t*>(b.data()), b.size(), 4096);
    REQUIRE(s.cut_bytes >= 3 * 4096);  // all three payloads are cut
  }
  int imported = 0;
  for (size_t n = 0; n <= bytes.size(); ++n) {
    // An exact-size heap copy, so ASan sees any read past the end.
    std::string cut = bytes.substr(0, n);
    std::vector<char> exact(cut.begin(), cut.end());
    try {
      Graph g = kiln::import_onnx(exact.data(), exact.size(), {});
      ++imported;
      CHECK(n > 0);
      check_against_protobuf(g, cut);
    } catch (const Error& e) {
      CHECK((e.code() == Code::invalid_model || e.code() == Code::unsupported));
    }
  }
  CHECK(imported >= 1);  // the whole file, at least
  // Through files too (mapped: a read past the end of the mapping would fault), every 97th.
  const fs::path file = tmp_dir() / "truncated.onnx";
  for (size_t n = 0; n <= bytes.size(); n += 97) {
    write_all(file, bytes.substr(0, n));
    try {
      kiln::import_onnx_file(file.string(), {});
    } catch (const Error& e) {
      CHECK((e.code() == Code::invalid_model || e.code() == Code::unsupported));
    }
  }
}

TEST_CASE("import_fast: random byte flips give a clean error or protobuf's values") {
  const std::string models[] = {small_cut_model(), many_initializers(12, 9)};
  std::mt19937_64 rng(12345);
  int imported = 0, rejected = 0;
  for (const std::string& base : models) {
    for (int trial = 0; trial < 1500; ++trial) {
      std::string b = base;
      const int flips = 1 + int(rng() % 6);
      for (int k = 0; k < flips; ++k) {
        size_t at = rng() % b.size();
        // Biased towards the first bytes of fields (tags, lengths) half of the time.
        if (rng() % 2) at = rng() % std::min<size_t>(b.size(), 64 + (rng() % b.size()) / 8);
        b[at] = char(rng() % 4 ? rng() : b[at] ^ (1u << (rng() % 8)));
      }
      if (import_damaged(b))
        ++imported;
      else
        ++rejected;
    }
  }
  CHECK(imported > 0);
  CHECK(rejected > 0);
}
