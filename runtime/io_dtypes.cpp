#include "runtime/io_dtypes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "graph/half.h"

namespace kiln {
namespace {

template <class From, class To>
void widen(const Tensor& t, Tensor& out) {
  const From* s = t.data<From>();
  To* d = out.data<To>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = To(s[i]);
}

template <class To>
void narrow_float(const Tensor& held, Tensor& out) {
  const float* s = held.data<float>();
  To* d = out.data<To>();
  constexpr float lo = float(std::numeric_limits<To>::min()),
                  hi = float(std::numeric_limits<To>::max());
  for (int64_t i = 0; i < held.numel(); ++i) {
    const float v = s[i];
    d[i] = std::isnan(v) ? To(0) : To(std::clamp(std::nearbyint(v), lo, hi));
  }
}

}  // namespace

bool any_narrow(const std::vector<Tensor>& ts) {
  return std::any_of(ts.begin(), ts.end(),
                     [](const Tensor& t) { return held_dtype(t.dtype()) != t.dtype(); });
}

Tensor to_held(const Tensor& t) {
  const DType h = held_dtype(t.dtype());
  if (h == t.dtype()) return t;
  Tensor out(h, t.shape());
  if (t.numel() == 0) return out;
  switch (t.dtype()) {
    case DType::u8:
      widen<uint8_t, float>(t, out);
      break;
    case DType::i8:
      widen<int8_t, float>(t, out);
      break;
    case DType::i32:
      widen<int32_t, int64_t>(t, out);
      break;
    case DType::f64: {
      const double* s = t.data<double>();
      float* d = out.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) d[i] = double_to_float(s[i]);
      break;
    }
    default:
      fail(Code::internal, std::string("to_held: no widening from ") + dtype_name(t.dtype()));
  }
  return out;
}

void narrow_into(const Tensor& held, Tensor& out) {
  if (held.dtype() != held_dtype(out.dtype()) || held.shape() != out.shape())
    fail(Code::internal, std::string("narrow_into: ") + dtype_name(held.dtype()) +
                             shape_str(held.shape()) + " into " + dtype_name(out.dtype()) +
                             shape_str(out.shape()));
  if (out.numel() == 0) return;
  switch (out.dtype()) {
    case DType::u8:
      return narrow_float<uint8_t>(held, out);
    case DType::i8:
      return narrow_float<int8_t>(held, out);
    case DType::i32: {
      const int64_t* s = held.data<int64_t>();
      int32_t* d = out.data<int32_t>();
      for (int64_t i = 0; i < held.numel(); ++i) d[i] = int32_t(uint32_t(uint64_t(s[i])));
      return;
    }
    case DType::f64:
      return widen<float, double>(held, out);
    default:
      if (held.raw() != out.raw()) std::memcpy(out.raw(), held.raw(), out.nbytes());
  }
}

}  // namespace kiln
