// Graph inputs and outputs a caller passes or receives as uint8, int8, int32 or float64
// (graph/ir.h io_dtypes): the graph holds them as float32 (8-bit integers exactly, float64
// rounded) or int64, so each run converts such inputs before the plan runs and such outputs
// after it. Images as uint8 (a TensorFlow export's input), a QuantizeLinear output as a model
// output, int32 indices, float64 from exports that compute in double.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace kiln {

// `t` in held_dtype(t.dtype()): a converted copy for u8 / i8 / i32 / f64 (f64 rounded to
// nearest float32), else `t` itself (shallow).
Tensor to_held(const Tensor& t);

// Writes `held` (held_dtype(out.dtype()), out's shape) into `out`: float32 integers to uint8 /
// int8 (saturated: a value out of the type's range, or NaN, cannot come from an 8-bit tensor's
// ops, but must not be undefined behaviour either), int64 to int32 (two's complement wrap, as
// int32 arithmetic would have), float32 to float64 (exact), else a copy.
void narrow_into(const Tensor& held, Tensor& out);

// Whether any of `ts` has a boundary dtype (u8, i8, i32, f64).
bool any_narrow(const std::vector<Tensor>& ts);

}  // namespace kiln
