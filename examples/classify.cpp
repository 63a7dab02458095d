// Kiln from C++ through the installed header kiln/kiln.hpp: same program as classify.c (same
// pseudo-random input, so both print the same top-5).
//
//   usage: classify_cpp MODEL.onnx [THREADS]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <kiln/kiln.hpp>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [THREADS]\n", argv[0]);
    return 2;
  }
  try {
    std::printf("kiln %s\n", kiln::version().c_str());
    kiln::Options options;
    options.threads(argc == 3 ? std::stoi(argv[2]) : 0);
    kiln::Session session(argv[1], options);

    uint32_t rng = 12345u;  // same generator as classify.c
    auto next_value = [&rng] {
      rng = rng * 1664525u + 1013904223u;
      return float(rng >> 8) / 8388608.0f - 1.0f;
    };
    // One buffer per input (int64 inputs stay zero), in 8-byte units so any dtype is aligned.
    std::vector<std::vector<int64_t>> in;
    std::vector<const void*> in_ptrs;
    for (const kiln::TensorInfo& info : session.inputs()) {
      std::printf("input %zu '%s': [", in.size(), info.name.c_str());
      for (size_t k = 0; k < info.shape.size(); ++k)
        std::printf(k ? ",%lld" : "%lld", static_cast<long long>(info.shape[k]));
      std::printf("]\n");
      in.emplace_back((info.bytes + 7) / 8);
      if (info.dtype == KILN_DTYPE_F32) {
        float* f = reinterpret_cast<float*>(in.back().data());
        for (size_t k = 0; k < info.elements(); ++k) f[k] = next_value();
      }
    }
    for (const auto& b : in) in_ptrs.push_back(b.data());
    std::vector<std::vector<int64_t>> out;
    std::vector<void*> out_ptrs;
    for (const kiln::TensorInfo& info : session.outputs()) out.emplace_back((info.bytes + 7) / 8);
    for (auto& b : out) out_ptrs.push_back(b.data());
    session.run(in_ptrs, out_ptrs);

    const kiln::TensorInfo& out0 = session.outputs()[0];
    if (out0.dtype != KILN_DTYPE_F32) throw std::runtime_error("output 0 is not float32");
    const float* scores = reinterpret_cast<const float*>(out[0].data());
    size_t n = out0.elements(), n_top = std::min<size_t>(5, n);
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), size_t(0));
    // Ties keep the lower index, like classify.c.
    std::partial_sort(idx.begin(), idx.begin() + long(n_top), idx.end(), [&](size_t a, size_t b) {
      return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    });
    std::printf("top-%zu of output '%s' (%zu values):\n", n_top, out0.name.c_str(), n);
    for (size_t t = 0; t < n_top; ++t)
      std::printf("  #%zu  class %zu  score %.6f\n", t + 1, idx[t], scores[idx[t]]);
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln error (%s): %s\n", e.code_name(), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 1;
}
