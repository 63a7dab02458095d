// Shared helpers of the C API tests (they link only libkiln.so and use only kiln.h).
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cstdint>
#include <string>

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
