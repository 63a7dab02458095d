// Trigonometric and hyperbolic ops (ONNX Sin .. Atanh, float32): libm's float functions, shared
// by the reference kernel and the typed glue kernel so both compute the same bits. (A plan runs
// Sin and Cos on the vectorised elementwise kernels instead: post-ops sin / cos, asm_math.h.)
#pragma once

#include <cmath>
#include <iterator>
#include <optional>
#include <string>

namespace kiln {

enum class MathOp : int { sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh };

// The ONNX op names, in MathOp's order.
inline const char* math_op_name(MathOp op) {
  static const char* const kNames[] = {"Sin",  "Cos",  "Tan",   "Asin",  "Acos", "Atan",
                                       "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"};
  return kNames[int(op)];
}

inline std::optional<MathOp> math_op(const std::string& op) {
  for (int i = 0; i <= int(MathOp::atanh); ++i)
    if (op == math_op_name(MathOp(i))) return MathOp(i);
  return std::nullopt;
}

inline float apply_math(MathOp op, float x) {
  switch (op) {
    case MathOp::sin:
      return std::sin(x);
    case MathOp::cos:
      return std::cos(x);
    case MathOp::tan:
      return std::tan(x);
    case MathOp::asin:
      return std::asin(x);
    case MathOp::acos:
      return std::acos(x);
    case MathOp::atan:
      return std::atan(x);
    case MathOp::sinh:
      return std::sinh(x);
    case MathOp::cosh:
      return std::cosh(x);
    case MathOp::asinh:
      return std::asinh(x);
    case MathOp::acosh:
      return std::acosh(x);
    case MathOp::atanh:
      return std::atanh(x);
  }
  return x;
}

}  // namespace kiln
