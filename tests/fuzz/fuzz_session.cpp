// libFuzzer harness: ONNX bytes -> kiln::Session (import, validation, folding, passes, plan,
// JIT code generation) -> for models small enough, one run on a deterministic input derived
// from the bytes. Which path runs (JIT at AVX-512, JIT capped to AVX2, or the reference
// kernels) is picked from a hash of the input, so one corpus covers all three.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "graph/dynamic.h"
#include "graph/ir.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/onnx_mutator.h"

namespace {

// Run only small models: a run must take milliseconds even under ASan.
constexpr size_t kMaxRunNodes = 200;
constexpr int64_t kMaxRunElements = int64_t(1) << 20;  // per tensor
constexpr int64_t kMaxRunWork = int64_t(1) << 25;      // multiply-adds (rough) per run

int64_t numel_or_max(const kiln::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0 || (d != 0 && n > kMaxRunElements * 64 / d))
      return INT64_MAX;
    else
      n *= d;
  return n;
}

// Rough cost of one run: each node touches its inputs and outputs; windowed and matrix ops
// multiply by the reduction length.
int64_t run_work(const kiln::Graph& g) {
  int64_t total = 0;
  for (const kiln::Node& n : g.nodes) {
    int64_t out = 0, in = 0;
    for (kiln::ValueId v : n.outputs)
      if (v != kiln::kNoValue) out += numel_or_max(g.value(v).shape);
    for (kiln::ValueId v : n.inputs)
      if (v != kiln::kNoValue) in += numel_or_max(g.value(v).shape);
    if (out >= kMaxRunElements * 8 || in >= kMaxRunElements * 64) return INT64_MAX;
    int64_t reduce = 1;
    if ((n.op == "Conv" || n.op == "Gemm" || n.op == "MatMul") && n.inputs.size() > 1) {
      const kiln::Shape& w = g.value(n.inputs[1]).shape;
      // Conv: C/group * kh * kw per output; Gemm/MatMul: at most the larger weight dim.
      reduce = n.op == "Conv" ? numel_or_max(w) / std::max<int64_t>(1, w.empty() ? 1 : w[0])
                              : (w.empty() ? 1 : *std::max_element(w.begin(), w.end()));
    } else if (n.op == "MaxPool" || n.op == "AveragePool") {
      reduce = numel_or_max(n.attr_ints("kernel_shape"));
    }
    if (reduce >= kMaxRunWork) return INT64_MAX;
    total += in + out * std::max<int64_t>(reduce, 1);
    if (total >= kMaxRunWork) return INT64_MAX;
  }
  return total;
}

bool small_enough(const kiln::Session& s) {
  const kiln::Graph& g = s.graph();
  if (g.nodes.size() >= kMaxRunNodes) return false;
  for (const kiln::Value& v : g.values)
    if (numel_or_max(v.shape) >= kMaxRunElements) return false;
  return run_work(g) < kMaxRunWork;
}

// Inputs from the model's own bytes: floats in [-2, 2], int64 / int32 in [-4, 4] (so runtime
// index inputs such as Gather's hit both valid and out-of-range values), bools both ways, 8-bit
// integers over their whole range.
std::vector<kiln::Tensor> make_inputs(const kiln::Session& s, const uint8_t* data, size_t size) {
  std::vector<kiln::Tensor> in;
  size_t k = 0;
  auto next = [&] { return size ? data[(k++ * 7919) % size] : uint8_t(0); };
  for (const kiln::IoInfo& io : s.inputs()) {
    kiln::Tensor t(io.dtype, io.shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (io.dtype == kiln::DType::f32)
        t.data<float>()[i] = float(int(next()) - 128) / 64.f;
      else if (io.dtype == kiln::DType::boolean)
        t.data<uint8_t>()[i] = next() & 1;
      else if (io.dtype == kiln::DType::u8)
        t.data<uint8_t>()[i] = next();
      else if (io.dtype == kiln::DType::i8)
        t.data<int8_t>()[i] = int8_t(next());
      else if (io.dtype == kiln::DType::i32)
        t.data<int32_t>()[i] = int32_t(next() % 9) - 4;
      else if (io.dtype == kiln::DType::f64)
        t.data<double>()[i] = double(int(next()) - 128) / 64.0;
      else
        t.data<int64_t>()[i] = int64_t(next() % 9) - 4;
    in.push_back(t);
  }
  return in;
}

// With KILN_FUZZ_STATS=1, how far inputs got is printed at exit (to see that runs happen).
struct Stats {
  long inputs = 0, loaded = 0, ran = 0, run_errors = 0;
  ~Stats() {
    if (std::getenv("KILN_FUZZ_STATS"))
      std::fprintf(stderr, "fuzz_session: %ld inputs, %ld loaded, %ld ran (%ld run errors)\n",
                   inputs, loaded, ran, run_errors);
  }
} stats;

}  // namespace

KILN_FUZZ_MODEL_HOOKS()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kiln::fuzz::kMaxModelBytes) return -1;
  uint32_t h = 2166136261u;  // FNV-1a: the execution path follows the bytes deterministically
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 16777619u;
  kiln::SessionOptions o;
  o.threads = 1;
  o.log_level = kiln::kOff;
  // No tuning cache: an input's path must not depend on what earlier inputs (or earlier
  // fuzzing runs) stored. Profiling keeps the default budget, as a user's load has.
  o.use_cache = false;
  switch (h % 3) {
    case 0:
      o.max_isa.reset();
      break;  // best ISA of this CPU
    case 1:
      o.max_isa = kiln::Isa::avx2;
      break;  // the AVX2 generators
    default:
      o.reference = true;
      break;  // scalar reference kernels
  }
  ++stats.inputs;
  kiln::fuzz::expect_clean([&] {
    std::unique_ptr<kiln::Session> s = kiln::Session::load_memory(data, size, o);
    ++stats.loaded;
    if (!small_enough(*s)) return;
    // A run-time tail (graph/dynamic.h) is bounded by its node count only: its shapes follow
    // the data, which make_inputs keeps small.
    if (s->tail() && s->tail()->graph.nodes.size() >= kMaxRunNodes) return;
    std::vector<kiln::Tensor> in = make_inputs(*s, data, size);
    ++stats.ran, ++stats.run_errors;  // the error count is undone when the run returns
    if (s->tail()) {
      s->run(in);
    } else {
      std::vector<kiln::Tensor> out;
      for (const kiln::IoInfo& io : s->outputs()) out.emplace_back(io.dtype, io.shape);
      s->run(in, out);
    }
    --stats.run_errors;
  });
  return 0;
}
