// Elementwise ops on f32 / int64 / bool tensors with numpy broadcasting (glue.h TypedOp). The
// output is walked in contiguous runs of its last dim; in a run every operand is either
// contiguous or one broadcast element, and that is a template parameter of the loop, so the
// compiler vectorises each (op, dtypes, strides) loop; each loop is compiled once per ISA with
// a target attribute and the plan's ISA picks one. Semantics are those of the reference kernels
// (runtime/ref/ref_logic.cpp, ref_elementwise.cpp), which the tests compare against.
#include <immintrin.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <type_traits>

#include "jit/glue/glue.h"

namespace kiln {
namespace {

#define KILN_INLINE [[gnu::always_inline]] inline

struct Params {
  bool detect_positive = true, detect_negative = true;
  bool int32 = false;  // Cast: to int32 (kept as int64)
  bool fmod = false;   // Mod: the remainder takes the dividend's sign
  MathOp math = MathOp::sin;
};

// ---- the ops: Y apply(A, B, C); unused operands are bytes that are never read ----

template <class T, TypedOp kOp>
struct Compare {
  using Y = uint8_t;
  using A = T;
  using B = T;
  using C = uint8_t;
  static constexpr int arity = 2;
  KILN_INLINE Y operator()(A a, B b, C) const {
    if constexpr (kOp == TypedOp::equal) return a == b;
    if constexpr (kOp == TypedOp::less) return a < b;
    if constexpr (kOp == TypedOp::greater) return a > b;
    if constexpr (kOp == TypedOp::less_equal) return a <= b;
    return a >= b;
  }
  const Params& p;
};

template <TypedOp kOp>
struct Logic {
  using Y = uint8_t;
  using A = uint8_t;
  using B = uint8_t;
  using C = uint8_t;
  static constexpr int arity = kOp == TypedOp::logical_not ? 1 : 2;
  KILN_INLINE Y operator()(A a, B b, C) const {
    if constexpr (kOp == TypedOp::logical_and) return a & b;
    if constexpr (kOp == TypedOp::logical_or) return a | b;
    if constexpr (kOp == TypedOp::logical_xor) return a ^ b;
    return a == 0;
  }
  const Params& p;
};

template <class T>
struct Where {
  using Y = T;
  using A = uint8_t;
  using B = T;
  using C = T;
  static constexpr int arity = 3;
  KILN_INLINE Y operator()(A c, B a, C b) const { return c ? a : b; }
  const Params& p;
};

template <TypedOp kOp>
struct FloatClass {
  using Y = uint8_t;
  using A = float;
  using B = uint8_t;
  using C = uint8_t;
  static constexpr int arity = 1;
  KILN_INLINE Y operator()(A v, B, C) const {
    if constexpr (kOp == TypedOp::is_nan) return v != v;
    const float inf = std::numeric_limits<float>::infinity();
    return (p.detect_positive && v == inf) || (p.detect_negative && v == -inf);
  }
  const Params& p;
};

template <class T>
struct Sign {
  using Y = T;
  using A = T;
  using B = uint8_t;
  using C = uint8_t;
  static constexpr int arity = 1;
  KILN_INLINE Y operator()(A v, B, C) const { return v > T(0) ? T(1) : v < T(0) ? T(-1) : v; }
  const Params& p;
};

// Add / Sub / Mul / Div / Mod (/ Pow of floats): int64 wrapping (in unsigned), division
// truncating; the kernel has checked that no divisor is 0 (runtime/ref/ref_elementwise.cpp,
// ref_logic.cpp's mod).
template <class T, TypedOp kOp>
struct Arith {
  using Y = T;
  using A = T;
  using B = T;
  using C = uint8_t;
  static constexpr int arity = 2;
  KILN_INLINE Y operator()(A a, B b, C) const {
    if constexpr (std::is_same_v<T, float>) {
      if constexpr (kOp == TypedOp::add) return a + b;
      if constexpr (kOp == TypedOp::sub) return a - b;
      if constexpr (kOp == TypedOp::mul) return a * b;
      if constexpr (kOp == TypedOp::div) return a / b;
      if constexpr (kOp == TypedOp::pow) return b == 2.f ? a * a : std::pow(a, b);
      return std::fmod(a, b);
    } else {
      const uint64_t ua = uint64_t(a), ub = uint64_t(b);
      if constexpr (kOp == TypedOp::add) return int64_t(ua + ub);
      if constexpr (kOp == TypedOp::sub) return int64_t(ua - ub);
      if constexpr (kOp == TypedOp::mul) return int64_t(ua * ub);
      if constexpr (kOp == TypedOp::div) return b == -1 ? int64_t(0 - ua) : a / b;  // (MIN / -1)
      if (b == -1) return 0;  // also INT64_MIN % -1, which traps
      const int64_t r = a % b;
      return !p.fmod && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
    }
  }
  const Params& p;
};

// Sin .. Atanh: libm per element (not vectorised; the same bits as the reference kernel).
struct MathUnary {
  using Y = float;
  using A = float;
  using B = uint8_t;
  using C = uint8_t;
  static constexpr int arity = 1;
  KILN_INLINE Y operator()(A v, B, C) const { return apply_math(p.math, v); }
  const Params& p;
};

template <class T>
struct ExpandCopy {
  using Y = T;
  using A = T;
  using B = uint8_t;
  using C = uint8_t;
  static constexpr int arity = 1;
  KILN_INLINE Y operator()(A v, B, C) const { return v; }
  const Params& p;
};

// float -> integer as x86's cvtt instructions (the reference kernel's truncate_float):
// truncation, INT_MIN ("integer indefinite") for NaN or out of range.
template <class I>
KILN_INLINE I truncate_float(float x) {
  constexpr float lim = float(uint64_t(1) << (sizeof(I) * 8 - 1));
  return x > -lim && x < lim ? I(x) : std::numeric_limits<I>::min();
}

template <class S, class D>
struct Cast {
  using Y = D;
  using A = S;
  using B = uint8_t;
  using C = uint8_t;
  static constexpr int arity = 1;
  KILN_INLINE Y operator()(A v, B, C) const {
    if constexpr (std::is_same_v<D, uint8_t>) {
      return v != S(0);  // NaN is nonzero: true
    } else if constexpr (std::is_same_v<D, float>) {
      return float(v);
    } else if constexpr (std::is_same_v<S, float>) {
      return p.int32 ? int64_t(truncate_float<int32_t>(v)) : truncate_float<int64_t>(v);
    } else {
      return p.int32 ? int64_t(int32_t(uint32_t(uint64_t(v)))) : int64_t(v);
    }
  }
  const Params& p;
};

// ---- the loops ----

using TypedRowFn = void (*)(void* y, const void* a, const void* b, const void* c, int64_t n,
                            const Params& p);

template <class Op, int S0, int S1, int S2>
KILN_INLINE void row_body(void* yv, const void* av, const void* bv, const void* cv, int64_t n,
                          const Params& p) {
  auto* __restrict y = static_cast<typename Op::Y*>(yv);
  const auto* __restrict a = static_cast<const typename Op::A*>(av);
  const auto* __restrict b = static_cast<const typename Op::B*>(bv);
  const auto* __restrict c = static_cast<const typename Op::C*>(cv);
  const Op op{p};
  for (int64_t i = 0; i < n; ++i) y[i] = op(a[S0 * i], b[S1 * i], c[S2 * i]);
}

template <class Op, int S0, int S1, int S2>
__attribute__((target("avx2,fma"))) void row_avx2(void* y, const void* a, const void* b,
                                                  const void* c, int64_t n, const Params& p) {
  row_body<Op, S0, S1, S2>(y, a, b, c, n, p);
}

template <class Op, int S0, int S1, int S2>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void row_avx512(
    void* y, const void* a, const void* b, const void* c, int64_t n, const Params& p) {
  row_body<Op, S0, S1, S2>(y, a, b, c, n, p);
}

// Cast of f32 to float16 and back (round to nearest even, overflow to infinity, subnormals):
// the F16C conversions, 8 lanes on either ISA (a rare op; GCC 12 warns on the zmm intrinsics).
__attribute__((target("avx2,fma,f16c"))) void half_avx2(void* yv, const void* av, const void*,
                                                        const void*, int64_t n, const Params&) {
  float* y = static_cast<float*>(yv);
  const float* a = static_cast<const float*>(av);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(a + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) y[i] = _cvtsh_ss(_cvtss_sh(a[i], _MM_FROUND_TO_NEAREST_INT));
}

// The loop for `Op` with operand strides s (1: contiguous, 0: one broadcast element).
template <class Op>
TypedRowFn pick(Isa isa, const int s[3]) {
  const bool z = isa == Isa::avx512;
#define KILN_ROW(a, b, c)                  \
  if (s[0] == a && s[1] == b && s[2] == c) \
    return z ? &row_avx512<Op, a, b, c> : &row_avx2<Op, a, b, c>;
  if constexpr (Op::arity == 1) {
    KILN_ROW(1, 0, 0)
    KILN_ROW(0, 0, 0)  // (Expand of a broadcast element)
  } else if constexpr (Op::arity == 2) {
    KILN_ROW(1, 1, 0)
    KILN_ROW(1, 0, 0)
    KILN_ROW(0, 1, 0)
    KILN_ROW(0, 0, 0)
  } else {
    KILN_ROW(1, 1, 1)
    KILN_ROW(1, 1, 0)
    KILN_ROW(1, 0, 1)
    KILN_ROW(1, 0, 0)
    KILN_ROW(0, 1, 1)
    KILN_ROW(0, 1, 0)
    KILN_ROW(0, 0, 1)
    KILN_ROW(0, 0, 0)
  }
#undef KILN_ROW
  return nullptr;
}

// f(tag) with tag a value of the C++ type stored for `t`.
template <class F>
TypedRowFn by_type(DType t, F f) {
  switch (t) {
    case DType::f32:
      return f(float{});
    case DType::i64:
      return f(int64_t{});
    case DType::boolean:
      return f(uint8_t{});
    default:  // u8 / i8 / i32 are boundary dtypes only (graph/ir.h): no graph value has one
      return nullptr;
  }
}

template <TypedOp kOp>
TypedRowFn pick_compare(DType t, Isa isa, const int s[3]) {
  return by_type(t, [&](auto tag) { return pick<Compare<decltype(tag), kOp>>(isa, s); });
}

template <TypedOp kOp>
TypedRowFn pick_arith(DType t, Isa isa, const int s[3]) {
  if (t == DType::f32) return pick<Arith<float, kOp>>(isa, s);
  return t == DType::i64 ? pick<Arith<int64_t, kOp>>(isa, s) : nullptr;
}

// The loop for the problem, or nullptr with *why when the dtypes do not fit the op.
TypedRowFn select(const TypedEltwiseProblem& p, Isa isa, const int s[3], std::string* why) {
  const std::vector<DType>& xt = p.x_type;
  auto all = [&](DType t) {
    return std::all_of(xt.begin(), xt.end(), [&](DType u) { return u == t; });
  };
  switch (p.op) {
    case TypedOp::equal:
    case TypedOp::less:
    case TypedOp::greater:
    case TypedOp::less_equal:
    case TypedOp::greater_equal:
      if (xt[1] != xt[0] || p.y_type != DType::boolean) break;
      if (p.op == TypedOp::equal) return pick_compare<TypedOp::equal>(xt[0], isa, s);
      if (p.op == TypedOp::less) return pick_compare<TypedOp::less>(xt[0], isa, s);
      if (p.op == TypedOp::greater) return pick_compare<TypedOp::greater>(xt[0], isa, s);
      if (p.op == TypedOp::less_equal) return pick_compare<TypedOp::less_equal>(xt[0], isa, s);
      return pick_compare<TypedOp::greater_equal>(xt[0], isa, s);
    case TypedOp::logical_and:
      if (all(DType::boolean)) return pick<Logic<TypedOp::logical_and>>(isa, s);
      break;
    case TypedOp::logical_or:
      if (all(DType::boolean)) return pick<Logic<TypedOp::logical_or>>(isa, s);
      break;
    case TypedOp::logical_xor:
      if (all(DType::boolean)) return pick<Logic<TypedOp::logical_xor>>(isa, s);
      break;
    case TypedOp::logical_not:
      if (all(DType::boolean)) return pick<Logic<TypedOp::logical_not>>(isa, s);
      break;
    case TypedOp::where:
      if (xt[0] != DType::boolean || xt[1] != xt[2] || p.y_type != xt[1]) break;
      return by_type(xt[1], [&](auto tag) { return pick<Where<decltype(tag)>>(isa, s); });
    case TypedOp::is_nan:
      if (all(DType::f32)) return pick<FloatClass<TypedOp::is_nan>>(isa, s);
      break;
    case TypedOp::is_inf:
      if (all(DType::f32)) return pick<FloatClass<TypedOp::is_inf>>(isa, s);
      break;
    case TypedOp::sign:
      if (xt[0] == DType::f32) return pick<Sign<float>>(isa, s);
      if (xt[0] == DType::i64) return pick<Sign<int64_t>>(isa, s);
      break;
    case TypedOp::add:
    case TypedOp::sub:
    case TypedOp::mul:
    case TypedOp::div:
    case TypedOp::mod:
      if (xt[1] != xt[0] || p.y_type != xt[0]) break;
      if (p.op == TypedOp::mod && xt[0] == DType::f32 && !p.fmod)
        return *why = "Mod of float32 needs fmod = 1", nullptr;
      if (p.op == TypedOp::add) return pick_arith<TypedOp::add>(xt[0], isa, s);
      if (p.op == TypedOp::sub) return pick_arith<TypedOp::sub>(xt[0], isa, s);
      if (p.op == TypedOp::mul) return pick_arith<TypedOp::mul>(xt[0], isa, s);
      if (p.op == TypedOp::div) return pick_arith<TypedOp::div>(xt[0], isa, s);
      return pick_arith<TypedOp::mod>(xt[0], isa, s);
    case TypedOp::pow:
      if (!all(DType::f32) || p.y_type != DType::f32) break;
      return pick<Arith<float, TypedOp::pow>>(isa, s);
    case TypedOp::math:
      if (xt[0] != DType::f32 || p.y_type != DType::f32) break;
      return pick<MathUnary>(isa, s);
    case TypedOp::expand:
      if (p.y_type != xt[0]) break;
      return by_type(xt[0], [&](auto tag) { return pick<ExpandCopy<decltype(tag)>>(isa, s); });
    case TypedOp::cast:
      if (p.narrow == TypedEltwiseProblem::Narrow::half) {
        if (xt[0] != DType::f32 || p.y_type != DType::f32)
          return *why = "Cast to float16 runs here from float32 only", nullptr;
        if (!host_cpu().f16c) return *why = "the CPU has no F16C", nullptr;
        return &half_avx2;
      }
      return by_type(xt[0], [&](auto s_tag) {
        return by_type(p.y_type, [&](auto d_tag) {
          return pick<Cast<decltype(s_tag), decltype(d_tag)>>(isa, s);
        });
      });
  }
  return *why = "operand dtypes the op does not take", nullptr;
}

constexpr int64_t kTileElems = 16384;

class TypedEltwiseKernel final : public Kernel {
 public:
  TypedEltwiseKernel(const TypedEltwiseProblem& p, TypedRowFn fn, std::string name)
      : fn_(fn), name_(std::move(name)) {
    params_.detect_positive = p.detect_positive;
    params_.detect_negative = p.detect_negative;
    params_.int32 = p.narrow == TypedEltwiseProblem::Narrow::int32;
    params_.fmod = p.fmod;
    params_.math = p.math;
    // Integer division: a zero divisor is an error (checked per run before the loop).
    check_divisor_ = (p.op == TypedOp::div || p.op == TypedOp::mod) && p.x_type[1] == DType::i64;
    total_ = 1;
    for (size_t d = 0; d < kR; ++d) total_ *= y_[d] = p.y[d];
    y_size_ = int64_t(dtype_size(p.y_type));
    for (size_t k = 0; k < p.x.size(); ++k) {
      int64_t st = 1;
      for (size_t d = kR; d-- > 0;) {
        stride_[k][d] = p.x[k][d] == 1 ? 0 : st;
        st *= p.x[k][d];
      }
      size_[k] = int64_t(dtype_size(p.x_type[k]));
    }
    operands_ = int(p.x.size());
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return (total_ + kTileElems - 1) / kTileElems; }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    static const uint8_t kUnused[1] = {0};
    const int64_t e_end = std::min(total_, end * kTileElems);
    for (int64_t e = begin * kTileElems; e < e_end;) {
      const int64_t row = y_[kR - 1], col = e % row;
      const int64_t len = std::min(row - col, e_end - e);
      int64_t off[3] = {col * stride_[0][kR - 1], col * stride_[1][kR - 1],
                        col * stride_[2][kR - 1]};
      int64_t r = e / row;
      for (size_t d = kR - 1; d-- > 0 && r > 0;) {  // the row's index, innermost dim first
        const int64_t i = r % y_[d];
        r /= y_[d];
        for (int k = 0; k < operands_; ++k) off[k] += i * stride_[k][d];
      }
      const void* x[3] = {kUnused, kUnused, kUnused};
      for (int k = 0; k < operands_; ++k)
        x[k] = reinterpret_cast<const char*>(args.src[k]) + off[k] * size_[k];
      if (check_divisor_) {
        const auto* d = static_cast<const int64_t*>(x[1]);
        const int64_t dn = stride_[1][kR - 1] ? len : 1;
        if (std::find(d, d + dn, int64_t(0)) != d + dn)
          fail(Code::invalid_argument, name_ + ": integer division by zero");
      }
      fn_(reinterpret_cast<char*>(args.dst[0]) + e * y_size_, x[0], x[1], x[2], len, params_);
      e += len;
    }
  }

 private:
  TypedRowFn fn_;
  std::string name_;
  Params params_;
  static constexpr size_t kR = kTypedRank;
  int64_t y_[kR] = {}, stride_[3][kR] = {}, size_[3] = {1, 1, 1};
  int64_t y_size_ = 4, total_ = 0;
  int operands_ = 0;
  bool check_divisor_ = false;
};

const char* op_name(TypedOp op) {
  static const char* const kNames[] = {
      "equal", "less",  "greater", "less_equal", "greater_equal", "and",  "or",  "xor",
      "not",   "where", "isnan",   "isinf",      "sign",          "cast", "add", "sub",
      "mul",   "div",   "mod",     "pow",        "expand",        "math"};
  static_assert(std::size(kNames) == size_t(TypedOp::math) + 1);
  return kNames[int(op)];
}

}  // namespace

std::unique_ptr<Kernel> create_typed_eltwise_kernel(const TypedEltwiseProblem& p, Isa isa,
                                                    std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs AVX2 or AVX-512");
  const size_t operands = p.op == TypedOp::where ? 3
                          : p.op == TypedOp::logical_not || p.op == TypedOp::is_nan ||
                                  p.op == TypedOp::is_inf || p.op == TypedOp::sign ||
                                  p.op == TypedOp::cast || p.op == TypedOp::expand ||
                                  p.op == TypedOp::math
                              ? 1
                              : 2;
  constexpr size_t kR = kTypedRank;
  if (p.x.size() != operands || p.x_type.size() != operands || p.y.size() != kR)
    return decline(why_not, "operand count or rank does not fit the op");
  int s[3] = {0, 0, 0};
  for (size_t k = 0; k < operands; ++k) {
    if (p.x[k].size() != kR) return decline(why_not, "operands must have kTypedRank dims");
    for (size_t d = 0; d < kR; ++d)
      if (p.x[k][d] != p.y[d] && p.x[k][d] != 1)
        return decline(why_not, "an operand does not broadcast to y");
    s[k] = p.x[k][kR - 1] == p.y[kR - 1] && p.y[kR - 1] > 1 ? 1 : 0;
  }
  if (operands == 1 && p.op != TypedOp::expand) s[0] = 1;  // one operand has y's shape
  std::string why;
  const TypedRowFn fn = select(p, isa, s, &why);
  if (!fn) return decline(why_not, why);
  std::string op = op_name(p.op);
  if (p.op == TypedOp::math) {  // (sin, cos, ...)
    op = math_op_name(p.math);
    std::transform(op.begin(), op.end(), op.begin(), [](char c) { return char(std::tolower(c)); });
  }
  return std::make_unique<TypedEltwiseKernel>(p, fn,
                                              op + "_" + dtype_name(p.x_type[operands - 1]) + "_" +
                                                  dtype_name(p.y_type) + "__" + isa_name(isa));
}

}  // namespace kiln
