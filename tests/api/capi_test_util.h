// Shared helpers of the C API tests (they link only libkiln.so and use only kiln.h).
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cstdint>
#include <string>
#include <vector>

namespace capi_test {

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

}  // namespace capi_test
