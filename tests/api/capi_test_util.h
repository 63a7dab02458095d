// Shared helpers of the C API tests (they link only libkiln.so and use only kiln.h).
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace capi_test {

namespace fs = std::filesystem;

// Takes ownership of a status; returns (code, message) and frees it.
struct St {
  kiln_code code;
  std::string msg;
};
inline St take(kiln_status* s) {
  St r{kiln_status_code(s), kiln_status_message(s)};
  kiln_status_release(s);
  return r;
}
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Minimal protobuf writer, enough to hand-encode ONNX ModelProto bytes.
struct Pb {
  std::string b;
  Pb& varint(uint64_t v) {
    while (v >= 0x80) {
      b += char((v & 0x7f) | 0x80);
      v >>= 7;
    }
    b += char(v);
    return *this;
  }
  Pb& i(int field, uint64_t v) { return varint(uint64_t(field) << 3).varint(v); }
  Pb& s(int field, const std::string& v) {
    varint(uint64_t(field) << 3 | 2).varint(v.size());
    b += v;
    return *this;
  }
  Pb& m(int field, const Pb& sub) { return s(field, sub.b); }
};

constexpr int kFloat = 1, kInt64 = 7;  // TensorProto.DataType

// ValueInfoProto for a tensor of `elem` type; a dim < 0 becomes the symbolic dim "N".
inline Pb value_info(const std::string& name, const std::vector<int64_t>& dims, int elem = kFloat) {
  Pb shape;
  for (int64_t d : dims) {
    Pb dim;
    if (d < 0)
      dim.s(2, "N");  // dim_param
    else
      dim.i(1, uint64_t(d));  // dim_value
    shape.m(1, dim);
  }
  Pb tensor;
  tensor.i(1, uint64_t(elem)).m(2, shape);  // elem_type, shape
  Pb type;
  type.m(1, tensor);  // tensor_type
  Pb vi;
  vi.s(1, name).m(2, type);
  return vi;
}

// NodeProto named after its op and first output.
inline Pb node(const std::string& op, const std::vector<std::string>& in,
               const std::vector<std::string>& out) {
  Pb n;
  for (auto& x : in) n.s(1, x);
  for (auto& x : out) n.s(2, x);
  n.s(3, op + "_" + out[0]).s(4, op);
  return n;
}

// ModelProto bytes: IR version 8, opset 13.
inline std::string model(const Pb& graph) {
  Pb opset;
  opset.s(1, "").i(2, 13);
  Pb m;
  m.i(1, 8).s(2, "kiln-test").m(7, graph).m(8, opset);
  return m.b;
}

}  // namespace capi_test

// The status is an error of `code` whose message contains `part`.
#define CHECK_ERR(call, want_code, part)                                               \
  do {                                                                                 \
    capi_test::St st_ = capi_test::take(call);                                         \
    CHECK_MESSAGE(st_.code == (want_code), st_.msg);                                   \
    CHECK_MESSAGE(capi_test::contains(st_.msg, part), "message: '" << st_.msg << "'"); \
  } while (0)
#define CHECK_OK(call)                             \
  do {                                             \
    capi_test::St st_ = capi_test::take(call);     \
    REQUIRE_MESSAGE(st_.code == KILN_OK, st_.msg); \
  } while (0)

namespace capi_test {

// A session loaded from model bytes (the test fails if the load does).
inline kiln_session* load_mem(const std::string& bytes, const kiln_options* o = nullptr) {
  kiln_session* s = nullptr;
  CHECK_OK(kiln_session_create_from_memory(bytes.data(), bytes.size(), o, &s));
  return s;
}

// Releases its session at scope exit.
struct SessionGuard {
  kiln_session* s;
  ~SessionGuard() { kiln_session_release(s); }
};

// Tiny .npy reader (float32 / int64, C order) so the test depends on nothing but the C API.
struct Npy {
  std::string descr;
  std::vector<int64_t> shape;
  std::string data;
};
inline Npy load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f, "cannot open " << path);
  std::string b((std::istreambuf_iterator<char>(f)), {});
  REQUIRE(b.size() >= 10);
  REQUIRE(b.compare(0, 6, "\x93NUMPY") == 0);
  size_t hlen, pre;
  if (b[6] == 1) {
    hlen = size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8;
    pre = 10;
  } else {
    hlen = size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8 | size_t(uint8_t(b[10])) << 16 |
           size_t(uint8_t(b[11])) << 24;
    pre = 12;
  }
  std::string h = b.substr(pre, hlen);
  Npy n;
  size_t d = h.find("'descr'");
  REQUIRE(d != std::string::npos);
  size_t q1 = h.find('\'', d + 7), q2 = h.find('\'', q1 + 1);
  n.descr = h.substr(q1 + 1, q2 - q1 - 1);
  REQUIRE(!contains(h, "'fortran_order': True"));
  size_t p = h.find('(', h.find("'shape'")), e = h.find(')', p);
  std::string dims = h.substr(p + 1, e - p - 1);
  for (size_t k = 0; k < dims.size();) {
    if (dims[k] >= '0' && dims[k] <= '9') {
      size_t end;
      n.shape.push_back(std::stoll(dims.substr(k), &end));
      k += end;
    } else {
      ++k;
    }
  }
  n.data = b.substr(pre + hlen);
  return n;
}

inline fs::path fixture_dir(const std::string& name) {
  fs::path dir = fs::path(KILN_FIXTURE_DIR) / "models" / name;
  REQUIRE_MESSAGE(fs::exists(dir / "model.onnx"), "missing fixture " << dir.string());
  return dir;
}

// The fixture's tolerance ("tol X" in info.txt), relative to max(1, max |reference|).
inline double fixture_tol(const fs::path& dir) {
  std::ifstream f(dir / "info.txt");
  std::string key;
  double tol = 1e-4;
  while (f >> key)
    if (key == "tol") f >> tol;
  return tol;
}

inline std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// Inputs and expected outputs of a fixture, read from its .npy files.
struct Fixture {
  fs::path dir;
  std::vector<Npy> inputs, outputs;
};
inline Fixture load_fixture(const fs::path& dir) {
  Fixture fx{dir, {}, {}};
  for (int i = 0; fs::exists(dir / ("input_" + std::to_string(i) + ".npy")); ++i)
    fx.inputs.push_back(load_npy((dir / ("input_" + std::to_string(i) + ".npy")).string()));
  for (int i = 0; fs::exists(dir / ("output_" + std::to_string(i) + ".npy")); ++i)
    fx.outputs.push_back(load_npy((dir / ("output_" + std::to_string(i) + ".npy")).string()));
  return fx;
}

}  // namespace capi_test
