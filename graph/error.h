// Errors inside Kiln are C++ exceptions of one type carrying a status code; the C API turns
// them into kiln_status values, so no exception ever crosses the ABI.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

// Mirrors kiln_code in the public header (same numeric values).
enum class Code : int {
  ok = 0,
  invalid_argument = 1,  // bad call: NULL pointer, wrong buffer size, unknown name
  invalid_model = 2,     // malformed / truncated / inconsistent model file
  unsupported = 3,       // valid ONNX that Kiln does not implement (op, attribute value, dtype)
  shape_mismatch = 4,    // input shape or dtype does not match the model
  io_error = 5,          // file could not be read or written
  out_of_memory = 6,
  internal = 7,
};

const char* code_name(Code c);

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

[[noreturn]] inline void fail(Code code, const std::string& msg) {
  throw Error(code, msg);
}

}  // namespace kiln
