// .npy files (NumPy format 1.0/2.0/3.0): float32, int64, int32, uint8, int8 and bool, C order,
// little endian.
#pragma once

#include <string>

#include "graph/ir.h"

namespace kiln {

// Throws Error (io_error when the file cannot be read, invalid_argument when it is not a
// supported .npy: other dtypes, Fortran order, truncated data) naming the file.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace kiln
